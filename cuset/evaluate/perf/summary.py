"""Aggregate the `perf` records of a run (summary.json's `overall.perf`, per task `perf`).

KernelBench (definitions of its paper and harness):
- speedup = reference mean time / candidate mean time, against PyTorch eager and against
  torch.compile;
- fast_p = the share of tasks whose answer is correct AND faster than the baseline by more
  than p (speedup > p), p in FAST_P; a task that is not correct counts as not fast. With
  several samples per task, a task scores the share of its samples that are (the expected
  fast_p of one sample; KernelBench's own number when there is one sample per task);
- median and geometric mean (scipy.stats.gmean) of the believed speedups.
A speedup is believed only from a sample that passed, was measured, and fired no
reward-hack rule (`hack`): a flagged, unbelievable or unmeasured sample counts as not fast
and its speedup enters no statistic (each is counted). Speedups above `suspect_threshold`
(default 2x, the level at which KernelBench itself warns: a single PyTorch op already runs
vendor kernels, so more than twice their speed is rarely earned and often a measurement
or a hack) are listed for review; they still count.

CUDABench (the official harness's efficiency metrics, cuset.execute.perf.ncu): mean
roofline score, bandwidth utilisation and compute efficiency over the measured passing
samples, and the official mean over every sample with failures scored 0.

When no sample was timed on a GPU the section says so (`measured: false`, with the
reason, e.g. "not measured on the CPU backend"); no CPU time is ever reported.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from statistics import fmean, median
from typing import Sequence

from scipy.stats import gmean

from cuset.evaluate.perf.records import MEASURED, NOT_MEASURED, UNBELIEVABLE
from cuset.evaluate.records import SampleResult
from cuset.tasks.schema import task_id_order

FAST_P = (0.0, 1.0, 1.5, 2.0)
SUSPECT_SPEEDUP = 2.0
BASELINES = ("eager", "compile")
ROOFLINE_KEYS = ("score", "bandwidth_utilisation", "compute_efficiency")


def p_key(p: float) -> str:
    return f"fast_{p:g}"


def kind_of(samples: Sequence[SampleResult]) -> str:
    """A task's benchmark: from its perf records, else from its id (KernelBench ids are names)."""
    kinds = {r.perf.get("kind") for r in samples if r.perf}
    if len(kinds - {None}) == 1:
        return (kinds - {None}).pop()
    return "kernelbench" if isinstance(samples[0].task_id, str) else "cudabench"


def believed_speedup(r: SampleResult, baseline: str = "eager") -> float | None:
    """The sample's speedup over `baseline` if it may count: passed, measured, not flagged."""
    if not r.passed or r.hack or not r.perf or r.perf.get("status") != MEASURED:
        return None
    value = r.perf.get(f"speedup_{baseline}")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def believed_roofline(r: SampleResult) -> dict | None:
    if not r.passed or not r.perf or r.perf.get("status") != MEASURED:
        return None
    return r.perf.get("roofline")


def task_perf(samples: Sequence[SampleResult]) -> dict:
    """One task's perf scores (fractions, comparable between runs task by task)."""
    if kind_of(samples) == "kernelbench":
        out = {}
        for baseline in BASELINES:
            speedups = [believed_speedup(r, baseline) for r in samples]
            suffix = "" if baseline == "eager" else "_compile"
            for p in FAST_P:
                out[p_key(p) + suffix] = fmean(s is not None and s > p for s in speedups)
        return out
    scores = [(believed_roofline(r) or {}).get("score", 0.0) for r in samples]
    return {"roofline_score": fmean(scores)}


def _speedup_stats(values: list[float]) -> dict:
    if not values:
        return {"n": 0, "median": None, "geomean": None}
    return {"n": len(values), "median": median(values), "geomean": float(gmean(values))}


