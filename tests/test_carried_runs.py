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
