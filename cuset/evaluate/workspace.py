"""Private directories of an evaluation, and each task's generated data.

    <root>/            0711: the sandbox uid may pass through, never list
      data/<key>/      0700: gen.py's private dir (inputs AND references), one per
                       (gen.py, case); cached so every sample of a task reuses it
      runs/<id>/       a fresh dir per program run: data/ holds copies of the inputs only
      compare/<id>/    copies of a run's outputs next to links to the references

The data dir can live in a persistent cache (`data_root`) so a re-run skips
gen.py; it is keyed on sha256(gen.py source + case + declared inputs).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import stat
import tempfile
import threading
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from cuset.execute import disk_quota
from cuset.execute.untrusted_files import copy_output, remove_tree
from cuset.evaluate import devicemap
from cuset.execute.result import StepResult
from cuset.execute.sandbox import protect, warn_once
from cuset.tasks import Task


@dataclass(frozen=True)
class PreparedData:
    """gen.py's output for one (task, case): `data_dir` holds inputs and references."""

    data_dir: Path
    step: StepResult
    problem: str | None = None   # why the task's own data is unusable (gen.py failed, input missing)

    def input_path(self, name: str) -> Path:
        return self.data_dir / "data" / f"{name}.bin"


def data_key(task: Task, case: int) -> str:
    h = hashlib.sha256()
    h.update(task.gen_py.encode())
    h.update(f"\0case={case}\0".encode())
    h.update(json.dumps([t.to_json() for t in task.inputs]).encode())
    return h.hexdigest()


