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


# -- warmed bases (cuset.demo.warm_build) ---------------------------------------------------

WARM = dict(TINY, warmup_steps=3, warmup_lr=1e-3, batch_size=2, n_train=8, n_eval=2, n_warmup=6, holdout="params")


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory, corpus):
    path = tmp_path_factory.mktemp("pre") / "base"
    make(path, TINY, corpus, progress=False)
    return path


@pytest.fixture(scope="module")
def pairs():
    from cuset.curation.synth import synthesize

    return base_corpus([], synthesize(5, 0, families=["saxpy"]))


def test_reply_rows_label_the_reply_only(pretrained, pairs):
    from transformers import AutoTokenizer

    from cuset.demo.warm_build import reply_rows

    tok = AutoTokenizer.from_pretrained(pretrained)
    rows, skipped = reply_rows(tok, pairs.conversations, max_tokens=10**6)  # whole: a 300-token vocabulary needs >2048
    assert len(rows) == 5 and skipped == {}
    messages = [{"role": r, "content": c} for r, c in pairs.conversations[0]]
    prompt = tok.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True)
    full = tok.apply_chat_template(messages, tokenize=False)
    ids, labels = rows[0]
    n_prompt = len(tok(prompt, add_special_tokens=False)["input_ids"])
    assert labels[:n_prompt] == [-100] * n_prompt and -100 not in labels[n_prompt:]
    assert tok.decode(ids[:n_prompt]) == prompt and tok.decode(labels[n_prompt:]) == full[len(prompt):]
    assert messages[-1]["content"] in tok.decode(labels[n_prompt:])
    cut = reply_rows(tok, pairs.conversations, max_tokens=n_prompt + 2)[0][0]
    assert len(cut[0]) == n_prompt + 2 and cut[1][-2:] == ids[n_prompt:n_prompt + 2]
    # a pair whose prompt fills the window is left out and counted, the others kept
    first = pairs.conversations[0]
    long = ((first[0][0], first[0][1] + " pad" * 10 * n_prompt), *first[1:])
    kept, skipped = reply_rows(tok, [long, *pairs.conversations[1:]], max_tokens=4 * n_prompt)
    assert kept == rows[1:] and skipped == {f"no reply token within the first {4 * n_prompt} tokens": 1}
    with pytest.raises(ValueError, match="no warm-up pair has a reply token within the first 3 tokens"):
        reply_rows(tok, pairs.conversations, max_tokens=3)
    with pytest.raises(ValueError, match=r"warm-up pair 0: the last message must be the assistant's reply"):
        reply_rows(tok, [pairs.conversations[0][:-1]])


