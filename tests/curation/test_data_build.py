"""`cuset data build` end to end.

test_end_to_end_* runs real validation (cuset.evaluate + the CPU backend; skipped
only where g++ is missing). test_build_with_scripted_validation covers
stages 1, 2, 4 and 5 and the manifest with validation verdicts scripted by kernel
name (the same verdicts the end-to-end test gets from real runs).
"""

import json
import shutil
import threading

import pytest

from cuset.curation.build import build_dataset
from cuset.io import read_jsonl
from cuset.execute.result import ExecResult, Status
from cuset.tasks import load_tasks

from build_expectations import LLM_REQUESTS, TRAIN_NAMES, VALIDATION_STATUS, check_manifest


class ScriptedValidation:
    """Stands in for cuset.evaluate.evaluate_program: status by the kernel in the program."""

    name = "scripted"
    VERDICTS = {"scale_twice": Status.COMPILE_ERROR, "negate_values": Status.RUNTIME_ERROR,
                "square_values": Status.WRONG}

    def __init__(self):
        self.calls = 0
        self._lock = threading.Lock()

    def fingerprint(self):
        return "scripted-1"

    def __call__(self, task, code, *, backend, cases):
        assert backend is self and tuple(cases) == (0, 1, 2, 3, 4) and code == task.bench_cu
        with self._lock:
            self.calls += 1
        for kernel, status in self.VERDICTS.items():
            if f"void {kernel}(" in code:
                return ExecResult(status, f"scripted {status.value}", backend="scripted")
        return ExecResult(Status.PASSED, backend="scripted")


def _check_run(result, fake_llm):
    run = result.run_dir
    check_manifest(result.manifest)
    tasks, report = load_tasks(result.train_path)  # strict: every record valid CUDABench
    assert [t.task_name for t in tasks] == TRAIN_NAMES and [t.id for t in tasks] == [0, 1, 2, 3]
    prov = read_jsonl(run / "train_provenance.jsonl")
    assert [p["origin"].rsplit("/", 1)[-1] for p in prov] == ["row_sum.cu", "vector_add.cu", "pairs.jsonl:1", "tasks.jsonl#id=41"]
    rejected = {r["origin"].rsplit("/", 1)[-1]: r["status"] for r in read_jsonl(run / "3_validation.jsonl") if r["status"] != "passed"}
    assert rejected == VALIDATION_STATUS
    (deco,) = read_jsonl(run / "4_decontamination.jsonl")
    assert deco["matched"].endswith("eval_tasks.jsonl#id=0 Leaky_ReLU")
    dups = {r["reason"]: r for r in read_jsonl(run / "4_dedup.jsonl")}
    cands = {c["key"]: c["origin"].rsplit("/", 1)[-1] for c in read_jsonl(run / "1_sources.jsonl")}
    assert cands[dups["exact_duplicate"]["key"]] == "vector_add_copy.cu"
    assert cands[dups["near_duplicate"]["key"]] == "vector_add_checked.cu"
    assert cands[dups["near_duplicate"]["matched"]] == "vector_add.cu"
    summary = (run / "summary.md").read_text()
    assert summary.startswith("# Dataset build: 4 tasks")
    assert "| 3. validation | 10 | 7 | compile_error: 1, runtime_error: 1, wrong: 1 |" in summary
    assert "## Removed by decontamination (1)" in summary
    assert fake_llm.requests == LLM_REQUESTS


def test_build_with_scripted_validation(build_config, fake_llm):
    cfg = build_config()
    scripted = ScriptedValidation()
    first = build_dataset(cfg, evaluate=scripted, backend=scripted)
    _check_run(first, fake_llm)
    assert scripted.calls == 10
    assert first.manifest["llm"]["requests_sent"] == LLM_REQUESTS
    # second run, same run dir: every stage reused, no LLM request, no validation
    second = build_dataset(cfg, evaluate=scripted, backend=scripted)
    _check_run(second, fake_llm)
    assert scripted.calls == 10 and second.manifest["llm"]["requests_sent"] == 0
    assert second.train_path.read_bytes() == first.train_path.read_bytes()


