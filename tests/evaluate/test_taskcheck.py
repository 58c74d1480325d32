"""`cuset tasks check`: each task's own reference through the evaluation (CPU backend, real
CUDA programs) and its checker against corrupted outputs, on a handful of tiny hand-made
tasks: a correct one, references that write the wrong shape or wrong values, a compare.py
that reads one element, two that read int32 outputs as float32 (all elements; the first
only), and a proper int checker."""

from __future__ import annotations

import importlib
import json
import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

from cuset.cli.main import app
from cuset.evaluate.config import EvalConfig, ExecutionConfig
from cuset.evaluate.records import load_results
from cuset.evaluate.taskcheck import TaskCheckError, TaskCheckFileError, check_tasks, load_check
from cuset.evaluate.taskcheck.corrupt import CORRUPTIONS, corrupt, wrong_values

needs_cuda_cpu = pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU backend compiles with g++")

FLOAT_CU = r'''#include <cstdio>
#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
int main() {
    const int n = 64;
    float a[n], b[n], c[n];
    FILE* f = fopen("data/a.bin", "rb"); fread(a, 4, n, f); fclose(f);
    f = fopen("data/b.bin", "rb"); fread(b, 4, n, f); fclose(f);
    float *da, *db, *dc;
    cudaMalloc(&da, n * 4); cudaMalloc(&db, n * 4); cudaMalloc(&dc, n * 4);
    cudaMemcpy(da, a, n * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(db, b, n * 4, cudaMemcpyHostToDevice);
    add<<<2, 32>>>(da, db, dc, n);
    cudaMemcpy(c, dc, n * 4, cudaMemcpyDeviceToHost);
    f = fopen("data/c.bin", "wb"); fwrite(c, 4, n, f); fclose(f);
    return 0;
}
'''
INT_CU = FLOAT_CU.replace("float", "int")

GEN_FLOAT = """import numpy as np
np.random.seed(3)
a = np.random.randn(64).astype(np.float32)
b = np.random.randn(64).astype(np.float32)
a.tofile("data/a.bin"); b.tofile("data/b.bin")
(a {op} b).astype(np.float32).tofile("data/c_ref.bin")
"""
GEN_INT = """import numpy as np  # non-negative: a negative int32 read as float32 is NaN
np.random.seed(5)
a = np.random.randint(0, 1000, 64).astype(np.int32)
b = np.random.randint(0, 1000, 64).astype(np.int32)
a.tofile("data/a.bin"); b.tofile("data/b.bin")
(a + b).astype(np.int32).tofile("data/c_ref.bin")
"""
# compare.py: (dtype it reads the output as, what it compares)
PROPER_FLOAT = """import numpy as np
c = np.fromfile("data/c.bin", dtype=np.float32); r = np.fromfile("data/c_ref.bin", dtype=np.float32)
print("T" if c.shape == r.shape and np.allclose(c, r, atol=1e-5) else "F")
"""
FIRST_ELEMENT = """import numpy as np
c = np.fromfile("data/c.bin", dtype=np.float32, count=1); r = np.fromfile("data/c_ref.bin", dtype=np.float32, count=1)
print("T" if abs(c[0] - r[0]) < 1e-5 else "F")
"""
INT_AS_FLOAT = """import numpy as np
c = np.fromfile("data/c.bin", dtype=np.float32); r = np.fromfile("data/c_ref.bin", dtype=np.float32)
print("T" if np.allclose(c, r, atol=1e-5) else "F")
"""
# the defect found on a public benchmark: 1 element of an int32 output, read as float32
INT_FIRST_AS_FLOAT = """import numpy as np
c = np.fromfile("data/c.bin", dtype=np.float32, count=1); r = np.fromfile("data/c_ref.bin", dtype=np.float32, count=1)
print("T" if abs(c[0] - r[0]) < 1e-5 else "F")
"""
PROPER_INT = """import numpy as np
c = np.fromfile("data/c.bin", dtype=np.int32); r = np.fromfile("data/c_ref.bin", dtype=np.int32)
print("T" if np.array_equal(c, r) else "F")
"""


