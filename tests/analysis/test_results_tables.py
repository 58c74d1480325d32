"""Eval results -> labelled runs -> Table 2/3/5 rows and Figure 4 series, on hand-checked numbers."""

import json

import pytest

from cuset.analysis.results import ResultsError, labels_from_meta, load_run, load_runs, method_name, parse_label_arg
from cuset.analysis.tables import (
    format_params, hparam_series, settings_labels, switches_of, table2_markdown, table2_rows, table3_rows, table5_markdown,
    table5_rows,
)

# task 0: compiled T T F, passed T F F; task 1: compiled T T T, passed F F F
OUTCOMES = {0: [(True, True), (True, False), (False, False)], 1: [(True, False), (True, False), (True, False)]}


def test_metrics_are_recomputed_from_records(make_run):
    run = load_run(make_run("a", OUTCOMES, meta={"model": "m", "method": "sft"},
                            tokens={0: [10, 20, 30], 1: [40, 50, 60]}))
    m = run.metrics
    assert m["function@1"] == pytest.approx((1 / 3 + 0) / 2)     # unbiased pass@1 = c/n per task
    assert m["function@3"] == pytest.approx((1 + 0) / 2)
    assert m["compile@1"] == pytest.approx((2 / 3 + 1) / 2)
    assert m["compile@3"] == pytest.approx(1.0)
    assert m["avg_tokens"] == pytest.approx(35.0)
    assert run.counts["n_tasks"] == 2 and run.counts["n_samples"] == 6
    assert run.labels == {"model": "m", "method": "SFT"}


def test_compat_definition_uses_first_sample_and_ran_ok(make_run):
    run = load_run(make_run("c", OUTCOMES, ran_ok=False), definition="compat")
    # official "compilation" = compiled AND ran with exit 0: nothing ran
    assert run.metrics["compile@1"] == 0.0 and run.metrics["compile@3"] == 0.0
    assert run.metrics["function@1"] == pytest.approx(0.5)  # task 0's first sample passed


def test_table2_rows_carry_the_right_numbers(make_run):
    runs = load_runs([make_run("a", OUTCOMES), make_run("b", {0: [(True, True)] * 3, 1: [(True, True)] * 3})],
                     ["model=Qwen2.5-Coder-7B-Instruct,method=sft", "model=Qwen2.5-Coder-7B-Instruct,method=CuSeT"])
    rows = table2_rows(runs, published="matched")
    ours = [r for r in rows if r["source"] == "this run"]
    assert [(r["method"], r["run_number"]) for r in ours] == [("SFT", 1), ("CuSeT", 2)]
    assert (ours[0]["compile@1"], ours[0]["function@1"], ours[0]["compile@3"], ours[0]["function@3"]) == \
        pytest.approx((83.3333, 16.6667, 100.0, 50.0), abs=1e-3)
    assert ours[1]["function@1"] == 100.0
    pub = [r for r in rows if r["source"] == "published (paper)"]
    assert len(pub) == 7 and {r["model"] for r in pub} == {"Qwen2.5-Coder-7B-Instruct"}
    md = table2_markdown(rows)
    assert "| Qwen2.5-Coder-7B-Instruct | SFT |  | this run (#1) | <u>83.3</u> | <u>16.7</u> | 100.0 | <u>50.0</u> |" in md
    assert "| Qwen2.5-Coder-7B-Instruct | CuSeT |  | published (paper) | 93.6 | 65.6 | 98.8 | 74.8 |" in md


def test_published_modes(make_run):
    runs = load_runs([make_run("t", OUTCOMES)], ["model=tiny,method=cuset"])
    assert [r["source"] for r in table2_rows(runs, "matched")] == ["this run"]
    assert len(table2_rows(runs, "all")) == 1 + 21
    assert len(table2_rows(runs, "none")) == 1
    with pytest.raises(ValueError, match="published mode"):
        table2_rows(runs, "some")


