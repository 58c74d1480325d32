"""Intervals and paired comparisons with tasks and training runs as random effects
(cuset.analysis.paired), and `cuset report --compare`."""

import json

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from cuset.analysis.paired import (
    contrast, contrast_of_task_scores, format_p, holm_adjust, mean_interval, paired_difference,
)
from cuset.cli.main import app

runner = CliRunner()


def test_one_run_per_side_is_the_paired_t_test():
    rng = np.random.default_rng(1)
    a = rng.uniform(0, 1, size=30)
    b = np.clip(a + rng.normal(0.05, 0.1, size=30), 0, 1)
    d = paired_difference(a, b, metric="function@1")
    ref = stats.ttest_rel(b, a)
    diffs = b - a
    half = stats.t.ppf(0.975, 29) * diffs.std(ddof=1) / np.sqrt(30)
    assert d.delta == pytest.approx(diffs.mean()) and d.df == pytest.approx(29)
    assert d.p_value == pytest.approx(ref.pvalue) and d.low == pytest.approx(diffs.mean() - half)
    assert d.high == pytest.approx(diffs.mean() + half)
    assert d.run_variance == "not_estimated" and "task sampling only" in d.sentence("A", "B")


def test_a_run_effect_shared_by_every_task_is_not_averaged_away():
    # A's second run is its first + 0.2 on every task (a pure run effect, no residual); B's two runs agree.
    # d_t = 0.3 on every task, so the task term is 0 and only A's run variance remains:
    # A's run means 0.25, 0.45 -> MS_run = 4 * var = 4 * 0.02 = 0.08, MS_e = 0 -> sr2 = 0.08 / 4 = 0.02,
    # Var(delta) = sr2 / 2 = 0.01 on 1 df: 0.3 +- t(0.975, 1) * 0.1 = 0.3 +- 1.27, p = 2 * P(t_1 > 3)
    a = np.array([[0.1, 0.2, 0.3, 0.4], [0.3, 0.4, 0.5, 0.6]])
    b = np.array([[0.5, 0.6, 0.7, 0.8], [0.5, 0.6, 0.7, 0.8]])
    d = paired_difference(a, b)
    assert d.delta == pytest.approx(0.3) and d.df == pytest.approx(1.0)
    assert d.p_value == pytest.approx(2 * stats.t.sf(3.0, 1)) and not d.significant
    assert d.low == pytest.approx(0.3 - stats.t.ppf(0.975, 1) * 0.1)   # -0.97
    assert d.high == 1.0                            # 1.57, clipped to the largest possible difference
    assert d.run_variance == "estimated"


def test_two_runs_of_ten_and_thirty_percent_give_a_wide_interval():
    tasks = 50
    run1 = (np.arange(tasks) < 5).astype(float)     # 10%
    run2 = (np.arange(tasks) < 15).astype(float)    # 30%
    m = mean_interval(np.stack([run1, run2]))
    assert m.mean == pytest.approx(0.2)
    assert m.low < 0.10 and m.high > 0.30           # two runs this far apart say little about a third
    task_only = mean_interval((run1 + run2) / 2)    # what ignoring the run effect would claim
    assert task_only.high - task_only.low < 0.25 < m.high - m.low


def test_no_variation_gives_no_interval_and_all_fail_is_printed_so():
    zeros = np.zeros((2, 10))
    m = mean_interval(zeros)
    assert (m.low, m.high) == (None, None) and m.cell() == "0.0 (no variation)"
    d = paired_difference(zeros, zeros)
    assert d.delta == 0 and d.low is None and d.p_value == 1.0 and not d.significant
    assert "no interval: no variation" in d.sentence("A", "B")
    ones = paired_difference(zeros, np.ones((2, 10)))   # a certain difference, but nothing to test it against
    assert ones.delta == 1 and ones.p_value is None and not ones.significant
    assert "no test possible" in ones.sentence("A", "B")


def test_one_single_run_side_borrows_the_other_sides_run_variance():
    rng = np.random.default_rng(3)
    a = rng.uniform(0, 1, size=(1, 40))
    b = np.clip(np.vstack([a[0] + 0.05, a[0] + 0.25]) + rng.normal(0, 0.05, (2, 40)), 0, 1)
    d = paired_difference(a, b)
    assert d.run_variance == "borrowed" and "other side's run-to-run variance" in d.sentence("A", "B")
    alone = paired_difference(a, b.mean(axis=0))    # the same data treated as one run each
    assert d.high - d.low > 2 * (alone.high - alone.low)