class Workspace:
    def __init__(self, root: str | Path | None = None, *, parent: str | Path | None = None,
                 data_root: str | Path | None = None, keep: bool = False, gen_timeout: float = 300.0,
                 python_preload: tuple[str, ...] | None = ("numpy",), script_sandbox=None, cuda_to_cpu: bool = True):
        """root=None: a new temporary dir (under `parent` if given), removed by close().

        python_preload: modules a warm fork server imports once for gen.py and
        compare.py (see pyrunner); None runs each script in a fresh interpreter.
        script_sandbox: a `SandboxPolicy` for the task's scripts (gen.py and compare.py) when
        they are untrusted (a third-party tasks file, or written by a model as in data
        curation): each runs in a fresh interpreter in the sandbox, seeing its own dir only
        (compare.py: copies of gen.py's references and the outputs, never the data cache's
        files); None runs them as trusted scripts of our own (fork server, no sandbox).
        cuda_to_cpu: gen.py/compare.py's torch CUDA device requests run on the CPU when
        no GPU answers (see `cuset.evaluate.devicemap`)."""
        self._owned = root is None
        self._mounted = False  # runs/ made a private mount (unmounted by close(), also for a root we do not own)
        self._lock_fd: int | None = None
        self.cleanup_errors: list[str] = []   # what discard()/close() could not remove
        if root is None:
            if parent is not None:
                Path(parent).mkdir(parents=True, exist_ok=True)
            # Workspaces of killed evaluations (SIGKILL, power loss) go now; live ones stay.
            self.cleanup_errors.extend(remove_stale_workspaces(Path(parent or tempfile.gettempdir())))
            root = tempfile.mkdtemp(prefix=WORKSPACE_PREFIX, dir=parent)
            self._lock_fd = _take_owner_lock(Path(root))
        self.root = Path(root).resolve()
        self.keep = keep
        self.gen_timeout = gen_timeout
        for sub in ("runs", "compare"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.data_root = Path(data_root).resolve() if data_root else self.root / "data"
        self.data_root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o711)
        os.chmod(self.data_root, 0o700)
        os.chmod(self.root / "compare", 0o700)
        os.chmod(self.root / "runs", 0o711)
        # No sandboxed step of this process (compile or run, any sample) may name these.
        protect(self.root, self.data_root)
        self._locks: dict[str, threading.Lock] = {}
        self._prepared: dict[str, PreparedData] = {}
        # compare.py verdicts by (data dir, compare.py hash, outputs digest, compat): see cudabench._judge.
        self.verdicts: dict[tuple, tuple] = {}
        self._guard = threading.Lock()
        self._preload = python_preload
        self._server = None
        self.script_sandbox = script_sandbox
        self.script_env = devicemap.env() if cuda_to_cpu else {}
        # what a sandboxed script sees besides its dir: the devicemap's sitecustomize
        self.script_readonly = (devicemap.DIRECTORY,) if cuda_to_cpu else ()

    def python_server(self):
        """The fork server for trusted task scripts, started on first use; None if disabled
        (or when the scripts run sandboxed: a fork of it would run outside the sandbox)."""
        if self._preload is None or self.script_sandbox is not None:
            return None
        with self._guard:
            if self._server is None:
                from cuset.execute.pyrunner import PyForkServer

                self._server = PyForkServer(tuple(self._preload))
            return self._server

    def run_script(self, name: str, cwd: Path, script: str, timeout: float, env: dict[str, str]) -> StepResult:
        """A task script (gen.py, compare.py) in `cwd`: sandboxed when `script_sandbox` says so."""
        if self.script_sandbox is not None:
            return self._run_sandboxed_script(name, cwd, script, timeout, env)
        from cuset.execute.pyrunner import run_script

        return run_script(name, script, cwd=cwd, timeout=timeout, extra_env={**self.script_env, **env},
                          server=self.python_server())

    def _run_sandboxed_script(self, name: str, cwd: Path, script: str, timeout: float,
                              env: dict[str, str]) -> StepResult:
        import dataclasses
        import math
        import sys

        from cuset.execute.sandbox import run_sandboxed

        # A fresh interpreter inside the sandbox, seeing nothing of ours but its own dir
        # (no fork server: its forks would run outside the sandbox).
        base = self.script_sandbox
        policy = dataclasses.replace(base, hide=tuple(dict.fromkeys((*base.hide, *self.hidden_paths))),
                                     cpu_seconds=base.cpu_seconds or math.ceil(timeout) + 5)
        step = run_sandboxed(name, [sys.executable, script], run_dir=cwd, timeout=timeout, policy=policy,
                             env={**self.script_env, **env}, readonly=self.script_readonly)
        _reclaim(cwd)
        return step

    @property
    def hidden_paths(self) -> tuple[str, ...]:
        """What a sandboxed program must not see: everything of ours."""
        return tuple(dict.fromkeys([str(self.root), str(self.data_root)]))

    # -- gen.py ------------------------------------------------------------

    def prepare(self, task: Task, case: int = 0) -> PreparedData:
        """Run gen.py once per (gen.py, case), here or in an earlier run; thread-safe."""
        key = data_key(task, case)
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._prepared:
                return self._prepared[key]
            prepared = self._prepare_locked(task, case, key)
            self._prepared[key] = prepared
            return prepared

    def _prepare_locked(self, task: Task, case: int, key: str) -> PreparedData:
        final = self.data_root / key
        with open(self.data_root / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another evaluation may share this data cache
            done = _read_prepared(final)
            if done is not None:
                return done
            tmp = Path(tempfile.mkdtemp(prefix="gen-", dir=self.data_root))
            (tmp / "data").mkdir()
            (tmp / "gen.py").write_text(task.gen_py, encoding="utf-8")
            step = self.run_script(f"gen[case={case}]", tmp, "gen.py", self.gen_timeout, {"CUSET_CASE": str(case)})
            problem = _gen_problem(task, tmp, step, self.gen_timeout) or (
                _unsafe_entry(tmp) if self.script_sandbox is not None else None)
            if problem is not None:  # keep failures out of the persistent cache
                self.cleanup_errors.extend(remove_tree(tmp))
                return PreparedData(final, step, problem)
            (tmp / "gen.json").write_text(json.dumps(asdict(step)))
            os.rename(tmp, final)
            return PreparedData(final, step)

    # -- run and compare dirs ----------------------------------------------

    def new_run_dir(self, prepared: PreparedData, task: Task, quota_bytes: int | None = None) -> Path:
        """A fresh dir whose data/ holds copies of the declared inputs and nothing else;
        with `quota_bytes`, its own tmpfs of that size (where mounting works, see
        cuset.execute.disk_quota) on top of the inputs' size."""
        run = self.root / "runs" / uuid.uuid4().hex
        run.mkdir()
        if quota_bytes is not None:
            if disk_quota.unavailable() is None:
                self.runs_dir()
                disk_quota.mount_tmpfs(run, quota_bytes + sum(s.nbytes for s in task.inputs))
            else:
                warn_once(f"no disk quota for run dirs ({disk_quota.unavailable()}): only RLIMIT_FSIZE per file")
        (run / "data").mkdir()
        for spec in task.inputs:
            shutil.copyfile(prepared.input_path(spec.name), run / "data" / f"{spec.name}.bin")
        return run

    def runs_dir(self) -> Path:
        """Where run dirs go (also a KernelBench verification's own run root): traversable by
        the sandbox uids, listable by none; a private mount where run dirs get disk quotas
        (see cuset.execute.disk_quota.isolate), so their mounts never reach a starting sandbox."""
        runs = self.root / "runs"
        if disk_quota.unavailable() is None:
            with self._guard:
                disk_quota.isolate(runs)
                self._mounted = True
        return runs

    def new_compare_dir(self, prepared: PreparedData, outputs: dict[str, Path], compare_py: str) -> Path:
        """References (hard links, else copies) + copies of the program's outputs + compare.py."""
        cmp = self.root / "compare" / uuid.uuid4().hex
        (cmp / "data").mkdir(parents=True)
        for ref in (prepared.data_dir / "data").iterdir():
            if self.script_sandbox is None:
                _link_or_copy(ref, cmp / "data" / ref.name)
            else:   # the sandbox owns its dir: a link would hand it the data cache's file
                copy_output(ref.parent, ref.name, None, cmp / "data" / ref.name)
        for name, path in outputs.items():
            target = cmp / "data" / f"{name}.bin"
            if target.exists():
                target.unlink()
            # The careful path: no link is followed, no more than the checked size read.
            copy_output(path.parent.parent, f"{path.parent.name}/{path.name}", None, target)
        (cmp / "compare.py").write_text(compare_py, encoding="utf-8")
        return cmp

    def discard(self, path: Path) -> None:
        """Remove a run or compare dir; never raises (what could not be removed is
        recorded in `cleanup_errors`, and the evaluation goes on)."""
        if self.keep:
            return
        if disk_quota.is_mounted(path):
            disk_quota.unmount(path)
        errors = remove_tree(path)
        if errors:
            with self._guard:
                self.cleanup_errors.extend(errors)

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if (self._owned or self._mounted) and not self.keep:
            _unmount_runs(self.root)
            self._mounted = False
        if self._owned and not self.keep:
            self.cleanup_errors.extend(remove_tree(self.root))
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


WORKSPACE_PREFIX = "cuset-eval-"
OWNER_LOCK = ".owner.lock"


def _take_owner_lock(root: Path) -> int:
    """Hold an exclusive flock on root/.owner.lock for the workspace's life. The file is
    locked under another name first and then renamed, so no other evaluation can ever
    find it unlocked while we live."""
    tmp = root / f"{OWNER_LOCK}.{os.getpid()}"
    fd = os.open(tmp, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.rename(tmp, root / OWNER_LOCK)
    return fd


def remove_stale_workspaces(parent: Path) -> list[str]:
    """Remove every workspace under `parent` whose owner lock nobody holds (its
    evaluation died without cleaning up). A workspace without the lock file (older
    versions, or one being created this instant) is left alone. Returns what could not
    be removed."""
    errors: list[str] = []
    for ws in _listdir(parent):
        if not ws.name.startswith(WORKSPACE_PREFIX):
            continue
        try:
            fd = os.open(ws / OWNER_LOCK, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue          # its owner lives
        try:
            _unmount_runs(ws)
            errors.extend(remove_tree(ws))
        finally:
            os.close(fd)
    return errors


def _unmount_runs(root: Path) -> None:
    """Unmount the run dirs' quotas (some may be left by an interrupted run), then the
    private mount holding them (see `disk_quota.isolate`)."""
    for run in _listdir(root / "runs"):
        if disk_quota.is_mounted(run):
            disk_quota.unmount(run)
    if disk_quota.is_mounted(root / "runs"):
        disk_quota.unmount(root / "runs")


def _listdir(path: Path) -> list[Path]:
    try:
        return sorted(path.iterdir())
    except OSError:
        return []


def _read_prepared(final: Path) -> PreparedData | None:
    try:
        step = StepResult(**json.loads((final / "gen.json").read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return PreparedData(final, step)


def _gen_problem(task: Task, gen_dir: Path, step: StepResult, timeout: float) -> str | None:
    if step.timed_out:
        return f"gen.py did not finish in {timeout:g} s"
    if step.returncode != 0:
        tail = (step.stderr or step.stdout).strip().splitlines()[-1:] or ["no output"]
        return f"gen.py failed (exit {step.returncode}): {tail[0][:300]}"
    for spec in task.inputs:
        path = gen_dir / "data" / f"{spec.name}.bin"
        try:  # lstat: an (untrusted) gen.py's link to /dev/zero must not be copied later
            st = os.lstat(path)
        except FileNotFoundError:
            return f"gen.py did not write declared input data/{spec.name}.bin"
        if not stat.S_ISREG(st.st_mode) or os.path.islink(gen_dir / "data"):
            return f"gen.py's data/{spec.name}.bin is not a regular file"
        if st.st_size != spec.nbytes:
            return (f"gen.py wrote {st.st_size} bytes to data/{spec.name}.bin, declared "
                    f"{spec.dtype} {spec.shape} = {spec.nbytes} bytes")
    return None


def _unsafe_entry(gen_dir: Path) -> str | None:
    """Why gen.py's dir may not be kept: an entry other than a regular file or a dir (a
    link made by an untrusted gen.py would make a later copy read a host file)."""
    for root, dirs, files in os.walk(gen_dir):
        for name in (*dirs, *files):
            st = os.lstat(os.path.join(root, name))
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                rel = os.path.relpath(os.path.join(root, name), gen_dir)
                return f"gen.py left {rel}, which is neither a regular file nor a directory"
    return None


def _reclaim(path: Path) -> None:
    """Give a sandboxed script's dir back to the evaluating user: nothing kept (the data
    cache above all) stays owned by a throw-away uid that a later sandbox may get again."""
    if os.geteuid() != 0:
        return
    uid, gid = os.getuid(), os.getgid()
    for root, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            os.lchown(os.path.join(root, name), uid, gid)
    os.chown(path, uid, gid)


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
