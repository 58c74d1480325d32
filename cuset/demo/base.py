"""The demo's base model: made once per recipe, then shipped or cached, never pretrained twice.

A base's recipe is what decides its bytes: the settings in BASE_SETTINGS, the sha256 of its
corpus (the pretraining programs and instruction conversations, as rendered) and of the
source files that make it (RECIPE_SOURCES). The recipe's sha256 names the base:

- shipped: `cuset/demo/shipped_base/` holds the default demo's base and its manifest.json
  (recipe, recipe sha256, every file's sha256, how and where it was made, the command
  that re-makes it and checks the bytes: `python -m cuset.demo.base check`);
- cached: `$CUSET_CACHE/demo-base/<recipe sha256>/`, the same layout, for every other recipe.

`provide_base` copies the shipped base when its recipe is the one asked for, else the cached
one, else builds it into the cache first; a changed setting, corpus or source file is a new
recipe, so it rebuilds. Each copy's files are checked against the manifest's sha256.
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

from cuset.demo.base_build import BASE_SETTINGS, BaseCorpus, build_base
from cuset.errors import CusetError
from cuset.io import atomic_write_json

log = logging.getLogger(__name__)

PACKAGE = Path(__file__).resolve().parents[1]   # the cuset package
# The files whose code decides a base's bytes (relative to the cuset package).
RECIPE_SOURCES = ("demo/base_build.py", "demo/pretrain.py", "train/tiny.py")
SHIPPED = Path(__file__).resolve().parent / "shipped_base"
MANIFEST = "manifest.json"
CACHE_SUBDIR = "demo-base"
# The DemoConfig fields that decide the corpus (its sha256 is in the recipe; these re-make it).
CORPUS_FIELDS = ("seed", "families", "n_pretrain", "n_instruct", "instruct_families", "layout")
# Pretraining speed of the default base (4096 tokens per step, hidden 128, 4 layers) on one
# thread of the 2-core machine at load ~1: its first 100 steps took 78 s (2026-12-06). What a
# build announces it will take; a loaded machine takes longer.
SECONDS_PER_STEP_AT_128x4 = 0.8


class BaseMismatch(CusetError):
    """A stored base whose files are not the bytes its manifest records."""


def source_hashes(package: Path = PACKAGE) -> dict[str, str]:
    return {rel: hashlib.sha256((package / rel).read_bytes()).hexdigest() for rel in RECIPE_SOURCES}


def recipe(settings: dict, corpus: BaseCorpus, package: Path = PACKAGE) -> dict:
    """Everything a base's bytes depend on, as a JSON-able dict."""
    return {"settings": {k: settings[k] for k in BASE_SETTINGS}, "corpus_sha256": corpus.sha256(),
            "sources": source_hashes(package)}


def recipe_sha256(rec: dict) -> str:
    return hashlib.sha256(json.dumps(rec, sort_keys=True).encode()).hexdigest()


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
    """About how long a build takes on one idle core (scaled from the default base's measured speed)."""
    scale = (settings["hidden"] / 128) ** 2 * settings["layers"] / 4
    return SECONDS_PER_STEP_AT_128x4 * max(scale, 0.05) * settings["pretrain_steps"]


def make(target: Path, settings: dict, corpus: BaseCorpus, *, progress: bool = True, command: str = "") -> dict:
    """Build a base into `target` (which must not exist) with its manifest; returns the manifest."""
    from cuset.progress import progress_bar
    from cuset.provenance import provenance

    rec = recipe(settings, corpus)
    staging = target.with_name(f"{target.name}.partial-{int(time.time() * 1e6)}")
    t0 = time.perf_counter()
    with progress_bar("pretrain base", settings["pretrain_steps"], enabled=progress) as bar:
        build_base(staging, corpus, settings, progress=lambda s, loss: bar.advance(status=f"loss {loss:.3f}"))
    manifest = {"recipe": rec, "recipe_sha256": recipe_sha256(rec), "files": file_hashes(staging),
                "corpus_config": {k: settings[k] for k in CORPUS_FIELDS if k in settings},
                "made": {"seconds": round(time.perf_counter() - t0, 1), "threads": 1, "deterministic": True,
                         "versions": _versions(), "cpu": _cpu(), **provenance(), "command": command},
                "remake": "python -m cuset.demo.base check"}
    atomic_write_json(staging / MANIFEST, manifest, indent=1)
    try:
        staging.rename(target)
    except OSError:  # another process built the same recipe meanwhile: keep theirs
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


