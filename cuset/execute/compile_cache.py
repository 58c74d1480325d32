"""Content-addressed compile cache shared by every evaluation worker.

key = sha256(source + backend.fingerprint()), the fingerprint holding the
compiler version and flags, so a changed toolchain never reuses stale binaries.
Layout: <root>/<key[:2]>/<key>/ holds the backend's build directory (the
executable plus whatever the backend left next to it) and `outcome.json`.

Each entry's `outcome.json` holds the sha256 of its executable; an entry whose
executable does not match it (changed after it was built, a link, gone) or that has no
outcome.json (a directory nobody published) is no entry: it is discarded and built
again. Only the evaluating process writes under the root (hidden from every sandbox);
the digest catches what changes an entry after that (a build's process that outlived
its step, a damaged disk), and `CompileOutcome.digest` lets a caller check the copy it
hands a program (cuset.execute.kernelbench.extension_cache).

Identical sources compile once: within a process, concurrent requests for one
key wait on the same future; across processes an flock on `<key>.lock`
serialises the build and the loser reads the winner's entry. Compile errors are
cached too (they are deterministic); timeouts are not (they depend on load).
Compiles run on a pool of `workers` threads (default: one per core), each of
which drives one compiler subprocess: the real work happens in processes.

Size budget (`max_bytes`): after each new entry, while the cache holds more, the
entries used least recently go, however recently that was (a hit marks an entry used;
removal renames it away first, so a reader never sees half of one). Only entries in
use are kept: each one handed out by `submit` is *pinned* (a shared flock on its
`outcome.json`, which `evict` must take exclusively, without waiting, to remove it)
until the caller `release`s it or the cache closes, in this process or any other. That
matters: an evaluation copies the executable into each run dir for every case, order
and robust case of its sample, so an entry evicted meanwhile would fail an honest
sample. The cache exceeds its budget only by what is pinned right now (the samples in
flight), logged once.

Entry size cap (`max_entry_bytes`): a build whose directory holds more is not stored. A
compile that failed keeps its `outcome.json` only (failures are deterministic); one that
succeeded stays in its private staging dir, the executable of this process's requests
for that source until they release it (then it is removed, and a later request builds
again).
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
from cuset.execute.untrusted_files import UnsafeOutput, open_output, read_bounded, read_digest, write_new

log = logging.getLogger(__name__)
DEFAULT_MAX_BYTES = 20 << 30     # a compile cache's size budget (EvalConfig.compile_cache_gb)
DEFAULT_MAX_ENTRY_BYTES = 256 << 20   # larger builds are not stored (EvalConfig.compile_cache_entry_mb)
OUTCOME = "outcome.json"         # its mtime: when the entry was last used; its flock: who uses it
LOOKUPS = 8                      # evictions racing one lookup before it gives up
OUTCOME_LIMIT = 1 << 20          # bytes: an outcome holds two logs of LOG_LIMIT characters and a few fields


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
                 timeout: float = 120.0, max_bytes: int | None = DEFAULT_MAX_BYTES,
                 max_entry_bytes: int | None = DEFAULT_MAX_ENTRY_BYTES):
        self.backend = backend
        self.max_bytes = max_bytes   # None: no budget
        self.max_entry_bytes = max_entry_bytes   # None: every build is stored
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
        self._lock = threading.RLock()   # re-entered: submit pins under it
        self._pending: dict[str, tuple[Future, float | None]] = {}   # key -> (future, its deadline)
        self._uses: dict[str, int] = {}        # key -> hand-outs not released yet
        self._pins: dict[str, int] = {}        # key -> fd of its outcome.json holding LOCK_SH
        self._unstored: dict[str, list[Path]] = {}   # key -> staging dirs of builds over max_entry_bytes
        self.hits = 0
        self.misses = 0

    def key(self, source: str) -> str:
        return cache_key(source, self.fingerprint)

    def entry_dir(self, key: str) -> Path:
        return self.root / key[:2] / key

    def submit(self, source: str, deadline: float | None = None) -> Future:
        """A future CompileOutcome; identical sources share one future. `deadline` (a
        time.monotonic() value): the build is stopped then (a timeout, not cached), or not
        started when it has passed; a request never shares a build stopped earlier than its own.

        The entry stays pinned (never evicted) until `release(source)` or `close()`."""
        key = self.key(source)
        with self._lock:
            self._uses[key] = self._uses.get(key, 0) + 1
            fut, other = self._pending.get(key, (None, None))
            if fut is not None and not fut.done() and other is not None and (deadline is None or other < deadline):
                fut = None   # another sample's build with less time: ours waits on the entry lock, then looks again
            if fut is not None and fut.done():
                outcome = fut.result() if fut.exception() is None else None
                if outcome is None or (outcome.executable is not None and not Path(outcome.executable).exists()) \
                        or (key not in self._unstored and not self._pin(key)):
                    fut = None   # failed, or its entry was evicted since: look again
                else:
                    mark_used(self.entry_dir(key))
                    self.hits += 1   # (under self._lock already)
                    hit = Future()   # this request's outcome: read from the cache, no compiler ran for it
                    hit.set_result(dataclasses.replace(outcome, built=False))
                    return hit
            if fut is None:
                fut = self._pool.submit(self._get_or_build, key, source, deadline)
                self._pending[key] = (fut, deadline)
            return fut

    def compile(self, source: str) -> CompileOutcome:
        """`submit(source).result()`: the entry stays pinned until `release` or `close`."""
        return self.submit(source).result()

    def release(self, source: str) -> None:
        """One `submit(source)`'s use is over: when no other is left, the entry may be
        evicted again (and a build too large to store is removed)."""
        key = self.key(source)
        with self._lock:
            left = self._uses.get(key, 0) - 1
            if left > 0:
                self._uses[key] = left
                return
            self._uses.pop(key, None)
            self._unpin_locked(key)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        with self._lock:
            for key in list(self._pins) + list(self._unstored):
                self._unpin_locked(key)
            self._uses.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- internals ---------------------------------------------------------

    def _get_or_build(self, key: str, source: str, deadline: float | None = None) -> CompileOutcome:
        entry = self.entry_dir(key)
        for _ in range(LOOKUPS):   # an entry evicted between reading and pinning it is looked up again
            cached = _read_entry(entry)
            if cached is not None and self._pin(key):
                self._count(hit=True)
                mark_used(entry)
                return cached
            with entry_lock(entry):  # another process may be building the same key
                cached = _read_entry(entry)
                if cached is None:
                    if os.path.lexists(entry):   # unreadable, or its executable is not the one built: not ours
                        log.warning("compile cache: entry %s does not match its outcome.json; discarded, built "
                                    "again", entry)
                        discard_entry(entry)
                    self._count(hit=False)
                    outcome = self._build(entry, source, deadline)
                    if not outcome.ok or key in self._unstored or self._pin(key):
                        break   # pinned before `evict` below can see it (or not stored at all)
                    continue
            if self._pin(key):
                self._count(hit=True)
                return cached
        else:   # readable but never pinnable: a defect, never a loop that holds the run
            raise RuntimeError(f"compile cache: entry {entry} could be read but not pinned {LOOKUPS} times in a row")
        if self.max_bytes is not None:
            evict(self.root, self.max_bytes, grace=0.0)
        return outcome

    def _pin(self, key: str) -> bool:
        """Hold this key's entry against eviction while this process has hand-outs of it
        not released; False when the entry is gone (evicted meanwhile)."""
        with self._lock:
            if key in self._pins:
                return True
            if self._uses.get(key, 0) <= 0:
                return True   # released before the build finished: nothing to hold
            fd = pin_entry(self.entry_dir(key))
            if fd is None:
                return False
            self._pins[key] = fd
            return True

    def _unpin_locked(self, key: str) -> None:
        fd = self._pins.pop(key, None)
        if fd is not None:
            os.close(fd)
        for unstored in self._unstored.pop(key, ()):
            shutil.rmtree(unstored, ignore_errors=True)

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
        rel = digest = None
        if outcome.ok:
            if outcome.executable is None:
                raise RuntimeError(f"{type(self.backend).__name__}.compile returned ok without an executable")
            rel = os.path.relpath(Path(outcome.executable).resolve(), workdir.resolve())
            if rel.startswith(".."):
                raise RuntimeError(f"{type(self.backend).__name__}.compile put the executable outside its workdir: "
                                   f"{outcome.executable}")
            digest = file_digest(workdir, rel)
            if digest is None:
                raise RuntimeError(f"{type(self.backend).__name__}.compile returned an executable that is not a "
                                   f"regular file: {outcome.executable}")
            outcome = dataclasses.replace(outcome, digest=digest)
        meta = {"ok": outcome.ok, "executable": rel, "sha256": digest, "step": asdict(outcome.step),
                "status": outcome.status.value if outcome.status else None, "detail": outcome.detail}
        # the build ran in workdir and may have left anything at this name (a link to a host
        # file the parent would write through, and read back as the entry's verdict)
        write_new(workdir, OUTCOME, json.dumps(meta).encode())
        os.chmod(workdir, 0o755)
        size = _tree_bytes(workdir)
        if self.max_entry_bytes is not None and size > self.max_entry_bytes:
            warn_entry_too_large(self.root, size, self.max_entry_bytes)
            if outcome.ok:   # this process's requests use it from the staging dir; never stored
                with self._lock:
                    self._unstored.setdefault(entry.name, []).append(workdir)
                    if self._uses.get(entry.name, 0) <= 0:   # every request released it already
                        self._unpin_locked(entry.name)
                return outcome
            _keep_only(workdir, OUTCOME)   # a failure's verdict is all a later request needs
        publish(workdir, entry)
        cached = _read_entry(entry)
        return outcome if cached is None else dataclasses.replace(cached, built=True)


def _read_entry(entry: Path) -> CompileOutcome | None:
    """The entry's outcome; None when there is none, or when its executable is not the regular
    file whose sha256 outcome.json names (an entry written before digests were kept included)."""
    try:
        raw = read_bounded(entry, OUTCOME, OUTCOME_LIMIT)   # never through a link
        if raw is None:
            return None
        meta = json.loads(raw)
        exe = entry / meta["executable"] if meta.get("executable") else None
        digest = meta.get("sha256") if meta["ok"] else None
        if meta["ok"] and (exe is None or not digest or file_digest(entry, meta["executable"]) != digest):
            return None
        status = Status(meta["status"]) if meta.get("status") else None
        return CompileOutcome(meta["ok"], exe, StepResult(**meta["step"]), status, meta.get("detail", ""),
                              digest=digest)
    except (OSError, ValueError, KeyError, TypeError, UnsafeOutput):
        return None


def file_digest(root: Path, rel: str) -> str | None:
    """sha256 of root/rel, read without following links (the careful reader); None when it is
    missing, a link or not a regular file."""
    try:
        fd, st = open_output(Path(root), rel, None)
    except (OSError, ValueError, UnsafeOutput):
        return None
    try:
        return read_digest(fd, st.st_size)
    finally:
        os.close(fd)


def pin_entry(entry: Path, marker: str = OUTCOME) -> int | None:
    """An fd holding a shared flock on the entry's marker, which `evict` cannot remove
    while it is held (by this process or any other); None when the entry is gone. The
    marker checked again after locking: an entry evicted meanwhile was renamed away."""
    path = entry / marker
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)   # waits only while an evictor removes it
        if os.fstat(fd).st_ino == os.stat(path, follow_symlinks=False).st_ino:
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _keep_only(directory: Path, name: str) -> None:
    for child in directory.iterdir():
        if child.name != name:
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()


def mark_used(entry: Path, marker: str = OUTCOME) -> None:
    try:
        os.utime(entry / marker, follow_symlinks=False)
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
          grace: float = 0.0) -> list[str]:
    """Remove the least recently used entries under `root` until it holds at most
    `max_bytes`; returns the removed keys. An entry pinned (`pin_entry`, by any process)
    stays, and so does one used within `grace` seconds. `marker`: the file in each entry
    whose mtime says when it was last used."""
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
                warn_over_budget(root, total, max_bytes, f"all of it used within the last {grace / 60:.0f} min")
                break
            if not _discard_unpinned(entry, marker):
                continue
            total -= size
            removed.append(entry.name)
        if total > max_bytes:
            warn_over_budget(root, total, max_bytes, "what is left is in use")
        return removed


def _discard_unpinned(entry: Path, marker: str) -> bool:
    """Remove `entry` unless someone holds a pin on it (see `pin_entry`); the exclusive
    lock is held across the removal, so a pin taken meanwhile finds the entry gone."""
    try:
        fd = os.open(entry / marker, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False   # pinned: in use
    try:
        return discard_entry(entry)
    finally:
        os.close(fd)


def _dirs(path: Path) -> list[Path]:
    try:
        return [Path(e.path) for e in os.scandir(path) if e.is_dir(follow_symlinks=False)
                and not e.name.startswith((".evicted-", "build-"))]
    except OSError:
        return []


def warn_over_budget(root: Path, total: int, max_bytes: int, why: str) -> None:
    if not getattr(warn_over_budget, "said", False):
        warn_over_budget.said = True
        log.warning("cache %s holds %.1f GiB, over its budget of %.1f GiB: %s", root, total / (1 << 30),
                    max_bytes / (1 << 30), why)


def warn_entry_too_large(root: Path, size: int, max_entry_bytes: int) -> None:
    if not getattr(warn_entry_too_large, "said", False):
        warn_entry_too_large.said = True
        log.warning("compile cache %s: a build of %.0f MiB is over the %.0f MiB an entry may hold; not stored "
                    "(compile_cache_entry_mb)", root, size / (1 << 20), max_entry_bytes / (1 << 20))
