"""`perf=true`: the perf record of one evaluated sample (cuset.evaluate.perf.records).

Only programs that passed are timed, only on the GPU backend, each timing in the sandbox
with its own timeout. On the CPU backend nothing is timed: the record says "not measured
on the CPU backend" (no CPU time is ever reported as a kernel's speed).

Each task kind's timer is registered with its evaluator (cuset.evaluate.kinds):
- KernelBench answers: CUDA events, KernelBench's way (cuset.evaluate.perf.kernelbench_runner);
- CUDABench programs: Nsight Compute metrics and the official roofline score
  (cuset.evaluate.perf.cudabench_runner); where no `ncu` is installed each record says
  "ncu not installed: not measured".
"""

from __future__ import annotations

import logging

from cuset.evaluate.kinds import eval_kind
from cuset.evaluate.options import EvalOptions
from cuset.evaluate.perf.options import PerfOptions
from cuset.evaluate.perf.records import FAILED, NOT_ON_CPU, NOT_PASSED, not_measured
from cuset.execute.result import ExecResult, printable

log = logging.getLogger(__name__)


def measure(task, code: str | None, result: ExecResult, backend, options: PerfOptions, *,
            eval_options=None, cache=None, workspace=None) -> dict:
    """The perf record of one sample. `backend` is the backend object (or its name); the
    CUDABench profile reuses the evaluation's compile `cache`, `workspace` and
    `eval_options` (EvalOptions: sandbox, cases, limits), which it needs."""
    kind = task.kind
    backend_name = backend if isinstance(backend, str) else backend.name
    if backend_name != "gpu":
        return not_measured(kind, NOT_ON_CPU)
    if not result.passed or not code:
        return not_measured(kind, NOT_PASSED)
    timer = eval_kind(kind).time_answer
    try:
        return timer(task, code, backend=backend, perf=options, options=eval_options or EvalOptions(), cache=cache,
                     workspace=workspace)
    except Exception as e:  # noqa: BLE001 - a bug of ours: the sample keeps its verdict, gets no time
        log.error("timing %s failed", getattr(task, "id", "?"), exc_info=e)
        return {"status": FAILED, "kind": kind, "reason": printable(f"the timing raised {type(e).__name__}: {e}")[:500]}
