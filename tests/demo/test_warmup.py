"""The base-strength warm-up set: drawn from the fine-tuning families at points neither the
fine-tuning nor the evaluation set holds, and checked so before training (both ways)."""

import json

import pytest

from cuset.data.synth import SynthError, check_disjoint, make_tasks, point_of, synthesize_points
from cuset.demo.config import DEMO_FAMILIES, DemoConfig
from cuset.demo.run import DemoRun, check_warmup_disjoint, warmup_points

FAMILIES = DEMO_FAMILIES.split(",")


def _sets(n_train=200, n_eval=64, n_warmup=300, holdout="params"):
    train = synthesize_points(n_train, 0, split="train", holdout=holdout, families=FAMILIES)
    evaluation = synthesize_points(n_eval, 0, split="eval", holdout=holdout, families=FAMILIES)
    return train, evaluation, warmup_points(train, evaluation, n_warmup, 0)


def test_warmup_points_share_nothing_with_fine_tuning_and_evaluation():
    train, evaluation, warmup = _sets()
    used = {point_of(p) for p in (*train, *evaluation)}
    mine = [point_of(p) for p in warmup]
    assert len(mine) == len(set(mine)) == 300 and not used & set(mine)
    assert {p[0] for p in mine} == set(FAMILIES)  # the fine-tuning families, every one of them
    points = {"train": [point_of(p) for p in train], "eval": [point_of(p) for p in evaluation], "warmup": mine}
    tasks = {"train": make_tasks(train), "eval": make_tasks(evaluation), "warmup": make_tasks(warmup)}
    check_warmup_disjoint(points, tasks)  # passes: nothing shared


def test_a_shared_point_or_prompt_is_refused():
    train, evaluation, warmup = _sets(n_train=40, n_eval=8, n_warmup=20)
    points = {"train": [point_of(p) for p in train], "eval": [point_of(p) for p in evaluation],
              "warmup": [point_of(p) for p in warmup]}
    tasks = {"train": make_tasks(train), "eval": make_tasks(evaluation), "warmup": make_tasks(warmup)}
    leaked = dict(points, warmup=points["warmup"] + [points["eval"][3]])
    fam, variant, size = points["eval"][3]
    with pytest.raises(SynthError, match=rf"warm-up set shares .*1 with the evaluation set, e\.g\. {fam} "):
        check_warmup_disjoint(leaked, tasks)
    # the recorded points disjoint, the saved tasks not: the prompts give it away
    swapped = dict(tasks, warmup=tasks["warmup"] + [tasks["train"][5]])
    with pytest.raises(SynthError, match=r"shares 1 prompt\(s\) with the fine-tuning set, e\.g\. "
                                         + tasks["train"][5].task_name):
        check_warmup_disjoint(points, swapped)
    with pytest.raises(SynthError, match=r"2 with the fine-tuning set"):
        check_disjoint("warm-up", points["train"][:2], {"fine-tuning": points["train"]})


def test_holdout_families_keeps_the_evaluation_families_out_of_the_warmup():
    train, evaluation, warmup = _sets(n_train=100, n_eval=20, n_warmup=50, holdout="families")
    assert {p[0].name for p in warmup} <= {p[0].name for p in train}
    assert not {p[0].name for p in warmup} & {p[0].name for p in evaluation}


def test_make_data_writes_the_warmup_set_and_its_points(tmp_path):
    cfg = DemoConfig(n_train=30, n_eval=4, n_pretrain=0, n_instruct=10, warmup_steps=3, n_warmup=12)
    run = DemoRun(cfg, tmp_path)
    run.make_data()
    points = json.loads(run.points.read_text())
    assert [len(points[k]) for k in ("train", "eval", "warmup")] == [30, 4, 12]
    assert run.warmup_tasks.is_file() and run.pretrained_model.name == "pretrained"
    train = run.warmup_config()
    assert (train.loss.name, train.finetune, train.optim.max_steps) == ("sft", "full", 3)
    assert train.model.name_or_path == str(run.pretrained_model)
    assert DemoRun(DemoConfig(), tmp_path).pretrained_model == DemoRun(DemoConfig(), tmp_path).vanilla
    with pytest.raises(ValueError, match=r"warmup_steps must be >= 0"):
        DemoConfig(warmup_steps=-1)
    with pytest.raises(ValueError, match=r"n_warmup must be >= 1 when warmup_steps > 0"):
        DemoConfig(warmup_steps=5, n_warmup=0)