def task(i, name, *, cu=FLOAT_CU, gen=GEN_FLOAT.format(op="+"), compare=PROPER_FLOAT, dtype="float32",
         out_shape="(64,)"):
    io = [{"name": n, "dtype": dtype, "shape": "(64,)"} for n in ("a", "b")]
    return {"id": i, "task_name": name, "task_description": name, "inputs": io,
            "outputs": [{"name": "c", "dtype": dtype, "shape": out_shape}], "gpu": "unknown",
            "bench.cu": cu, "gen.py": gen, "compare.py": compare,
            "level1_prompt": name, "level2_prompt": name, "level3_prompt": name}


TASKS = [
    task(0, "Good_Float"),
    task(1, "First_Element_Checker", compare=FIRST_ELEMENT),
    task(2, "Declares_Half_The_Output", out_shape="(32,)"),        # the reference writes 64 elements
    task(3, "Reference_Answer_Is_Wrong", gen=GEN_FLOAT.format(op="-")),
    task(4, "Int_Read_As_Float", cu=INT_CU, gen=GEN_INT, compare=INT_AS_FLOAT, dtype="int32"),
    task(5, "Good_Int", cu=INT_CU, gen=GEN_INT, compare=PROPER_INT, dtype="int32"),
    task(6, "Int_First_Element_As_Float", cu=INT_CU, gen=GEN_INT, compare=INT_FIRST_AS_FLOAT, dtype="int32"),
]


def write_tasks(path, tasks):
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return path


def config(tmp_path):
    # nvcc is not asked (compile_judge=backend): the programs are ours and known to be valid CUDA
    return EvalConfig(ExecutionConfig(backend="cpu", compile_judge="backend", workers=2), robust=True, progress=False, workdir=str(tmp_path / "work"))


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """The seven tasks checked once (two programs to compile: float and int), then again."""
    tmp = tmp_path_factory.mktemp("check")
    tasks = write_tasks(tmp / "tasks.jsonl", TASKS)
    first = check_tasks(tasks, tmp / "out", config(tmp))
    again = check_tasks(tasks, tmp / "out", config(tmp))
    return tmp, first, again


def by_id(result):
    return {c.task_id: c for c in result.checks}


@needs_cuda_cpu
def test_references_that_write_the_wrong_shape_or_values_are_listed_with_the_reason(checked):
    _, first, _ = checked
    c = by_id(first)
    assert c[2].defects == ("reference_fails",) and c[2].reference_status == "wrong"
    assert "data/c.bin has 256 bytes; declared float32 (32,) = 128 bytes" in c[2].reference_detail
    assert c[3].defects == ("reference_fails",) and c[3].reference_status == "wrong"
    assert "compare.py rejected the outputs (printed 'F')" in c[3].reference_detail
    assert c[2].corruptions == () and c[2].checker_note == "not measured: the reference did not pass"
    assert "reference wrong: case 0: data/c.bin has 256 bytes" in c[2].why()


@needs_cuda_cpu
def test_proper_checkers_reject_every_corruption(checked):
    _, first, _ = checked
    c = by_id(first)
    for tid, tried in ((0, {"one_element", "suffix", "every_element", "zeros", "nan", "reversed"}),
                       (5, {"one_element", "suffix", "every_element", "zeros", "reversed"})):   # no NaN in int32
        assert c[tid].defects == () and c[tid].verdict == "ok", c[tid].why()
        assert c[tid].reference_status == "passed" and c[tid].robust_status == "passed"
        assert {r.corruption for r in c[tid].corruptions} == tried
        assert not any(r.accepted for r in c[tid].corruptions)
        assert all(r.strict_caught for r in c[tid].corruptions)


@needs_cuda_cpu
def test_a_checker_reading_one_element_cannot_fail_where_the_strict_check_can(checked):
    _, first, _ = checked
    c = by_id(first)[1]
    assert c.reference_status == "passed" and c.defects == ("checker_cannot_fail",)
    assert [r.label for r in c.accepted] == ["c:one_element", "c:suffix"]
    # the first element changes under the others, so the checker sees those
    assert {r.corruption for r in c.corruptions if not r.accepted} == {"every_element", "zeros", "nan", "reversed"}
    assert c.strict_stronger is True and all(r.strict_caught for r in c.accepted)
    assert "compare.py accepts c:one_element, c:suffix (cuset's strict check, robust=true, rejects them all" in c.why()


