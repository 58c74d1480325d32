"""`executor=ray` on a local Ray cluster of 2 worker CPUs: same results as `local`, a killed
worker's sample recorded exactly once, and a run interrupted under one executor resumed under
the other."""

from __future__ import annotations

import json
import os
import signal
import shutil
import threading
import time
from pathlib import Path

import pytest
import ray  # the test extra installs it: a broken install fails, never skips

from cuset.evaluate import EvalConfig
from cuset.evaluate.config import ExecutionConfig
from cuset.evaluate.metrics import summarize
from cuset.evaluate.batch import PID_DIR_ENV
from cuset.evaluate.records import load_results
from cuset.evaluate.runner import evaluate_file
from cuset.execute.result import Status
from cuset.tasks.io import load_tasks

ROOT = Path(__file__).resolve().parents[2]
N_TASKS = 6   # 12 samples per run: enough for a kill mid-run, a resume after 3, curation of 3 tasks

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU backend needs g++")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One local cluster for the module: 2 CPUs, workers that note which job (sample) they run."""
    pid_dir = tmp_path_factory.mktemp("pids")
    os.environ[PID_DIR_ENV] = str(pid_dir)  # inherited by the worker processes
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield pid_dir
    ray.shutdown()
    os.environ.pop(PID_DIR_ENV, None)


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> tuple[Path, Path]:
    """The first bundled CPU-suite tasks; per task the reference and a variant that exits 3."""
    root = tmp_path_factory.mktemp("suite")
    tasks, _ = load_tasks(ROOT / "suites" / "cuset-bench-cpu.jsonl", strict=True)
    tasks = tasks[:N_TASKS]
    (root / "tasks.jsonl").write_text("".join(json.dumps(t.to_json()) + "\n" for t in tasks))
    rows = []
    for t in tasks:
        for sample, code in enumerate((t.bench_cu, t.bench_cu.replace("return 0;", "return 3;", 1))):
            rows.append({"task_id": t.id, "task_name": t.task_name, "sample": sample, "model": "ref", "level": 1,
                         "response": f"```cuda\n{code}```", "code": code, "n_tokens": 10 + sample,
                         "finish_reason": "stop", "seconds": 0.0})
    (root / "gens.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root / "tasks.jsonl", root / "gens.jsonl"


@pytest.fixture(scope="module")
def compile_cache(tmp_path_factory) -> Path:
    """One compile cache for every run of the module: the runs differ in where and how the
    programs run, never in what g++ builds, and 20 builds per run were most of its time."""
    return tmp_path_factory.mktemp("cache")


def config(cache: Path, executor: str, **kw) -> EvalConfig:
    return EvalConfig(ExecutionConfig(backend="cpu", executor=executor, workers=2, **kw), progress=False,
                      cache_dir=str(cache))


def outcome(path: Path) -> dict:
    return {r.key: (r.status, r.compiled, r.ran_ok, r.passed) for r in load_results(path)}


@pytest.fixture(scope="module")
def local_run(suite, compile_cache, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("local")
    evaluate_file(*suite, out / "results.jsonl", config(compile_cache, "local"))
    return out / "results.jsonl"


def test_ray_gives_the_same_results_as_local(cluster, suite, local_run, compile_cache, tmp_path):
    summary = evaluate_file(*suite, tmp_path / "results.jsonl", config(compile_cache, "ray"))
    expected = outcome(local_run)
    assert len(expected) == 2 * N_TASKS
    assert outcome(tmp_path / "results.jsonl") == expected
    # the references pass, the exit-3 variants fail at run time
    assert {k: v[0] for k, v in expected.items()} == {
        k: Status.PASSED if k[1] == 0 else Status.RUNTIME_ERROR for k in expected}
    local_summary = json.loads((local_run.parent / "summary.json").read_text())
    assert summary.overall == local_summary["overall"]
    assert summary.meta["executor"] == "ray" and summary.meta["ray_resources_per_sample"] == {"num_cpus": 1}


def _kill_first_worker(pid_dir: Path, stop: threading.Event, killed: list) -> None:
    while not stop.is_set():
        for f in sorted(pid_dir.iterdir()):
            pid = int(f.name.split(".")[0])
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed.append(f.name)
            return
        time.sleep(0.005)


@pytest.mark.parametrize("retries", [2, 0])
def test_a_killed_worker_never_loses_or_doubles_a_sample(retries, cluster, suite, local_run, compile_cache, tmp_path):
    for f in cluster.iterdir():
        f.unlink()
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=_kill_first_worker, args=(cluster, stop, killed))
    killer.start()
    try:
        summary = evaluate_file(*suite, tmp_path / "results.jsonl", config(compile_cache, "ray", ray_max_retries=retries))
    finally:
        stop.set()
        killer.join()
    assert killed, "no worker was killed: the test proved nothing"
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    keys = [(r["task_id"], r["sample"]) for r in lines]
    assert len(keys) == len(set(keys)) == 2 * N_TASKS  # every sample exactly once
    got, expected = outcome(tmp_path / "results.jsonl"), outcome(local_run)
    # the worker noted the job's index: the run evaluated every sample, in the generations file's order
    row = json.loads(suite[1].read_text().splitlines()[int(killed[0].split(".")[1])])
    task_id, sample = row["task_id"], row["sample"]
    if retries:
        assert got == expected  # the killed sample was retried on another worker
        assert summary.infra_errors == []
    else:
        assert got[(task_id, sample)][0] is Status.INFRA_ERROR
        assert {k: v for k, v in got.items() if k != (task_id, sample)} == \
            {k: v for k, v in expected.items() if k != (task_id, sample)}
        assert [(r["task_id"], r["sample"]) for r in summary.infra_errors] == [(task_id, sample)]
        assert "lost 1 time(s)" in summary.infra_errors[0]["reason"]
        # out of the denominators: the task's pass@1 comes from its other sample alone
        assert summary.tasks[task_id]["n"] == 1
        assert "Infrastructure failures (1 samples" in (tmp_path / "report.md").read_text()


def test_an_interrupted_local_run_resumes_under_ray(cluster, suite, local_run, compile_cache, tmp_path):
    seen = []

    def interrupt(result):
        seen.append(result)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        evaluate_file(*suite, tmp_path / "results.jsonl", config(compile_cache, "local"), on_result=interrupt)
    partial = outcome(tmp_path / "results.jsonl")
    assert 3 <= len(partial) < 2 * N_TASKS
    summary = evaluate_file(*suite, tmp_path / "results.jsonl", config(compile_cache, "ray"))
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert len(lines) == 2 * N_TASKS  # nothing evaluated twice
    assert outcome(tmp_path / "results.jsonl") == outcome(local_run)
    assert summary.meta["resumed"] == len(partial) and summary.meta["evaluated_now"] == 2 * N_TASKS - len(partial)


def test_curation_on_ray_judges_as_evaluation_did(cluster, suite, local_run, compile_cache):
    """The curation path of the batch runner on the same cluster: the programs of the first
    3 tasks, each as a task's reference, get the statuses the local evaluation gave them."""
    import dataclasses

    from cuset.curation.validation import validate_references

    tasks, _ = load_tasks(suite[0], strict=True)
    programs = {(r["task_id"], r["sample"]): r["code"] for r in map(json.loads, suite[1].read_text().splitlines())}
    as_references = {key: dataclasses.replace(next(t for t in tasks if t.id == key[0]), bench_cu=code)
                     for key, code in programs.items() if key[0] in {t.id for t in tasks[:3]}}
    execution = config(compile_cache, "ray").execution   # the local run's section, executor=ray
    validations = validate_references(list(as_references.values()), execution=execution, cases=(0,),
                                      cache_dir=compile_cache / "compile")
    expected = outcome(local_run)
    assert len(validations) == 6
    assert {key: Status(v.status) for key, v in zip(as_references, validations)} == \
        {key: expected[key][0] for key in as_references}
    assert {v.status for v in validations} == {"passed", "runtime_error"}


def test_summaries_leave_infra_errors_out_of_denominators():
    from cuset.evaluate.records import SampleResult

    rows = [SampleResult(1, "t", "f", 0, Status.PASSED, compiled=True, ran_ok=True, passed=True),
            SampleResult(1, "t", "f", 1, Status.INFRA_ERROR, "worker lost"),
            SampleResult(2, "u", "f", 0, Status.WRONG, compiled=True, ran_ok=True)]
    s = summarize(rows, ks=(1,))
    assert s.tasks[1]["n"] == 1 and s.tasks[1]["function@1"] == 1.0
    assert s.overall["function@1"] == pytest.approx(0.5)
    assert s.infra_errors == [{"task_id": 1, "task_name": "t", "sample": 1, "reason": "worker lost"}]
