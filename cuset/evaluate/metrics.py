"""Pass@k and the official CUDABench definitions, as pure functions.

Two families of numbers are computed from the same per-sample results:

- ours: the unbiased estimator of Chen et al. (2021), pass@k = 1 - C(n-c, k) / C(n, k)
  over the n samples of a task, for "compilation" (nvcc/g++ succeeded) and
  "function" (outputs accepted by compare.py);
- compat: the official harness. Its "compilation" flag means compiled AND ran
  with exit code 0; Pass@1 looks at the first sample only; Pass@3 is "any of
  the first three". It also has a quirk: once a sample has no extractable code
  it ignores the task's later samples. `compat_quirk` reproduces that,
  `compat` does not.

Task values are averaged over tasks (per family and overall); skipped samples
(data over the backend's budget) are excluded everywhere and their tasks listed.

With robust verification (results carrying `robust_status`), "robust_function@k" is
the same estimator over the samples that passed the plain AND the robust checks,
next to "function@k"; `robust_failures` counts the samples that passed plain but not
robust, by the check that failed (strict, cases, ...), and `robust_not_applicable`
the robust passes for which no new input case could be made (cases_unavailable).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from math import comb
from statistics import fmean
from typing import Iterable, Sequence

from cuset.evaluate.perf.summary import SUSPECT_SPEEDUP, perf_summary, task_perf
from cuset.evaluate.records import SampleResult
from cuset.execute.result import Status
from cuset.tasks.schema import task_id_order

KS = (1, 3)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn without replacement from n
    (c of them correct) is correct."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if k < 1 or n < k:
        raise ValueError(f"pass@{k} needs at least {k} samples, got n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def official_pass_at_k(outcomes: Sequence[bool], k: int) -> float:
    """The harness's Pass@k: 1 if any of the first k samples (in sample order) succeeded."""
    return 1.0 if any(outcomes[:k]) else 0.0


def apply_empty_sample_quirk(outcomes: Sequence[bool], has_code: Sequence[bool]) -> list[bool]:
    """Drop every sample after the first one with no code, as the official harness does."""
    for i, ok in enumerate(has_code):
        if not ok:
            return list(outcomes[: i + 1])
    return list(outcomes)


def _estimate(n: int, c: int, k: int, pad: bool = False) -> float | None:
    """pass@k, or None with fewer than k samples; `pad` counts the missing samples as failures."""
    if n >= k:
        return pass_at_k(n, c, k)
    return pass_at_k(k, c, k) if pad else None


def task_metrics(samples: Sequence[SampleResult], ks: Sequence[int] = KS, pad: bool = False,
                 robust: bool = False) -> dict:
    """Metrics of one task from its non-skipped samples (`pad`: samples missing up to k
    count as failures, so a task without samples scores 0; `robust`: add the robust
    columns, None for a task with a sample evaluated without robust verification)."""
    samples = sorted(samples, key=lambda r: r.sample)
    n = len(samples)
    n_compiled = sum(r.compiled for r in samples)
    n_passed = sum(r.passed for r in samples)
    compat_compile = [r.compiled and r.ran_ok for r in samples]
    compat_function = [r.passed for r in samples]
    has_code = [r.has_code for r in samples]
    quirk_compile = apply_empty_sample_quirk(compat_compile, has_code)
    quirk_function = apply_empty_sample_quirk(compat_function, has_code)
    tokens = [r.n_tokens for r in samples if r.n_tokens is not None]
    out: dict = {"n": n, "n_compiled": n_compiled, "n_passed": n_passed}
    for k in ks:
        out[f"compile@{k}"] = _estimate(n, n_compiled, k, pad)
        out[f"function@{k}"] = _estimate(n, n_passed, k, pad)
    out["compat"] = {}
    out["compat_quirk"] = {}
    for k in ks:
        out["compat"][f"compile@{k}"] = official_pass_at_k(compat_compile, k)
        out["compat"][f"function@{k}"] = official_pass_at_k(compat_function, k)
        out["compat_quirk"][f"compile@{k}"] = official_pass_at_k(quirk_compile, k)
        out["compat_quirk"][f"function@{k}"] = official_pass_at_k(quirk_function, k)
    out["avg_tokens"] = fmean(tokens) if tokens else None
    out["statuses"] = dict(Counter(r.status.value for r in samples))
    if robust:
        out.update(_robust_metrics(samples, n, ks, pad))
    return out