@needs_cuda_cpu
@pytest.mark.parametrize("tid", [4, 6])   # every element read as float32; only the first one
def test_a_checker_reading_int32_as_float32_accepts_every_corruption(checked, tid):
    _, first, _ = checked
    c = by_id(first)[tid]
    assert c.reference_status == "passed" and c.defects == ("checker_cannot_fail",)
    # +1 on an int32 is a change of ~1e-45 read as float32: far below atol
    assert [r.corruption for r in c.accepted] == ["one_element", "suffix", "every_element", "zeros", "reversed"]
    assert c.strict_stronger is True


@needs_cuda_cpu
def test_the_check_file_and_summary_list_the_defects(checked):
    tmp, first, _ = checked
    doc = json.loads(first.json_path.read_text())
    assert doc["counts"] == {"tasks": 7, "ok": 2, "not_checked": 0, "checker_not_measured": 0, "reference_fails": 2,
                             "reference_fails_robust": 0, "checker_cannot_fail": 3}
    assert [t["verdict"] for t in doc["tasks"]] == ["ok", "checker cannot fail", "reference fails",
                                                    "reference fails", "checker cannot fail", "ok",
                                                    "checker cannot fail"]
    md = first.markdown_path.read_text()
    assert "## References that fail (2)" in md and "## Checkers that cannot fail (3)" in md
    assert "| 4 | Int_Read_As_Float | compare.py | c:one_element, c:suffix, c:every_element, c:zeros, c:reversed | " \
           "rejects them all: the task's checker is weaker than cuset's strict check |" in md
    assert set(load_check(tmp / "out").defective()) == {"1", "2", "3", "4", "6"}


@needs_cuda_cpu
def test_a_rerun_skips_every_checked_task(checked):
    tmp, first, again = checked
    assert first.checked_now == 5 and first.resumed == 0
    assert again.checked_now == 0 and again.resumed == 5
    assert [c.to_json() for c in again.checks] == [c.to_json() for c in first.checks]
    meta = json.loads((tmp / "out" / "references" / "summary.json").read_text())["meta"]
    assert meta["evaluated_now"] == 0 and meta["resumed"] == 7


@needs_cuda_cpu
def test_an_edited_task_is_checked_again_and_only_it(tmp_path, monkeypatch):
    """Task 1's checker fixed: only its reference and checker run again (one compile, cached);
    a new corruption battery tries every checker again, the references' verdicts stay."""
    tasks = write_tasks(tmp_path / "tasks.jsonl", TASKS[:2])
    first = check_tasks(tasks, tmp_path / "out", config(tmp_path))
    assert by_id(first)[1].defects == ("checker_cannot_fail",)
    fixed = [TASKS[0], {**TASKS[1], "compare.py": PROPER_FLOAT}]
    again = check_tasks(write_tasks(tasks, fixed), tmp_path / "out", config(tmp_path))
    assert again.checked_now == 1 and again.resumed == 1 and by_id(again)[1].defects == ()
    results = load_results(tmp_path / "out" / "references" / "results.jsonl")
    assert sorted(r.task_id for r in results) == [0, 1]
    import cuset.evaluate.taskcheck.run as run_module
    monkeypatch.setattr(run_module, "BATTERY_VERSION", run_module.BATTERY_VERSION + 1)
    third = check_tasks(tasks, tmp_path / "out", config(tmp_path))
    assert third.checked_now == 2 and third.resumed == 0
    meta = json.loads((tmp_path / "out" / "references" / "summary.json").read_text())["meta"]
    assert meta["evaluated_now"] == 0 and meta["resumed"] == 2
    with pytest.raises(TaskCheckError, match="holds a check made with"):
        check_tasks(tasks, tmp_path / "out", EvalConfig(ExecutionConfig(backend="cpu", compile_judge="backend"), robust=False, progress=False))


@needs_cuda_cpu
def test_a_checker_that_could_not_be_tried_is_not_ok_and_is_tried_again(tmp_path, monkeypatch):
    import cuset.evaluate.taskcheck.run as run_module

    real = run_module.compare_py_strength
    monkeypatch.setattr(run_module, "compare_py_strength", lambda task, ctx: (
        "compare.py", "not measured: the reference's run failed this time: timeout: still running after 60 s", ()))
    tasks = write_tasks(tmp_path / "tasks.jsonl", TASKS[:1])
    first = check_tasks(tasks, tmp_path / "out", config(tmp_path))
    assert first.checks[0].verdict == "checker not measured" and first.checks[0].defects == ()
    assert json.loads(first.json_path.read_text())["counts"]["checker_not_measured"] == 1
    monkeypatch.setattr(run_module, "compare_py_strength", real)
    again = check_tasks(tasks, tmp_path / "out", config(tmp_path))
    assert again.checked_now == 1 and again.checks[0].verdict == "ok" and len(again.checks[0].corruptions) == 6


