"""Synthesised reference programs pass end to end on the CPU backend (a sample; the full
2,000 run in bench/synth_throughput.py), and a wrong program is caught."""

from __future__ import annotations

import dataclasses
import random
import shutil

import pytest

from cuset.curation.families import get_family
from cuset.curation.validation import task_key, validate_references
from cuset.evaluate.config import ExecutionConfig
from cuset.curation.synth import synthesize
from cuset.io import read_jsonl

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU backend needs g++")


@pytest.fixture(scope="module")
def backend():
    from cuset.execute.cpu import CpuBackend

    return CpuBackend()


def test_a_sample_of_synthesised_references_pass_on_the_cpu_backend(backend, tmp_path):
    sample = random.Random(1).sample(synthesize(2000, seed=0), 6)
    results = validate_references(sample, backend=backend, cases=(0, 1), execution=ExecutionConfig(workers=2),
                                  results_path=tmp_path / "results.jsonl", cache_dir=tmp_path / "cache")
    assert [(r.task_name, r.status) for r in results] == [(t.task_name, "passed") for t in sample], \
        [r.detail for r in results if r.status != "passed"]
    assert sorted(r["key"] for r in read_jsonl(tmp_path / "results.jsonl")) == sorted(task_key(t) for t in sample)


def test_wrong_programs_fail_and_a_rerun_resumes(backend, tmp_path, monkeypatch):
    task = get_family("relu").make({"kind": "leaky", "slope": 0.1}, {"n": 4096}, task_id=0)
    wrong = dataclasses.replace(task, bench_cu=task.bench_cu.replace("0.1f * v", "0.2f * v"))
    crash = dataclasses.replace(task, bench_cu=task.bench_cu.replace('"data/x.bin"', '"data/missing.bin"'))
    assert wrong.bench_cu != task.bench_cu and crash.bench_cu != task.bench_cu
    path = tmp_path / "results.jsonl"
    results = validate_references([task, wrong, crash], backend=backend, cases=(0,), execution=ExecutionConfig(workers=2),
                                  results_path=path,
                                  cache_dir=tmp_path / "cache")
    assert [r.status for r in results] == ["passed", "wrong", "runtime_error"]
    calls = []
    again = validate_references([task, wrong, crash], backend=backend, cases=(0,), results_path=path,
                                cache_dir=tmp_path / "cache", on_result=calls.append)
    assert calls == [] and again == results
    import cuset.curation.validation as validation  # evaluation code changed since: every task validated again

    monkeypatch.setattr(validation, "judge_code_hash", lambda: "other evaluation code")
    validate_references([task, wrong, crash], backend=backend, cases=(0,), results_path=path,
                        cache_dir=tmp_path / "cache", on_result=calls.append)
    assert sorted(r.status for r in calls) == ["passed", "runtime_error", "wrong"]
