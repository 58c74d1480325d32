"""The demo's base models: made once per recipe, then shipped or cached, never trained twice.

Two kinds of base, each named by its recipe's sha256 (everything its bytes depend on):
- pretrained (cuset.demo.base_build): the settings in BASE_SETTINGS, the sha256 of its corpus
  (the pretraining programs and instruction conversations, as rendered) and of the source
  files that make it (RECIPE_SOURCES);
- warmed (cuset.demo.warm_build): a pretrained base's files (their sha256), the settings in
  WARM_SETTINGS, the sha256 of the warm-up pairs and of WARM_SOURCES.

A base is
- shipped: `cuset/demo/shipped_base/` (the default demo's pretrained base) and
  `cuset/demo/shipped_warm_base/` (the default demo's warmed base), each with its manifest.json
  (recipe, recipe sha256, every file's sha256, how and where it was made, the command that
  re-makes it and checks the bytes: `python -m cuset.demo.base check [--dir DIR]`);
- cached: `$CUSET_CACHE/demo-base/<recipe sha256>/`, the same layout, for every other recipe.

`provide_base` / `provide_warm_base` copy the shipped base when its recipe is the one asked for,
else the cached one, else build it into the cache first; a changed setting, corpus, source file
or pretrained base is a new recipe, so it rebuilds. Each copy's files are checked against the
manifest's sha256.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from cuset.demo.base_build import BASE_SETTINGS, BaseCorpus, build_base
from cuset.demo.warm_build import WARM_SETTINGS, build_warm_base
from cuset.errors import CusetError
from cuset.io import atomic_write_json

log = logging.getLogger(__name__)

PACKAGE = Path(__file__).resolve().parents[1]   # the cuset package
# The files whose code decides a base's bytes (relative to the cuset package).
RECIPE_SOURCES = ("demo/base_build.py", "demo/pretrain.py", "train/tiny.py")
WARM_SOURCES = ("demo/base_build.py", "demo/warm_build.py")
SHIPPED = Path(__file__).resolve().parent / "shipped_base"
SHIPPED_WARM = Path(__file__).resolve().parent / "shipped_warm_base"
MANIFEST = "manifest.json"
CACHE_SUBDIR = "demo-base"
# The DemoConfig fields that decide the corpus (its sha256 is in the recipe; these re-make it).
CORPUS_FIELDS = ("seed", "families", "n_pretrain", "n_instruct", "instruct_families", "layout")
# ... and those that decide the warm-up pairs (the warm-up points avoid the fine-tuning and evaluation ones).
WARM_CORPUS_FIELDS = ("seed", "families", "holdout", "n_train", "n_eval", "n_warmup", "layout")
# Pretraining speed of the default base (4096 tokens per step, hidden 128, 4 layers) on one
# thread of the 2-core machine at load ~1: its first 100 steps took 78 s (2026-12-06). What a
# build announces it will take; a loaded machine takes longer.
SECONDS_PER_STEP_AT_128x4 = 0.8
# Warm-up speed of the default base (4 pairs per step, hidden 128, 4 layers) on one thread: the
# shipped warmed base took 1228 s for 1600 steps while another warm-up shared the machine (its
# manifest, 2026-12-06).
WARM_SECONDS_PER_STEP_AT_128x4 = 0.8


class BaseMismatch(CusetError):
    """A stored base whose files are not the bytes its manifest records."""


def source_hashes(package: Path = PACKAGE, sources: tuple[str, ...] = RECIPE_SOURCES) -> dict[str, str]:
    return {rel: hashlib.sha256((package / rel).read_bytes()).hexdigest() for rel in sources}


def recipe(settings: dict, corpus: BaseCorpus, package: Path = PACKAGE) -> dict:
    """Everything a pretrained base's bytes depend on, as a JSON-able dict."""
    return {"settings": {k: settings[k] for k in BASE_SETTINGS}, "corpus_sha256": corpus.sha256(),
            "sources": source_hashes(package)}


def warm_recipe(settings: dict, pretrained: Path, corpus: BaseCorpus, package: Path = PACKAGE) -> dict:
    """Everything a warmed base's bytes depend on: the pretrained base as its files' sha256 (so a
    base given with `pretrained=` is keyed as well as a made one), settings, pairs and code."""
    return {"kind": "warmed", "pretrained_files_sha256": files_sha256(file_hashes(pretrained)),
            "settings": {k: settings[k] for k in WARM_SETTINGS}, "corpus_sha256": corpus.sha256(),
            "sources": source_hashes(package, WARM_SOURCES)}


