"""Evaluation per task kind: the evaluator `evaluate_program` hands each task to.

Keyed by the names of cuset.tasks.kinds and checked at import to cover every one of them
(`per_kind`). Every evaluator takes the arguments of `evaluate_program`:

    evaluate(task, code, *, backend, options, cache=None, workspace=None, workdir=None) -> ExecResult

A new benchmark format adds its evaluator module here beside cudabench.py and
kernelbench.py, and one entry to `EVALUATORS`.
"""

from __future__ import annotations

from typing import Callable

from cuset.evaluate.cudabench import evaluate_cudabench
from cuset.evaluate.kernelbench import evaluate_kernelbench
from cuset.execute.result import ExecResult
from cuset.tasks.kinds import get_kind, per_kind

Evaluator = Callable[..., ExecResult]

EVALUATORS: dict[str, Evaluator] = per_kind({
    "cudabench": evaluate_cudabench,       # gen.py, nvcc/g++, sandboxed runs per thread order, compare.py
    "kernelbench": evaluate_kernelbench,   # reference and load_inline candidate in separate sandboxed processes
}, "evaluators")


def evaluator_for(kind: str) -> Evaluator:
    """The evaluator of tasks of `kind`; `UnknownTaskKind` naming the known kinds otherwise."""
    return EVALUATORS[get_kind(kind).name]
