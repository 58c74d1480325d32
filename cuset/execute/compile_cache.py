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

Size budget (`max_bytes`): after each new entry, while the cache holds more, the
entries used least recently go (a hit marks an entry used; removal renames it away
first, so a reader never sees half of one). An entry used within GRACE_SECONDS is
never removed (an evaluation may still copy its executable), so the cache can exceed
its budget for a while when everything in it is that recent (logged once).
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import logging
import os
import time
import shutil
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from cuset.cachedir import cache_root
from cuset.execute.interface import Backend, CompileOutcome
from cuset.execute.result import Status, StepResult
from cuset.execute.sandbox import protect

log = logging.getLogger(__name__)
DEFAULT_MAX_BYTES = 20 << 30     # a compile cache's size budget (EvalConfig.compile_cache_gb)
GRACE_SECONDS = 3600.0           # an entry used this recently is never evicted
OUTCOME = "outcome.json"         # its mtime: when the entry was last used


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
                 timeout: float = 120.0, max_bytes: int | None = DEFAULT_MAX_BYTES):
        self.backend = backend
        self.max_bytes = max_bytes   # None: no budget
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
        self._pending: dict[str, tuple[Future, float | None]] = {}   # key -> (future, its deadline)
        self.hits = 0
        self.misses = 0

    def key(self, source: str) -> str:
        return cache_key(source, self.fingerprint)

    def entry_dir(self, key: str) -> Path:
        return self.root / key[:2] / key

    def submit(self, source: str, deadline: float | None = None) -> Future:
        """A future CompileOutcome; identical sources share one future. `deadline` (a
        time.monotonic() value): the build is stopped then (a timeout, not cached), or not
        started when it has passed; a request never shares a build stopped earlier than its own."""
        key = self.key(source)
        with self._lock:
            fut, other = self._pending.get(key, (None, None))
            if fut is not None and not fut.done() and other is not None and (deadline is None or other < deadline):
                fut = None   # another sample's build with less time: ours waits on the entry lock, then looks again
            if fut is not None and fut.done():
                outcome = fut.result() if fut.exception() is None else None
                if outcome is None or (outcome.executable is not None and not Path(outcome.executable).exists()):
                    fut = None   # failed, or its entry was evicted since: look again
                else:
                    mark_used(self.entry_dir(key))
            if fut is None:
                fut = self._pool.submit(self._get_or_build, key, source, deadline)
                self._pending[key] = (fut, deadline)
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

    def _get_or_build(self, key: str, source: str, deadline: float | None = None) -> CompileOutcome:
        entry = self.entry_dir(key)
        cached = _read_entry(entry)
        if cached is not None:
            self._count(hit=True)
            mark_used(entry)
            return cached
        with entry_lock(entry):  # another process may be building the same key
            cached = _read_entry(entry)
            if cached is not None:
                self._count(hit=True)
                return cached
            self._count(hit=False)
            outcome = self._build(entry, source, deadline)
        if self.max_bytes is not None:
            evict(self.root, self.max_bytes)
        return outcome

    def _count(self, hit: bool) -> None:
        with self._lock:
            if hit:
                self.hits += 1
            else:
                self.misses += 1

    def _build(self, entry: Path, source: str, deadline: float | None = None) -> CompileOutcome:
        timeout = self.timeout if deadline is None else min(self.timeout, deadline - time.monotonic())
        if timeout <= 0:
            detail = "not started: the time allowed for it had passed"
            return CompileOutcome(False, None, StepResult("compile", None, 0.0, True, "", detail),
                                  Status.COMPILE_ERROR, detail)
        workdir = staging_dir(entry)
        try:
            outcome = dataclasses.replace(self.backend.compile(source, workdir, timeout), built=True)
        except Exception:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        if outcome.step.timed_out:  # load-dependent: do not cache
            shutil.rmtree(workdir, ignore_errors=True)
            return dataclasses.replace(outcome, ok=False, executable=None, status=outcome.status or Status.TIMEOUT)
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
        (workdir / OUTCOME).write_text(json.dumps(meta))
        os.chmod(workdir, 0o755)
        publish(workdir, entry)
        cached = _read_entry(entry)
        return outcome if cached is None else dataclasses.replace(cached, built=True)


