"""The demo's base is made once per recipe: shipped or cached, the bytes its recipe makes,
rebuilt when the recipe changes (issue 63)."""

import json
import shutil
from dataclasses import asdict

import pytest

from cuset.demo import base as base_mod
from cuset.demo.base import (BaseMismatch, check_files, file_hashes, make, provide_base, read_manifest, recipe,
                             recipe_sha256)
from cuset.demo.base_build import base_corpus

TINY = dict(seed=0, vocab_size=300, hidden=16, layers=1, pretrain_steps=3, pretrain_lr=3e-3, seq_len=128,
            families="saxpy", n_pretrain=6, n_instruct=4, instruct_families="resize", layout="kernels_first")


@pytest.fixture(scope="module")
def corpus():
    from cuset.curation.synth import synthesize

    return base_corpus(synthesize(6, 0, families=["column_reduce", "rgb_to_gray"]), synthesize(4, 0, families=["resize"]))


def test_a_recipe_built_twice_gives_identical_bytes(tmp_path, corpus):
    one = make(tmp_path / "one", TINY, corpus, progress=False)
    two = make(tmp_path / "two", TINY, corpus, progress=False)
    assert one["files"] == two["files"] and "model.safetensors" in one["files"] and "tokenizer.json" in one["files"]
    assert one["recipe_sha256"] == two["recipe_sha256"] == recipe_sha256(recipe(TINY, corpus))
    assert file_hashes(tmp_path / "one") == one["files"]  # the manifest is not among the hashed files
    other = make(tmp_path / "seed1", {**TINY, "seed": 1}, corpus, progress=False)
    assert other["files"]["model.safetensors"] != one["files"]["model.safetensors"]


def test_the_recipe_covers_settings_corpus_and_source_files(tmp_path, corpus):
    key = recipe_sha256(recipe(TINY, corpus))
    assert recipe_sha256(recipe({**TINY, "pretrain_steps": 4}, corpus)) != key
    assert recipe_sha256(recipe({**TINY, "families": "relu"}, corpus)) == key  # only through the corpus
    fewer = base_corpus([], [])
    assert recipe_sha256(recipe(TINY, fewer)) != key
    package = tmp_path / "cuset"
    for rel in base_mod.RECIPE_SOURCES:
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(base_mod.PACKAGE / rel, package / rel)
    assert recipe_sha256(recipe(TINY, corpus, package)) == key
    with open(package / "demo" / "pretrain.py", "a") as f:
        f.write("\n# a changed line\n")
    assert recipe_sha256(recipe(TINY, corpus, package)) != key


def test_shipped_base_is_used_and_a_changed_recipe_rebuilds_into_the_cache(tmp_path, corpus, monkeypatch):
    monkeypatch.setenv("CUSET_CACHE", str(tmp_path / "cache"))
    shipped = tmp_path / "shipped"
    made = make(shipped, TINY, corpus, progress=False)
    built = []
    real = base_mod.build_base
    monkeypatch.setattr(base_mod, "build_base", lambda *a, **k: built.append(1) or real(*a, **k))
    assert provide_base(TINY, corpus, tmp_path / "run1", progress=False, shipped=shipped) == "shipped"
    assert built == [] and file_hashes(tmp_path / "run1") == made["files"]
    changed = {**TINY, "pretrain_steps": 4}
    assert provide_base(changed, corpus, tmp_path / "run2", progress=False, shipped=shipped) == "built"
    assert built == [1]
    key = recipe_sha256(recipe(changed, corpus))
    assert read_manifest(tmp_path / "cache" / "demo-base" / key)["recipe_sha256"] == key
    assert provide_base(changed, corpus, tmp_path / "run3", progress=False, shipped=shipped) == "cached"
    assert built == [1]  # built once per recipe
    assert file_hashes(tmp_path / "run3") != made["files"]


def test_a_base_whose_bytes_changed_is_refused(tmp_path, corpus):
    made = make(tmp_path / "b", TINY, corpus, progress=False)
    with open(tmp_path / "b" / "model.safetensors", "ab") as f:
        f.write(b"\0")
    with pytest.raises(BaseMismatch, match=r"model\.safetensors differ from .*manifest\.json.*delete the directory"):
        check_files(tmp_path / "b", made)
    with pytest.raises(BaseMismatch, match="model.safetensors"):
        provide_base(TINY, corpus, tmp_path / "run", progress=False, shipped=tmp_path / "b")


@pytest.mark.slow
def test_the_shipped_base_is_the_default_configs_recipe():
    """The committed base is what the default demo asks for (recipe hash) and its bytes are the manifest's."""
    from cuset.demo.base import SHIPPED, corpus_of
    from cuset.demo.config import DemoConfig

    manifest = read_manifest(SHIPPED)
    assert manifest is not None, f"{SHIPPED} holds no manifest.json"
    cfg = DemoConfig()
    rec = recipe(asdict(cfg), corpus_of(cfg))
    assert rec == manifest["recipe"] and recipe_sha256(rec) == manifest["recipe_sha256"]
    check_files(SHIPPED, manifest)
    assert json.loads((SHIPPED / "config.json").read_text())["hidden_size"] == cfg.hidden


def test_check_re_makes_a_base_from_its_manifest_and_compares_the_bytes(tmp_path, capsys):
    from cuset.demo.base import corpus_of, main
    from cuset.demo.config import DemoConfig

    cfg = DemoConfig(**TINY)
    made = make(tmp_path / "b", asdict(cfg), corpus_of(cfg), progress=False)
    assert made["corpus_config"] == {k: TINY[k] for k in base_mod.CORPUS_FIELDS}
    assert main(["check", "--dir", str(tmp_path / "b")]) == 0
    assert f"all {len(made['files'])} files byte-identical" in capsys.readouterr().out
    # a manifest whose recipe is not what this code makes from its settings: refused, nothing re-made
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    manifest["recipe"]["sources"]["demo/pretrain.py"] = "0" * 64
    manifest["recipe_sha256"] = recipe_sha256(manifest["recipe"])
    (tmp_path / "b" / "manifest.json").write_text(json.dumps(manifest))
    assert main(["check", "--dir", str(tmp_path / "b")]) == 1
    out = capsys.readouterr().out
    assert "the recipe changed since" in out and "(sources)" in out
    with pytest.raises(SystemExit, match="holds no manifest.json"):
        main(["check", "--dir", str(tmp_path)])
