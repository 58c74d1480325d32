import json

import pytest
from typer.testing import CliRunner

from eval_fakes import GxxBackend, make_task, needs_gxx, program
from cuset.cli.main import app
from cuset.evaluate.config import EvalConfig
from cuset.generate.records import GenerationRecord, save_generations
from cuset.tasks import save_tasks

runner = CliRunner()


@pytest.fixture
def files(tmp_path):
    save_tasks([make_task(1)], tmp_path / "tasks.jsonl")
    save_generations(tmp_path / "gens.jsonl", [
        GenerationRecord(1, "Axpb", s, "m", 1, "", code, 7, "stop", 0.1)
        for s, code in enumerate([program(), program(), program(body="y[i] = 1;")])])
    return tmp_path


@needs_gxx
def test_eval_command_prints_table_and_writes_files(files, monkeypatch):
    monkeypatch.setattr(EvalConfig, "make_backend", lambda self: GxxBackend())
    res = runner.invoke(app, ["eval", str(files / "tasks.jsonl"), str(files / "gens.jsonl"), "--out", str(files / "out"),
                              "--backend", "cpu", "execution.workers=1", f"cache_dir={files / 'cache'}", "progress=false"])
    assert res.exit_code == 0, res.output
    assert "unbiased" in res.output and "66.7" in res.output   # function@1 = 2/3
    assert "passed=2" in res.output and "wrong=1" in res.output
    summary = json.loads((files / "out" / "summary.json").read_text())
    assert summary["meta"]["workers"] == 1 and summary["meta"]["backend"] == "fake"
    assert (files / "out" / "report.md").exists()


def test_eval_config_errors_are_listed(files):
    res = runner.invoke(app, ["eval", str(files / "tasks.jsonl"), str(files / "gens.jsonl"), "--out", str(files / "o"),
                              "workerz=2", "execution.timeout_run=soon"])
    assert res.exit_code == 2
    assert "workerz: unknown key (did you mean 'execution.workers'?)" in res.output
    assert "execution.timeout_run: expected a number" in res.output


def test_eval_missing_generations_file(files):
    res = runner.invoke(app, ["eval", str(files / "tasks.jsonl"), str(files / "nope.jsonl"), "--out", str(files / "o"),
                              "--backend", "gpu"])
    assert res.exit_code == 2 and "no such generations file" in res.output


def test_every_shipped_eval_config_loads():
    from pathlib import Path

    from cuset.config import load_config

    paths = sorted(Path(__file__).resolve().parents[2].glob("configs/eval/*.yaml"))
    assert paths, "configs/eval has no configs"
    for p in paths:
        load_config(EvalConfig, p)


def test_shipped_configs_show_the_kernel_and_perf_options_at_their_defaults():
    """configs/eval show perf, strict_kernels and eval_mode (issues 38, 40); gpu.yaml every
    perf_timing option, at the defaults, so the file cannot drift from the code."""
    import dataclasses
    from pathlib import Path

    import yaml

    from cuset.evaluate.perf.options import PerfOptions

    root = Path(__file__).resolve().parents[2] / "configs" / "eval"
    for name in ("gpu.yaml", "cpu.yaml"):
        raw = yaml.safe_load((root / name).read_text())
        assert {"perf", "strict_kernels", "eval_mode"} <= set(raw), name
        assert (raw["perf"], raw["strict_kernels"], raw["eval_mode"]) == (False, False, "train"), name
    timing = yaml.safe_load((root / "gpu.yaml").read_text())["perf_timing"]
    assert set(timing) == {f.name for f in dataclasses.fields(PerfOptions)}
    assert PerfOptions(**timing) == PerfOptions()