def _robust_metrics(samples: Sequence[SampleResult], n: int, ks: Sequence[int], pad: bool) -> dict:
    flags = [r.robust_passed for r in samples]
    unknown = sum(f is None for f in flags)
    n_robust = sum(f is True for f in flags)
    out: dict = {"n_robust_passed": n_robust, "n_robust_unknown": unknown}
    for k in ks:
        out[f"robust_function@{k}"] = None if unknown else _estimate(n, n_robust, k, pad)
    out["robust_failures"] = dict(Counter(r.robust_check or "unspecified" for r in samples
                                          if r.passed and r.robust_passed is False))
    out["robust_not_applicable"] = sum(r.robust_check == "cases_unavailable" for r in samples)
    return out


def _mean_or_none(values: list) -> float | None:
    if not values or any(v is None for v in values):
        return None
    return fmean(values)


def aggregate(task_rows: Sequence[dict], samples: Sequence[SampleResult], ks: Sequence[int] = KS) -> dict:
    """Mean of task metrics over tasks; token average over samples (as the paper reports it)."""
    out: dict = {"n_tasks": len(task_rows), "n_samples": len(samples)}
    for k in ks:
        for what in ("compile", "function"):
            out[f"{what}@{k}"] = _mean_or_none([t[f"{what}@{k}"] for t in task_rows])
    for mode in ("compat", "compat_quirk"):
        out[mode] = {key: _mean_or_none([t[mode][key] for t in task_rows])
                     for key in (task_rows[0][mode] if task_rows else {})}
    tokens = [r.n_tokens for r in samples if r.n_tokens is not None]
    out["avg_tokens"] = fmean(tokens) if tokens else None
    out.update(reasoning_token_averages(samples))
    out["statuses"] = dict(Counter(r.status.value for r in samples))
    out.update(kernel_counts(samples))
    if any("n_robust_passed" in t for t in task_rows):
        for k in ks:
            out[f"robust_function@{k}"] = _mean_or_none([t[f"robust_function@{k}"] for t in task_rows])
        failures: Counter = Counter()
        for t in task_rows:
            failures.update(t["robust_failures"])
        out["robust_failures"] = dict(failures)
        for key in ("n_robust_passed", "n_robust_unknown", "robust_not_applicable"):
            out[key] = sum(t[key] for t in task_rows)
    return out


WITHOUT_KERNEL_KEPT = 1000   # passes without a kernel listed by sample in summary.json


def kernel_counts(samples: Sequence[SampleResult]) -> dict:
    """KernelBench passes by what they ran: {} without KernelBench results; else the passes
    that launched their own kernels and those that did not, by why (WITHOUT_KERNEL)."""
    kb = [r for r in samples if r.extensions_built is not None or any(s.name.startswith("kernelbench")
                                                                         for s in r.steps)]
    if not kb:
        return {}
    passes = [r for r in kb if r.passed]
    without = sorted((r for r in passes if r.passed_without_kernel), key=lambda r: (task_id_order(r.task_id), r.sample))
    return {"n_kernelbench": len(kb), "n_passed_with_kernel": sum(not r.passed_without_kernel for r in passes),
            "passed_without_kernel": dict(Counter(r.passed_without_kernel for r in without)),
            # which samples (the first WITHOUT_KERNEL_KEPT; every record says it in results.jsonl)
            "passed_without_kernel_samples": [{"task_id": r.task_id, "task_name": r.task_name, "sample": r.sample,
                                               "why": r.passed_without_kernel} for r in without[:WITHOUT_KERNEL_KEPT]]}


def reasoning_token_averages(samples: Sequence[SampleResult]) -> dict:
    """Average reasoning and answer tokens over the samples whose trace was counted (None without any)."""
    both = [(r.reasoning_tokens, r.n_tokens - r.reasoning_tokens) for r in samples
            if r.reasoning_tokens is not None and r.n_tokens is not None]
    if not both:
        return {"avg_reasoning_tokens": None, "avg_answer_tokens": None}
    return {"avg_reasoning_tokens": fmean(b[0] for b in both), "avg_answer_tokens": fmean(b[1] for b in both)}


