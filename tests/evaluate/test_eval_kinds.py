"""The evaluation side of the task-kind registry (evaluators, perf timers), the one way
options enter `evaluate_program`, and the per-sample log the CUDABench pipeline keeps its
steps and timings in."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from eval_fakes import make_task

from cuset.evaluate import kinds as eval_kinds
from cuset.evaluate.cudabench import SampleLog, evaluate_cudabench
from cuset.evaluate.kernelbench import evaluate_kernelbench
from cuset.evaluate.kinds import EVAL_KINDS, EvalKind, eval_kind, evaluator_for
from cuset.evaluate.perf import cudabench_runner, kernelbench_runner
from cuset.evaluate.perf.measure import measure
from cuset.evaluate.perf.options import PerfOptions
from cuset.evaluate.options import EvalOptions, Timeouts
from cuset.evaluate.pipeline import evaluate_program
from cuset.evaluate.strict import StrictVerdict
from cuset.execute.result import ExecResult, Status, StepResult
from cuset.tasks import KINDS, KernelBenchTask, UnknownTaskKind


def test_each_kind_says_what_a_run_with_its_tasks_reports():
    """summary.json's per-kind fields come from the kind's registry entry, not a test of its name."""
    from types import SimpleNamespace

    from cuset.evaluate.config import EvalConfig
    from cuset.evaluate.runner import _kind_meta

    cpu, gpu = SimpleNamespace(name="cpu"), SimpleNamespace(name="gpu")
    cfg = EvalConfig(strict_kernels=True)
    assert _kind_meta(cpu, cfg, [make_task()]) == {}
    kb = KernelBenchTask("kb_relu", "relu", "elementwise", "import torch\n")
    assert _kind_meta(gpu, cfg, [kb]) == {
        "kernelbench_compile_judge": "nvcc (torch's load_inline on the GPU)", "kernelbench_only": True,
        "strict_kernels": True, "eval_mode": cfg.eval_mode}
    mixed = _kind_meta(cpu, cfg, [make_task(), kb])
    assert mixed["kernelbench_only"] is False and mixed["kernelbench_compile_judge"].startswith("g++")


def test_every_task_kind_has_an_evaluator_and_a_timer():
    assert list(EVAL_KINDS) == list(KINDS)
    assert evaluator_for("cudabench") is evaluate_cudabench and evaluator_for("kernelbench") is evaluate_kernelbench
    assert eval_kind("cudabench").time_answer is cudabench_runner.time_answer
    assert eval_kind("kernelbench").time_answer is kernelbench_runner.time_answer
    with pytest.raises(UnknownTaskKind, match=r"unknown task kind 'triton': use cudabench \(the default\)"):
        evaluator_for("triton")


def test_evaluators_and_timers_take_one_set_of_arguments():
    entry = [name for name in inspect.signature(evaluate_program).parameters]
    assert entry == ["task", "code", "backend", "options", "cache", "workspace", "workdir"]
    for kind in EVAL_KINDS.values():
        assert list(inspect.signature(kind.evaluate).parameters) == entry, kind.evaluate.__name__
        assert list(inspect.signature(kind.time_answer).parameters) == [
            "task", "code", "backend", "perf", "options", "cache", "workspace"], kind.time_answer.__module__


def test_perf_times_a_passing_answer_with_its_kinds_timer(monkeypatch):
    seen = []

    def timer(task, code, **kwargs):
        seen.append((task.kind, code, kwargs))
        return {"status": "measured"}

    def broken(task, code, **kwargs):
        raise KeyError("no such metric")

    monkeypatch.setattr(eval_kinds, "EVAL_KINDS", {"cudabench": EvalKind(evaluate_cudabench, broken),
                                                   "kernelbench": EvalKind(evaluate_kernelbench, timer)})
    task = KernelBenchTask("kb", "K", "class Model: pass\ndef get_inputs(): pass\ndef get_init_inputs(): pass\n")
    perf, opts = PerfOptions(trials=5), EvalOptions(cases=(1,))
    passed = ExecResult(Status.PASSED, "", (), {}, "gpu")
    assert measure(task, "code", passed, "gpu", perf, eval_options=opts, workspace="ws") == {"status": "measured"}
    assert seen == [("kernelbench", "code", dict(backend="gpu", perf=perf, options=opts, cache=None, workspace="ws"))]
    assert measure(task, "code", passed, "cpu", perf)["reason"] == "not measured on the CPU backend"
    assert len(seen) == 1
    cuda = make_task()
    assert measure(cuda, "code", passed, "gpu", perf) == {
        "status": "failed", "kind": "cudabench", "reason": "the timing raised KeyError: 'no such metric'"}


def test_options_enter_one_way(monkeypatch):
    """No `cases=` / `timeouts=` next to the options: a variation is dataclasses.replace."""
    with pytest.raises(TypeError, match="cases"):
        evaluate_program(None, "", backend=None, cases=(0, 1))
    calls = []

    def fake(task, code, **kwargs):
        calls.append((task, code, kwargs))
        return ExecResult(Status.PASSED, "", (), {}, "cpu")

    monkeypatch.setattr(eval_kinds, "EVAL_KINDS", {**EVAL_KINDS, "kernelbench": EvalKind(fake, None)})
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