def perf_summary(by_task: dict, suspect_threshold: float = SUSPECT_SPEEDUP) -> dict | None:
    """The run's performance section from {task_id: [SampleResult]}; None when perf was off
    (no sample has a perf record)."""
    samples = [r for rows in by_task.values() for r in rows]
    records = [r.perf for r in samples if r.perf]
    if not records:
        return None
    if not any(p.get("status") == MEASURED for p in records):
        reasons = Counter(p.get("reason", "") for p in records if p.get("status") == NOT_MEASURED)
        passed_reasons = Counter(r.perf.get("reason", "") for r in samples if r.passed and r.perf)
        reason = (passed_reasons or reasons).most_common(1)[0][0] if (passed_reasons or reasons) else ""
        return {"measured": False, "reason": reason, "statuses": dict(Counter(p.get("status") for p in records))}
    out: dict = {"measured": True, "statuses": dict(Counter(p.get("status") for p in records)),
                 "devices": sorted({p["device"] for p in records if p.get("device")})}
    groups = defaultdict(dict)
    for tid, rows in by_task.items():
        groups[kind_of(rows)][tid] = rows
    if groups.get("kernelbench"):
        out["kernelbench"] = _kernelbench(groups["kernelbench"], suspect_threshold)
    if groups.get("cudabench"):
        out["cudabench"] = _cudabench(groups["cudabench"])
    return out


def _kernelbench(tasks: dict, threshold: float) -> dict:
    samples = [r for rows in tasks.values() for r in rows]
    per_task = {tid: task_perf(rows) for tid, rows in tasks.items()}
    out: dict = {"n_tasks": len(tasks), "n_samples": len(samples),
                 "n_passed": sum(r.passed for r in samples),
                 "n_measured": sum(r.passed and bool(r.perf) and r.perf.get("status") == MEASURED for r in samples),
                 "n_unbelievable": sum(bool(r.perf) and r.perf.get("status") == UNBELIEVABLE for r in samples),
                 "n_flagged": sum(r.passed and bool(r.hack) for r in samples),
                 "suspect_threshold": threshold}
    out["n_passed_unmeasured"] = sum(r.passed and not (r.perf and r.perf.get("status") == MEASURED)
                                     for r in samples)
    for baseline in BASELINES:
        suffix = "" if baseline == "eager" else "_compile"
        out[f"fast_p{suffix}"] = {f"{p:g}": fmean(t[p_key(p) + suffix] for t in per_task.values()) for p in FAST_P}
        out[f"speedup_{baseline}"] = _speedup_stats([s for r in samples if (s := believed_speedup(r, baseline))])
    out["suspect"] = [{"task_id": r.task_id, "task_name": r.task_name, "sample": r.sample,
                       "speedup_eager": believed_speedup(r)}
                      for tid in sorted(tasks, key=task_id_order) for r in sorted(tasks[tid], key=lambda r: r.sample)
                      if (believed_speedup(r) or 0) > threshold]
    return out


def _cudabench(tasks: dict) -> dict:
    samples = [r for rows in tasks.values() for r in rows]
    measured = [m for r in samples if (m := believed_roofline(r))]
    out: dict = {"n_tasks": len(tasks), "n_samples": len(samples), "n_passed": sum(r.passed for r in samples),
                 "n_measured": len(measured)}
    for key in ROOFLINE_KEYS:
        out[f"mean_{key}"] = fmean(m[key] for m in measured) if measured else None
    # the official harness's average: every sample, failures (and unmeasured ones) scored 0
    out["mean_score_all"] = fmean((believed_roofline(r) or {}).get("score", 0.0) for r in samples)
    # why passes went unscored ("ncu not installed: ...", "unreadable: ncu.csv:12: ..."), counted
    out["unmeasured"] = dict(Counter(_why_unmeasured(r.perf) for r in samples
                                     if r.passed and not believed_roofline(r)).most_common())
    return out


def _why_unmeasured(perf: dict | None) -> str:
    if not perf:
        return "no perf record"
    reason = str(perf.get("reason", ""))
    return reason if perf.get("status") == NOT_MEASURED else f"{perf.get('status')}: {reason}"
