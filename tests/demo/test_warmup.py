"""The base-strength warm-up set: drawn from the fine-tuning families at points neither the
fine-tuning nor the evaluation set holds, and checked so before training (both ways)."""

import json

import pytest

from cuset.curation.synth import SynthError, check_disjoint, make_tasks, point_of, synthesize_points
from cuset.demo.config import DEMO_FAMILIES, DemoConfig
from cuset.demo.corpus import warmup_points
from cuset.demo.run import DemoRun, check_warmup_disjoint

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
    assert DemoRun(DemoConfig(warmup_steps=0), tmp_path).pretrained_model == DemoRun(DemoConfig(warmup_steps=0), tmp_path).vanilla
    # the demo warms its base up by default; --fast and --study keep the base as pretrained
    from cuset.demo.config import FAST, STUDY

    assert DemoConfig().warmup_steps == 1600 and FAST["warmup_steps"] == STUDY["warmup_steps"] == 0
    assert DemoRun(DemoConfig(warmup_steps=40), tmp_path).pretrained_model.name == "pretrained"
    with pytest.raises(ValueError, match=r"warmup_steps must be >= 0"):
        DemoConfig(warmup_steps=-1)
    with pytest.raises(ValueError, match=r"n_warmup must be >= 1 when warmup_steps > 0"):
        DemoConfig(warmup_steps=5, n_warmup=0)


def test_base_mechanism_by_hand():
    """Two samples, 6 tokens: CUDA-sensitive p = 0.05, 0.5, 0.9; neutral p = 0.1, 0.8, 1.0."""
    import math

    import numpy as np
    from scipy.stats import ks_2samp

    from cuset.analysis.confidence import ScoredSample
    from cuset.demo.run import base_mechanism

    k, n = frozenset({"kernel_body"}), frozenset()
    samples = [ScoredSample("a", np.array([0.05, 0.1, 0.5]), (k, n, k)),
               ScoredSample("b", np.array([0.8, 0.9, 1.0]), (n, k, n))]
    m = base_mechanism(samples, tau=0.1)
    fit = m["fit"]
    # p <= 0.1: 0.05 (sensitive) and 0.1 (neutral, inclusive)
    assert (fit["share_low"], fit["share_low_sensitive"], fit["share_low_neutral"]) == pytest.approx((2 / 6, 1 / 3, 1 / 3))
    nll = -(math.log(0.05) + math.log(0.1) + math.log(0.5) + math.log(0.8) + math.log(0.9) + 0.0) / 6
    assert fit["nll"] == pytest.approx(nll)
    assert m["mean_conf_sensitive"] == pytest.approx((0.05 + 0.5 + 0.9) / 3)
    assert m["mean_conf_neutral"] == pytest.approx((0.1 + 0.8 + 1.0) / 3)
    # empirical CDFs differ by at most 1/3 (e.g. at 0.05: 1/3 vs 0)
    assert m["ks"]["statistic"] == pytest.approx(1 / 3)
    assert m["ks"]["pvalue"] == pytest.approx(ks_2samp([0.05, 0.5, 0.9], [0.1, 0.8, 1.0]).pvalue)
    assert (m["ks"]["n_sensitive"], m["ks"]["n_neutral"]) == (3, 3)
    from cuset.demo.report import _mechanism_text

    text = _mechanism_text(m, 0.1)
    assert "33.3% of its target tokens there are at p <= tau = 0.1 (CUDA-sensitive 33.3%, neutral 33.3%)" in text
    assert "mean confidence CUDA-sensitive 0.483 vs neutral 0.633 (KS D = 0.333" in text
    assert "sensitive tokens less confident than neutral ones" in text
