"""Carry a run tree (a demo, a study, a map of cells) to another machine, a finished step at a time.

    carry(run_dir, carry_dir)     # write or refresh carry_dir: what run_dir has finished
    restore(carry_dir, run_dir)   # rebuild run_dir from it; the same command then resumes there

A map runs for many hours; the machine that runs it may be gone before it ends, and what survives
is what was committed. `carry` keeps exactly what a resumed run would skip, following the two
levels of resuming in cuset.experiment.cell:
- a cell whose steps.json records `evaluate` is finished: all of it is kept;
- an unfinished cell keeps its training when `train` is recorded (the train/ directory, and a
  steps.json that records `train` alone), else nothing; its half-written samples and results
  are left for the resumed run to redo, so no torn file travels;
- everything else (a demo's data, base models, reports) is kept as it is: a file a recorded step
  wrote is whole, and one an unrecorded step was writing is overwritten when that step runs again;
- caches (`cache/`), training checkpoints and staging directories (`checkpoint-*`, `.staging`,
  `*.partial`) are never kept: they are rebuilt, or only serve an interrupted step.

The carry directory holds carry.json (each file's sha256 and size, what was left out and why)
and files/, a mirror of the kept tree. Text files over GZIP_OVER bytes are stored gzip-compressed
with no time stamp, so an unchanged file gives the same bytes and refreshing a committed carry
directory changes only what the run changed since. `restore` checks every file against its
sha256 and writes only into an empty or absent directory.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path, PurePosixPath

from cuset.errors import CusetError
from cuset.experiment.cell import EVAL_DIR, STEPS
from cuset.io import atomic_write_json

MANIFEST = "carry.json"
FILES = "files"
FORMAT = 1
GZIP_OVER = 64 * 1024
TEXT_SUFFIXES = (".jsonl", ".json", ".md", ".txt", ".csv", ".log", ".cu", ".yaml")
NEVER_KEPT_DIRS = ("cache", ".staging")
CELL_FILES = ("train", "generations.jsonl", EVAL_DIR)


class CarryError(CusetError, ValueError):
    """A carry directory that cannot be written or restored (the message names the file and the fix)."""


def _never_kept(name: str) -> bool:
    return name in NEVER_KEPT_DIRS or name.startswith("checkpoint-") or name.endswith(".partial")


def _steps(directory: Path) -> dict | None:
    path = directory / "steps.json"
    if not path.is_file():
        return None
    try:
        steps = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise CarryError(f"{path}: not a readable steps record ({error}); finish or delete that step's "
                         "directory before carrying the run") from None
    if not isinstance(steps, dict):
        raise CarryError(f"{path}: a steps record must be a JSON object of step -> seconds")
    return steps


def _is_cell(directory: Path, steps: dict) -> bool:
    """A cell's directory: its steps record names a cell step, or it holds a cell's files (a cell
    writes no steps.json before its first step ends, while that step's files already grow)."""
    return any(k in STEPS for k in steps) or any((directory / name).exists() for name in CELL_FILES)


def kept_files(run_dir: Path) -> tuple[dict[str, Path | bytes], dict[str, list[str]], dict[str, list[str]]]:
    """(relative path -> file to keep, reason -> paths left out, cells by state) of `run_dir`, by
    the rules above. An unfinished cell's steps.json maps to the bytes to carry instead (its
    `train` step alone); the cells are listed as `finished` or `trained` (training only)."""
    kept: dict[str, Path | bytes] = {}
    left: dict[str, list[str]] = {}
    cells: dict[str, list[str]] = {"finished": [], "trained": []}

    def leave(reason: str, path: Path) -> None:
        left.setdefault(reason, []).append(path.relative_to(run_dir).as_posix())

    def walk(directory: Path) -> None:
        steps = _steps(directory) or {}
        only = None
        if directory != run_dir and _is_cell(directory, steps):
            rel_dir = directory.relative_to(run_dir).as_posix()
            if "evaluate" in steps:
                cells["finished"].append(rel_dir)
            elif "train" in steps:
                only = {"train"}
                cells["trained"].append(rel_dir)
            else:
                leave("unfinished cell, not trained yet", directory)
                return
        for entry in sorted(directory.iterdir()):
            rel = entry.relative_to(run_dir).as_posix()
            if entry.is_symlink():
                leave("symbolic link", entry)
            elif _never_kept(entry.name):
                leave("cache, checkpoint or staging", entry)
            elif only is not None and entry.name == "steps.json":
                kept[rel] = json.dumps({"train": steps["train"]}, indent=1).encode()
            elif only is not None and entry.name not in only:
                leave("unfinished cell: redone on resume", entry)
            elif entry.is_dir():
                walk(entry)
            elif entry.is_file():
                kept[rel] = entry

    if not run_dir.is_dir():
        raise CarryError(f"{run_dir}: no such run directory")
    walk(run_dir)
    return kept, left, cells


def _stored_name(rel: str, size: int, kept: dict) -> str:
    """rel.gz for a large text file, unless the run also holds a file of that name."""
    return rel + ".gz" if size > GZIP_OVER and rel.endswith(TEXT_SUFFIXES) and rel + ".gz" not in kept else rel


def _compress(data: bytes) -> bytes:
    import io

    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as fh:
        fh.write(data)
    return buffer.getvalue()


def carry(run_dir: str | Path, carry_dir: str | Path) -> dict:
    """Write (or refresh) `carry_dir` from `run_dir`; returns the manifest. Files whose bytes did
    not change are not rewritten; files no longer kept are removed."""
    run_dir, carry_dir = Path(run_dir), Path(carry_dir)
    kept, left, cells = kept_files(run_dir)
    files_root = carry_dir / FILES
    manifest_files = {}
    for rel, source in kept.items():
        data = source if isinstance(source, bytes) else source.read_bytes()
        stored = _stored_name(rel, len(data), kept)
        blob = _compress(data) if stored != rel else data
        target = files_root / stored
        if not (target.is_file() and target.read_bytes() == blob):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(blob)
        manifest_files[rel] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "stored": stored}
    stored_now = {entry["stored"] for entry in manifest_files.values()}
    if files_root.is_dir():
        for path in sorted(files_root.rglob("*"), reverse=True):   # files, then the directories they leave empty
            rel = path.relative_to(files_root).as_posix()
            if path.is_file() and rel not in stored_now:
                path.unlink()
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()
    manifest = {"format": FORMAT, "source": str(run_dir), "cells": cells, "files": dict(sorted(manifest_files.items())),
                "left_out": {reason: sorted(paths) for reason, paths in sorted(left.items())},
                "restore": f"cuset carry --restore {carry_dir} {run_dir}"}
    atomic_write_json(carry_dir / MANIFEST, manifest, indent=1)
    return manifest