def provide_base(settings: dict, corpus: BaseCorpus, target: Path, *, progress: bool = True,
                 shipped: Path = SHIPPED) -> str:
    """Copy the base of this recipe into `target`: the shipped one, else the cached one, else one built
    into the cache now. Returns where it came from ('shipped', 'cached' or 'built')."""
    key = recipe_sha256(recipe(settings, corpus))
    source, origin = None, ""
    ship = read_manifest(shipped) if shipped.is_dir() else None
    if ship is not None and ship["recipe_sha256"] == key:
        source, origin = shipped, "shipped"
        log.info("base model: the shipped base (recipe %s) is this config's, no pretraining", key[:12])
    else:
        cached = cache_dir() / key
        if read_manifest(cached) is None:
            minutes = expected_build_seconds(settings) / 60
            log.info("base model: no shipped or cached base for recipe %s; pretraining one (%d steps, expected "
                     "about %.0f minute(s) on one idle core), cached in %s for the next run", key[:12],
                     settings["pretrain_steps"], max(minutes, 1), cached)
            cached.parent.mkdir(parents=True, exist_ok=True)
            make(cached, settings, corpus, progress=progress, command="cuset demo (built on first use)")
            origin = "built"
        else:
            origin = "cached"
            log.info("base model: the cached base of recipe %s (%s), no pretraining", key[:12], cached)
        source = cached
    manifest = read_manifest(source)
    check_files(source, manifest)
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    return origin


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


def _config_of(manifest: dict):
    from cuset.demo.config import DemoConfig

    return DemoConfig(**{**manifest["corpus_config"], **manifest["recipe"]["settings"]})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cuset.demo.base", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("ship", help="build the default demo config's base into cuset/demo/shipped_base (replacing it)")
    check = sub.add_parser("check", help="re-make the shipped base from its manifest's recipe in a temporary "
                                         "directory and compare every file's sha256 (exit 1 on a difference)")
    check.add_argument("--dir", type=Path, default=SHIPPED, help="the base to check (default: the shipped one)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.command == "ship":
        from cuset.demo.config import DemoConfig

        cfg = DemoConfig()
        settings = asdict(cfg)
        shutil.rmtree(SHIPPED, ignore_errors=True)
        manifest = make(SHIPPED, settings, corpus_of(cfg), command="python -m cuset.demo.base ship")
        print(f"shipped base: recipe {manifest['recipe_sha256']}, {manifest['made']['seconds']} s")
        return 0
    manifest = read_manifest(args.dir)
    if manifest is None:
        sys.exit(f"{args.dir} holds no {MANIFEST}")
    cfg = _config_of(manifest)
    corpus = corpus_of(cfg)
    rec = recipe(asdict(cfg), corpus)
    if recipe_sha256(rec) != manifest["recipe_sha256"]:
        changed = [k for k in rec if rec[k] != manifest["recipe"].get(k)]
        print(f"the recipe changed since {args.dir} was made ({', '.join(changed)}): its base is not what this "
              "code makes; `python -m cuset.demo.base ship` makes the new one")
        return 1
    check_files(args.dir, manifest)
    with tempfile.TemporaryDirectory(prefix="cuset-base-check-") as tmp:
        again = make(Path(tmp) / "base", asdict(cfg), corpus, command="python -m cuset.demo.base check")
    differ = sorted(n for n in set(again["files"]) | set(manifest["files"])
                    if again["files"].get(n) != manifest["files"].get(n))
    if differ:
        print(f"re-made from recipe {manifest['recipe_sha256'][:12]}: {', '.join(differ)} differ "
              f"(made with {manifest['made']['versions']} on {manifest['made']['cpu']}; here "
              f"{again['made']['versions']} on {again['made']['cpu']})")
        return 1
    print(f"re-made from recipe {manifest['recipe_sha256'][:12]}: all {len(again['files'])} files "
          "byte-identical to the shipped base")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