def test_eval_command_on_the_cpu_backend(tmp_path):
    from pathlib import Path

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "adversarial"
    task = json.loads((fixtures / "task.json").read_text())
    (tmp_path / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    ref, const = (fixtures / "reference.cu").read_text(), (fixtures / "writes_constant.cu").read_text()
    save_generations(tmp_path / "gens.jsonl", [
        GenerationRecord(900, "Adversarial_Axpb", 0, "m", 1, f"```cuda\n{ref}```", ref, 300, "stop", 1.0),
        GenerationRecord(900, "Adversarial_Axpb", 1, "m", 1, f"```cuda\n{const}```", const, 100, "stop", 1.0)])
    res = runner.invoke(app, ["eval", str(tmp_path / "tasks.jsonl"), str(tmp_path / "gens.jsonl"), "--out",
                              str(tmp_path / "out"), "--backend", "cpu", f"cache_dir={tmp_path / 'cache'}",
                              "progress=false"])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["meta"]["backend"] == "cpu"
    assert summary["overall"]["statuses"] == {"passed": 1, "wrong": 1}
    assert summary["overall"]["function@1"] == 0.5 and summary["overall"]["avg_tokens"] == 200


def test_eval_with_relative_paths_on_the_cpu_backend(tmp_path, monkeypatch):
    """Regression: with a relative cache_dir the CPU backend ran its compiler in the build
    directory on a path relative to the caller's, and every sample became 'unsupported'."""
    from pathlib import Path

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "adversarial"
    task = json.loads((fixtures / "task.json").read_text())
    (tmp_path / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    ref = (fixtures / "reference.cu").read_text()
    save_generations(tmp_path / "gens.jsonl", [
        GenerationRecord(900, "Adversarial_Axpb", 0, "m", 1, f"```cuda\n{ref}```", ref, 300, "stop", 1.0)])
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["eval", "tasks.jsonl", "gens.jsonl", "--out", "out", "--backend", "cpu",
                              "cache_dir=rel/cache", "progress=false"])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["overall"]["statuses"] == {"passed": 1}


class _RaisingBackend(GxxBackend):
    """A backend with a bug one program reaches: its compile raises (issue 37's backstop)."""

    def compile(self, source, workdir, timeout):
        if "PROVOKES_A_BUG" in source:
            raise KeyError("a bug of the evaluator \udc80")
        return super().compile(source, workdir, timeout)


@needs_gxx
def test_a_sample_whose_evaluation_raises_is_a_failure_and_the_run_goes_on(files, monkeypatch):
    from cuset.evaluate.records import load_results
    from cuset.generate.records import GenerationRecord, save_generations

    save_generations(files / "gens.jsonl", [
        GenerationRecord(1, "Axpb", s, "m", 1, "", code, 7, "stop", 0.1)
        for s, code in enumerate([program(), program(extra="// PROVOKES_A_BUG"), program()])])
    monkeypatch.setattr(EvalConfig, "make_backend", lambda self: _RaisingBackend())
    args = ["eval", str(files / "tasks.jsonl"), str(files / "gens.jsonl"), "--out", str(files / "out"),
            "--backend", "cpu", "execution.workers=1", f"cache_dir={files / 'cache'}", "progress=false"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    by_sample = {r.sample: r for r in load_results(files / "out" / "results.jsonl")}
    assert [by_sample[s].status.value for s in range(3)] == ["passed", "runtime_error", "passed"]
    assert by_sample[1].detail == "the evaluator failed on this sample: KeyError: 'a bug of the evaluator \\udc80'"
    summary = json.loads((files / "out" / "summary.json").read_text())
    # in the denominator (2 of 3), never an infra_error, and counted for the maintainers
    assert summary["overall"]["function@1"] == pytest.approx(2 / 3) and summary["infra_errors"] == []
    assert summary["meta"]["evaluator_failures"] == 1
    again = runner.invoke(app, args)
    assert again.exit_code == 0
    resumed = json.loads((files / "out" / "summary.json").read_text())["meta"]
    assert resumed["resumed"] == 3 and resumed["evaluator_failures"] == 1   # the flag survives the results file


@needs_gxx
def test_a_run_whose_evaluator_fails_on_many_samples_stops_with_the_fix(files, monkeypatch):
    """More evaluator failures than programs explain (over 10 and over 5% of the run): the
    machine changed under the run, so the run stops and names the file to delete; the summary
    and report stay for reading. 10 of them do not stop it (the bound is inclusive)."""
    from cuset.evaluate.runner import MAX_EVALUATOR_FAILURES

    def run(n_bugs, out):
        save_generations(files / f"{out}.jsonl", [GenerationRecord(1, "Axpb", s, "m", 1, "", program(extra="// PROVOKES_A_BUG"),
                                                                   7, "stop", 0.1) for s in range(n_bugs)])
        return runner.invoke(app, ["eval", str(files / "tasks.jsonl"), str(files / f"{out}.jsonl"), "--out",
                                   str(files / out), "--backend", "cpu", "execution.workers=1",
                                   f"cache_dir={files / 'cache'}", "progress=false"])

    monkeypatch.setattr(EvalConfig, "make_backend", lambda self: _RaisingBackend())
    assert run(MAX_EVALUATOR_FAILURES, "ten").exit_code == 0
    broken = run(MAX_EVALUATOR_FAILURES + 1, "eleven")
    assert broken.exit_code == 2, broken.output
    text = " ".join(broken.output.split())
    results = files / "eleven" / "results.jsonl"
    assert f"{results}: the evaluator itself failed on 11 of 11 samples (e.g. task 1 sample" in text
    assert f"delete {results} and run the same command again" in text
    assert json.loads((files / "eleven" / "summary.json").read_text())["meta"]["evaluator_failures"] == 11


def test_a_detail_that_spells_an_evaluator_failure_is_not_one(tmp_path):
    """A KernelBench candidate writes its own detail, so it can spell the evaluator's words. Only
    the runner's flag, set on the path where the evaluation raised, counts: forged details on
    every sample of a run neither count nor stop it, and a results file cannot set the flag with
    anything but a JSON true."""
    from cuset.evaluate.records import SampleResult
    from cuset.evaluate.runner import EVALUATOR_FAILURE, EvaluatorBroken, check_evaluator_failures
    from cuset.execute.result import Status

    forged = [SampleResult(1, "t", "f", s, Status.RUNTIME_ERROR, f"{EVALUATOR_FAILURE}: KeyError: x") for s in range(40)]
    check_evaluator_failures(forged, tmp_path / "results.jsonl")   # raises nothing
    assert not any(r.evaluator_failed for r in forged)
    real = [SampleResult.from_json({**r.to_json(), "evaluator_failed": True}) for r in forged]
    with pytest.raises(EvaluatorBroken, match="failed on 40 of 40 samples"):
        check_evaluator_failures(real, tmp_path / "results.jsonl")
    assert not SampleResult.from_json({**forged[0].to_json(), "evaluator_failed": "yes"}).evaluator_failed
