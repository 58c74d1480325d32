"""The evaluation side of the task-kind registry, the one way options enter `evaluate_program`,
and the per-sample log the CUDABench pipeline keeps its steps and timings in."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from cuset.evaluate import kinds as eval_kinds
from cuset.evaluate.cudabench import SampleLog, evaluate_cudabench
from cuset.evaluate.kernelbench import evaluate_kernelbench
from cuset.evaluate.kinds import EVALUATORS, evaluator_for
from cuset.evaluate.options import EvalOptions, Timeouts
from cuset.evaluate.pipeline import evaluate_program
from cuset.evaluate.strict import StrictVerdict
from cuset.execute.result import ExecResult, Status, StepResult
from cuset.tasks import KINDS, KernelBenchTask, UnknownTaskKind


def test_every_task_kind_has_an_evaluator():
    assert list(EVALUATORS) == list(KINDS)
    assert evaluator_for("cudabench") is evaluate_cudabench and evaluator_for("kernelbench") is evaluate_kernelbench
    with pytest.raises(UnknownTaskKind, match=r"unknown task kind 'triton': use cudabench \(the default\) or kernelbench"):
        evaluator_for("triton")


def test_evaluators_take_the_arguments_of_evaluate_program():
    entry = [name for name in inspect.signature(evaluate_program).parameters]
    assert entry == ["task", "code", "backend", "options", "cache", "workspace", "workdir"]
    for evaluate in EVALUATORS.values():
        assert list(inspect.signature(evaluate).parameters) == entry, evaluate.__name__


def test_options_enter_one_way(monkeypatch):
    """No `cases=` / `timeouts=` next to the options: a variation is dataclasses.replace."""
    with pytest.raises(TypeError, match="cases"):
        evaluate_program(None, "", backend=None, cases=(0, 1))
    calls = []

    def fake(task, code, **kwargs):
        calls.append((task, code, kwargs))
        return ExecResult(Status.PASSED, "", (), {}, "cpu")

    monkeypatch.setattr(eval_kinds, "EVALUATORS", {**EVALUATORS, "kernelbench": fake})
    task = KernelBenchTask("kb", "K", "class Model: pass\ndef get_inputs(): pass\ndef get_init_inputs(): pass\n")
    opts = dataclasses.replace(EvalOptions(), cases=(0, 1), timeouts=Timeouts(run=5.0))
    assert evaluate_program(task, "code", backend="b", options=opts).status is Status.PASSED
    assert evaluate_program(task, None, backend="b", workdir="w").status is Status.PASSED
    assert calls == [
        (task, "code", dict(backend="b", options=opts, cache=None, workspace=None, workdir=None)),
        (task, None, dict(backend="b", options=EvalOptions(), cache=None, workspace=None, workdir="w")),
    ]


def step(name: str) -> StepResult:
    return StepResult(name, 0, 0.0)


def test_sample_log_gathers_steps_stage_times_and_the_mismatch():
    log = SampleLog()
    log.add(step("gen[case=0]"))
    for stage in ("gen", "run", "gen"):
        with log.timed(stage):
            pass
    with pytest.raises(RuntimeError):
        with log.timed("compare"):
            raise RuntimeError("compare.py crashed")
    log.add(step("compile"))
    log.strict_failed(1, StrictVerdict(True))                       # no record: nothing kept
    assert log.mismatch is None
    log.strict_failed(2, StrictVerdict(False, "y[3] = 1 != 2", mismatch={"outputs": ["y"]}))
    result = log.result(Status.WRONG, "case 2: strict check", "cpu", (Status.WRONG, "strict", "strict"))
    assert [s.name for s in result.steps] == ["gen[case=0]", "compile"]
    assert list(result.timings) == ["gen", "run", "compare", "total"]   # a stage that raised still counts
    assert all(seconds >= 0 for seconds in result.timings.values())
    assert result.mismatch == {"case": 2, "outputs": ["y"]}
    assert (result.status, result.robust_status, result.robust_detail, result.robust_check) == \
        (Status.WRONG, Status.WRONG, "strict", "strict")
    plain = SampleLog().result(Status.PASSED, "", "gpu")
    assert (plain.robust_status, plain.robust_check, plain.backend, plain.steps) == (None, "", "gpu", ())
