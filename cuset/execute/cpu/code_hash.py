"""Keys of the CPU backend's caches, hashed from the code that produces what they hold.

Two caches hold derived artefacts: the compile cache (cuset/execute/compile_cache.py:
executables, keyed by the source and `CpuBackend.fingerprint()`) and the prebuilt
runtime (`cpu-pch/<Toolchain.fingerprint()>/`: the precompiled header and runtime
library). A cached artefact is reused only when every file that took part in making it
is byte for byte the same, so no edit can serve an artefact an older version made
(a hand-bumped version number was forgotten six times in a row):

- `runtime_hash()`: every file under runtime/ (headers and sources): the prebuilt
  runtime is compiled from them and from nothing else of this package.
- `compile_hash()`: every Python file of this package (the rewriter, the planners and
  the order proof, the lexer, the feature checks, the backend's compiler driver) and
  of what the planners read outside it (the tree-sitter grammar module and the
  versions of the tree-sitter packages), and the runtime's files: together they decide
  what a program is compiled into. A file of the package that does not take part (the
  run-time report readers) is hashed too: a spurious miss costs a compile, a missed
  file a wrong verdict.

Each is computed once per process (the files are read once; a process that edits
them while running, such as a test, clears the caches: `compile_hash.cache_clear()`).
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from importlib import metadata
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
RUNTIME_DIR = PACKAGE_DIR / "runtime"
GRAMMAR = PACKAGE_DIR.parents[1] / "spans" / "grammar.py"   # the parser and name tables the planners use
PACKAGES = ("tree-sitter", "tree-sitter-cuda")               # the parser itself


def runtime_files() -> list[Path]:
    """Every file under runtime/ (headers, sources)."""
    return sorted(p for p in RUNTIME_DIR.rglob("*") if p.is_file())


def compile_files() -> list[Path]:
    """The files that decide what a program compiles into (see the module)."""
    python = sorted(p for p in PACKAGE_DIR.rglob("*.py") if "__pycache__" not in p.parts)
    return python + [GRAMMAR] + runtime_files()


def files_hash(paths: list[Path], extra: tuple[str, ...] = ()) -> str:
    """sha256 over each file's path (relative to the cuset package) and bytes, then `extra`."""
    base = PACKAGE_DIR.parents[1]
    h = hashlib.sha256()
    for path in paths:
        name = str(path.relative_to(base)) if path.is_relative_to(base) else str(path)
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    for item in extra:
        h.update(item.encode() + b"\0")
    return h.hexdigest()[:20]


def package_versions() -> tuple[str, ...]:
    out = []
    for name in PACKAGES:
        try:
            out.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            out.append(f"{name} missing")
    return tuple(out)


@lru_cache(maxsize=1)
def runtime_hash() -> str:
    return files_hash(runtime_files())


@lru_cache(maxsize=1)
def compile_hash() -> str:
    return files_hash(compile_files(), package_versions())