runner = CliRunner()


@pytest.mark.parametrize("line2, expected", [
    ('{"id": 1, "task_name": ', "tasks.jsonl:2: <line>: invalid JSON"),
    (json.dumps({**TASKS[1], "outputs": [{"name": "c", "dtype": "f32", "shape": "(64,)"}]}),
     "tasks.jsonl:2: outputs[0].dtype: unknown dtype 'f32'"),
])
def test_a_bad_tasks_file_is_one_error_naming_file_and_line(tmp_path, line2, expected):
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(TASKS[0]) + "\n" + line2 + "\n")
    res = runner.invoke(app, ["tasks", "check", str(path), "--out", str(tmp_path / "out"), "execution.backend=cpu"])
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
    assert expected in " ".join(res.output.split()) and "Traceback" not in res.output
    assert not (tmp_path / "out" / "task_check.json").exists()


def test_a_missing_tasks_file_is_named(tmp_path):
    res = runner.invoke(app, ["tasks", "check", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "o"),
                              "execution.backend=cpu"])
    assert res.exit_code == 2 and "nope.jsonl: no such file or directory" in " ".join(res.output.split())


def test_a_bad_check_file_is_named(tmp_path):
    with pytest.raises(TaskCheckFileError, match="no such task check file"):
        load_check(tmp_path)
    (tmp_path / "task_check.json").write_text('{"tasks": [{"task_id": 1}]}')
    with pytest.raises(TaskCheckFileError, match=r"task_check.json: tasks\[0\]: not a task check record"):
        load_check(tmp_path / "task_check.json")
    (tmp_path / "task_check.json").write_text('{"tasks": [')
    with pytest.raises(TaskCheckFileError, match=r"task_check.json:1: invalid JSON"):
        load_check(tmp_path / "task_check.json")


# ---------------------------------------------------------------- the corruptions themselves


def test_corruptions_change_what_they_say_and_nothing_else():
    x = np.array([1.0, -2.0, 3.0, 4.0], dtype=np.float32)
    assert corrupt(x, "one_element").tolist() == [1.0, -2.0, 3.0, 6.5]          # 4 + (1 + 4) / 2
    assert corrupt(x, "suffix").tolist() == [1.0, -2.0, 5.0, 6.5]
    assert corrupt(x, "every_element").tolist() == [2.0, -0.5, 5.0, 6.5]
    assert corrupt(x, "reversed").tolist() == [4.0, 3.0, -2.0, 1.0]
    assert np.isnan(corrupt(x, "nan")).all() and corrupt(x, "zeros").tolist() == [0, 0, 0, 0]
    i = np.array([7, np.iinfo(np.int32).max], dtype=np.int32)
    assert corrupt(i, "every_element").tolist() == [8, np.iinfo(np.int32).min]   # +1, wrapping
    assert corrupt(i, "nan") is None                                              # no NaN in integers
    assert corrupt(np.zeros(3, np.float32), "zeros") is None                      # would change nothing
    assert corrupt(np.array([1, 2, 1], np.int32), "reversed") is None
    assert wrong_values(np.array([True, False])).tolist() == [False, True]
    assert wrong_values(np.array([np.inf, np.nan], np.float32)).tolist() == [1.0, 1.0]
    assert set(CORRUPTIONS) == {"one_element", "suffix", "every_element", "zeros", "nan", "reversed"}
    with pytest.raises(ValueError, match="unknown corruption 'half'"):
        corrupt(x, "half")


# ---------------------------------------------------------------- KernelBench format

RELU = """import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(4, 32)]

def get_init_inputs():
    return []
"""
# Its output does not depend on its input: a model returning the constant passes every trial.
CONSTANT = RELU.replace("return torch.relu(x)", "return torch.ones(4, 32) + 0 * x.mean()")


def kb_record(i, src, **fields):
    return {"kind": "kernelbench", "id": i, "task_name": i, "reference_src": src, "n_trials": 2, **fields}


