"""docs/tools/publish_regime.py: a level re-run with fewer arms is not copied over a committed
report that holds more, unless asked; otherwise the files a map needs are copied."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "docs" / "tools" / "publish_regime.py"


@pytest.fixture
def publish_tool(monkeypatch):
    monkeypatch.delitem(sys.modules, "publish_regime", raising=False)
    spec = importlib.util.spec_from_file_location("publish_regime", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def level(directory: Path, methods: list[str]) -> Path:
    directory.mkdir(parents=True)
    (directory / "report.json").write_text(json.dumps({"method_order": methods}))
    for name in ("report.md", "base_nll.json", "demo_config.json"):
        (directory / name).write_text("{}")
    (directory / "results").mkdir()
    (directory / "results" / "sft.jsonl").write_text("{}\n")
    return directory


def test_a_level_with_fewer_arms_is_refused_then_allowed(publish_tool, tmp_path):
    run, dest = tmp_path / "run", tmp_path / "docs"
    level(run / "base-k0", ["vanilla", "sft", "cuset"])
    level(run / "base-k12", ["vanilla", "sft", "cuset"])
    (run / "regime.json").write_text("{}")
    level(dest / "base-k0", ["vanilla", "sft", "cuset", "cuset:wnorm"])   # committed with one more arm
    assert publish_tool.dropped_arms(run / "base-k0", dest / "base-k0") == ["cuset:wnorm"]
    assert publish_tool.dropped_arms(run / "base-k12", dest / "base-k12") == []   # nothing committed yet
    with pytest.raises(SystemExit, match=r"base-k0: cuset:wnorm\. Re-run the level"):
        publish_tool.publish(run, dest)
    assert json.loads((dest / "base-k0" / "report.json").read_text())["method_order"][-1] == "cuset:wnorm"
    copied = publish_tool.publish(run, dest, allow_dropped=True)
    assert dest / "base-k12" / "results" / "sft.jsonl" in copied and dest / "regime.json" in copied
    assert json.loads((dest / "base-k0" / "report.json").read_text())["method_order"] == ["vanilla", "sft", "cuset"]


COMMITTED_K0 = Path(__file__).resolve().parents[2] / "docs" / "regime-2026-11-26" / "base-k0"


def without_arm(src: Path, dst: Path, run: str) -> Path:
    """A copy of a committed level as a re-run without one arm's run would have written it."""
    import shutil

    shutil.copytree(src, dst)
    doc = json.loads((dst / "report.json").read_text())
    method = doc["runs"].pop(run)["method"]
    doc["method_order"].remove(method)
    for key in ("training", "reference_fit"):
        doc[key].pop(run, None)
    doc["timings_s"] = {k: v for k, v in doc["timings_s"].items() if not k.endswith(f"_{run}")}
    (dst / "report.json").write_text(json.dumps(doc))
    (dst / "results" / f"{run}.jsonl").unlink()
    shutil.rmtree(dst / "cells" / run)
    return dst


def test_carry_arms_restores_a_committed_arm_on_the_same_base(publish_tool, tmp_path):
    committed = json.loads((COMMITTED_K0 / "report.json").read_text())
    run_level = without_arm(COMMITTED_K0, tmp_path / "run" / "base-k0", "cuset-wnorm")
    assert publish_tool.carry_arms(run_level, COMMITTED_K0) == ["cuset-wnorm"]
    doc = json.loads((run_level / "report.json").read_text())
    assert doc["method_order"] == committed["method_order"]
    assert doc["methods"]["cuset:wnorm"] == committed["methods"]["cuset:wnorm"]   # recomputed from the results
    assert doc["paired"] == committed["paired"]
    assert doc["training"]["cuset-wnorm"] == committed["training"]["cuset-wnorm"]
    assert (run_level / "cells" / "cuset-wnorm" / "train" / "train_log.jsonl").is_file()
    assert "earlier run of this level on the same base" in doc["carried_runs"]["cuset-wnorm"]
    assert "Carried over: run `cuset-wnorm`" in (run_level / "report.md").read_text()
    assert publish_tool.carry_arms(run_level, COMMITTED_K0) == []   # nothing left to carry


def test_carry_arms_refuses_another_base(publish_tool, tmp_path):
    run_level = without_arm(COMMITTED_K0, tmp_path / "run" / "base-k0", "cuset-wnorm")
    base = json.loads((run_level / "base_nll.json").read_text())
    (run_level / "base_nll.json").write_text(json.dumps({**base, "nll": base["nll"] + 1e-9}))
    with pytest.raises(SystemExit, match="cannot carry cuset:wnorm .* its base is not this run's"):
        publish_tool.carry_arms(run_level, COMMITTED_K0)