def test_a_warm_up_steps_loss_is_the_mean_nll_of_its_reply_tokens(pretrained, pairs):
    """One step of one row: the loss it reports is the model's mean NLL over the reply tokens
    before the update, as transformers computes it with the prompt labelled -100."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cuset.demo.warm_build import reply_rows, warm_up

    tok = AutoTokenizer.from_pretrained(pretrained)
    model = AutoModelForCausalLM.from_pretrained(pretrained, dtype=torch.float32)
    rows, _ = reply_rows(tok, pairs.conversations[:1])
    with torch.no_grad():
        want = model(input_ids=torch.tensor([rows[0][0]]), labels=torch.tensor([rows[0][1]])).loss.item()
    before = [p.detach().clone() for p in model.parameters()]
    seen = []
    losses = warm_up(model, rows, steps=2, batch_size=1, lr=1e-3, seed=0, on_step=lambda s, loss: seen.append(s))
    assert losses[0] == pytest.approx(want, rel=1e-5) and seen == [1, 2]
    assert losses[1] < losses[0]  # the same row again, after a step at lr 1e-3 (warm-up: first lr 0, then 1e-3)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_a_warmed_base_is_the_bytes_of_its_recipe_and_the_recipe_covers_its_inputs(tmp_path, pretrained, pairs):
    from cuset.demo.base import make_warm, warm_recipe

    one = make_warm(tmp_path / "one", WARM, pretrained, pairs, progress=False)
    two = make_warm(tmp_path / "two", WARM, pretrained, pairs, progress=False)
    assert one["files"] == two["files"] and one["recipe"]["kind"] == "warmed"
    assert "warmup_log.json" in one["files"] and "pretrain_log.json" not in one["files"]
    assert one["files"]["tokenizer.json"] == file_hashes(pretrained)["tokenizer.json"]
    assert one["files"]["model.safetensors"] != file_hashes(pretrained)["model.safetensors"]
    assert one["pretrained_recipe_sha256"] == read_manifest(pretrained)["recipe_sha256"]
    assert len(json.loads((tmp_path / "one" / "warmup_log.json").read_text())["loss"]) == 3
    key = one["recipe_sha256"]
    assert recipe_sha256(warm_recipe({**WARM, "warmup_steps": 4}, pretrained, pairs)) != key
    assert recipe_sha256(warm_recipe({**WARM, "n_warmup": 99}, pretrained, pairs)) == key  # only through the pairs
    assert recipe_sha256(warm_recipe(WARM, pretrained, base_corpus([], []))) != key
    other = tmp_path / "other"
    shutil.copytree(pretrained, other)
    assert recipe_sha256(warm_recipe(WARM, other, pairs)) == key
    (other / "pretrain_log.json").write_text("{}")  # a pretrained base with other bytes
    assert recipe_sha256(warm_recipe(WARM, other, pairs)) != key
    package = tmp_path / "cuset"
    for rel in base_mod.WARM_SOURCES:
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(base_mod.PACKAGE / rel, package / rel)
    assert recipe_sha256(warm_recipe(WARM, pretrained, pairs, package)) == key
    with open(package / "demo" / "warm_build.py", "a") as f:
        f.write("\n# a changed line\n")
    assert recipe_sha256(warm_recipe(WARM, pretrained, pairs, package)) != key
    seeded = make_warm(tmp_path / "seed1", {**WARM, "seed": 1}, pretrained, pairs, progress=False)
    assert seeded["files"]["model.safetensors"] != one["files"]["model.safetensors"]


def test_a_shipped_warmed_base_is_used_and_a_changed_recipe_rebuilds_into_the_cache(tmp_path, pretrained, pairs,
                                                                                     monkeypatch):
    from cuset.demo.base import make_warm, provide_warm_base

    monkeypatch.setenv("CUSET_CACHE", str(tmp_path / "cache"))
    shipped = tmp_path / "shipped"
    made = make_warm(shipped, WARM, pretrained, pairs, progress=False)
    built = []
    real = base_mod.build_warm_base
    monkeypatch.setattr(base_mod, "build_warm_base", lambda *a, **k: built.append(1) or real(*a, **k))
    assert provide_warm_base(WARM, pretrained, pairs, tmp_path / "run1", progress=False, shipped=shipped) == "shipped"
    assert built == [] and file_hashes(tmp_path / "run1") == made["files"]
    changed = {**WARM, "warmup_lr": 2e-3}
    assert provide_warm_base(changed, pretrained, pairs, tmp_path / "run2", progress=False, shipped=shipped) == "built"
    assert provide_warm_base(changed, pretrained, pairs, tmp_path / "run3", progress=False, shipped=shipped) == "cached"
    assert built == [1] and file_hashes(tmp_path / "run3") != made["files"]
    with open(shipped / "model.safetensors", "ab") as f:
        f.write(b"\0")
    with pytest.raises(BaseMismatch, match="model.safetensors"):
        provide_warm_base(WARM, pretrained, pairs, tmp_path / "run4", progress=False, shipped=shipped)


def test_check_re_makes_a_warmed_base_from_its_manifest(tmp_path, monkeypatch, capsys):
    from cuset.demo.base import corpus_of, main, make_warm, provide_base, warm_corpus_of
    from cuset.demo.config import DemoConfig

    monkeypatch.setenv("CUSET_CACHE", str(tmp_path / "cache"))
    cfg = DemoConfig(**WARM)
    provide_base(asdict(cfg), corpus_of(cfg), tmp_path / "pre", progress=False)
    make_warm(tmp_path / "warm", asdict(cfg), tmp_path / "pre", warm_corpus_of(cfg), progress=False)
    assert main(["check", "--dir", str(tmp_path / "warm")]) == 0
    assert "byte-identical" in capsys.readouterr().out
    # warmed up from a base its settings do not make (as with `pretrained=`): refused, named
    other = tmp_path / "other"
    shutil.copytree(tmp_path / "pre", other)
    (other / "pretrain_log.json").write_text("{}")
    make_warm(tmp_path / "warm2", asdict(cfg), other, warm_corpus_of(cfg), progress=False)
    assert main(["check", "--dir", str(tmp_path / "warm2")]) == 1
    assert "cannot be re-made from settings" in capsys.readouterr().out


@pytest.mark.slow
def test_the_shipped_warmed_base_is_the_default_configs_recipe():
    """The committed warmed base is what the default demo asks for, warmed from the shipped pretrained base."""
    from cuset.demo.base import SHIPPED, SHIPPED_WARM, warm_corpus_of, warm_recipe
    from cuset.demo.config import DemoConfig

    manifest = read_manifest(SHIPPED_WARM)
    assert manifest is not None, f"{SHIPPED_WARM} holds no manifest.json"
    cfg = DemoConfig()
    rec = warm_recipe(asdict(cfg), SHIPPED, warm_corpus_of(cfg))
    assert rec == manifest["recipe"] and recipe_sha256(rec) == manifest["recipe_sha256"]
    assert manifest["pretrained_recipe_sha256"] == read_manifest(SHIPPED)["recipe_sha256"]
    check_files(SHIPPED_WARM, manifest)
    assert len(json.loads((SHIPPED_WARM / "warmup_log.json").read_text())["loss"]) == cfg.warmup_steps
