"""KernelBench `load_inline` extensions built once, by the parent, and loaded by every run.

Both backends build a candidate's extensions the same way: the parent builds each call's
build record (build.ExtensionSpec: sources, functions, extra flags, include paths) through
the compile cache, whose key adds the builder's fingerprint (compilers, torch, CUDA
architectures), so a second sample, a robust check or a timing run with the same
extension reuses the build, and a changed flag builds again:

- `extension_builder(backend)`: the compile-cache backend of a backend's builds (the CPU
  backend's g++ build, build.ExtensionBuilder; torch's own build on the GPU,
  torch_build.TorchExtensionBuilder), both in the compile sandbox;
- `place_extensions(manifest, ext_dir)`: a run's private copies of the builds it may load,
  each checked against the sha256 the cache recorded when it was built (a copy that
  differs raises ExtensionChanged: nothing unverified is loaded);
- `prebuild(cache, answers, seconds)`: the extension calls found in many answers' sources
  built side by side before any is verified or timed (each answer within its own budget).

Trust: only this process writes the cache (its root is hidden from every sandbox); a build
runs in the compile sandbox and writes only its own build dir, which becomes the entry of
its own key (sources and flags included), so a hostile build can only spoil the build of
the same answer text. A build stopped by a budget or a timeout is never kept. A build a
candidate makes in its own run (a call the parent did not build) stays in that run.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cuset.execute.compile_cache import CompileCache, file_digest
from cuset.execute.kernelbench.budget import BuildBudget
from cuset.execute.kernelbench.build import ExtensionBuilder
from cuset.execute.kernelbench.torch_build import TorchExtensionBuilder
from cuset.execute.untrusted_files import copy_output


class ExtensionChanged(RuntimeError):
    """A cached extension's copy is not the build the cache recorded (changed since it was read)."""


def extension_builder(backend: str, sandbox_mode: str = "auto"):
    """The compile-cache backend building `backend`'s ("cpu" or "gpu") load_inline extensions."""
    if backend == "cpu":
        return ExtensionBuilder(sandbox_mode=sandbox_mode)
    if backend == "gpu":
        return TorchExtensionBuilder(sandbox_mode=sandbox_mode)
    raise ValueError(f"backend={backend!r}: KernelBench extensions are built for 'cpu' or 'gpu'")


def builds_extensions(cache: CompileCache | None, backend: str) -> bool:
    """Whether `cache` builds `backend`'s extensions (else the caller makes one that does)."""
    wanted = ExtensionBuilder if backend == "cpu" else TorchExtensionBuilder
    return cache is not None and type(cache.backend) is wanted


def place_extensions(manifest: dict, ext_dir: Path) -> dict:
    """The harness's `extensions` for one run: a private copy under `ext_dir` of each build in
    `manifest` ({"so", "module"}; the sandbox sees nothing of the cache), failed builds as
    they are. Each copy's sha256 must be the one recorded with the build (ExtensionChanged)."""
    ext_dir.mkdir(exist_ok=True)
    placed = {}
    for key, entry in manifest.items():
        if "path" not in entry:
            placed[key] = entry
            continue
        source = Path(entry["path"])
        local = ext_dir / key[:16] / source.name
        local.parent.mkdir()
        copy_output(source.parent, source.name, None, local)   # no link followed, a regular file only
        digest = file_digest(local.parent, local.name)
        if not entry.get("sha256") or digest != entry["sha256"]:
            raise ExtensionChanged(f"the cached build {source} is not the one recorded (sha256 {digest}, recorded "
                                   f"{entry.get('sha256')}): it changed after it was built; evaluate again "
                                   "(the cache drops such an entry when it reads it)")
        placed[key] = {"so": str(local), "module": entry["module"]}
    return placed


def prebuild(cache: CompileCache, answers: list[list], seconds: float, workers: int | None = None) -> list[str | None]:
    """Build every answer's extension specs (lists of ExtensionSpec, one list per answer) side by
    side, each answer's one after another within a BuildBudget of `seconds` of its own, so the
    verifications and timings that follow find them in the cache. Per answer: why its budget
    ran out, or None. (A build the budget stopped is not cached: its sample builds it again,
    under its own budget.)"""
    def build(specs: list) -> str | None:
        return BuildBudget(seconds).build(cache, specs, {}, [], {})

    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1, thread_name_prefix="prebuild") as pool:
        return list(pool.map(build, answers))
