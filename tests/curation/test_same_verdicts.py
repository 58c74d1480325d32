"""Curation and evaluation judge a program the same way: one execution section, one backend
construction, one batch runner. The same five programs (correct, wrong output, compile error,
endless loop, crash) validated as curated references and evaluated as generated samples get
the same status each, on the CPU backend."""

from __future__ import annotations

import dataclasses
import shutil

import pytest

from cuset.curation.families import get_family
from cuset.curation.validation import validate_references
from cuset.evaluate import EvalConfig, evaluate_file, load_results
from cuset.evaluate.config import ExecutionConfig
from cuset.execute.result import Status
from cuset.generate.records import GenerationRecord, save_generations
from cuset.tasks import save_tasks

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU backend needs g++")

MAIN = "int main() {\n"
# name -> (edit of the reference program, the status both must give)
PROGRAMS = {
    "correct": (lambda src: src, Status.PASSED),
    "wrong_output": (lambda src: src.replace("0.1f * v", "0.2f * v"), Status.WRONG),
    "compile_error": (lambda src: src.replace("int i = blockIdx.x", "int i = blockIdx.x +"), Status.COMPILE_ERROR),
    "endless_loop": (lambda src: src.replace(MAIN, MAIN + "    volatile int spin = 1;\n    while (spin) {}\n"),
                     Status.TIMEOUT),
    "crash": (lambda src: src.replace(MAIN, MAIN + "    *(volatile int*)nullptr = 1;\n"), Status.RUNTIME_ERROR),
}


@pytest.fixture(scope="module")
def tasks():
    """One task per program: the relu family's task with that program as its reference."""
    reference = get_family("relu").make({"kind": "leaky", "slope": 0.1}, {"n": 4096}, task_id=0)
    out = []
    for i, (name, (edit, _)) in enumerate(PROGRAMS.items()):
        code = edit(reference.bench_cu)
        assert name == "correct" or code != reference.bench_cu, name
        out.append(dataclasses.replace(reference, id=i, task_name=f"relu_{name}", bench_cu=code))
    return out


def test_curation_and_evaluation_give_the_same_status_per_program(tasks, tmp_path):
    execution = ExecutionConfig(backend="cpu", compile_judge="backend", workers=2, timeout_run=3.0)
    # evaluation: each program as the one sample of its task; the backend built from `execution`
    save_tasks(tasks, tmp_path / "tasks.jsonl")
    save_generations(tmp_path / "gens.jsonl", [
        GenerationRecord(t.id, t.task_name, 0, "m", 1, f"```cuda\n{t.bench_cu}```", t.bench_cu, 10, "stop", 0.0)
        for t in tasks])
    cfg = EvalConfig(execution, cache_dir=str(tmp_path / "cache"), progress=False)
    evaluate_file(tmp_path / "tasks.jsonl", tmp_path / "gens.jsonl", tmp_path / "eval" / "results.jsonl", cfg)
    results = {r.task_id: r for r in load_results(tmp_path / "eval" / "results.jsonl")}
    # curation: each program as its task's reference, under the same execution section
    validations = {v.task_id: v for v in validate_references(tasks, execution=execution, cases=(0,), sandbox_gen=True,
                                                             cache_dir=tmp_path / "cache" / "compile")}
    expected = {i: status for i, (_, status) in enumerate(PROGRAMS.values())}
    assert {i: r.status for i, r in results.items()} == expected
    assert {i: Status(v.status) for i, v in validations.items()} == expected
    # both took the run timeout from the section (3 s, not the 60 s default)
    loop = list(PROGRAMS).index("endless_loop")
    assert "still running after 3 s" in results[loop].detail and "still running after 3 s" in validations[loop].detail
