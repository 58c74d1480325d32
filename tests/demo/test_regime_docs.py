"""Every committed base-strength map under docs/ is what the code writes from its committed
files: each level's numbers from its report.json and training logs, the map's markdown from
those rows (so a number quoted from docs/regime-*/regime.md has a file and code behind it)."""

import json
from pathlib import Path

import pytest

from cuset.demo.regime import levels_under, regime_map, regime_markdown

DOCS = Path(__file__).resolve().parents[2] / "docs"
MAPS = sorted(p.parent for p in DOCS.glob("regime-*/regime.json"))


@pytest.mark.parametrize("directory", MAPS, ids=[p.name for p in MAPS])
def test_the_committed_map_is_what_the_code_writes_from_its_files(directory):
    committed = json.loads((directory / "regime.json").read_text())
    doc = regime_map(levels_under(directory), directory)
    assert doc["levels"] == json.loads(json.dumps(committed["levels"], default=str))
    doc.update({k: committed[k] for k in ("wall_s", "provenance") if k in committed})
    assert regime_markdown(doc) == (directory / "regime.md").read_text()


@pytest.mark.parametrize("directory", MAPS, ids=[p.name for p in MAPS])
def test_each_level_report_names_its_bases_regime(directory):
    from cuset.demo.report import REGIME_WORDS, regime_of

    for _, level in levels_under(directory):
        report = json.loads((level / "report.json").read_text())
        regime = regime_of(report["base_nll"])[0]
        assert f"**Regime: {REGIME_WORDS[regime]}**" in (level / "report.md").read_text()


def _pass_at_1(path: Path, key: str) -> float:
    """Mean over tasks of each task's share of samples with `key` (compiled / passed), skipped samples left out."""
    by_task: dict = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record["status"] != "skipped":
            by_task.setdefault(record["task_id"], []).append(bool(record[key]))
    return sum(sum(v) / len(v) for v in by_task.values()) / len(by_task)


@pytest.mark.parametrize("directory", MAPS, ids=[p.name for p in MAPS])
def test_the_competence_gate_is_recomputed_from_each_bases_committed_samples(directory):
    """Each base's untuned compile@1 and function@1, as the committed map states them and its gate
    judges them, are what its committed per-sample results (results/vanilla.jsonl) say."""
    committed = json.loads((directory / "regime.json").read_text())
    md = (directory / "regime.md").read_text()
    gate = committed["gate"]
    assert (gate["min_compile"], gate["min_function"]) == (0.65, 0.25)
    passed = []
    for row in committed["levels"]:
        results = directory / row["dir"] / "results" / "vanilla.jsonl"
        compile1, function1 = _pass_at_1(results, "compiled"), _pass_at_1(results, "passed")
        assert row["base"]["compile@1"] == pytest.approx(compile1, abs=1e-12)
        assert row["base"]["function@1"] == pytest.approx(function1, abs=1e-12)
        assert (f"k = {row['warmup_steps']}: compile@1 {100 * compile1:.1f}%, function@1 {100 * function1:.1f}%"
                in gate["text"])
        if compile1 >= 0.65 and function1 >= 0.25:
            passed.append(row["warmup_steps"])
    assert gate["passed"] == passed
    assert f"**{gate['text']}**" in md
    if not passed:
        assert "no base passes it" in md and "cannot test the paper's claim" in md
