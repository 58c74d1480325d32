"""`cuset demo --fast` end to end: every number in the report comes from the
per-sample result files it links."""

import json
import os
import re
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cuset.cli.main import app

pytestmark = [pytest.mark.slow, pytest.mark.nvcc,
              pytest.mark.skipif(shutil.which("nvcc") is None, reason="the demo compiles with nvcc")]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _pass_at_1(rows, key):
    """Unbiased pass@1 = mean over tasks of c/n, recomputed by hand from the rows."""
    by_task = defaultdict(list)
    for r in rows:
        if r["status"] != "skipped":
            by_task[r["task_id"]].append(bool(r[key]))
    return 100 * sum(sum(v) / len(v) for v in by_task.values()) / len(by_task)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    # A relative --out, as `make demo` uses (runs/demo-<timestamp>): every stage must cope.
    parent = tmp_path_factory.mktemp("demo")
    cwd = os.getcwd()
    os.chdir(parent)
    try:
        res = CliRunner().invoke(app, ["demo", "--fast", "--out", "run", "progress=false"])
    finally:
        os.chdir(cwd)
    assert res.exit_code == 0, res.output + repr(res.exception)
    return parent / "run"


def test_report_numbers_match_result_files(demo_run):
    report = (demo_run / "report.md").read_text()
    cfg = json.loads((demo_run / "demo_config.json").read_text())
    rows = [line for line in report.splitlines() if line.startswith("| ") and "](results/" in line]
    assert len(rows) == 3
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        link = re.search(r"\((results/[^)]+\.jsonl)\)", cells[-1]).group(1)
        results = [json.loads(x) for x in (demo_run / link).read_text().splitlines()]
        assert len(results) == cfg["n_eval"] * cfg["samples"]
        for col, key in ((1, "compiled"), (3, "passed")):
            # "mean [low, high]*": one seed, so an interval over tasks only (flagged *); "mean (no variation)"
            cell = re.fullmatch(r"([\d.]+) (?:\[([\d.]+), ([\d.]+)\]\*|\(no variation\))", cells[col])
            assert cell, cells[col]
            mean = float(cell.group(1))
            assert mean == pytest.approx(_pass_at_1(results, key), abs=0.05)
            if cell.group(2) is not None:
                assert float(cell.group(2)) <= mean <= float(cell.group(3))
            else:
                assert len({r[key] for r in results}) == 1
        tokens = [r["n_tokens"] for r in results]
        assert float(cells[5]) == pytest.approx(sum(tokens) / len(tokens), abs=0.5)
        assert int(cells[6]) == len(results)
        # nvcc-accepted programs reach the CPU runner with their files where it looks for them
        assert not any("No such file or directory" in r["detail"] for r in results if r["compiled"])


def test_report_is_recomputed_from_its_committed_files_alone(demo_run, tmp_path):
    """report.json + results/*.jsonl + attribution/*.jsonl (what a study commits) rebuild every metric,
    comparison and the table of divergence causes."""
    from cuset.errors import CusetError

    copy = tmp_path / "committed"
    copy.mkdir()
    shutil.copy(demo_run / "report.json", copy / "report.json")
    shutil.copytree(demo_run / "results", copy / "results")
    shutil.copytree(demo_run / "attribution", copy / "attribution")
    original = json.loads((demo_run / "report.json").read_text())
    stripped = {k: v for k, v in original.items() if k not in ("metrics", "methods", "paired")}
    (copy / "report.json").write_text(json.dumps(stripped))
    res = CliRunner().invoke(app, ["demo", "--report-from", str(copy / "report.json")])
    assert res.exit_code == 0, res.output
    again = json.loads((copy / "report.json").read_text())
    for key in ("metrics", "methods", "paired"):
        assert again[key] == original[key]
    assert (copy / "report.md").read_text() == (demo_run / "report.md").read_text()
    assert again["attribution"] == original["attribution"] and set(again["attribution"]) == {"vanilla", "sft", "cuset"}
    assert "## Where failing samples leave the correct programs" in (copy / "report.md").read_text()
    (copy / "attribution" / "cuset.jsonl").unlink()
    res = CliRunner().invoke(app, ["demo", "--report-from", str(copy / "report.json")])
    assert res.exit_code != 0 and "attribution records missing beside it: attribution/cuset.jsonl" in res.output
    (copy / "results" / "sft.jsonl").unlink()
    res = CliRunner().invoke(app, ["demo", "--report-from", str(copy / "report.json")])
    assert res.exit_code != 0 and "per-sample results missing beside it: results/sft.jsonl" in res.output


