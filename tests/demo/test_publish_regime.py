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
