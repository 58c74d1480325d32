"""docs/competence.md (every committed base's competence before fine-tuning) is what
cuset.demo.competence writes from the committed reports, and each report's base numbers come
back from its committed per-sample results."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

import pytest

from cuset.demo.competence import base_row, committed_rows, competence_markdown
from cuset.demo.report import add_statistics

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _tool():
    spec = importlib.util.spec_from_file_location("competence_table", ROOT / "docs" / "tools" / "competence_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_page_is_what_the_committed_reports_give():
    assert (DOCS / "competence.md").read_text() == _tool().page_text(), \
        "run python docs/tools/competence_table.py and commit docs/competence.md"


@pytest.mark.parametrize("source", [r.source for r in committed_rows(DOCS)])
def test_each_bases_numbers_come_back_from_its_per_sample_results(source):
    committed = json.loads((DOCS / source / "report.json").read_text())
    recomputed = add_statistics(copy.deepcopy(committed), DOCS / source)
    for key in ("compile@1", "function@1"):
        assert json.loads(json.dumps(recomputed["methods"]["vanilla"][key])) == committed["methods"]["vanilla"][key]


def _report(tmp_path: Path, name: str, *, compile_at_1: float, function_at_1: float, hidden: int = 128,
            warmup: int = 0, sft: float | None = None, given: str = "", spread: float = 0.1) -> Path:
    stat = lambda mean: {"mean": mean, "low": max(0.0, mean - spread), "high": min(1.0, mean + spread), "n_tasks": 8}
    methods = {"vanilla": {"n_samples": 24, "compile@1": stat(compile_at_1), "function@1": stat(function_at_1)}}
    if sft is not None:
        methods["sft"] = {"n_samples": 24, "compile@1": stat(0.9), "function@1": stat(sft)}
    doc = {"runs": {"vanilla": {"results": "results/vanilla.jsonl"}}, "config": {"hidden": hidden, "layers": 4, "pretrain_steps": 1400, "n_instruct": 2000,
                      "warmup_steps": warmup, "pretrained": given, "finetune": "lora", "finetune_lr": 1e-4},
           "base_model": {"parameters": 1000 * hidden}, "methods": methods,
           "base_nll": {"nll": 0.5, "mechanism": {"fit": {"share_low": 0.1, "share_low_sensitive": 0.25,
                                                          "share_low_neutral": 0.05}}}}
    path = tmp_path / name / "report.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    return path


def test_the_gate_and_the_most_competent_base_on_hand_made_reports(tmp_path):
    _report(tmp_path, "weak", compile_at_1=0.80, function_at_1=0.10)
    _report(tmp_path, "big", compile_at_1=0.70, function_at_1=0.30, hidden=256, warmup=400, sft=0.5)
    _report(tmp_path, "edge", compile_at_1=0.65, function_at_1=0.2499)        # just below the function gate
    _report(tmp_path, "few", compile_at_1=0.95, function_at_1=0.32, spread=0.3)  # higher means, wider intervals
    (tmp_path / "no-base").mkdir()
    (tmp_path / "no-base" / "report.json").write_text(json.dumps({"config": {}, "methods": {"sft": {}}}))
    no_results = json.loads((tmp_path / "weak" / "report.json").read_text())
    no_results["runs"] = {"vanilla": {"method": "vanilla"}}                  # numbers without their samples
    (tmp_path / "early").mkdir()
    (tmp_path / "early" / "report.json").write_text(json.dumps(no_results))
    rows = committed_rows(tmp_path)
    assert [r.source for r in rows] == ["edge", "few", "weak", "big"]    # by parameters: 128_000 thrice, then 256_000
    assert [r.passes(0.65, 0.25) for r in rows] == [False, True, False, True]
    page = competence_markdown(rows, min_compile=0.65, min_function=0.25)
    assert "| [big](big/report.md) | 256,000 | 256 x 4 | 1400 (2000) | 400 | 8 | 70.0 [60.0, 80.0] | " \
           "30.0 [20.0, 40.0] | 0.500 | 10.0% / 25.0% / 5.0% | lora 0.0001 | 50.0 [40.0, 60.0] | passes |" in page
    assert "| [weak](weak/report.md) | 128,000 | 128 x 4 | 1400 (2000) | 0 | 8 | 80.0 [70.0, 90.0] | " \
           "10.0 [0.0, 20.0] | 0.500 | 10.0% / 25.0% / 5.0% | n/a | n/a | below |" in page
    assert "Bases that pass the gate: few, big." in page
    # few has the higher means (32.0 > 30.0) but the lower bound (2.0 < 20.0): big ranks first
    assert "ranks by what they show at least): big, compile@1 70.0 [60.0, 80.0]" in page
    assert base_row(tmp_path / "no-base" / "report.json", tmp_path) is None
    assert base_row(tmp_path / "early" / "report.json", tmp_path) is None


def test_no_base_passing_is_said_in_words(tmp_path):
    _report(tmp_path, "weak", compile_at_1=0.80, function_at_1=0.10)
    page = competence_markdown(committed_rows(tmp_path), min_compile=0.65, min_function=0.25)
    assert "No base passes the gate (1 evaluated)." in page and "| below |" in page


def test_check_fails_on_a_page_that_differs(tmp_path, monkeypatch, capsys):
    tool = _tool()
    monkeypatch.setattr(tool, "PAGE", tmp_path / "competence.md")
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    (tmp_path / "competence.md").write_text("# typed by hand\n")
    assert tool.main(["--check"]) == 1
    assert "not what the committed reports give" in capsys.readouterr().err


def test_a_base_given_to_the_run_is_not_described_by_its_recipe(tmp_path):
    _report(tmp_path, "pilot", compile_at_1=0.9, function_at_1=0.3, sft=0.3, given="/runs/map/base-k1600/models/vanilla")
    page = competence_markdown(committed_rows(tmp_path), min_compile=0.65, min_function=0.25)
    assert "| [pilot](pilot/report.md) | 128,000 | 128 x 4 | given (base-k1600/models/vanilla) | 0 | 8 |" in page
