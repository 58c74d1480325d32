"""Task families: registry, declarations, generated records, gen.py/compare.py consistency, nvcc."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cuset.curation.families import DOMAINS, REGISTRY, Family, all_families, families_in_domain, get_family
from cuset.curation.checker import Check, compare_script
from cuset.curation.families.base import Tensor, cfloat, name_num, pick, size_grid, task_seed
from cuset.curation.families.selfcheck import combined_source, compare_verdicts, run_gen, self_check, self_check_many
from cuset.tasks import validate_record

FAMILY_NAMES = list(REGISTRY)


def small_suite_task(fam: Family):
    return fam.make(fam.suite_variant, fam.suite_sizes[0], task_id=0)


def first_variant_task(fam: Family):
    return fam.make(fam.variants[0], min(fam.small_sizes, key=lambda s: sorted(s.values())), task_id=1)


# ---------------------------------------------------------------- registry

def test_registry_covers_every_domain_with_40_families():
    assert len(REGISTRY) >= 40
    assert {f.domain for f in all_families()} == set(DOMAINS)
    assert len({f.name for f in all_families()}) == len(REGISTRY)


def test_task_names_identify_one_family_and_variant():
    owner = {}
    for fam in all_families():
        size = fam.small_sizes[0]
        for variant in (fam.suite_variant, *fam.variants):
            name = fam.make(variant, size, 0).task_name
            assert owner.setdefault(name, (fam.name, str(variant))) == (fam.name, str(variant)), name


def test_get_family_suggests_close_names():
    assert get_family("relu").name == "relu"
    with pytest.raises(KeyError, match="did you mean.*saxpy"):
        get_family("saxpyy")
    with pytest.raises(KeyError, match="unknown domain"):
        families_in_domain("quantum")
    assert [f.name for f in families_in_domain("elementwise")][:2] == ["vector_binary", "saxpy"]


def test_family_rejects_suite_points_among_factory_points():
    fam = get_family("saxpy")
    common = dict(name="x", domain="elementwise", build=fam.build, suite_sizes=fam.suite_sizes)
    with pytest.raises(ValueError, match="suite variant is also a factory variant"):
        Family(suite_variant={"alpha": 2.0}, variants=({"alpha": 2.0},), small_sizes=({"n": 5},), **common)
    with pytest.raises(ValueError, match="is a suite size"):
        Family(suite_variant={"alpha": 2.0}, variants=({"alpha": 1.0},), small_sizes=(fam.suite_sizes[0],), **common)
    with pytest.raises(ValueError, match="unknown domain"):
        Family(**{**common, "domain": "nope"}, suite_variant={}, variants=(), small_sizes=())
    with pytest.raises(ValueError, match="at least two sizes"):
        Family(**{**common, "suite_sizes": fam.suite_sizes[:1]}, suite_variant={}, variants=(), small_sizes=())


# ---------------------------------------------------------------- helpers

def test_literal_and_name_helpers():
    assert cfloat(0.5) == "0.5f" and cfloat(2) == "2.0f" and cfloat(1e-5) == "1e-05f"
    assert name_num(0.05) == "0p05" and name_num(-1.5) == "m1p5" and name_num(2.0) == "2"
    assert size_grid(a=(1, 2), b=(3,)) == ({"a": 1, "b": 3}, {"a": 2, "b": 3})
    # Expected values: CRC-32 of the key text taken outside Python (the gzip trailer of
    # `printf 'k|7' | gzip -c`), so a change to another hash (Python's hash() is salted per
    # process) or another key format shows. crc32("k|7") = 2163502630, 2163502630 % 3 = 1.
    assert [pick((1, 2, 3), "k", k) for k in (7, 8, 9)] == [2, 3, 1]  # crc32 % 3 = 1, 2, 0
    # crc32('f|{"a":1}|{"n":2}') = 1666849521 and crc32('f|{"a":2}|{"n":2}') = 2288886258, mod 1_000_003
    assert task_seed("f", {"a": 1}, {"n": 2}) == 844523
    assert task_seed("f", {"a": 2}, {"n": 2}) == 879394
    # the key text sorts the parameters: the order a family lists them in does not matter
    assert task_seed("f", {"b": 0, "a": 1}, {"n": 2}) == task_seed("f", {"a": 1, "b": 0}, {"n": 2})


def test_tensor_dtypes_are_those_of_the_programs():
    # the tolerance rules and compare.py itself: tests/curation/test_data_checker.py
    with pytest.raises(ValueError, match="dtype"):
        Tensor("t", "float64", (1,), "1")


def test_compare_tolerance_is_applied(tmp_path):
    """A hand-made check: |out - ref| <= atol + rtol * |ref| passes, one ulp beyond fails."""
    import numpy as np

    from cuset.curation.families.base import make_task, TaskParts

    y = Tensor("y", "float32", (3,), "3")
    parts = TaskParts("T", "l1", "l2", (), (y,), "int main(){}", "", compare_script((y,), (Check("y", 0.5, 0.0),)))
    task = make_task(parts, 0, "toy")
    (tmp_path / "data").mkdir()
    np.array([1.0, 2.0, 3.0], np.float32).tofile(tmp_path / "data" / "y_ref.bin")
    verdicts = compare_verdicts(task, tmp_path)
    assert verdicts["reference"] == "T" and verdicts["missing"] == "F" and verdicts["truncated"] == "F"
    # perturbed adds 0.5 * (1 + |2|) = 1.5 > 0.5 to the middle element
    assert verdicts["perturbed"] == "F"


# ---------------------------------------------------------------- every family

@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_family_records_are_valid_cudabench_tasks(name):
    fam = get_family(name)
    assert len(fam.suite_sizes) >= 2 and fam.variants and fam.small_sizes
    tasks = [fam.make(fam.suite_variant, s, i) for i, s in enumerate(fam.suite_sizes)]
    tasks += [fam.make(v, fam.small_sizes[i % len(fam.small_sizes)], 10 + i) for i, v in enumerate(fam.variants)]
    assert len({t.task_name for t in tasks[: len(fam.suite_sizes)]}) == 1, "suite sizes share one task name"
    assert len({t.task_name for t in tasks[len(fam.suite_sizes):]}) == len(fam.variants), "variant names are distinct"
    for task in tasks:
        record = task.to_json()
        assert validate_record(record) == [], task.task_name
        assert record["family"] == name
        assert re.fullmatch(r"[A-Za-z0-9_]+", task.task_name)
        assert task.task_description == task.level3_prompt == f"Compute the {task.task_name} kernel on GPU using CUDA."
        assert task.inputs[0].shape in task.level1_prompt
        assert task.inputs[0].shape not in task.level2_prompt
        assert "int main()" in task.bench_cu and "__global__" in task.bench_cu
        for spec in task.inputs:
            assert f'"data/{spec.name}.bin"' in task.bench_cu and f'"data/{spec.name}.bin"' in task.gen_py
        for spec in task.outputs:
            assert f'"data/{spec.name}.bin"' in task.bench_cu and f'"data/{spec.name}_ref.bin"' in task.gen_py
        assert "CUSET_CASE" in task.gen_py and 'print("T" if ok else "F")' in task.compare_py
        assert 30 <= task.bench_cu.count("\n") <= 220, f"{task.task_name}: {task.bench_cu.count(chr(10))} lines"


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_family_gen_and_compare_agree(name, tmp_path):
    """For the small suite task and every factory variant: gen.py writes the declared files,
    honours CUSET_CASE, and compare.py accepts the reference and rejects broken outputs."""
    fam = get_family(name)
    tasks = [small_suite_task(fam)]
    tasks += [fam.make(v, fam.small_sizes[i % len(fam.small_sizes)], i + 1) for i, v in enumerate(fam.variants)]
    problems = self_check_many(tasks, tmp_path)
    assert {t.task_name: p for t, p in zip(tasks, problems) if p} == {}


def test_gen_is_deterministic_per_case(tmp_path):
    task = small_suite_task(get_family("prefix_scan"))
    for d in ("a", "b"):
        run_gen(task, tmp_path / d, case=3)
    files = sorted(p.name for p in (tmp_path / "a" / "data").iterdir())
    assert files == ["x.bin", "y_ref.bin"]
    for f in files:
        assert (tmp_path / "a" / "data" / f).read_bytes() == (tmp_path / "b" / "data" / f).read_bytes()


def test_self_check_catches_a_compare_that_accepts_anything(tmp_path):
    task = small_suite_task(get_family("relu"))
    lax = dataclasses.replace(task, compare_py='print("T")\n')
    problems = self_check(lax, tmp_path)
    assert any("zeros" in p for p in problems) and any("missing" in p for p in problems)
    ignores_case = dataclasses.replace(task, gen_py=task.gen_py.replace("SEED + CASE", "SEED"))
    assert any("CUSET_CASE is ignored" in p for p in self_check(ignores_case, tmp_path / "b"))


# ---------------------------------------------------------------- nvcc

def _compile(source: str, workdir: Path, link: bool) -> str:
    workdir.mkdir(parents=True, exist_ok=True)
    src = workdir / "bench.cu"
    src.write_text(source)
    argv = ["nvcc", str(src), "-o", str(workdir / ("prog" if link else "prog.o"))] + ([] if link else ["-c"])
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    return "" if proc.returncode == 0 and "warning" not in proc.stderr.lower() else proc.stderr[-3000:]


def _compile_all(tasks, tmp_path: Path, link: bool) -> dict[str, str]:
    with ThreadPoolExecutor(2) as pool:
        errors = list(pool.map(lambda it: _compile(it[1].bench_cu, tmp_path / str(it[0]), link), enumerate(tasks)))
    return {f"{t.family}/{t.task_name}/{t.inputs[0].shape}": e for t, e in zip(tasks, errors) if e}


def _compile_batched(tasks, tmp_path: Path) -> dict[str, str]:
    """Check programs 25 to a translation unit; a failing batch is retried program by program,
    so the error names the program."""
    batches = [tasks[i:i + 25] for i in range(0, len(tasks), 25)]
    with ThreadPoolExecutor(2) as pool:
        errors = list(pool.map(lambda it: _compile(combined_source([t.bench_cu for t in it[1]]), tmp_path / f"b{it[0]}", False),
                               enumerate(batches)))
    failed = [t for batch, err in zip(batches, errors) if err for t in batch]
    single = _compile_all(failed, tmp_path / "single", link=False)
    if any(errors) and not single:
        return {"batch": "a batch failed although each of its programs compiles alone: " + next(e for e in errors if e)}
    return single


needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")


@pytest.mark.nvcc
@needs_nvcc
def test_each_family_compiles_cleanly(tmp_path):
    """The small suite program and one factory variant of every family: no errors, no warnings."""
    tasks = [t for fam in all_families() for t in (small_suite_task(fam), first_variant_task(fam))]
    assert _compile_batched(tasks, tmp_path) == {}


@pytest.mark.nvcc
@pytest.mark.slow
@needs_nvcc
def test_every_suite_task_and_variant_compiles(tmp_path):
    from cuset.curation.families.suite import suite_tasks

    tasks = suite_tasks()
    tasks += [fam.make(v, fam.small_sizes[i % len(fam.small_sizes)], i) for fam in all_families() for i, v in enumerate(fam.variants)]
    assert _compile_batched(tasks, tmp_path) == {}


@pytest.mark.nvcc
@needs_nvcc
def test_a_broken_program_fails_the_compile_check(tmp_path):
    task = small_suite_task(get_family("relu"))
    broken = task.bench_cu.replace("fmaxf(v, 0.0f)", "fmaxf(v, 0.0f")
    errors = _compile_batched([task, dataclasses.replace(task, bench_cu=broken)], tmp_path)
    assert list(errors) == ["relu/ReLU_Activation/(262144,)"] and "error" in errors["relu/ReLU_Activation/(262144,)"]


def test_combined_source_namespaces_each_program():
    tasks = [small_suite_task(get_family(n)) for n in ("relu", "prefix_scan")]
    text = combined_source([t.bench_cu for t in tasks])
    assert text.count("void read_binary") == 1 and text.count("int main()") == 2
    assert "namespace task0 {" in text and "namespace task1 {" in text
    assert text.count("#include <cuda_runtime.h>") == 1


@pytest.mark.nvcc
@needs_nvcc
def test_kernels_first_moves_the_helpers_before_main_and_still_compiles(tmp_path):
    """The demo's kernels_first layout: the same lines, the task's code first, helpers just
    before main(); the demo's families still compile cleanly (each alone: the batching of
    _compile_batched expects the synthesised layout)."""
    from cuset.demo.config import DEMO_FAMILIES
    from cuset.curation.families.base import HOST_HELPERS, kernels_first

    moved, refused = [], []
    for fam in all_families():
        task = small_suite_task(fam)
        try:
            program = kernels_first(task.bench_cu)
        except ValueError:
            refused.append(fam.name)
            continue
        assert sorted(program.splitlines()) == sorted(task.bench_cu.splitlines()) or \
            sorted(filter(None, program.splitlines())) == sorted(filter(None, task.bench_cu.splitlines()))
        assert program.index("__global__") < program.index("#define CUDA_CHECK") < program.index("int main() {")
        assert program.count(HOST_HELPERS) == 1
        moved.append(dataclasses.replace(task, bench_cu=program))
    assert "relu" in {t.family for t in moved} and len(refused) < len(moved) / 10
    assert _compile_all([t for t in moved if t.family in DEMO_FAMILIES.split(",")], tmp_path, link=False) == {}
    with pytest.raises(ValueError, match="helpers only main"):
        kernels_first("int main() { return 0; }\n")