def test_every_failing_sample_is_attributed_and_every_generation_kept(demo_run):
    from cuset.analysis.attribution import CAUSES, UNATTRIBUTED
    from cuset.io import read_jsonl

    for run in ("vanilla", "sft", "cuset"):
        results = [json.loads(x) for x in (demo_run / "results" / f"{run}.jsonl").read_text().splitlines()]
        failing = {(r["task_id"], r["sample"]) for r in results if not r["passed"] and r["status"] != "skipped"}
        records = read_jsonl(demo_run / "attribution" / f"{run}.jsonl")
        assert {(r["task_id"], r["sample"]) for r in records} == failing
        assert all(r["cause"] in CAUSES + UNATTRIBUTED for r in records)
        for r in records:
            if r["cause"] in CAUSES:
                assert (r["p_base"] <= 0.1) == r["cause"].startswith("low")
                assert r["in_mask"] == r["cause"].endswith("inside")
        assert (read_jsonl(demo_run / "generations" / f"{run}.jsonl.gz")
                == read_jsonl(demo_run / "cells" / run / "generations.jsonl"))


def test_base_model_never_saw_the_fine_tuning_families(demo_run):
    """The base pretrains on other families only; its NLL on the fine-tuning set, measured
    before fine-tuning, is in the report and far from 0."""
    from cuset.tasks import load_tasks

    pretrain, _ = load_tasks(demo_run / "data" / "pretrain.jsonl")
    train, _ = load_tasks(demo_run / "data" / "train.jsonl")
    assert pretrain and not {t.family for t in pretrain} & {t.family for t in train}
    nll = json.loads((demo_run / "base_nll.json").read_text())
    assert nll["nll"] > 0.3 and nll["n_examples"] > 0 and nll["n_tokens"] > 1000
    assert f"on the fine-tuning set is **{nll['nll']:.3f}**" in (demo_run / "report.md").read_text()
    doc = json.loads((demo_run / "report.json").read_text())
    assert doc["base_nll"] == nll


def test_figures_and_artifacts(demo_run):
    for png in ("confidence/fig1_confidence_density.png", "confidence/fig2b_window_curve.png"):
        data = (demo_run / png).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000
        assert png in (demo_run / "report.md").read_text()
    doc = json.loads((demo_run / "report.json").read_text())
    assert set(doc["metrics"]) == {"vanilla", "sft", "cuset"}
    for method in ("sft", "cuset"):
        summary = json.loads((demo_run / "cells" / method / "train" / "run_summary.json").read_text())
        assert summary["objective"] == method and summary["steps"] == doc["config"]["finetune_steps"]
        if doc["config"]["finetune"] == "full":  # every weight trains: the report's count is the model's
            assert summary["trainable_parameters"] == doc["base_model"]["parameters"]
    from transformers import AutoTokenizer

    vocab = len(AutoTokenizer.from_pretrained(demo_run / "models" / "vanilla"))
    assert doc["base_model"]["vocab_size"] == vocab and f"with a {vocab:,}-token" in (demo_run / "report.md").read_text()


def test_reference_fit_scores_every_model_on_the_held_out_references(demo_run):
    from cuset.analysis.confidence import reference_fit
    from cuset.analysis.confidence_report import load_scores
    from cuset.spans import CUSET_KINDS

    doc = json.loads((demo_run / "report.json").read_text())
    fits = doc["reference_fit"]
    assert set(fits) == {"vanilla", "sft", "cuset"}
    for fit in fits.values():
        assert fit["n_samples"] == doc["config"]["n_eval"] and fit["threshold"] == doc["config"]["tau"]
        assert all(0 <= fit[k] <= 1 for k in ("share_low", "share_low_sensitive", "share_low_neutral"))
    # the vanilla model's fit, recomputed from the scores the confidence step saved of the same references
    vanilla = reference_fit(load_scores(demo_run / "confidence" / "scores.jsonl"), threshold=doc["config"]["tau"],
                            sensitive_kinds=CUSET_KINDS)
    assert fits["vanilla"] == pytest.approx(vanilla)
    assert fits["sft"]["nll"] < fits["vanilla"]["nll"]  # SFT trained on the same families' programs
    report = (demo_run / "report.md").read_text()
    assert "## How closely each model fits the held-out reference programs" in report
    assert f"| sft | {fits['sft']['nll']:.3f} |" in report


