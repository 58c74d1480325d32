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