@dataclass(frozen=True)
class Summary:
    """Everything a run reports; `to_json` is the summary.json file."""

    overall: dict
    families: dict[str, dict]
    tasks: dict[int, dict]
    skipped_tasks: list[dict] = field(default_factory=list)   # {task_id, task_name, reason}
    missing_tasks: list[int] = field(default_factory=list)     # expected but no results
    meta: dict = field(default_factory=dict)
    short_tasks: list[dict] = field(default_factory=list)      # {task_id, task_name, n}: fewer than max(ks) samples
    missing_as_failed: bool = False                            # missing tasks/samples counted as failures
    infra_errors: list[dict] = field(default_factory=list)     # {task_id, task_name, sample, reason}: not scored
    robust_failed: list[dict] = field(default_factory=list)    # {task_id, task_name, sample, check, detail}: passed plain only

    def to_json(self) -> dict:
        return {
            "overall": self.overall, "families": self.families,
            "tasks": {str(k): v for k, v in self.tasks.items()},
            "skipped_tasks": self.skipped_tasks, "missing_tasks": self.missing_tasks,
            "short_tasks": self.short_tasks, "missing_as_failed": self.missing_as_failed, "meta": self.meta,
            "infra_errors": self.infra_errors, "robust_failed": self.robust_failed,
        }


def summarize(results: Iterable[SampleResult], *, expected_task_ids: Iterable[int] | None = None,
              ks: Sequence[int] = KS, meta: dict | None = None, missing_as_failed: bool = False) -> Summary:
    """Per task, per family and overall metrics; skipped tasks listed and left out.

    Expected tasks without results are listed in `missing_tasks`, as are tasks with fewer
    than max(ks) samples in `short_tasks` (their pass@k is None, so is the mean). With
    `missing_as_failed` both count as failures instead: a missing task scores 0 and joins
    the overall denominator, a short task's missing samples fail."""
    by_task: dict[int, list[SampleResult]] = defaultdict(list)
    skipped: dict[int, SampleResult] = {}
    infra: list[SampleResult] = []
    results = list(results)
    robust = any(r.robust_status is not None for r in results)
    for r in results:
        if r.status is Status.SKIPPED:
            skipped.setdefault(r.task_id, r)
        elif r.status is Status.INFRA_ERROR:  # not the sample's fault: out of every denominator, listed
            infra.append(r)
        else:
            by_task[r.task_id].append(r)
    tasks: dict[int, dict] = {}
    family_of: dict[int, str] = {}
    for tid in sorted(by_task, key=task_id_order):
        rows = by_task[tid]
        tasks[tid] = {"task_id": tid, "task_name": rows[0].task_name, "family": rows[0].family,
                      **task_metrics(rows, ks, pad=missing_as_failed, robust=robust)}
        family_of[tid] = rows[0].family
    families: dict[str, dict] = {}
    for fam in sorted(set(family_of.values())):
        tids = [t for t in tasks if family_of[t] == fam]
        families[fam] = aggregate([tasks[t] for t in tids], [r for t in tids for r in by_task[t]], ks)
    missing = sorted(set(expected_task_ids or ()) - set(by_task) - set(skipped), key=task_id_order)
    scored = list(tasks.values())
    if missing_as_failed:
        scored += [{"task_id": tid, "task_name": "", "family": "", "missing": True, **task_metrics([], ks, pad=True, robust=robust)}
                   for tid in missing]
    overall = aggregate(scored, [r for rows in by_task.values() for r in rows], ks)
    perf = perf_summary(by_task, (meta or {}).get("perf_suspect_speedup") or SUSPECT_SPEEDUP)   # perf=true: the performance section (cuset.evaluate.perf.summary)
    if perf is not None:
        overall["perf"] = perf
        for tid, rows in by_task.items():
            tasks[tid]["perf"] = task_perf(rows)
    skipped_rows = [{"task_id": tid, "task_name": r.task_name, "reason": r.detail}
                    for tid, r in sorted(skipped.items(), key=lambda kv: task_id_order(kv[0])) if tid not in by_task]
    short = [{"task_id": tid, "task_name": t["task_name"], "n": t["n"]} for tid, t in tasks.items() if t["n"] < max(ks)]
    infra_rows = [{"task_id": r.task_id, "task_name": r.task_name, "sample": r.sample, "reason": r.detail}
                  for r in sorted(infra, key=lambda r: (task_id_order(r.task_id), r.sample))]
    robust_rows = [{"task_id": r.task_id, "task_name": r.task_name, "sample": r.sample, "check": r.robust_check,
                    "detail": r.robust_detail}
                   for rows in by_task.values() for r in sorted(rows, key=lambda r: r.sample)
                   if r.passed and r.robust_passed is False]
    return Summary(overall, families, tasks, skipped_rows, missing, dict(meta or {}), short, missing_as_failed,
                   infra_rows, robust_rows)
