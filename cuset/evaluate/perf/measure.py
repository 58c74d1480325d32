"""`perf=true`: the perf record of one evaluated sample (cuset.evaluate.perf.records).

Only programs that passed are timed, only on the GPU backend, each timing in the sandbox
with its own timeout. On the CPU backend nothing is timed: the record says "not measured
on the CPU backend" (no CPU time is ever reported as a kernel's speed).

CUDABench programs are scored with Nsight Compute (`ncu`, cuset.execute.perf.ncu): where
no `ncu` is installed their record says so; profiling them from the evaluation is not
wired yet (see `bench/kernel_perf.py`, which refuses rather than guess), so a GPU run
records `not_measured` with that reason for them.
"""

from __future__ import annotations

import logging

from cuset.evaluate.perf.options import PerfOptions
from cuset.evaluate.perf.records import FAILED, NOT_ON_CPU, NOT_PASSED, not_measured
from cuset.execute.result import ExecResult, printable

log = logging.getLogger(__name__)
CUDABENCH_NOT_WIRED = ("not measured: CUDABench programs are profiled with Nsight Compute, which the evaluation "
                       "does not run yet (the roofline arithmetic is cuset.execute.perf.ncu)")


def measure(task, code: str | None, result: ExecResult, backend_name: str, options: PerfOptions, *,
            sandbox=None, workdir=None, program_memory_bytes: int | None = None,
            extra_env: dict | None = None) -> dict:
    kind = getattr(task, "kind", "cudabench")
    if backend_name != "gpu":
        return not_measured(kind, NOT_ON_CPU)
    if not result.passed or not code:
        return not_measured(kind, NOT_PASSED)
    if kind != "kernelbench":
        return not_measured(kind, CUDABENCH_NOT_WIRED)
    from cuset.evaluate.perf.kernelbench_runner import time_kernelbench
    from cuset.execute.sandbox import SandboxPolicy

    try:
        return time_kernelbench(task, code, options=options, sandbox=sandbox or SandboxPolicy(), workdir=workdir,
                                program_memory_bytes=program_memory_bytes, extra_env=extra_env)
    except Exception as e:  # noqa: BLE001 - a bug of ours: the sample keeps its verdict, gets no time
        log.error("timing %s failed", getattr(task, "id", "?"), exc_info=e)
        return {"status": FAILED, "kind": kind, "reason": printable(f"the timing raised {type(e).__name__}: {e}")[:500]}
