"""The bundled suite: current with the family code, valid, and shaped as promised."""

from __future__ import annotations

import importlib.util
from collections import defaultdict
from pathlib import Path

import pytest

from cuset.curation.families import DOMAINS, get_family
from cuset.curation.families.suite import idioms, suite_tasks
from cuset.tasks.io import load_tasks

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "suites" / "cuset-bench.jsonl"


def load_builder():
    spec = importlib.util.spec_from_file_location("build_suite", ROOT / "suites" / "build_suite.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def suite():
    tasks, report = load_tasks(SUITE, strict=True)
    return tasks


def test_committed_files_are_what_the_builder_writes():
    builder = load_builder()
    tasks = suite_tasks()
    assert SUITE.read_text(encoding="utf-8") == builder.render_jsonl(tasks), "run python suites/build_suite.py"
    assert (ROOT / "suites" / "README.md").read_text(encoding="utf-8") == builder.render_readme(tasks)
    assert (ROOT / "suites" / "cuset-bench-cpu.jsonl").read_text(encoding="utf-8") == builder.render_jsonl(
        builder.cpu_subset(tasks))
    assert builder.main(["--check"]) == 0


def test_ids_are_contiguous_and_families_have_two_sizes_one_small(suite):
    assert [t.id for t in suite] == list(range(len(suite)))
    by_family = defaultdict(list)
    for t in suite:
        by_family[t.family].append(t)
    assert len(by_family) >= 40
    assert {get_family(f).domain for f in by_family} == set(DOMAINS)
    for fam, group in by_family.items():
        assert len(group) >= 2, fam
        assert len({t.task_name for t in group}) == 1, fam
        assert min(t.data_bytes for t in group) <= 6 * 2**20, f"{fam}: smallest size holds too much data for the CPU"
        assert group[0].data_bytes < group[-1].data_bytes, f"{fam}: sizes should grow"
    assert len({t.task_name for t in suite}) == len(by_family), "task names are unique per family"


def test_cpu_subset_is_the_first_size_of_each_family(suite):
    cpu, _ = load_tasks(ROOT / "suites" / "cuset-bench-cpu.jsonl", strict=True)
    assert len(cpu) == len({t.family for t in suite})
    by_id = {t.id: t for t in suite}
    for t in cpu:
        assert by_id[t.id] == t and t.family == by_id[t.id].family
        assert t.data_bytes <= 6 * 2**20
        assert all(o.id >= t.id for o in suite if o.family == t.family)


def test_suite_uses_the_promised_cuda_idioms(suite):
    usage = defaultdict(set)
    for t in suite:
        for name in idioms(t.bench_cu):
            usage[name].add(t.family)
    for name in ("shared memory", "dynamic shared memory", "__syncthreads", "warp shuffles", "atomics",
                 "grid-stride loop", "2-D/3-D grid (dim3)", "constant memory", "templates"):
        assert len(usage[name]) >= 2, f"only {sorted(usage[name])} use {name}"


def test_idiom_detection_on_hand_written_sources():
    src = """
    template <typename T> __global__ void k(T* x) { extern __shared__ float s[]; __syncthreads();
      for (int i = 0; i < 9; i += blockDim.x * gridDim.x) atomicAdd(x, 1); }
    """
    assert idioms(src) == ["shared memory", "dynamic shared memory", "__syncthreads", "atomics",
                           "grid-stride loop", "templates"]
    assert idioms("__global__ void k() {}") == []