def test_a_2x2_interaction_by_hand():
    """One run per cell, 4 tasks: the interaction (B1 - A1) - (B0 - A0) per task is [1, 0, 0, 1],
    mean 0.5, variance of the mean (1/3) / 4, t with 3 df (t_0.975,3 = 3.182446...)."""
    a0, b0, a1, b1 = [1, 0, 1, 0], [1, 1, 1, 0], [0, 0, 1, 0], [1, 1, 1, 1]
    c = contrast([("A0", a0, 1), ("B0", b0, -1), ("A1", a1, -1), ("B1", b1, 1)], metric="function@1")
    se = (1 / 12) ** 0.5
    assert c.estimate == pytest.approx(0.5) and c.df == pytest.approx(3)
    assert (c.low, c.high) == pytest.approx((0.5 - 3.182446305284263 * se, 0.5 + 3.182446305284263 * se))
    assert c.p_value == pytest.approx(2 * stats.t.sf(0.5 / se, 3)) and not c.significant
    assert c.n_tasks == 4 and c.n_seeds == (1, 1, 1, 1) and c.run_variance == "not_estimated"
    assert c.terms == (("A0", 1.0), ("B0", -1.0), ("A1", -1.0), ("B1", 1.0))
    assert c.sentence("interaction").startswith("function@1: interaction = +50.0 points (95% interval [-41.9, +141.9]")
    # pass rates bound the contrast by its coefficients: at most +2 here, at least -2
    sure = contrast([("A0", [0, 0, 0], 1), ("B0", [0, 0, 0], -1), ("A1", [0, 0, 0], -1), ("B1", [1, 1, 0.9], 1)])
    assert sure.high <= 2.0 and sure.low >= -2.0


def test_a_two_group_contrast_is_the_paired_difference():
    rng = np.random.default_rng(3)
    a, b = rng.random((3, 12)), rng.random((2, 12))
    d, c = paired_difference(a, b), contrast([("A", a, -1), ("B", b, 1)])
    assert (c.estimate, c.low, c.high, c.p_value, c.df) == pytest.approx((d.delta, d.low, d.high, d.p_value, d.df))
    assert c.run_variance == d.run_variance == "estimated"


def test_contrast_over_the_tasks_every_run_scored_and_its_errors():
    runs = {"A": [{"t1": 1, "t2": 0, "t3": 1}], "B": [{"t1": 1, "t2": 1, "t4": 0}]}
    c = contrast_of_task_scores([("A", runs["A"], -1), ("B", runs["B"], 1)])
    assert c.n_tasks == 2 and c.estimate == pytest.approx(0.5)   # t1 and t2 only
    assert contrast_of_task_scores([("A", [{"t1": 1}], -1), ("B", [{"t1": 0}], 1)]) is None
    with pytest.raises(ValueError, match="the same tasks in every group: A 3, B 2"):
        contrast([("A", [1, 0, 1], -1), ("B", [1, 0], 1)])
    with pytest.raises(ValueError, match="at least 2 common tasks"):
        contrast([("A", [1], -1), ("B", [0], 1)])


