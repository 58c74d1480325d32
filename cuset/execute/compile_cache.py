"""Content-addressed compile cache shared by every evaluation worker.

key = sha256(source + backend.fingerprint()), the fingerprint holding the
compiler version and flags, so a changed toolchain never reuses stale binaries.
Layout: <root>/<key[:2]>/<key>/ holds the backend's build directory (the
executable plus whatever the backend left next to it) and `outcome.json`.

Identical sources compile once: within a process, concurrent requests for one
key wait on the same future; across processes an flock on `<key>.lock`
serialises the build and the loser reads the winner's entry. Compile errors are
cached too (they are deterministic); timeouts are not (they depend on load).
Compiles run on a pool of `workers` threads (default: one per core), each of
which drives one compiler subprocess: the real work happens in processes.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from cuset.cachedir import cache_root
from cuset.execute.interface import Backend, CompileOutcome
from cuset.execute.result import Status, StepResult
from cuset.execute.sandbox import protect

def default_root() -> Path:
    """`compile/` under the cache root (read now: CUSET_CACHE may change after import)."""
    return cache_root() / "compile"


def cache_key(source: str, fingerprint: str) -> str:
    h = hashlib.sha256()
    h.update(fingerprint.encode())
    h.update(b"\0")
    h.update(source.encode())
    return h.hexdigest()


class CompileCache:
    def __init__(self, backend: Backend, root: str | Path | None = None, workers: int | None = None,
                 timeout: float = 120.0):
        self.backend = backend
        # Absolute: compilers and programs run with their own working directories.
        self.root = Path(root or default_root()).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)  # untrusted programs must not browse other binaries' sources
        # Hidden from every sandbox (a compile sees its own build dir only, bound back
        # with traversable parents; a run sees its private copy of the executable).
        protect(self.root)
        self.timeout = timeout
        self.fingerprint = backend.fingerprint()
        self._pool = ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1, thread_name_prefix="compile")
        self._lock = threading.Lock()
        self._pending: dict[str, Future] = {}
        self.hits = 0
        self.misses = 0

    def key(self, source: str) -> str:
        return cache_key(source, self.fingerprint)

    def entry_dir(self, key: str) -> Path:
        return self.root / key[:2] / key

    def submit(self, source: str) -> Future:
        """A future CompileOutcome; identical sources share one future."""
        key = self.key(source)
        with self._lock:
            fut = self._pending.get(key)
            if fut is None or (fut.done() and fut.exception() is not None):
                fut = self._pool.submit(self._get_or_build, key, source)
                self._pending[key] = fut
            return fut

    def compile(self, source: str) -> CompileOutcome:
        return self.submit(source).result()

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- internals ---------------------------------------------------------

    def _get_or_build(self, key: str, source: str) -> CompileOutcome:
        entry = self.entry_dir(key)
        cached = _read_entry(entry)
        if cached is not None:
            self._count(hit=True)
            return cached
        entry.parent.mkdir(parents=True, exist_ok=True)
        with open(entry.parent / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building the same key
            cached = _read_entry(entry)
            if cached is not None:
                self._count(hit=True)
                return cached
            self._count(hit=False)
            return self._build(entry, source)

    def _count(self, hit: bool) -> None:
        with self._lock:
            if hit:
                self.hits += 1
            else:
                self.misses += 1

    def _build(self, entry: Path, source: str) -> CompileOutcome:
        workdir = Path(tempfile.mkdtemp(prefix="build-", dir=entry.parent))
        try:
            outcome = self.backend.compile(source, workdir, self.timeout)
        except Exception:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        if outcome.step.timed_out:  # load-dependent: do not cache
            shutil.rmtree(workdir, ignore_errors=True)
            return CompileOutcome(False, None, outcome.step, outcome.status or Status.TIMEOUT, outcome.detail)
        if not outcome.ok and (outcome.step.limit or (outcome.step.returncode or 0) < 0):
            # Stopped by a limit or a signal: the outcome depends on the configured limits
            # (not in the key) and the machine, not on the source alone; do not cache it.
            shutil.rmtree(workdir, ignore_errors=True)
            return outcome
        rel = None
        if outcome.ok:
            if outcome.executable is None:
                raise RuntimeError(f"{type(self.backend).__name__}.compile returned ok without an executable")
            rel = os.path.relpath(Path(outcome.executable).resolve(), workdir.resolve())
            if rel.startswith(".."):
                raise RuntimeError(f"{type(self.backend).__name__}.compile put the executable outside its workdir: "
                                   f"{outcome.executable}")
        meta = {"ok": outcome.ok, "executable": rel, "step": asdict(outcome.step),
                "status": outcome.status.value if outcome.status else None, "detail": outcome.detail}
        (workdir / "outcome.json").write_text(json.dumps(meta))
        os.chmod(workdir, 0o755)
        try:
            os.rename(workdir, entry)
        except OSError:  # a racing writer got there first; theirs is equivalent
            shutil.rmtree(workdir, ignore_errors=True)
        return _read_entry(entry) or outcome


def _read_entry(entry: Path) -> CompileOutcome | None:
    try:
        meta = json.loads((entry / "outcome.json").read_text())
    except (OSError, ValueError):
        return None
    exe = entry / meta["executable"] if meta.get("executable") else None
    if meta["ok"] and (exe is None or not exe.exists()):
        return None
    status = Status(meta["status"]) if meta.get("status") else None
    return CompileOutcome(meta["ok"], exe, StepResult(**meta["step"]), status, meta.get("detail", ""))