def _safe_relative(rel: str, where: str) -> PurePosixPath:
    path = PurePosixPath(rel)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise CarryError(f"{where}: {rel!r} is not a path inside the run; the manifest was edited or corrupted")
    return path


def restore(carry_dir: str | Path, run_dir: str | Path) -> int:
    """Rebuild `run_dir` (absent or empty) from `carry_dir`; returns the number of files written.
    Every file is checked against the sha256 its manifest records before anything is written."""
    carry_dir, run_dir = Path(carry_dir), Path(run_dir)
    manifest_path = carry_dir / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CarryError(f"{manifest_path}: no carry manifest here; write one with `cuset carry RUN_DIR {carry_dir}`") from None
    except ValueError as error:
        raise CarryError(f"{manifest_path}: not JSON ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or not isinstance(manifest.get("files"), dict):
        raise CarryError(f"{manifest_path}: not a carry manifest of format {FORMAT}")
    if run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())):
        raise CarryError(f"{run_dir}: exists and is not empty; restore into a new directory (a run already there "
                         "would mix with the carried one)")
    contents = {}
    for rel, entry in manifest["files"].items():
        where = f"{manifest_path}: files[{rel!r}]"
        path = _safe_relative(rel, where)
        stored = _safe_relative(str(entry.get("stored", "")), where)
        source = carry_dir / FILES / stored
        try:
            blob = source.read_bytes()
            data = gzip.decompress(blob) if stored.name.endswith(".gz") and not path.name.endswith(".gz") else blob
        except (OSError, EOFError, gzip.BadGzipFile) as error:
            raise CarryError(f"{source}: cannot be read ({error}); the carry directory is incomplete") from None
        if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
            raise CarryError(f"{source}: its content does not match the sha256 {manifest_path} records for {rel}")
        contents[path] = data
    for path, data in contents.items():
        target = run_dir.joinpath(*path.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return len(contents)

