"""The task factory: determinism, distinctness, no overlap with the suite, filters, held-out splits."""

from __future__ import annotations

import random

import pytest

from cuset.curation.families import DOMAINS, REGISTRY, get_family
from cuset.curation.families.selfcheck import self_check
from cuset.curation.families.suite import suite_tasks
from cuset.curation.synth import capacity, split_families, synthesize, synthesize_split
from cuset.tasks.io import load_tasks, save_tasks


def identity(task) -> tuple:
    """What makes two tasks the same problem: name and every declared shape."""
    return (task.task_name, tuple(t.shape for t in task.inputs), tuple(t.shape for t in task.outputs))


@pytest.fixture(scope="module")
def big():
    return synthesize(2000, seed=0)


def test_same_seed_same_bytes_other_seed_other_tasks(tmp_path):
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    save_tasks(synthesize(80, seed=7), a)
    save_tasks(synthesize(80, seed=7), b)
    save_tasks(synthesize(80, seed=8), c)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()


def test_2000_distinct_valid_tasks(big, tmp_path):
    assert [t.id for t in big] == list(range(2000))
    assert len({identity(t) for t in big}) == 2000
    assert len({t.bench_cu for t in big}) == 2000
    assert len({t.level1_prompt for t in big}) == 2000
    path = tmp_path / "synth.jsonl"
    save_tasks(big, path)
    loaded, report = load_tasks(path, strict=True)
    assert report.loaded == 2000 and loaded == big
    assert [t.family for t in loaded] == [t.family for t in big]


def test_no_synthesised_task_collides_with_the_suite(big):
    suite = suite_tasks()
    assert {t.task_name for t in big}.isdisjoint({t.task_name for t in suite})
    assert {t.bench_cu for t in big}.isdisjoint({t.bench_cu for t in suite})
    assert {t.gen_py for t in big}.isdisjoint({t.gen_py for t in suite})


def test_families_take_turns_so_small_requests_cover_every_domain():
    tasks = synthesize(len(REGISTRY), seed=1)
    assert sorted(t.family for t in tasks) == sorted(REGISTRY)
    assert {get_family(t.family).domain for t in synthesize(60, seed=2)} == set(DOMAINS)


def test_small_scale_tasks_fit_the_cpu_backend(big):
    assert max(t.data_bytes for t in big) <= 6 * 2**20
    large = synthesize(20, seed=0, size_scale="large")
    assert min(t.data_bytes for t in large) > 2**20


def test_family_filters_and_errors():
    only = synthesize(30, seed=0, families=["relu", "saxpy"])
    assert {t.family for t in only} == {"relu", "saxpy"}
    assert "relu" not in {t.family for t in synthesize(100, seed=0, exclude_families=["relu"])}
    assert capacity(families=["saxpy"]) == len(get_family("saxpy").variants) * len(get_family("saxpy").small_sizes)
    with pytest.raises(ValueError, match="only 108 distinct"):
        synthesize(109, seed=0, families=["saxpy"])
    with pytest.raises(KeyError, match="did you mean"):
        synthesize(5, seed=0, families=["sxapy"])
    with pytest.raises(ValueError, match="no task family left"):
        synthesize(5, seed=0, families=["relu"], exclude_families=["relu"])
    with pytest.raises(ValueError, match="non-negative"):
        synthesize(-1, seed=0)
    with pytest.raises(ValueError, match="size_scale"):
        synthesize(5, seed=0, size_scale="huge")
    with pytest.raises(ValueError, match="eval_fraction"):
        synthesize(5, seed=0, split="eval", eval_fraction=1.5)
    assert synthesize(0, seed=0) == []
    assert [t.id for t in synthesize(3, seed=0, start_id=100)] == [100, 101, 102]


def test_parameter_holdout_is_disjoint_and_covers_families():
    train, test = synthesize_split(600, 150, seed=3)
    assert {identity(t) for t in train}.isdisjoint({identity(t) for t in test})
    assert {t.bench_cu for t in train}.isdisjoint({t.bench_cu for t in test})
    assert len({t.family for t in test}) >= len(REGISTRY) - 2
    assert [t.id for t in test] == list(range(150))


def test_family_holdout_keeps_every_domain_in_training():
    train_names, eval_names = split_families(seed=5, eval_fraction=0.25)
    assert set(train_names).isdisjoint(eval_names)
    assert sorted(train_names + eval_names) == sorted(REGISTRY)
    assert {get_family(n).domain for n in train_names} == set(DOMAINS)
    assert len(eval_names) >= 10
    train, test = synthesize_split(300, 80, seed=5, holdout="families", eval_fraction=0.25)
    assert {t.family for t in train} <= set(train_names)
    assert {t.family for t in test} <= set(eval_names)
    assert split_families(seed=5, eval_fraction=0.25) == (train_names, eval_names)
    assert split_families(seed=6, eval_fraction=0.25) != (train_names, eval_names)


def test_a_sample_of_synthesised_tasks_is_self_consistent(big, tmp_path):
    sample = random.Random(0).sample(big, 8)
    for task in sample:
        assert self_check(task, tmp_path / str(task.id)) == [], task.task_name
