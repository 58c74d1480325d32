"""KernelBench reference runs kept on disk: one reference run per machine, not per process.

    store = ReferenceStore()                       # <cache root>/kernelbench-references
    key = store.key(memory_key, backend, extra_env)
    hit = store.load(key, read)                    # read(entry, sizes) -> value, or None
    with store.lock(key):                          # one process runs the reference
        ...; store.save(key, files)                # {"inputs/c0.json": (run_dir, "inputs/c0.json"), ...}

verify.py keeps the reference's inputs and expected outputs in this process's memory
(`_ReferenceCache`); below it, this store keeps the same files under the cache root, so
another `cuset eval`, a Ray worker or the next test run skips the sandboxed torch import
and the reference's forward. The layout, locking, publication and size budget are the
compile cache's (cuset.execute.compile_cache: entry_lock, staging_dir, publish, evict):

    <root>/<key[:2]>/<key>/entry.json      sizes and sha256 of every file below; its mtime:
                                           when the entry was last used (least recently used out)
    <root>/<key[:2]>/<key>/inputs/...      what a candidate run receives
    <root>/<key[:2]>/<key>/expected/...    the reference's outputs (never shown to a sandbox:
                                           the root is hidden from every sandboxed step)

Only a reference that ran and left readable files is stored: a failure (timeout, disk
quota, unusable files) depends on limits and load, and is seen again by the next run.
Entries are read as hostile input (they are files a sandboxed run wrote, copied): through
the careful reader (cuset.execute.untrusted_files: no links, regular files, sizes checked
before reading), their sha256 checked against entry.json, then parsed by the caller's
reader (verify: compare.read_files, the parser of the reference's own run dir). Anything
wrong with an entry (missing, truncated, a link, too large, garbage) is a miss: the entry
is removed and the reference runs again (logged at debug), never an error.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

from cuset.cachedir import cache_root
from cuset.execute.compile_cache import discard_entry, entry_lock, evict, mark_used, publish, staging_dir
from cuset.execute.kernelbench.compare import BadOutput, parse_json
from cuset.execute.result import printable
from cuset.execute.sandbox import protect
from cuset.execute.untrusted_files import UnsafeOutput, copy_output, open_output, read_bounded, read_digest

log = logging.getLogger(__name__)
T = TypeVar("T")

SUBDIR = "kernelbench-references"
MANIFEST = "entry.json"                # its mtime: when the entry was last used
MANIFEST_LIMIT = 1 << 20               # bytes of an entry.json read back
FORMAT = 1                             # the entry layout below; bump when it changes
DEFAULT_MAX_BYTES = 4 << 30            # the store's size budget (EvalConfig.reference_cache_gb)
DEFAULT_MAX_ENTRY_BYTES = 256 << 20    # a larger reference run is not kept (as verify's memory cache)
# A reader holds an entry only while it copies a few files: a short grace is enough
# (an entry evicted under a reader reads as a miss, never as a wrong value).
GRACE_SECONDS = 60.0
# Files of the reference run: `inputs/` or `expected/`, then a plain name the harness writes
# (c0.json, c0_t1.safetensors): nothing that could climb out of the entry.
FILE_NAME = re.compile(r"(inputs|expected)/[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
# Source files whose text decides the files of a reference run, hashed into every key:
# harness.py runs inside the reference's process and writes the files (and encodes the
# values), compare.py decodes them, verify.py writes the run's config and environment
# and names the files it reads back, this module lays out the entry.
_HERE = Path(__file__).resolve().parent
PRODUCER_SOURCES = (_HERE / "harness.py", _HERE / "compare.py", _HERE / "verify.py", Path(__file__).resolve())
# extra_env keys that reach only a candidate's own kernels (the CPU runtime linked into
# the extensions it builds), never a reference's torch: the thread-order check's
# CUSET_CPU_ORDER would otherwise make its reference miss the store in every process.
CANDIDATE_ONLY_ENV = frozenset({"CUSET_CPU_ORDER"})


class UnknownDevice(OSError):
    """The GPU or CPU cannot be named: a key without it could match another machine's runs."""