def recipe_sha256(rec: dict) -> str:
    return hashlib.sha256(json.dumps(rec, sort_keys=True).encode()).hexdigest()


def files_sha256(hashes: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest()


def file_hashes(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.iterdir()) if p.is_file() and p.name != MANIFEST}


def read_manifest(directory: Path) -> dict | None:
    path = directory / MANIFEST
    return json.loads(path.read_text()) if path.is_file() else None


def check_files(directory: Path, manifest: dict) -> None:
    """Raise BaseMismatch naming each file whose bytes are not the manifest's."""
    got, want = file_hashes(directory), manifest["files"]
    wrong = sorted(n for n in set(got) | set(want) if got.get(n) != want.get(n))
    if wrong:
        raise BaseMismatch(f"{directory}: {', '.join(wrong)} differ from {directory / MANIFEST} (recipe "
                           f"{manifest['recipe_sha256'][:12]}); delete the directory to rebuild it")


def cache_dir() -> Path:
    from cuset.cachedir import cache_root

    return cache_root() / CACHE_SUBDIR


def expected_build_seconds(settings: dict) -> float:
    """About how long a pretrained base's build takes on one idle core (scaled from the default base's speed)."""
    return SECONDS_PER_STEP_AT_128x4 * _size_scale(settings) * settings["pretrain_steps"]


def expected_warm_seconds(settings: dict) -> float:
    """About how long a warm-up takes on one idle core (scaled from the default base's speed)."""
    return (WARM_SECONDS_PER_STEP_AT_128x4 * _size_scale(settings) * settings["warmup_steps"]
            * settings["batch_size"] / 4)


def _size_scale(settings: dict) -> float:
    return max((settings["hidden"] / 128) ** 2 * settings["layers"] / 4, 0.05)


def _make(target: Path, rec: dict, build: Callable[[Path, Callable[[int, float], None]], object], *, label: str,
          total: int, progress: bool, command: str, extra: dict) -> dict:
    """Build a base into `target` (which must not exist) with `build(staging, on_step)`, then write
    its manifest; returns the manifest."""
    from cuset.progress import progress_bar
    from cuset.provenance import provenance

    staging = target.with_name(f"{target.name}.partial-{int(time.time() * 1e6)}")
    t0 = time.perf_counter()
    with progress_bar(label, total, enabled=progress) as bar:
        build(staging, lambda step, loss: bar.advance(status=f"loss {loss:.3f}"))
    manifest = {"recipe": rec, "recipe_sha256": recipe_sha256(rec), "files": file_hashes(staging), **extra,
                "made": {"seconds": round(time.perf_counter() - t0, 1), "threads": 1, "deterministic": True,
                         "versions": _versions(), "cpu": _cpu(), **provenance(), "command": command}}
    atomic_write_json(staging / MANIFEST, manifest, indent=1)
    try:
        staging.rename(target)
    except OSError:  # another process built the same recipe meanwhile: keep theirs
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


def make(target: Path, settings: dict, corpus: BaseCorpus, *, progress: bool = True, command: str = "") -> dict:
    """Build a pretrained base into `target` (which must not exist) with its manifest; returns the manifest."""
    return _make(target, recipe(settings, corpus), lambda staging, on_step: build_base(staging, corpus, settings, progress=on_step),
                 label="pretrain base", total=settings["pretrain_steps"], progress=progress, command=command,
                 extra={"corpus_config": {k: settings[k] for k in CORPUS_FIELDS if k in settings},
                        "remake": "python -m cuset.demo.base check"})


def make_warm(target: Path, settings: dict, pretrained: Path, corpus: BaseCorpus, *, progress: bool = True,
              command: str = "") -> dict:
    """Build the warmed base of `pretrained` into `target` (which must not exist) with its manifest."""
    fields = (*CORPUS_FIELDS, *WARM_CORPUS_FIELDS, *BASE_SETTINGS, *WARM_SETTINGS)
    made_from = read_manifest(pretrained)
    return _make(target, warm_recipe(settings, pretrained, corpus),
                 lambda staging, on_step: build_warm_base(staging, pretrained, corpus.conversations, settings,
                                                          on_step=on_step),
                 label="warm up base", total=settings["warmup_steps"], progress=progress, command=command,
                 extra={"corpus_config": {k: settings[k] for k in dict.fromkeys(fields) if k in settings},
                        "pretrained_recipe_sha256": made_from["recipe_sha256"] if made_from else None,
                        "remake": f"python -m cuset.demo.base check --dir {_shown(target)}"})


