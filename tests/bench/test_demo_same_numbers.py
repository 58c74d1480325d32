"""bench/demo_same_numbers.py: a result that differs is caught; timings and provenance are not results."""

import json
import sys

from .scripts import load_bench_script


def load_script(monkeypatch):
    monkeypatch.delitem(sys.modules, "demo_same_numbers", raising=False)  # restored after the test
    return load_bench_script("demo_same_numbers")


REPORT = {"config": {"out": "runs/a", "seed": 0, "regime_levels": "0,200,800"},
          "time": {"wall_s": 209.4}, "timings_s": {"train_sft": 51.6},
          "training": {"sft": {"final_metrics": {"loss": 0.25, "tokens_per_s": 2941.2}}},
          "results": {"sft": {"function@1": 0.125, "per_task": [1, 0, 0, 0]}}}


def write(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_only_bookkeeping_differs(tmp_path, monkeypatch):
    script = load_script(monkeypatch)
    after = json.loads(json.dumps(REPORT))
    after["config"].update(out="runs/b", regime_levels="0,12,40")
    after["time"]["wall_s"], after["timings_s"]["train_sft"] = 244.0, 54.3
    after["training"]["sft"]["final_metrics"]["tokens_per_s"] = 2188.8
    after["provenance"] = {"commit": "abc"}
    result = script.compare(write(tmp_path, "a.json", REPORT), write(tmp_path, "b.json", after), ("regime_levels",))
    assert result["result_differences"] == []
    assert sorted(result["bookkeeping_differences"]) == [
        "/config/out", "/config/regime_levels", "/provenance", "/time/wall_s", "/timings_s/train_sft",
        "/training/sft/final_metrics/tokens_per_s"]


def test_a_changed_score_a_changed_default_and_a_missing_field_are_results(tmp_path, monkeypatch):
    script = load_script(monkeypatch)
    after = json.loads(json.dumps(REPORT))
    after["results"]["sft"]["per_task"][2] = 1
    after["config"]["regime_levels"] = "0,12,40"          # not declared unused: a result
    del after["training"]["sft"]["final_metrics"]["loss"]
    result = script.compare(write(tmp_path, "a.json", REPORT), write(tmp_path, "b.json", after), ())
    assert [d["field"] for d in result["result_differences"]] == [
        "/config/regime_levels", "/results/sft/per_task[2]", "/training/sft/final_metrics/loss"]
    assert script.main([str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--out", str(tmp_path / "r.json")]) == 1
    assert json.loads((tmp_path / "r.json").read_text())["results"]["identical_results"] is False
