"""Each run committed under carried/ (a long run moved between machines with `cuset carry`)
restores whole: every file its manifest names is there and has the recorded sha256."""

from pathlib import Path

import pytest

from cuset.experiment.carry import MANIFEST, restore

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("carried", sorted(p.parent.name for p in (ROOT / "carried").glob(f"*/{MANIFEST}")))
def test_a_committed_carry_restores_every_file(carried, tmp_path):
    import json

    manifest = json.loads((ROOT / "carried" / carried / MANIFEST).read_text())
    assert restore(ROOT / "carried" / carried, tmp_path / "run") == len(manifest["files"]) > 0


def test_the_carried_readme_lists_exactly_the_committed_carries():
    """carried/README.md's table is how a reader finds a run in progress and its command: a carry
    missing from it cannot be resumed, a row without its carry points at nothing (a published
    run's row is deleted with its directory)."""
    rows = [line.split("|")[1].strip() for line in (ROOT / "carried" / "README.md").read_text().splitlines()
            if line.startswith("| ") and not line.startswith("| name")]
    listed = {name for name in rows if not name.startswith("(")}
    assert listed == {p.parent.name for p in (ROOT / "carried").glob(f"*/{MANIFEST}")}
    assert rows, "the table has lost its rows; write '(none in progress)' when nothing is carried"