def test_table3_has_tokens_params_and_type(make_run):
    runs = load_runs([make_run("a", OUTCOMES, tokens={0: [700, 800, 900], 1: [600, 700, 800]})],
                     ["model=Qwen3-14B,method=cuset,type=General,params=14768307200"])
    rows = table3_rows(runs)
    assert rows[0]["avg_tokens"] == pytest.approx(750) and rows[0]["params"] == "14.8B" and rows[0]["type"] == "General"
    assert rows[1]["source"] == "published (paper)" and rows[1]["avg_tokens"] == 722


def test_switch_identities_and_main_runs(make_run):
    path = make_run("a", OUTCOMES)
    run = lambda **labels: load_run(path, labels=labels)
    assert switches_of(run(method="sft")) == (False, False, False)
    assert switches_of(run(method="profit")) == (True, False, False)
    assert switches_of(run(method="cuset")) == (True, True, True)
    assert switches_of(run(method="cuset", region_weight=False)) == (True, True, False)
    assert switches_of(run(method="dft")) is None


def test_settings_tell_apart_runs_of_one_model_and_method(make_run):
    path = make_run("a", OUTCOMES)
    runs = [load_run(path, labels=l) for l in (
        {"model": "M", "method": "cuset", "tau": 0.1, "window": 256},
        {"model": "M", "method": "cuset", "tau": 0.3, "window": 256},
        {"model": "M", "method": "sft", "tau": 0.9},          # alone in its group: nothing to tell apart
        {"model": "N", "method": "cuset", "tau": 0.3})]
    assert list(settings_labels(runs).values()) == ["tau=0.1", "tau=0.3", "", ""]


def test_table5_rows_in_paper_order(make_run):
    specs = [("cuset", "conf_mask=true,cuda_mask=true,region_weight=true"), ("sft", ""),
             ("cuset", "conf_mask=true,cuda_mask=false,region_weight=true"), ("profit", ""),
             ("cuset", "conf_mask=true,cuda_mask=true,region_weight=true,tau=0.5")]  # a tau cell: its setting says so
    paths = [make_run(f"r{i}", OUTCOMES) for i in range(len(specs))]
    runs = load_runs(paths, [f"model=M,method={m}" + (f",{s}" if s else "") for m, s in specs])
    rows = [r for r in table5_rows(runs, published="none")]
    assert [(r["conf_mask"], r["cuda_mask"], r["region_weight"]) for r in rows] == \
        [(False, False, False), (True, False, False), (True, False, True), (True, True, True), (True, True, True)]
    assert [r["run_number"] for r in rows] == [2, 4, 3, 1, 5]
    assert [r["setting"] for r in rows] == ["", "", "", "", "tau=0.5"]
    md = table5_markdown(table5_rows(runs, published="all"))
    assert "| Qwen2.5-Coder-7B-Instruct | ✓? | ✓? | ✗? |  | published (paper) | 96.6 | 62.8 | 99.4 | 70.4 |" in md


def test_hparam_series_group_sort_and_average(make_run):
    good = {0: [(True, True)] * 3, 1: [(True, True)] * 3}
    half = {0: [(True, True)] * 3, 1: [(True, False)] * 3}
    specs = [("tau=0.5", OUTCOMES), ("tau=0.1", good), ("tau=0.1", half), ("tau=0.3", half),
             ("tau=0.3,lam=2.0", good)]  # other lambda: its own group (of one value: dropped)
    runs = load_runs([make_run(f"h{i}", o) for i, (_, o) in enumerate(specs)],
                     [f"model=M,method=cuset,{s}" for s, _ in specs])
    series = hparam_series(runs, "tau")
    assert len(series) == 1
    s = series[0]
    assert s["x"] == [0.1, 0.3, 0.5] and s["n_runs"] == [2, 1, 1]
    assert s["metrics"]["function@1"] == pytest.approx([75.0, 50.0, 16.6667], abs=1e-3)
    assert hparam_series(runs, "window") == []
    with pytest.raises(ValueError, match="unknown hyper-parameter"):
        hparam_series(runs, "beta")