def test_fresh_run_dir_reuses_the_llm_cache(build_config, fake_llm, tmp_path):
    scripted = ScriptedValidation()
    build_dataset(build_config(), evaluate=scripted, backend=scripted)
    other = build_dataset(build_config([f"out_dir={tmp_path / 'run2'}"]), evaluate=scripted, backend=scripted)
    assert fake_llm.requests == LLM_REQUESTS
    assert other.manifest["llm"]["requests_sent"] == 0 and other.manifest["llm"]["cache_hits"] == LLM_REQUESTS
    check_manifest(other.manifest)


def test_budget_exhaustion_is_reported_and_resumed(build_config, fake_llm):
    scripted = ScriptedValidation()
    part = build_dataset(build_config(["llm.max_requests=5"]), evaluate=scripted, backend=scripted)
    assert part.manifest["complete"] is False
    assert part.manifest["stages"]["synthesis"]["deferred"] == {"llm_budget_exhausted": 6}
    assert "**Incomplete:**" in (part.run_dir / "summary.md").read_text()
    full = build_dataset(build_config(), evaluate=scripted, backend=scripted)
    check_manifest(full.manifest)
    assert fake_llm.requests == LLM_REQUESTS


@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU backend needs g++")
@pytest.mark.timeout(900)
def test_end_to_end_with_real_validation_on_the_cpu_backend(build_config, fake_llm, tmp_path, module_cold_compile_cache,
                                                           monkeypatch):
    import cuset.curation.build as build

    trusted = []   # the programs are the LLM's: its order proofs are never believed, nor built

    def spy(execution, backend, **kw):
        trusted.append((kw.get("trusted_programs", False), backend.options.skip_independent_orders))
        return real_evaluator(execution, backend, **kw)

    real_evaluator = build.pipeline_evaluator
    monkeypatch.setattr(build, "pipeline_evaluator", spy)
    cfg = build_config()
    first = build_dataset(cfg)
    assert trusted and set(trusted) == {(False, False)}, trusted
    _check_run(first, fake_llm)
    assert any(module_cold_compile_cache.iterdir())  # CUSET_CACHE is read when used (it was once read at import)
    details = {r["origin"].rsplit("/", 1)[-1]: r["detail"] for r in read_jsonl(first.run_dir / "3_validation.jsonl")}
    assert "case 0" in details["broken_crash.cu"] and "exit code 1" in details["broken_crash.cu"]
    assert "case 0" in details["broken_wrong.cu"]
    second = build_dataset(cfg)
    _check_run(second, fake_llm)
    assert second.manifest["llm"]["requests_sent"] == 0
    assert json.loads((second.run_dir / "manifest.json").read_text())["stages"] == first.manifest["stages"]


def test_missing_backend_stops_after_synthesis_with_a_clear_error(build_config, fake_llm, monkeypatch):
    import cuset.execute.registry as backends
    from cuset.curation.validation import ValidationUnavailable

    def no_backend(name, **kw):
        raise ImportError(f"No module named 'cuset.execute.{name}'")

    monkeypatch.setattr(backends, "get_backend", no_backend)
    cfg = build_config()
    with pytest.raises(ValidationUnavailable, match=r"execution backend 'cpu' is not available: No module named"):
        build_dataset(cfg)
    # stages 1 and 2 are kept: the next run sends no request
    assert len(read_jsonl(cfg.out_dir + "/2_synthesis.jsonl")) == 12 and fake_llm.requests == LLM_REQUESTS
    scripted = ScriptedValidation()
    check_manifest(build_dataset(cfg, evaluate=scripted, backend=scripted).manifest)
    assert fake_llm.requests == LLM_REQUESTS


@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU backend needs g++")
@pytest.mark.timeout(900)
def test_validation_on_a_local_ray_cluster_keeps_the_same_tasks(build_config, fake_llm, tmp_path, monkeypatch,
                                                                module_cold_compile_cache):
    import cuset.evaluate.batch as batch

    def no_local_pool(*a, **k):
        raise AssertionError("executor=ray validated on the local thread pool")

    monkeypatch.setattr(batch, "_run_local", no_local_pool)
    cfg = build_config(validation={"execution": {"backend": "cpu", "workers": 2, "compile_judge": "backend",
                                                 "executor": "ray"}})
    result = build_dataset(cfg)
    _check_run(result, fake_llm)  # the same statuses, kept tasks and report as the local executor's
    assert {r["status"] for r in read_jsonl(result.run_dir / "3_validation.jsonl")} <= \
        {"passed", "compile_error", "runtime_error", "wrong"}
