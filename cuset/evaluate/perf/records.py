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
   crash, outputs that differ from the reference on the timed inputs; CUDABench: the run
   under ncu failed, compare.py refused its outputs, or ncu had no access to the counters)
- {"status": "unreadable", "kind": "cudabench", "reason": ...}: the profiler's output file
  (written inside the sandbox, next to the program) could not be read as ncu CSV: missing,
  oversized, a link, malformed rows, metrics missing (the reason names file, line and field)

Speeds are only ever GPU numbers: on the CPU backend nothing is timed.
"""

from __future__ import annotations

MEASURED, NOT_MEASURED, UNBELIEVABLE, FAILED = "measured", "not_measured", "unbelievable", "failed"
UNREADABLE = "unreadable"
STATUSES = (MEASURED, NOT_MEASURED, UNBELIEVABLE, FAILED, UNREADABLE)
NOT_ON_CPU = "not measured on the CPU backend"
NOT_PASSED = "not timed: the program did not pass"
NCU_NOT_INSTALLED = ("ncu not installed: not measured (CUDABench's score needs Nsight Compute; install it or set "
                     "perf_timing.ncu to its path)")


def not_measured(kind: str, reason: str) -> dict:
    return {"status": NOT_MEASURED, "kind": kind, "reason": reason}


def kernelbench_measured(candidate: dict, eager: dict, compiled: dict | None, *, device: str, warmup: int,
                         trials: int, seed: int | None = None, inputs_alternate: bool | None = None) -> dict:
    """A KernelBench timing: speedups are ratios of mean trial times (KernelBench's definition).
    `inputs_alternate`: whether the trials alternated two input sets (false when the task's
    get_inputs gives other shapes under another seed: a per-tensor cache then goes unseen)."""
    return {"status": MEASURED, "kind": "kernelbench", "device": device, "warmup": warmup, "trials": trials, "seed": seed,
            "inputs_alternate": inputs_alternate,
            "candidate_ms": candidate, "eager_ms": eager, "compile_ms": compiled,
            "speedup_eager": eager["mean"] / candidate["mean"],
            "speedup_compile": compiled["mean"] / candidate["mean"] if compiled else None}


def cudabench_measured(roofline: dict, *, device: str, launches: int) -> dict:
    """A CUDABench profile: the program's roofline (its scoring kernel's BU, CE and score, and
    every kernel's metrics) and how many kernel launches ncu profiled."""
    return {"status": MEASURED, "kind": "cudabench", "device": device, "launches": launches, "roofline": roofline}


def perf_problem(status: str, kind: str, reason: str) -> dict:
    """A record without a measurement: failed, unbelievable or unreadable, with why."""
    return {"status": status, "kind": kind, "reason": reason}