def test_holm_adjustment_and_p_printing():
    base = paired_difference([0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 0.0, 1.0])
    from dataclasses import replace

    family = [replace(base, p_value=p) for p in (0.01, 0.04, 0.03)]
    # sorted 0.01, 0.03, 0.04 -> 3 * 0.01 = 0.03, 2 * 0.03 = 0.06, max(0.06, 1 * 0.04) = 0.06
    assert [d.p_holm for d in holm_adjust(family)] == pytest.approx([0.03, 0.06, 0.06])
    assert format_p(3e-9) == "p < 0.0001" and format_p(0.0123) == "p = 0.012" and format_p(0.5) == "p = 0.5"
    assert format_p(None).startswith("p: no test")


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="same tasks on both sides: 2 vs 3"):
        paired_difference([0, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="at least 2 common tasks"):
        paired_difference([1.0], [0.0])
    with pytest.raises(ValueError, match="confidence must be in"):
        mean_interval([0.0, 1.0], confidence=95)


# --- simulated studies with a known run effect ------------------------------------------------------------------
# Pass@1 of 3 samples per task; logit p = mu_method + task (sd 1.5) + task x method (sd 0.5) + run (per run).

def _study(rng, runs, mu_a, mu_b, sd_run, tasks=64):
    task = rng.normal(0, 1.5, tasks)
    sides = []
    for mu in (mu_a, mu_b):
        logit = mu + task + rng.normal(0, 0.5, tasks) + rng.normal(0, sd_run, (runs, 1))
        sides.append(rng.binomial(3, 1 / (1 + np.exp(-logit))) / 3)
    return sides


def _true_difference(mu_a, mu_b, sd_run, rng):
    z = rng.normal(0, np.sqrt(1.5 ** 2 + 0.5 ** 2 + sd_run ** 2), 2_000_000)
    return float(np.mean(1 / (1 + np.exp(-(mu_b + z))) - 1 / (1 + np.exp(-(mu_a + z)))))


N_STUDIES = 600   # binomial sd of a 5% rate: 0.9 points; the bands below are about +-3 sd


@pytest.mark.parametrize("runs,sd_run", [(2, 0.4), (4, 0.8)])
def test_null_false_positive_rate_is_near_five_percent(runs, sd_run):
    rng = np.random.default_rng(runs)
    hits = naive = 0
    for _ in range(N_STUDIES):
        a, b = _study(rng, runs, -1.5, -1.5, sd_run)
        hits += paired_difference(a, b).significant
        naive += stats.ttest_rel(b.mean(axis=0), a.mean(axis=0)).pvalue < 0.05   # tasks only, runs averaged
    assert 0.02 <= hits / N_STUDIES <= 0.08
    assert naive / N_STUDIES > 0.15     # the design's run effect is real: ignoring it is badly anti-conservative


@pytest.mark.parametrize("runs,sd_run", [(2, 0.4), (4, 0.8)])
def test_the_true_difference_is_covered_about_95_percent_of_the_time(runs, sd_run):
    rng = np.random.default_rng(10 + runs)
    true = _true_difference(-1.5, -1.0, sd_run, rng)
    covered = sum(d.low <= true <= d.high for d in
                  (paired_difference(*_study(rng, runs, -1.5, -1.0, sd_run)) for _ in range(N_STUDIES)))
    assert 0.92 <= covered / N_STUDIES <= 0.98


# --- cuset report --compare -------------------------------------------------------------------------------------

def _outcomes(pass_first):
    return {t: [(True, t < pass_first)] * 3 for t in range(40)}


def test_report_compare_by_labels_with_seeds(tmp_path, make_run):
    args, labels = [], []
    for seed, (sft, cuset) in enumerate([(10, 30), (12, 28)]):
        for method, n in (("sft", sft), ("cuset", cuset)):
            args.append(str(make_run(f"{method}{seed}", _outcomes(n))))
            labels += ["--label", f"model=m,method={method},seed={seed}"]
    out = tmp_path / "report"
    res = runner.invoke(app, ["report", *args, *labels, "--out", str(out), "--compare", "method=SFT:method=CuSeT"])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "report.json").read_text())
    (cmp,) = doc["paired"]
    assert cmp["runs_a"] == [1, 3] and cmp["runs_b"] == [2, 4]
    rows = {r["metric"]: r for r in cmp["rows"]}
    f1 = rows["function@1"]
    assert f1["n_tasks"] == 40 and f1["n_seeds"] == [2, 2] and f1["run_variance"] == "estimated"
    assert f1["mean_a"] == pytest.approx(11 / 40) and f1["mean_b"] == pytest.approx(29 / 40)
    assert f1["delta"] == pytest.approx(18 / 40) and f1["significant"] and f1["p_holm"] >= f1["p_value"]
    assert cmp["n_comparisons"] == len(cmp["rows"])
    c1 = rows["compile@1"]
    assert c1["delta"] == 0 and c1["low"] is None and not c1["significant"]
    md = (out / "report.md").read_text()
    assert "## Paired comparison: method=CuSeT (runs [2, 4]) vs method=SFT (runs [1, 3])" in md
    assert "function@1: method=CuSeT - method=SFT = +45.0 points" in md and "significant at the 5% level" in md
    assert "Satterthwaite" in md and f"Holm-adjusted p (column p_Holm) over the {len(cmp['rows'])}" in md
    assert "none (no variation)" in md
    printed = " ".join(res.output.split())
    assert "compile@1: method=CuSeT - method=SFT = +0.0 points" in printed and "cannot tell them apart" in printed


def test_report_compare_errors_name_the_fix(tmp_path, make_run):
    a = str(make_run("a", _outcomes(5)))
    res = runner.invoke(app, ["report", a, "--label", "method=sft", "--out", str(tmp_path / "r"),
                              "--compare", "method=SFT:method=DFT"])
    assert res.exit_code != 0 and "no run has the labels 'method=DFT'" in " ".join(res.output.split())
    res = runner.invoke(app, ["report", a, "--out", str(tmp_path / "r"), "--compare", "method=SFT"])
    assert res.exit_code != 0 and "two label selectors separated by ':'" in " ".join(res.output.split())


def test_report_compare_on_kernelbench_task_ids(tmp_path):
    """KernelBench task ids are names (L<level>_<name>): per-task scores are keyed by them."""
    from cuset.analysis.report import build_report
    from cuset.analysis.results import load_run
    from cuset.evaluate.records import SampleResult, save_results
    from cuset.execute.result import Status

    ids = [f"L1_{i}_op{i}" for i in range(12)]
    runs = []
    for name, n_pass in (("a", 3), ("b", 9)):
        d = tmp_path / name
        d.mkdir()
        save_results(d / "results.jsonl", [
            SampleResult(task_id=tid, task_name=tid, family="kb", sample=0,
                         status=Status.PASSED if i < n_pass else Status.WRONG, compiled=True, ran_ok=True,
                         passed=i < n_pass, n_tokens=10) for i, tid in enumerate(ids)])
        (d / "summary.json").write_text(json.dumps({"overall": {}, "meta": {}}))
        runs.append(load_run(d))
    assert set(runs[0].task_metrics) == set(ids)
    doc = build_report(runs, tmp_path / "report")
    f1 = {r["metric"]: r for r in doc["paired"][0]["rows"]}["function@1"]
    assert f1["n_tasks"] == 12 and f1["delta"] == pytest.approx(6 / 12)