def test_rerun_resumes_without_redoing_steps(demo_run):
    before = (demo_run / "report.md").read_text()
    artifacts = [*demo_run.glob("cells/*/generations.jsonl"), *demo_run.glob("cells/*/eval/results.jsonl"),
                 *demo_run.glob("cells/*/train/run_summary.json"), demo_run / "models" / "vanilla" / "model.safetensors"]
    assert len(artifacts) == 3 + 3 + 2 + 1  # vanilla, sft, cuset: each cell's generations and results; 2 trainings
    stamps = {p: p.stat().st_mtime_ns for p in artifacts}
    res = CliRunner().invoke(app, ["demo", "--fast", "--out", str(demo_run), "progress=false"])
    assert res.exit_code == 0
    assert {p: p.stat().st_mtime_ns for p in artifacts} == stamps  # nothing was recomputed
    after = (demo_run / "report.md").read_text()
    strip = lambda t: t.split("## Time per step")[0]
    assert strip(before) == strip(after)
    doc = json.loads((demo_run / "report.json").read_text())
    assert doc["time"]["reused_steps"] == list(doc["timings_s"]) and doc["time"]["steps_run_now_s"] == 0
    assert "of the steps run this time: 0.0 minutes" in after


def test_data_splits_are_disjoint_and_from_the_configured_families(demo_run):
    from cuset.tasks import load_tasks

    cfg = json.loads((demo_run / "demo_config.json").read_text())
    split = {name: load_tasks(demo_run / "data" / f"{name}.jsonl")[0] for name in ("train", "eval", "instruct")}
    assert [len(split[k]) for k in ("train", "eval", "instruct")] == [cfg["n_train"], cfg["n_eval"], cfg["n_instruct"]]
    families = {k: {t.family for t in v} for k, v in split.items()}
    assert families["train"] | families["eval"] <= set(cfg["families"].split(","))
    assert families["instruct"] <= set(cfg["instruct_families"].split(","))
    assert families["instruct"].isdisjoint(families["train"] | families["eval"])
    programs = {k: {t.bench_cu for t in v} for k, v in split.items()}
    assert programs["train"].isdisjoint(programs["eval"])  # held-out (variant, size) points
    assert f"{cfg['n_instruct']} chat-formatted prompt/program pairs" in (demo_run / "report.md").read_text()


def test_a_carried_run_resumes_elsewhere_without_redoing_steps(demo_run, tmp_path):
    """`cuset carry` then `--restore` into another directory: the demo resumes there with every step
    skipped and the same report, and each trained model is found under the cell's new train/ dir
    (the training summary still names the old paths)."""
    from cuset.demo.config import FAST, DemoConfig
    from cuset.demo.run import DemoRun
    from cuset.experiment import trained_model

    carried, moved = tmp_path / "carried", tmp_path / "elsewhere" / "run"
    res = CliRunner().invoke(app, ["carry", str(demo_run), str(carried)])
    assert res.exit_code == 0, res.output
    assert "cache, checkpoint or staging" in res.output and not (carried / "files" / "cache").exists()
    res = CliRunner().invoke(app, ["carry", "--restore", str(carried), str(moved)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["demo", "--fast", "--out", str(moved), "progress=false"])
    assert res.exit_code == 0, res.output
    doc = json.loads((moved / "report.json").read_text())
    assert doc["time"]["steps_run_now_s"] == 0 and doc["time"]["reused_steps"] == list(doc["timings_s"])
    strip = lambda t: t.split("## Time per step")[0]
    assert strip((moved / "report.md").read_text()) == strip((demo_run / "report.md").read_text())
    run = DemoRun(DemoConfig(**{**FAST, "out": str(moved)}), moved)
    for model in (m for m in run.models if m != "vanilla"):
        path, adapter = trained_model(run.cell(model))
        assert Path(adapter or path).is_relative_to(moved) and Path(adapter or path).is_dir()
