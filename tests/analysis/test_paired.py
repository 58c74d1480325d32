"""The paired bootstrap (cuset.analysis.paired) and `cuset report --compare`."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from cuset.analysis.paired import paired_bootstrap
from cuset.cli.main import app

runner = CliRunner()


def test_a_known_difference_is_covered_and_significant():
    rng = np.random.default_rng(1)
    difficulty = rng.uniform(0.1, 0.7, size=80)          # tasks differ a lot; the pairing removes that
    a = difficulty + rng.normal(0, 0.02, size=80)
    b = difficulty + 0.10 + rng.normal(0, 0.02, size=80)
    d = paired_bootstrap(a, b, metric="function@1")
    true = float(np.mean(b - a))
    assert d.delta == pytest.approx(true) and d.low < 0.10 < d.high and d.low < true < d.high
    assert d.significant and d.p_value <= 1e-3
    assert d.high - d.low < 0.02  # paired: the spread of task difficulty does not widen the interval


def test_no_difference_is_not_significant():
    rng = np.random.default_rng(2)
    a = rng.integers(0, 2, size=(3, 64)).astype(float)  # 3 seeds x 64 tasks of pass/fail
    b = rng.integers(0, 2, size=(3, 64)).astype(float)  # same distribution
    d = paired_bootstrap(a, b)
    assert d.low < 0 < d.high and not d.significant and d.p_value > 0.05
    assert d.n_seeds == (3, 3) and d.n_tasks == 64
    same = paired_bootstrap(a, a)
    assert same.delta == 0 and same.p_value == 1.0 and not same.significant


def test_hand_checked_two_tasks_one_seed():
    # B - A per task is (+1, 0): every resample's mean is 0, 0.5 or 1, never below 0
    d = paired_bootstrap([0.0, 1.0], [1.0, 1.0], n_resamples=4000)
    assert d.delta == 0.5 and d.low == 0.0 and d.high == 1.0
    assert d.p_value == pytest.approx(2 * 0.25, abs=0.05)  # P(both draws are the tie task) = 1/4
    with pytest.raises(ValueError, match="same tasks on both sides: 2 vs 3"):
        paired_bootstrap([0, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="at least 2 common tasks"):
        paired_bootstrap([1.0], [0.0])


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
    f1 = {r["metric"]: r for r in cmp["rows"]}["function@1"]
    assert f1["n_tasks"] == 40 and f1["n_seeds"] == [2, 2]
    assert f1["mean_a"] == pytest.approx(11 / 40) and f1["mean_b"] == pytest.approx(29 / 40)
    assert f1["delta"] == pytest.approx(18 / 40) and f1["significant"]
    c1 = {r["metric"]: r for r in cmp["rows"]}["compile@1"]
    assert c1["delta"] == 0 and not c1["significant"]
    md = (out / "report.md").read_text()
    assert "## Paired comparison: method=CuSeT (runs [2, 4]) vs method=SFT (runs [1, 3])" in md
    assert "function@1: method=CuSeT - method=SFT = +45.0 points" in md and "significant at the 5% level" in md
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