def _provide(key: str, build: Callable[[Path], dict], target: Path, shipped: Path, what: str) -> str:
    """Copy the base of recipe `key` into `target`: `shipped` when its recipe is `key`, else the cached
    one, else one built into the cache by `build(directory)` (which announces itself)."""
    ship = read_manifest(shipped) if shipped.is_dir() else None
    if ship is not None and ship["recipe_sha256"] == key:
        source, origin = shipped, "shipped"
        log.info("%s: the shipped one (recipe %s) is this config's, no training", what, key[:12])
    else:
        source = cache_dir() / key
        if read_manifest(source) is None:
            source.parent.mkdir(parents=True, exist_ok=True)
            build(source)
            origin = "built"
        else:
            origin = "cached"
            log.info("%s: the cached one of recipe %s (%s), no training", what, key[:12], source)
    check_files(source, read_manifest(source))
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    return origin


def provide_base(settings: dict, corpus: BaseCorpus, target: Path, *, progress: bool = True,
                 shipped: Path = SHIPPED) -> str:
    """Copy the pretrained base of this recipe into `target`: the shipped one, else the cached one, else
    one built into the cache now. Returns where it came from ('shipped', 'cached' or 'built')."""
    key = recipe_sha256(recipe(settings, corpus))

    def build(directory: Path) -> dict:
        log.info("base model: no shipped or cached base for recipe %s; pretraining one (%d steps, expected "
                 "about %.0f minute(s) on one idle core), cached in %s for the next run", key[:12],
                 settings["pretrain_steps"], max(expected_build_seconds(settings) / 60, 1), directory)
        return make(directory, settings, corpus, progress=progress, command="cuset demo (built on first use)")

    return _provide(key, build, target, shipped, "base model")


def provide_warm_base(settings: dict, pretrained: Path, corpus: BaseCorpus, target: Path, *, progress: bool = True,
                      shipped: Path = SHIPPED_WARM) -> str:
    """Copy the warmed base of `pretrained` (a model directory) for this recipe into `target`, as
    provide_base does. Returns where it came from ('shipped', 'cached' or 'built')."""
    key = recipe_sha256(warm_recipe(settings, pretrained, corpus))

    def build(directory: Path) -> dict:
        log.info("warm-up: no shipped or cached warmed base for recipe %s; warming one up (%d steps, expected "
                 "about %.0f minute(s) on one idle core), cached in %s for the next run", key[:12],
                 settings["warmup_steps"], max(expected_warm_seconds(settings) / 60, 1), directory)
        return make_warm(directory, settings, pretrained, corpus, progress=progress,
                         command="cuset demo (built on first use)")

    return _provide(key, build, target, shipped, "warmed base")