def test_the_kernelbench_checker_is_measured_against_the_reference_outputs(monkeypatch):
    """The battery through cuset's comparison, the reference's outputs given at the seam
    (`reference_outputs`): tolerances above the outputs' size accept what they should not."""
    import torch
    from cuset.evaluate.options import EvalOptions
    from cuset.evaluate.taskcheck.checkers import allclose_strength
    from cuset.tasks import KernelBenchTask

    verify = importlib.import_module("cuset.execute.kernelbench.verify")   # the module, not the function

    trials = [torch.tensor([[0.5, -1.0], [0.75, 0.25]]), torch.tensor([[1.5, 0.0], [-2.0, 3.0]])]
    expected = {f"c0_t{t}": ({"outputs": [{"t": "out"}]}, {"out": v}) for t, v in enumerate(trials)}
    monkeypatch.setattr(verify, "reference_outputs", lambda *a, **k: (expected, None))

    tight = KernelBenchTask("kb_t", "T", RELU, atol=1e-2, rtol=1e-2, n_trials=2)
    checker, note, results = allclose_strength(tight, "cpu", EvalOptions())
    assert checker == "cuset's comparison (atol=0.01, rtol=0.01)" and "no separate strict column" in note
    assert {r.corruption: r.accepted for r in results} == {
        "one_element": False, "suffix": False, "every_element": False, "zeros": False, "nan": False,
        "reversed": False, "constant_answer": False}
    assert all(r.strict_caught is None for r in results)

    loose = KernelBenchTask("kb_l", "L", RELU, atol=10.0, rtol=0.0, n_trials=2)   # |error| <= 10 passes
    _, _, results = allclose_strength(loose, "cpu", EvalOptions())
    # every finite corruption of values below 3 is within 10; NaN where the reference is finite never is
    assert [r.corruption for r in results if r.accepted] == ["one_element", "suffix", "every_element", "zeros",
                                                             "reversed", "constant_answer"]

    # |error| <= 1: zeros pass the first trial (values within 1) but not the second, and a
    # candidate must pass every trial
    medium = KernelBenchTask("kb_m", "M", RELU, atol=1.0, rtol=0.0, n_trials=2)
    zeros = {r.corruption: r for r in allclose_strength(medium, "cpu", EvalOptions())[2]}["zeros"]
    assert not zeros.accepted and zeros.detail.startswith("output: 3 of 4 elements differ beyond atol=1, rtol=0")


@pytest.mark.slow
def test_kernelbench_references_and_their_checkers_end_to_end(tmp_path):
    """Two KernelBench tasks on the CPU backend: the reference runs as its own candidate
    (ModelNew = Model) through the evaluation, then the battery runs on its outputs."""
    path = tmp_path / "kb.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (kb_record("kb_relu", RELU),
                                                            kb_record("kb_constant", CONSTANT))))
    result = check_tasks(path, tmp_path / "out", config(tmp_path))
    c = by_id(result)
    assert c["kb_relu"].reference_status == "passed" and c["kb_relu"].robust_status == "passed"
    assert c["kb_relu"].defects == () and len(c["kb_relu"].corruptions) == 7
    assert c["kb_constant"].reference_status == "passed"
    assert c["kb_constant"].defects == ("checker_cannot_fail",)
    assert [r.label for r in c["kb_constant"].accepted] == ["*:constant_answer"]
    assert c["kb_constant"].strict_stronger is None


@needs_cuda_cpu
def test_the_command_checks_with_robust_verification_and_exits_1_on_a_defect(tmp_path):
    tasks = write_tasks(tmp_path / "tasks.jsonl", TASKS[:2])
    args = ["tasks", "check", str(tasks), "--out", str(tmp_path / "out"), "--backend", "cpu",
            "execution.compile_judge=backend", "progress=false", f"workdir={tmp_path / 'work'}"]
    res = runner.invoke(app, args)
    assert res.exit_code == 1, res.output
    text = " ".join(res.output.split())
    assert "1 First_Element_Checker: compare.py accepts c:one_element, c:suffix" in text
    assert "checkers tried now: 2, from earlier runs: 0" in text
    doc = json.loads((tmp_path / "out" / "task_check.json").read_text())
    assert doc["settings"]["robust"] is True and doc["counts"]["checker_cannot_fail"] == 1
    res = runner.invoke(app, args[:-3] + ["robust=false", "execution.compile_judge=backend", "progress=false"])
    assert res.exit_code == 2 and "holds a check made with" in " ".join(res.output.split())
