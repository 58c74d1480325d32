"""The performance section of report.md (from summary.json's `overall.perf`)."""

from __future__ import annotations

from cuset.evaluate.perf.records import NOT_ON_CPU
from cuset.evaluate.perf.summary import FAST_P

SUSPECT_LISTED = 20


def _num(v, fmt="{:.2f}") -> str:
    return "n/a" if v is None else fmt.format(v)


def perf_section(perf: dict | None) -> list[str]:
    """Markdown lines; [] when perf was off."""
    if not perf:
        return []
    lines = ["## Performance", ""]
    if not perf.get("measured"):
        reason = perf.get("reason") or "not measured"
        lines += [f"Kernel speed: {reason}. No time is reported"
                  + (" (a CPU time is no GPU number)." if reason == NOT_ON_CPU else "."), ""]
        return lines
    lines += [f"Timed on: {', '.join(perf.get('devices') or ['?'])}. Timing records: "
              + ", ".join(f"{k} {v}" for k, v in sorted(perf.get("statuses", {}).items())) + ".", ""]
    kb = perf.get("kernelbench")
    if kb:
        lines += ["### KernelBench", "",
                  "| baseline | believed speedups | median speedup | geometric mean | "
                  + " | ".join(f"fast_{p:g}" for p in FAST_P) + " |",
                  "|---|---:|---:|---:|" + "---:|" * len(FAST_P)]
        for baseline, label in (("eager", "PyTorch eager"), ("compile", "torch.compile")):
            s = kb[f"speedup_{baseline}"]
            fast = kb["fast_p" if baseline == "eager" else "fast_p_compile"]
            lines.append(f"| {label} | {s['n']} | {_num(s['median'])}x | {_num(s['geomean'])}x | "
                         + " | ".join(f"{100 * fast[f'{p:g}']:.1f}" for p in FAST_P) + " |")
        lines += ["", f"fast_p: percent of the {kb['n_tasks']} tasks whose answer is correct and more than p times "
                      "faster than the baseline (a task that is not correct is not fast). Speedups count only from "
                      f"passing, measured samples that no reward-hack rule flagged: {kb['n_flagged']} flagged "
                      f"pass(es) and {kb['n_passed_unmeasured']} pass(es) without a believed time "
                      f"({kb['n_unbelievable']} unbelievable) count as not fast.", ""]
        if kb["suspect"]:
            lines.append(f"Speedups over eager above {kb['suspect_threshold']:g}x, to review "
                         f"({len(kb['suspect'])}):")
            lines += [f"- {s['task_id']} sample {s['sample']}: {s['speedup_eager']:.2f}x"
                      for s in kb["suspect"][:SUSPECT_LISTED]]
            lines.append("")
    cb = perf.get("cudabench")
    if cb:
        lines += ["### CUDABench (Nsight Compute roofline)", "",
                  "| measured passes | mean score | mean BU | mean CE | mean score, failures as 0 |",
                  "|---:|---:|---:|---:|---:|",
                  f"| {cb['n_measured']} of {cb['n_passed']} | {_num(cb['mean_score'], '{:.3f}')} | "
                  f"{_num(cb['mean_bandwidth_utilisation'], '{:.3f}')} | {_num(cb['mean_compute_efficiency'], '{:.3f}')} | "
                  f"{_num(cb['mean_score_all'], '{:.3f}')} |", ""]
        unmeasured = cb.get("unmeasured") or {}
        if unmeasured:
            lines.append(f"Passes without a roofline score ({sum(unmeasured.values())}):")
            lines += [f"- {n} x {why}" for why, n in list(unmeasured.items())[:SUSPECT_LISTED]]
            lines.append("")
    return lines
