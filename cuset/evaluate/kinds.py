"""What the evaluate layer does per task kind: the evaluator `evaluate_program` hands each
task to, and the timer of `perf=true`.

Keyed by the names of cuset.tasks.kinds and checked at import to cover every one of them
(`per_kind`). Every evaluator takes the arguments of `evaluate_program`:

    evaluate(task, code, *, backend, options, cache=None, workspace=None, workdir=None) -> ExecResult

and every timer those of the evaluation whose passing answer it times (cuset.evaluate.perf.measure):

    time_answer(task, code, *, backend, perf, options, cache=None, workspace=None) -> perf record

A new benchmark format adds its evaluator module (and its timer) beside cudabench.py and
kernelbench.py, and one `EvalKind` to `EVAL_KINDS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from cuset.evaluate.cudabench import evaluate_cudabench
from cuset.evaluate.kernelbench import evaluate_kernelbench, kernelbench_run_meta
from cuset.evaluate.perf import cudabench_runner, kernelbench_runner
from cuset.execute.result import ExecResult
from cuset.tasks.kinds import get_kind, per_kind

Evaluator = Callable[..., ExecResult]


@dataclass(frozen=True)
class EvalKind:
    """How answers to tasks of one kind are judged and timed."""

    evaluate: Evaluator                 # one answer's verdict
    time_answer: Callable[..., dict]    # perf=true on the GPU: the perf record of an answer that passed
    # what a run with tasks of this kind adds to summary.json's meta: (backend, EvalConfig,
    # every kind in the run) -> fields (how its answers were built and judged)
    run_meta: Callable[..., dict] = lambda backend, cfg, kinds: {}


EVAL_KINDS: dict[str, EvalKind] = per_kind({
    # gen.py, nvcc/g++, sandboxed runs per thread order, compare.py; timed under Nsight Compute
    "cudabench": EvalKind(evaluate_cudabench, cudabench_runner.time_answer),
    # reference and load_inline answer in separate sandboxed processes; timed with CUDA events
    "kernelbench": EvalKind(evaluate_kernelbench, kernelbench_runner.time_answer, kernelbench_run_meta),
}, "evaluators")


def eval_kind(kind: str) -> EvalKind:
    """The evaluation of tasks of `kind`; `UnknownTaskKind` naming the known kinds otherwise."""
    return EVAL_KINDS[get_kind(kind).name]


def evaluator_for(kind: str) -> Evaluator:
    """The evaluator of tasks of `kind` (`eval_kind(kind).evaluate`)."""
    return eval_kind(kind).evaluate
