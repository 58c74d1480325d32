"""Evaluate one program on one task: the library entry point.

    from cuset.evaluate import EvalOptions, evaluate_program
    from cuset.execute.registry import get_backend
    result = evaluate_program(task, code, backend=get_backend("cpu"))
    result.status, result.detail   # Status.PASSED, ""
    evaluate_program(task, code, backend=backend, options=EvalOptions(cases=(0, 1), robust=True))

How to evaluate is one `EvalOptions` (cuset.evaluate.options); a variation of it is
`dataclasses.replace(options, ...)`. The task's kind picks the evaluator
(cuset.evaluate.kinds): CUDABench programs go through cuset.evaluate.cudabench, KernelBench
answers through cuset.evaluate.kernelbench.
"""

from __future__ import annotations

from cuset.evaluate.kinds import evaluator_for
from cuset.evaluate.options import EvalOptions
from cuset.evaluate.workspace import Workspace
from cuset.execute.compile_cache import CompileCache
from cuset.execute.interface import Backend
from cuset.execute.result import ExecResult

__all__ = ["evaluate_program"]   # EvalOptions and Timeouts: cuset.evaluate.options (or cuset.evaluate)


def evaluate_program(task, code: str | None, *, backend: Backend, options: EvalOptions | None = None,
                     cache: CompileCache | None = None, workspace: Workspace | None = None,
                     workdir=None) -> ExecResult:
    """Evaluate ONE program on `task` (any registered kind) and return its typed result.

    backend   : from `cuset.execute.registry.get_backend("gpu"|"cpu"|"auto")`.
    options   : how to evaluate: input cases, timeouts, compat mode, data budget, sandbox
                policy, robust verification (default `EvalOptions()`).
    cache     : a shared CompileCache for `backend` (default: the user cache dir).
    workspace : a shared Workspace, so gen.py runs once per task across many calls.
    workdir   : where to make a temporary workspace (ignored if `workspace` is given).
    """
    return evaluator_for(task.kind)(task, code, backend=backend, options=options or EvalOptions(), cache=cache,
                                    workspace=workspace, workdir=workdir)