def _read_entry(entry: Path) -> CompileOutcome | None:
    try:
        meta = json.loads((entry / OUTCOME).read_text())
    except (OSError, ValueError):
        return None
    exe = entry / meta["executable"] if meta.get("executable") else None
    if meta["ok"] and (exe is None or not exe.exists()):
        return None
    status = Status(meta["status"]) if meta.get("status") else None
    return CompileOutcome(meta["ok"], exe, StepResult(**meta["step"]), status, meta.get("detail", ""))


def mark_used(entry: Path, marker: str = OUTCOME) -> None:
    try:
        os.utime(entry / marker)
    except OSError:
        pass   # evicted meanwhile: the caller's outcome is still whole (it was read)


# -- the entry helpers every cache under the cache root shares (the KernelBench
# -- reference store too): <root>/<key[:2]>/<key>/, one marker file per entry whose
# -- mtime says when it was last used.

@contextmanager
def entry_lock(entry: Path):
    """An flock on `<entry>.lock` next to the entry: one writer per key across processes
    (and threads: each holder opens the file itself). Held while the entry is made."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    with open(entry.parent / f"{entry.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def staging_dir(entry: Path) -> Path:
    """A fresh directory beside `entry` to fill before `publish` (its `build-` prefix keeps
    it out of `evict`'s listing)."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="build-", dir=entry.parent))


def publish(staging: Path, entry: Path) -> bool:
    """Make the filled `staging` dir the entry in one rename (a reader sees all of it or
    none); False, and `staging` removed, when a racing writer's entry is there already
    (theirs is equivalent: the same key)."""
    try:
        os.rename(staging, entry)
        return True
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        return False


def discard_entry(entry: Path) -> bool:
    """Remove `entry`, renamed away first so no reader sees half of it; False when it was
    not there (another process removed or evicted it)."""
    from cuset.execute.untrusted_files import remove_tree

    doomed = entry.with_name(f".evicted-{entry.name}-{os.getpid()}-{threading.get_ident()}")
    try:
        os.rename(entry, doomed)   # gone for readers at once
    except OSError:
        return False
    remove_tree(doomed)
    return True


def _tree_bytes(path: Path) -> int:
    """Bytes of the regular files under `path` (an entry: a build dir, a few files)."""
    total, stack = 0, [path]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for e in it:
                    if e.is_dir(follow_symlinks=False):
                        stack.append(Path(e.path))
                    elif e.is_file(follow_symlinks=False):
                        total += e.stat(follow_symlinks=False).st_size
        except OSError:
            continue
    return total


_EVICT_LOCK = threading.Lock()


def evict(root: Path, max_bytes: int, now: float | None = None, marker: str = OUTCOME,
          grace: float = GRACE_SECONDS) -> list[str]:
    """Remove the least recently used entries under `root` until it holds at most
    `max_bytes` (entries used within `grace` seconds stay); returns the removed keys.
    `marker`: the file in each entry whose mtime says when it was last used."""
    now = time.time() if now is None else now
    with _EVICT_LOCK:
        entries = []
        for shard in _dirs(root):
            for entry in _dirs(shard):
                try:
                    used = os.stat(entry / marker).st_mtime
                except OSError:
                    continue   # being built, or half removed by another process
                entries.append((used, entry, _tree_bytes(entry)))
        total = sum(size for *_, size in entries)
        removed = []
        for used, entry, size in sorted(entries, key=lambda e: e[0]):
            if total <= max_bytes:
                break
            if now - used < grace:
                warn_over_budget(root, total, max_bytes, grace)
                break
            if not discard_entry(entry):
                continue
            total -= size
            removed.append(entry.name)
        return removed


def _dirs(path: Path) -> list[Path]:
    try:
        return [Path(e.path) for e in os.scandir(path) if e.is_dir(follow_symlinks=False)
                and not e.name.startswith((".evicted-", "build-"))]
    except OSError:
        return []


def warn_over_budget(root: Path, total: int, max_bytes: int, grace: float = GRACE_SECONDS) -> None:
    if not getattr(warn_over_budget, "said", False):
        warn_over_budget.said = True
        log.warning("cache %s holds %.1f GiB, over its budget of %.1f GiB, all of it used within the last "
                    "%.0f min: nothing evicted yet", root, total / (1 << 30), max_bytes / (1 << 30), grace / 60)
