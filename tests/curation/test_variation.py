"""Replaceable tokens: varied reference programs are deterministic per seed, change only names,
comments and indentation, and still compile with nvcc and pass validation."""

from __future__ import annotations

import random
import re
import shutil
import subprocess

import pytest

from cuset.curation.synth import synthesize
from cuset.curation.variation import add_comments, function_names, reindent, rename_functions, vary_task
from cuset.demo.config import DEMO_FAMILIES

TASKS = synthesize(16, 0, families=DEMO_FAMILIES.split(","))


def _strip(code: str) -> str:
    """The program without comment lines and indentation."""
    return "\n".join(line.strip() for line in code.split("\n") if not line.strip().startswith("//"))


def test_deterministic_per_seed_and_different_between_seeds():
    same = [vary_task(t, 7).bench_cu for t in TASKS]
    assert same == [vary_task(t, 7).bench_cu for t in TASKS]
    other = [vary_task(t, 8).bench_cu for t in TASKS]
    assert sum(a != b for a, b in zip(same, other)) == len(TASKS)
    assert all(v != t.bench_cu for v, t in zip(same, TASKS))
    varied = vary_task(TASKS[0], 7)
    assert (varied.level1_prompt, varied.gen_py, varied.compare_py) == (TASKS[0].level1_prompt, TASKS[0].gen_py,
                                                                        TASKS[0].compare_py)


def test_only_names_comments_and_indentation_change():
    for task in TASKS:
        varied = vary_task(task, 3).bench_cu
        old, new = function_names(task.bench_cu), function_names(varied)
        assert len(old) == len(new) >= 1 and not set(old) & set(new)
        back = varied
        for o, n in zip(old, new):
            back = re.sub(rf"\b{n}\b", o, back)
        assert _strip(back) == _strip(task.bench_cu)


def test_the_parts_by_hand():
    code = "__global__ void k(int n) {\n    int i = 0;\n#define A \\\n    1;\n        x();\n}"
    assert reindent(code, "\t") == "__global__ void k(int n) {\n\tint i = 0;\n#define A \\\n\t1;\n\t\tx();\n}"
    commented = add_comments(code, random.Random(0), rate=1.0).split("\n")
    # after every line ending ';' or '{', except the continued macro line '    1;'
    assert [line.strip().startswith("//") for line in commented] == [False, True, False, True, False, False, False,
                                                                       True, False]
    functor = "struct Op { __device__ float operator()(float v) const { return v; } };"
    assert function_names(functor) == []
    renamed = rename_functions("__device__ float act(float v) { return v; }\n__global__ void k() { act(1.0f); }",
                               random.Random(1))
    assert "act" not in re.findall(r"\w+", renamed) and len(function_names(renamed)) == 2


@pytest.mark.skipif(shutil.which("g++") is None or shutil.which("nvcc") is None,
                    reason="validation needs g++ (CPU backend) and nvcc")
def test_varied_programs_compile_with_nvcc_and_pass_validation(tmp_path):
    from cuset.curation.validation import validate_references
    from cuset.evaluate.config import ExecutionConfig
    from cuset.execute.cpu import CpuBackend

    sample = [vary_task(t, 5) for t in random.Random(2).sample(TASKS, 3)]
    for task in sample:
        src = tmp_path / f"{task.id}.cu"
        src.write_text(task.bench_cu)
        done = subprocess.run(["nvcc", "-o", str(tmp_path / f"{task.id}.out"), str(src)], capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    results = validate_references(sample, backend=CpuBackend(), cases=(0,), execution=ExecutionConfig(workers=1),
                                  cache_dir=tmp_path / "cache")
    assert [r.status for r in results] == ["passed"] * 3, [r.detail for r in results]


def test_demo_varies_the_training_programs_only(tmp_path):
    from cuset.demo.config import DemoConfig
    from cuset.demo.run import DemoRun
    from cuset.tasks import load_tasks

    runs = [DemoRun(DemoConfig(n_train=8, n_eval=2, n_pretrain=0, n_instruct=4, replaceable=r), tmp_path / str(r))
            for r in (False, True)]
    for run in runs:
        run.make_data()
    plain, varied = ([load_tasks(run.train_tasks)[0] for run in runs])
    assert [t.bench_cu for t in varied] == [vary_task(t, 0).bench_cu for t in plain]
    assert load_tasks(runs[0].eval_tasks)[0] == load_tasks(runs[1].eval_tasks)[0]


def test_replaceable_ranges_mark_names_whole_line_comments_and_indentation():
    from cuset.curation.variation import replaceable_ranges

    code = "__global__ void scale(float* x) {\n  // twice\n\tx[0] *= 2; // inline\n}\nint main() { scale<<<1, 1>>>(0); }"
    # by hand: "scale" at 16 and 82 (lines start at 0, 34, 45, 67, 69), "  " at 34, "// twice" at 36, "\t" at 45
    assert replaceable_ranges(code) == [(16, 21), (34, 36), (36, 44), (45, 46), (82, 87)]
    assert [code[a:b] for a, b in replaceable_ranges(code)] == ["scale", "  ", "// twice", "\t", "scale"]


def test_a_varied_program_has_more_replaceable_characters():
    from cuset.curation.variation import replaceable_ranges

    count = lambda code: sum(b - a for a, b in replaceable_ranges(code))  # noqa: E731
    for task in TASKS[:4]:
        varied = vary_task(task, 3).bench_cu
        assert count(varied) > count(task.bench_cu) or "\t" in varied  # a tab indent is shorter than 4 spaces