def _shown(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _versions() -> dict:
    import importlib.metadata

    out = {}
    for name in ("torch", "transformers", "tokenizers", "safetensors"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def _cpu() -> dict | None:
    """The CPU's model and instruction-set flags: float results, and so the bytes, may differ on another ISA."""
    from cuset.execute.kernelbench.reference_store import _cpu_identity

    return _cpu_identity()


def corpus_of(cfg) -> BaseCorpus:
    """The base corpus a DemoConfig asks for, synthesised afresh (what its data step saves)."""
    from cuset.demo.base_build import base_corpus
    from cuset.demo.corpus import base_tasks

    pretrain, instruct = base_tasks(cfg)
    return base_corpus(pretrain, instruct)


def warm_corpus_of(cfg) -> BaseCorpus:
    """The warm-up pairs a DemoConfig asks for (warmup_steps > 0), synthesised afresh."""
    from cuset.demo.base_build import base_corpus
    from cuset.demo.corpus import demo_sets

    return base_corpus([], demo_sets(cfg)[1]["warmup"])


def _config_of(manifest: dict):
    from cuset.demo.config import DemoConfig

    return DemoConfig(**{**manifest["corpus_config"], **manifest["recipe"]["settings"]})


def ship(cfg) -> list[dict]:
    """Build the bases of `cfg` whose shipped recipe is not `cfg`'s into the shipped directories
    (the warmed one too when warmup_steps > 0); returns the manifests made."""
    settings, made = asdict(cfg), []
    corpus = corpus_of(cfg)
    shipped = read_manifest(SHIPPED) if SHIPPED.is_dir() else None
    if shipped is None or shipped["recipe_sha256"] != recipe_sha256(recipe(settings, corpus)):
        shutil.rmtree(SHIPPED, ignore_errors=True)
        made.append(make(SHIPPED, settings, corpus, command="python -m cuset.demo.base ship"))
    if cfg.warmup_steps:
        check_files(SHIPPED, read_manifest(SHIPPED))
        warm = warm_corpus_of(cfg)
        shipped = read_manifest(SHIPPED_WARM) if SHIPPED_WARM.is_dir() else None
        if shipped is None or shipped["recipe_sha256"] != recipe_sha256(warm_recipe(settings, SHIPPED, warm)):
            shutil.rmtree(SHIPPED_WARM, ignore_errors=True)
            made.append(make_warm(SHIPPED_WARM, settings, SHIPPED, warm, command="python -m cuset.demo.base ship"))
    return made


def _remake(directory: Path, manifest: dict, tmp: Path) -> tuple[dict | None, str]:
    """Re-make the base `manifest` describes inside `tmp`: (its manifest, "") or (None, why not)."""
    cfg = _config_of(manifest)
    settings = asdict(cfg)
    if manifest["recipe"].get("kind") != "warmed":
        corpus = corpus_of(cfg)
        rec = recipe(settings, corpus)
        if recipe_sha256(rec) != manifest["recipe_sha256"]:
            return None, _changed(directory, rec, manifest)
        return make(tmp / "base", settings, corpus, command="python -m cuset.demo.base check"), ""
    pretrained = tmp / "pretrained"
    provide_base(settings, corpus_of(cfg), pretrained)
    got = files_sha256(file_hashes(pretrained))
    if got != manifest["recipe"]["pretrained_files_sha256"]:
        return None, (f"{directory} was warmed up from a pretrained base whose files hash to "
                      f"{manifest['recipe']['pretrained_files_sha256'][:12]}; its settings make one hashing to "
                      f"{got[:12]} here (a base given with `pretrained=` cannot be re-made from settings)")
    corpus = warm_corpus_of(cfg)
    rec = warm_recipe(settings, pretrained, corpus)
    if recipe_sha256(rec) != manifest["recipe_sha256"]:
        return None, _changed(directory, rec, manifest)
    return make_warm(tmp / "base", settings, pretrained, corpus, command="python -m cuset.demo.base check"), ""


def _changed(directory: Path, rec: dict, manifest: dict) -> str:
    changed = [k for k in rec if rec[k] != manifest["recipe"].get(k)]
    return (f"the recipe changed since {directory} was made ({', '.join(changed)}): its base is not what this "
            "code makes; `python -m cuset.demo.base ship` makes the new one")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cuset.demo.base", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("ship", help="build the default demo config's bases (pretrained, and warmed when its warmup_steps "
                                "> 0) into cuset/demo/shipped_base and shipped_warm_base, where their recipe changed")
    check = sub.add_parser("check", help="re-make a base from its manifest's recipe in a temporary directory and "
                                         "compare every file's sha256 (exit 1 on a difference)")
    check.add_argument("--dir", type=Path, default=SHIPPED, help="the base to check (default: the shipped "
                                                                   "pretrained one; cuset/demo/shipped_warm_base "
                                                                   "for the warmed one)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.command == "ship":
        from cuset.demo.config import DemoConfig

        for manifest in ship(DemoConfig()):
            print(f"shipped base: recipe {manifest['recipe_sha256']}, {manifest['made']['seconds']} s")
        return 0
    manifest = read_manifest(args.dir)
    if manifest is None:
        sys.exit(f"{args.dir} holds no {MANIFEST}")
    check_files(args.dir, manifest)
    with tempfile.TemporaryDirectory(prefix="cuset-base-check-") as tmp:
        again, why = _remake(args.dir, manifest, Path(tmp))
    if again is None:
        print(why)
        return 1
    differ = sorted(n for n in set(again["files"]) | set(manifest["files"])
                    if again["files"].get(n) != manifest["files"].get(n))
    if differ:
        print(f"re-made from recipe {manifest['recipe_sha256'][:12]}: {', '.join(differ)} differ "
              f"(made with {manifest['made']['versions']} on {manifest['made']['cpu']}; here "
              f"{again['made']['versions']} on {again['made']['cpu']})")
        return 1
    print(f"re-made from recipe {manifest['recipe_sha256'][:12]}: all {len(again['files'])} files "
          f"byte-identical to {args.dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
