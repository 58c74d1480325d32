"""cuset.experiment.carry: what a carried run keeps, and a restore that checks every byte."""

import json

import pytest

from cuset.experiment.carry import GZIP_OVER, CarryError, carry, restore


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def run_dir(tmp_path):
    run = tmp_path / "run"
    _write(run / "steps.json", json.dumps({"data": 1.0, "base_model": 2.0}))
    _write(run / "data" / "train.jsonl", "x" * (GZIP_OVER + 1))          # big text: stored gzip-compressed
    _write(run / "data" / "eval.jsonl", "y" * (GZIP_OVER + 1))           # ... unless the run has that name too
    (run / "data" / "eval.jsonl.gz").write_bytes(b"\x1f\x8b not ours")
    (run / "models" / "vanilla").mkdir(parents=True)
    (run / "models" / "vanilla" / "model.safetensors").write_bytes(bytes(range(256)) * 4)
    _write(run / "cache" / "tokenized" / "a.arrow", "cache")
    _write(run / "models" / "pretrained.partial" / "w", "half a copy")
    done = run / "cells" / "sft-seed0"                                  # finished: kept whole
    _write(done / "steps.json", json.dumps({"train": 5.0, "generate": 6.0, "evaluate": 7.0}))
    _write(done / "train" / "adapter" / "adapter_config.json", "{}")
    _write(done / "train" / "checkpoint-20" / "optimizer.pt", "state")
    _write(done / "generations.jsonl", '{"sample": 0}\n')
    _write(done / "eval" / "results.jsonl", '{"status": "passed"}\n')
    trained = run / "cells" / "cuset-seed0"                             # trained, generating: its training only
    _write(trained / "steps.json", json.dumps({"train": 5.5}))
    _write(trained / "train" / "adapter" / "adapter_config.json", '{"r": 8}')
    _write(trained / "generations.jsonl", '{"sample": 0}\n{"sam')
    training = run / "cells" / "dft-seed0"                              # still training: nothing
    _write(training / "train" / "checkpoint-10" / "model.safetensors", "w")
    _write(training / "steps.json", "{}")
    _write(run / "cells" / "vanilla" / "generations.jsonl", '{"sample": 0}\n{"sa')   # first step running: no steps.json yet
    return run


def test_carry_keeps_what_a_resumed_run_skips_and_restore_rebuilds_it(run_dir, tmp_path):
    manifest = carry(run_dir, tmp_path / "carried")
    assert sorted(manifest["files"]) == [
        "cells/cuset-seed0/steps.json", "cells/cuset-seed0/train/adapter/adapter_config.json",
        "cells/sft-seed0/eval/results.jsonl", "cells/sft-seed0/generations.jsonl", "cells/sft-seed0/steps.json",
        "cells/sft-seed0/train/adapter/adapter_config.json", "data/eval.jsonl", "data/eval.jsonl.gz", "data/train.jsonl",
        "models/vanilla/model.safetensors", "steps.json"]
    assert manifest["left_out"] == {
        "cache, checkpoint or staging": ["cache", "cells/sft-seed0/train/checkpoint-20", "models/pretrained.partial"],
        "unfinished cell, not trained yet": ["cells/dft-seed0", "cells/vanilla"],
        "unfinished cell: redone on resume": ["cells/cuset-seed0/generations.jsonl"]}
    assert manifest["cells"] == {"finished": ["cells/sft-seed0"], "trained": ["cells/cuset-seed0"]}
    assert manifest["files"]["data/train.jsonl"]["stored"] == "data/train.jsonl.gz"
    assert (tmp_path / "carried" / "files" / "data" / "train.jsonl.gz").stat().st_size < 200
    moved = tmp_path / "moved"
    assert manifest["files"]["data/eval.jsonl"]["stored"] == "data/eval.jsonl"
    assert restore(tmp_path / "carried", moved) == 11
    assert json.loads((moved / "cells" / "cuset-seed0" / "steps.json").read_text()) == {"train": 5.5}
    for rel in manifest["files"]:
        if rel != "cells/cuset-seed0/steps.json":
            assert (moved / rel).read_bytes() == (run_dir / rel).read_bytes(), rel


def test_refreshing_rewrites_only_what_changed_and_drops_what_is_gone(run_dir, tmp_path):
    carried = tmp_path / "carried"
    carry(run_dir, carried)
    stored = {p: p.stat().st_mtime_ns for p in (carried / "files").rglob("*") if p.is_file()}
    blobs = {p: p.read_bytes() for p in stored}
    cell = run_dir / "cells" / "cuset-seed0"                            # the cell finishes; the data is regenerated alike
    _write(cell / "steps.json", json.dumps({"train": 5.5, "generate": 1.0, "evaluate": 2.0}))
    _write(cell / "eval" / "results.jsonl", "{}\n")
    _write(run_dir / "data" / "train.jsonl", "x" * (GZIP_OVER + 1))
    manifest = carry(run_dir, carried)
    assert "cells/cuset-seed0/generations.jsonl" in manifest["files"]
    for path, stamp in stored.items():
        if "cuset-seed0" not in str(path):
            assert path.stat().st_mtime_ns == stamp and path.read_bytes() == blobs[path], path   # the same bytes, untouched
    (run_dir / "cells" / "sft-seed0" / "eval" / "results.jsonl").unlink()
    carry(run_dir, carried)
    assert not (carried / "files" / "cells" / "sft-seed0" / "eval").exists()


def test_restore_refuses_tampered_files_unsafe_paths_and_a_used_directory(run_dir, tmp_path):
    carried = tmp_path / "carried"
    carry(run_dir, carried)
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("mine")
    with pytest.raises(CarryError, match="used: exists and is not empty"):
        restore(carried, tmp_path / "used")
    target = carried / "files" / "cells" / "sft-seed0" / "eval" / "results.jsonl"
    target.write_text('{"status": "failed"}\n')
    with pytest.raises(CarryError, match=r"results.jsonl: its content does not match the sha256"):
        restore(carried, tmp_path / "new")
    assert not (tmp_path / "new").exists()                              # checked before anything is written
    carry(run_dir, carried)                                             # a refresh repairs the blob
    manifest = json.loads((carried / "carry.json").read_text())
    manifest["files"]["../escape"] = manifest["files"].pop("steps.json")
    (carried / "carry.json").write_text(json.dumps(manifest))
    with pytest.raises(CarryError, match=r"'../escape' is not a path inside the run"):
        restore(carried, tmp_path / "new")
    with pytest.raises(CarryError, match="no carry manifest here"):
        restore(tmp_path / "nothing", tmp_path / "new")
    with pytest.raises(CarryError, match="no such run directory"):
        carry(tmp_path / "nothing", tmp_path / "c2")
