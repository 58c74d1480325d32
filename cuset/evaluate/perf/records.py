"""The per-sample `perf` record of results.jsonl (`SampleResult.perf`), one of:

- {"status": "measured", "kind": "kernelbench", "device": ..., "warmup": 3, "trials": 100,
   "candidate_ms": {mean, median, std, min, max, n}, "eager_ms": {...}, "compile_ms": {...} | None,
   "speedup_eager": eager mean / candidate mean, "speedup_compile": ... | None}
- {"status": "measured", "kind": "cudabench", "device": ..., "roofline": {kernel,
   bandwidth_utilisation, compute_efficiency, score, kernels: [...]}}
- {"status": "not_measured", "kind": ..., "reason": "not measured on the CPU backend"} (or: ncu
   is not installed, the program did not pass)
- {"status": "unbelievable", "kind": ..., "reason": ...}: the timing run's record failed the
   parent's checks (cuset.execute.perf.claims): no time, never a speedup
- {"status": "failed", "kind": ..., "reason": ...}: the timing run itself failed (timeout,
   crash, outputs that differ from the reference on the timed inputs)

Speeds are only ever GPU numbers: on the CPU backend nothing is timed.
"""

from __future__ import annotations

MEASURED, NOT_MEASURED, UNBELIEVABLE, FAILED = "measured", "not_measured", "unbelievable", "failed"
STATUSES = (MEASURED, NOT_MEASURED, UNBELIEVABLE, FAILED)
NOT_ON_CPU = "not measured on the CPU backend"
NOT_PASSED = "not timed: the program did not pass"


def not_measured(kind: str, reason: str) -> dict:
    return {"status": NOT_MEASURED, "kind": kind, "reason": reason}


def kernelbench_measured(candidate: dict, eager: dict, compiled: dict | None, *, device: str, warmup: int,
                         trials: int) -> dict:
    """A KernelBench timing: speedups are ratios of mean trial times (KernelBench's definition)."""
    return {"status": MEASURED, "kind": "kernelbench", "device": device, "warmup": warmup, "trials": trials,
            "candidate_ms": candidate, "eager_ms": eager, "compile_ms": compiled,
            "speedup_eager": eager["mean"] / candidate["mean"],
            "speedup_compile": compiled["mean"] / candidate["mean"] if compiled else None}


def cudabench_measured(roofline: dict, *, device: str) -> dict:
    return {"status": MEASURED, "kind": "cudabench", "device": device, "roofline": roofline}