def test_labels_priority_meta_sidecar_cli(make_run):
    path = make_run("p", OUTCOMES, meta={"model": "from-meta", "train": {"loss": {"tau": 0.3, "name": "x"}},
                                         "objective": "dft"})
    assert load_run(path).labels == {"model": "from-meta", "method": "DFT", "tau": 0.3}
    (path / "labels.json").write_text(json.dumps({"labels": {"model": "from-sidecar", "window": 128}}))
    assert load_run(path).labels["model"] == "from-sidecar" and load_run(path).labels["window"] == 128
    assert load_run(path, labels={"model": "from-cli"}).labels["model"] == "from-cli"
    assert load_run(make_run("q", OUTCOMES)).labels == {"model": "q"}  # the directory name, at least


def test_label_parsing_and_meta_lookup():
    assert parse_label_arg("model=Qwen/X-7B,method=CuSeT,tau=0.3,conf_mask=false,params=40B/744B") == \
        {"model": "Qwen/X-7B", "method": "CuSeT", "tau": 0.3, "conf_mask": False, "params": "40B/744B"}
    with pytest.raises(ResultsError, match="is not key=value"):
        parse_label_arg("model")
    assert labels_from_meta({"labels": {"model": "a"}, "model": "b"}) == {"model": "a"}
    assert method_name("profit") == "ProFit" and method_name("my-loss") == "my-loss"
    assert format_params(6.7e9) == "6.7B" and format_params("32B") == "32B" and format_params(None) == "?"


def test_bad_results_arguments(tmp_path, make_run):
    with pytest.raises(ResultsError, match="no such file or directory"):
        load_run(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ResultsError, match="neither results.jsonl"):
        load_run(tmp_path / "empty")
    bad = tmp_path / "bad" / "results.jsonl"
    bad.parent.mkdir()
    good = '{"task_id": 0, "task_name": "t", "family": "f", "sample": 0, "status": "passed"}'
    bad.write_text(good + '\n{"task_id": oops}\n{"task_id": 1}\n')
    with pytest.raises(ResultsError, match=r"results.jsonl:2: invalid JSON"):
        load_run(bad)
    bad.write_text(good + '\n{"task_id": 1, "sample": 0, "status": "passed"}\n')
    with pytest.raises(ResultsError, match=r"results.jsonl:2: missing field\(s\) task_name, family"):
        load_run(bad)
    bad.write_text(good + '\n{"task_id": 1, "task_name": "t", "family": "f", "sample": 0, "status": "exploded"}\n')
    with pytest.raises(ResultsError, match=r"results.jsonl:2: unknown status 'exploded'"):
        load_run(bad)
    path = make_run("ok", OUTCOMES)
    with pytest.raises(ResultsError, match="got 2 --label option"):
        load_runs([path], ["model=a", "model=b"])
    with pytest.raises(ResultsError, match="unknown metric definition"):
        load_run(path, definition="best")
    only_summary = tmp_path / "s" / "summary.json"
    only_summary.parent.mkdir()
    only_summary.write_text(json.dumps({"meta": {}}))
    with pytest.raises(ResultsError, match="no 'overall' section"):
        load_run(only_summary)


def test_summary_only_run_uses_its_numbers(tmp_path):
    path = tmp_path / "summary.json"
    overall = {"compile@1": 0.5, "function@1": 0.25, "compile@3": 0.75, "function@3": 0.5, "avg_tokens": 900,
               "n_tasks": 4, "n_samples": 12, "compat": {"compile@1": 0.4, "function@1": 0.2, "compile@3": 0.6,
                                                         "function@3": 0.4}}
    path.write_text(json.dumps({"overall": overall, "meta": {"model": "m"}}))
    run = load_run(path)
    assert run.metrics["function@1"] == 0.25 and run.metrics["avg_tokens"] == 900
    assert load_run(path, definition="compat").metrics["compile@3"] == 0.6
