"""`cuset sweep`: grid expansion, cell identity, resume and failure handling, final report.

Cells run through an injected runner that writes synthetic eval results, so the grid and
resume logic is tested without training; shipped sweep configs are expanded for real.
"""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cuset.experiment.sweep import (
    SweepConfig, SweepError, build_cells, expand_grid, grid_settings, plan_cells, run_sweep, split_settings,
)
from cuset.cli.main import app
from cuset.config import load_config
from cuset.experiment import step_seconds

ROOT = Path(__file__).resolve().parents[2]
TINY_TRAIN = str(ROOT / "configs/train/tiny/lora.yaml")


def sweep_cfg(tmp_path, **kw):
    return SweepConfig(train_config=TINY_TRAIN, tasks="tasks.jsonl", out_dir=str(tmp_path / "sweep"), progress=False, **kw)


def test_expand_grid_is_the_cartesian_product_in_written_order():
    assert expand_grid({"a": [1, 2], "b": ["x", "y"]}) == [
        {"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}, {"a": 2, "b": "y"}]
    assert expand_grid({}) == [{}]


def test_settings_are_routed_to_their_stage():
    stages, vanilla = split_settings({"loss.tau": 0.3, "train.optim.learning_rate": 1e-4, "generate.temperature": 0.2,
                                      "eval.execution.backend": "cpu", "method": "dft", "loss.conf_mask": False})
    assert stages == {"train": ["loss.tau=0.3", "optim.learning_rate=0.0001", "loss.name=dft", "loss.conf_mask=false"],
                      "generate": ["temperature=0.2"], "eval": ["execution.backend=cpu"]}
    assert not vanilla
    assert split_settings({"method": "vanilla"}) == ({"train": [], "generate": [], "eval": []}, True)


def test_grid_axes_and_cells_are_unioned(tmp_path):
    cfg = sweep_cfg(tmp_path, grid={"method": ["sft", "cuset"]}, axes=[{"loss.tau": [0.1, 0.5]}],
                    cells=[{"method": "vanilla"}])
    assert grid_settings(cfg) == [{"method": "sft"}, {"method": "cuset"}, {"loss.tau": 0.1}, {"loss.tau": 0.5},
                                  {"method": "vanilla"}]


def test_cells_are_deduplicated_by_resolved_settings_and_labelled(tmp_path):
    # tiny/lora.yaml trains cuset with tau 0.1 by default: `method=cuset` and `loss.tau=0.1` are one cell.
    cells = build_cells(sweep_cfg(tmp_path, grid={"method": ["sft", "cuset"]}, axes=[{"loss.tau": [0.1, 0.5]}],
                                  cells=[{"method": "vanilla"}], labels={"params": "1M"}))
    assert [c.describe() for c in cells] == ["method=sft", "method=cuset", "loss.tau=0.5", "method=vanilla"]
    sft, cuset, tau5, vanilla = cells
    assert sft.labels == {"params": "1M", "model": "tiny-model", "method": "SFT"}
    assert cuset.labels["method"] == "CuSeT" and cuset.labels["tau"] == 0.1 and cuset.labels["region_weight"] is True
    assert tau5.labels["tau"] == 0.5 and tau5.overrides["train"] == ("loss.tau=0.5",)
    assert vanilla.vanilla and vanilla.labels["method"] == "Vanilla"
    assert len({c.cell_id for c in cells}) == 4 and cuset.cell_id.startswith("method=cuset-")


def test_cell_ids_change_when_the_base_config_changes(tmp_path):
    a = build_cells(sweep_cfg(tmp_path, grid={"loss.tau": [0.5]}))[0]
    b = build_cells(sweep_cfg(tmp_path, grid={"loss.tau": [0.5]}, train_overrides=["seed=7"]))[0]
    assert a.cell_id != b.cell_id and a.cell_id.split("-")[0] == b.cell_id.split("-")[0]
    c = build_cells(sweep_cfg(tmp_path, grid={"loss.tau": [0.5]}, eval_overrides=["execution.backend=cpu"]))[0]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("{}\n")
    d1 = build_cells(SweepConfig(train_config=TINY_TRAIN, tasks=str(tasks), grid={"loss.tau": [0.5]}))[0]
    tasks.write_text("{}\n{}\n")  # the evaluation tasks changed: so did every result
    d2 = build_cells(SweepConfig(train_config=TINY_TRAIN, tasks=str(tasks), grid={"loss.tau": [0.5]}))[0]
    assert len({a.cell_id, c.cell_id, d1.cell_id, d2.cell_id}) == 4


def test_bad_cells_are_clear_errors(tmp_path):
    with pytest.raises(SweepError, match="loss.tua.*did you mean 'loss.tau'"):
        build_cells(sweep_cfg(tmp_path, grid={"loss.tua": [0.3]}))
    with pytest.raises(SweepError, match="method=vanilla trains nothing"):
        build_cells(sweep_cfg(tmp_path, cells=[{"method": "vanilla", "loss.tau": 0.3}]))
    with pytest.raises(ValueError, match=r"grid.loss.tau must be a non-empty list"):
        sweep_cfg(tmp_path, grid={"loss.tau": 0.3})


class FakeRunner:
    """Writes an eval run whose pass rate falls with tau; can be told to fail some cells."""

    def __init__(self, make_run_dir, fail_on=()):
        self.make_run_dir, self.fail_on, self.calls = make_run_dir, set(fail_on), []

    def __call__(self, cell, cell_dir):
        self.calls.append(cell.cell_id)
        if dict(cell.settings).get("loss.tau") in self.fail_on:
            raise RuntimeError("out of memory (simulated)")
        tau = cell.labels.get("tau", 0.0)
        n_pass = {0.0: 1, 0.1: 3, 0.5: 2, 0.9: 0}[tau]
        return self.make_run_dir(cell_dir / "eval", {t: [(True, t < n_pass)] * 3 for t in range(4)})


def test_run_resume_failures_and_report(tmp_path, assert_png, write_run):
    cfg = sweep_cfg(tmp_path, grid={"method": ["sft"]}, axes=[{"loss.tau": [0.1, 0.5, 0.9]}])
    runner = FakeRunner(write_run, fail_on={0.9})
    manifest = run_sweep(cfg, runner=runner)
    assert manifest["counts"] == {"done": 3, "cached": 0, "failed": 1}
    assert len(runner.calls) == 4
    failed = [c for c in manifest["cells"] if c["status"] == "failed"][0]
    cell_dir = tmp_path / "sweep" / "cells" / failed["cell_id"]
    assert "out of memory" in json.loads((cell_dir / "failed.json").read_text())["error"]
    assert json.loads((tmp_path / "sweep" / "sweep.json").read_text())["counts"]["failed"] == 1
    report = json.loads((tmp_path / "sweep" / "report" / "report.json").read_text())
    series = report["figure4"]["tau"][0]
    assert series["x"] == [0.1, 0.5] and series["metrics"]["function@1"] == [75.0, 50.0]
    assert {r["method"] for r in report["table2"] if r["source"] == "this run"} == {"SFT", "CuSeT"}
    assert_png(tmp_path / "sweep" / "report" / "fig4_hyperparameters.png")
    # Second run: finished cells are skipped, the failed one is retried (and now succeeds).
    runner2 = FakeRunner(write_run)
    manifest2 = run_sweep(cfg, runner=runner2)
    assert runner2.calls == [failed["cell_id"]]
    assert manifest2["counts"] == {"done": 4, "cached": 3, "failed": 0}
    assert not (cell_dir / "failed.json").exists() and failed["cell_id"] in step_seconds(tmp_path / "sweep")
    states = dict((c.cell_id, s) for c, s in plan_cells(cfg))
    assert set(states.values()) == {"done"}
    labels = json.loads((cell_dir / "eval" / "labels.json").read_text())["labels"]
    assert labels["tau"] == 0.9  # `cuset report` on the cell's eval dir alone finds its labels
    report2 = json.loads((tmp_path / "sweep" / "report" / "report.json").read_text())
    assert report2["figure4"]["tau"][0]["x"] == [0.1, 0.5, 0.9]


def test_a_runner_that_leaves_no_evaluation_fails_its_cell_and_is_not_recorded_done(tmp_path):
    cfg = sweep_cfg(tmp_path, grid={"loss.tau": [0.1]}, report=False)
    manifest = run_sweep(cfg, runner=lambda cell, cell_dir: None)
    assert manifest["counts"] == {"done": 0, "cached": 0, "failed": 1}
    assert "left no evaluation in" in manifest["failed"][0]["error"]
    assert step_seconds(tmp_path / "sweep") == {}
    assert [state for _, state in plan_cells(cfg)] == ["failed"]


def test_fail_fast_stops_at_the_first_failure(tmp_path, write_run):
    cfg = sweep_cfg(tmp_path, axes=[{"loss.tau": [0.9, 0.1]}], fail_fast=True)
    runner = FakeRunner(write_run, fail_on={0.9})
    with pytest.raises(RuntimeError, match="simulated"):
        run_sweep(cfg, runner=runner)
    assert len(runner.calls) == 1


@pytest.mark.parametrize("name,n_cells", [("figure4-qwen2.5-coder-7b.yaml", 12), ("table5-qwen2.5-coder-7b.yaml", 5),
                                          ("table2-qwen2.5-coder-7b.yaml", 7), ("tiny-cpu.yaml", 4)])
def test_shipped_sweep_configs_load_and_expand(name, n_cells, monkeypatch):
    monkeypatch.chdir(ROOT)
    cfg = load_config(SweepConfig, ROOT / "configs/sweep" / name)
    cells = build_cells(cfg)
    assert len(cells) == n_cells
    if name.startswith("table5"):
        switches = [tuple(c.labels[k] for k in ("conf_mask", "cuda_mask", "region_weight")) for c in cells]
        assert switches == [(False, False, False), (True, False, False), (True, True, False), (True, False, True),
                            (True, True, True)]


def test_every_shipped_sweep_config_is_covered():
    shipped = {p.name for p in (ROOT / "configs/sweep").glob("*.yaml")}
    assert shipped == {"figure4-qwen2.5-coder-7b.yaml", "table5-qwen2.5-coder-7b.yaml", "table2-qwen2.5-coder-7b.yaml",
                       "tiny-cpu.yaml"}


def test_cli_dry_run_and_config_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    runner = CliRunner()
    res = runner.invoke(app, ["sweep", "configs/sweep/tiny-cpu.yaml", "--dry-run", f"out_dir={tmp_path / 's'}"])
    assert res.exit_code == 0, res.output
    assert res.output.count("todo") == 4 and "method=vanilla" in res.output
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"train_config: {TINY_TRAIN}\ntasks: t.jsonl\ngird: {{loss.tau: [0.1]}}\n")
    res = runner.invoke(app, ["sweep", str(bad)])
    assert res.exit_code == 2 and "gird: unknown key (did you mean 'grid'?)" in res.output
    res = runner.invoke(app, ["sweep", "configs/sweep/tiny-cpu.yaml", "--dry-run", "grid={loss.tua: [1]}"])
    assert res.exit_code == 2 and "did you mean 'loss.tau'" in res.output