@dataclass(frozen=True)
class ReferenceStore:
    """Where and how much: `root` (None: `<cache root>/kernelbench-references`, read when
    used), `max_bytes` (None: no budget) and `max_entry_bytes` (a larger run is not kept)."""

    root: str | None = None
    max_bytes: int | None = DEFAULT_MAX_BYTES
    max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES

    def directory(self) -> Path:
        """The store's root, made private and hidden from every sandboxed step of this process
        (it holds expected outputs: a candidate that found them could copy them)."""
        root = (Path(self.root) if self.root else cache_root() / SUBDIR).expanduser().resolve()
        root.mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o700)
        protect(root)
        return root

    def entry(self, key: str) -> Path:
        return self.directory() / key[:2] / key

    def key(self, reference_key: str, backend: str, extra_env: dict[str, str]) -> str:
        """The entry's key: everything that could change the reference's files. Each part:
        - `reference_key` (verify._reference_key): the reference's source, the backend, the
          checks (seeds, model seed, overrides, value transform, backward) and eval_mode:
          the run's own inputs;
        - the sources that produce and read the files (PRODUCER_SOURCES) and FORMAT: a
          harness that seeds, encodes or names things differently makes other files;
        - torch's version (and its CUDA build), Python's, numpy's and safetensors': the
          reference's values are torch's arithmetic, its inputs torch's random numbers,
          and the files safetensors';
        - the device: on "gpu" the GPU's name and torch's CUDA version (kernels and cuBLAS
          pick algorithms per architecture), on "cpu" the CPU's model and instruction set
          (torch's CPU kernels dispatch on AVX2/AVX-512/..., so float results can differ
          between CPUs);
        - `extra_env` (what the reference's process sees besides verify's own environment,
          e.g. thread counts), less CANDIDATE_ONLY_ENV.
        UnknownDevice (an OSError: verify then runs the reference without the store) when the
        device cannot be named (no nvidia-smi, no /proc/cpuinfo)."""
        env = {k: v for k, v in sorted(extra_env.items()) if k not in CANDIDATE_ONLY_ENV}
        device = _gpu_identity(env.get("CUDA_VISIBLE_DEVICES", "0")) if backend == "gpu" else _cpu_identity()
        if device is None:   # two machines could share the key: nothing is kept rather than a wrong value
            raise UnknownDevice(f"the {backend.upper()} this reference runs on cannot be identified")
        spec = {"reference": reference_key, "format": FORMAT, "producers": _producers_hash(),
                "software": _software(), "device": device, "env": env}
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()

    def lock(self, key: str):
        """Held while this process runs the reference for `key`: a second process (a Ray
        worker on the same node) waits, then finds the entry instead of running it too."""
        return entry_lock(self.entry(key))

    def load(self, key: str, read: Callable[[Path, dict[str, int]], T]) -> T | None:
        """`read(entry, sizes)` of the entry for `key` once its files are checked (sizes:
        name -> bytes, each one verified against its sha256), or None: no entry, or one that
        is not whole (removed here). `read` raises BadOutput, UnsafeOutput or OSError for
        what it cannot parse: the entry is removed and None returned as well."""
        try:
            entry = self.entry(key)
        except OSError as e:   # no store here (a read-only cache root): a miss
            log.debug("reference store: unusable (%s)", e)
            return None
        try:
            raw = read_bounded(entry.parent, f"{key}/{MANIFEST}", MANIFEST_LIMIT)
        except (UnsafeOutput, OSError) as e:
            return self._drop(entry, f"{MANIFEST}: {e}")
        if raw is None:
            return None
        try:
            sizes = self._checked(entry, key, raw)
            value = read(entry, sizes)
        except (BadOutput, UnsafeOutput, OSError, ValueError) as e:
            return self._drop(entry, str(e))
        mark_used(entry, MANIFEST)
        return value

    def save(self, key: str, files: dict[str, tuple[Path, str]]) -> bool:
        """Store `files` (entry name -> (directory, path under it): the reference's finished
        run dir or this process's own copies, read through the careful reader) as the entry
        for `key`: staged, then published in one rename. False when it is not kept: over
        `max_entry_bytes`, a name that is not a plain file name, a file that is a link or not
        regular, a write that fails, or a racing writer that published first (its entry is as
        good). Never raises: keeping the run is only an optimisation."""
        sizes = {}
        try:
            entry = self.entry(key)
            for name, (directory, rel) in files.items():
                if not FILE_NAME.fullmatch(name):   # the reference's run named its inputs itself
                    raise UnsafeOutput(f"{printable(repr(name))[:80]} is not a plain file name")
                fd, st = open_output(directory, rel, None)
                os.close(fd)
                sizes[name] = st.st_size
        except (UnsafeOutput, OSError) as e:
            log.debug("reference store: %s not kept (%s)", key[:12], e)
            return False
        if sum(sizes.values()) > self.max_entry_bytes:
            log.debug("reference store: %s not kept (%d bytes, more than %d)", key[:12], sum(sizes.values()),
                      self.max_entry_bytes)
            return False
        staging = None
        try:
            staging = staging_dir(entry)
            digests = {}
            for sub in ("inputs", "expected"):
                (staging / sub).mkdir()
            for name, (directory, rel) in files.items():
                copy_output(directory, rel, sizes[name], staging / name)   # the size checked again
                fd = os.open(staging / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                try:
                    digests[name] = [sizes[name], read_digest(fd, sizes[name])]
                finally:
                    os.close(fd)
            (staging / MANIFEST).write_text(json.dumps({"format": FORMAT, "key": key, "files": digests}))
        except (UnsafeOutput, OSError) as e:   # a file that changed, a full disk: slower later, never wrong
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
            log.debug("reference store: %s not kept (%s)", key[:12], e)
            return False
        published = publish(staging, entry)
        if published and self.max_bytes is not None:
            evict(self.directory(), self.max_bytes, marker=MANIFEST, grace=GRACE_SECONDS)
        return published

    # -- internals ---------------------------------------------------------

    def _checked(self, entry: Path, key: str, raw: bytes) -> dict[str, int]:
        """The entry's files and sizes from its manifest, each file checked: a regular file
        reached without links, of the listed size, with the listed sha256."""
        manifest = parse_json(raw, MANIFEST)
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or manifest.get("key") != key:
            raise BadOutput(f"{MANIFEST}: not an entry of format {FORMAT} for this key")
        files = manifest.get("files")
        if not isinstance(files, dict) or not files:
            raise BadOutput(f"{MANIFEST}: no files listed")
        sizes = {}
        for name, listed in files.items():
            if not (isinstance(name, str) and FILE_NAME.fullmatch(name) and isinstance(listed, list)
                    and len(listed) == 2 and type(listed[0]) is int and 0 <= listed[0] and isinstance(listed[1], str)):
                raise BadOutput(f"{MANIFEST}: a malformed file entry {printable(repr(name))[:80]}")
            sizes[name] = listed[0]
        if sum(sizes.values()) > self.max_entry_bytes:
            raise BadOutput(f"{MANIFEST}: {sum(sizes.values())} bytes listed, more than {self.max_entry_bytes}")
        for name, (size, digest) in files.items():
            fd, _ = open_output(entry, name, size)   # UnsafeOutput: a link, not regular, another size
            try:
                if read_digest(fd, size) != digest:
                    raise BadOutput(f"{name}: its bytes are not the ones stored")
            finally:
                os.close(fd)
        return sizes

    def _drop(self, entry: Path, why: str) -> None:
        log.debug("reference store: entry %s ignored and removed: %s", entry.name[:12], why)
        discard_entry(entry)
        return None


@lru_cache(maxsize=1)
def _producers_hash() -> str:
    h = hashlib.sha256()
    for path in PRODUCER_SOURCES:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


@lru_cache(maxsize=1)
def _software() -> dict:
    from importlib import metadata

    import torch   # the parent reads the reference's tensors with it anyway

    versions = {"python": sys.version.split()[0], "torch": torch.__version__, "torch_cuda": torch.version.cuda}
    for package in ("numpy", "safetensors"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return versions


@lru_cache(maxsize=None)
def _gpu_identity(visible: str) -> dict | None:
    """The GPU the reference runs on (the first visible one) as the host names it; None
    when nvidia-smi cannot say."""
    from cuset.execute.gpu import gpu_name

    name = gpu_name(visible.split(",")[0].strip() or "0")
    if name.startswith("unknown GPU"):
        return None
    return {"gpu": name, "cuda": _software()["torch_cuda"]}


@lru_cache(maxsize=1)
def _cpu_identity() -> dict | None:
    """The CPU's model and instruction-set flags (/proc/cpuinfo's first processor); None
    when neither can be read."""
    model, flags = "", ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                field, _, value = line.partition(":")
                field = field.strip()
                if field in ("model name", "CPU part", "Processor") and not model:
                    model = value.strip()
                elif field in ("flags", "Features") and not flags:
                    flags = " ".join(sorted(value.split()))
                if model and flags:
                    break
    except OSError:
        pass
    if not model and not flags:
        return None
    return {"machine": platform.machine(), "model": model or platform.processor(),
            "isa": hashlib.sha256(flags.encode()).hexdigest()[:16]}
