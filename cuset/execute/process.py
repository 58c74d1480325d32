"""Run one pipeline step in its own subprocess: own session/process group, a
wall-clock timeout that kills the whole group, rlimits, a clean environment and
truncated logs. Every step of evaluation (gen.py, compile, run, compare.py) and
of the CPU backend goes through `run_step`; `cuset.execute.sandbox` adds the
isolation for untrusted programs on top of it.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cuset.execute.result import StepResult, truncate_log

# Variables a child may inherit; everything else (tokens, proxies, CUDA_* unless
# set explicitly) is dropped.
BASE_ENV_KEYS = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")


@dataclass(frozen=True)
class Limits:
    """rlimits applied in the child before exec. None leaves a limit unchanged."""

    cpu_seconds: int | None = None
    address_space_bytes: int | None = None   # RLIMIT_AS: not usable with CUDA (it maps huge ranges)
    file_size_bytes: int | None = None       # largest file the child may write
    processes: int | None = None             # RLIMIT_NPROC (per user: a fork-bomb brake)
    open_files: int | None = None
    core_dumps: bool = False

    def apply(self) -> None:
        def setl(which, value):
            if value is not None:
                resource.setrlimit(which, (value, value))
        setl(resource.RLIMIT_CPU, self.cpu_seconds)
        setl(resource.RLIMIT_AS, self.address_space_bytes)
        setl(resource.RLIMIT_FSIZE, self.file_size_bytes)
        setl(resource.RLIMIT_NPROC, self.processes)
        setl(resource.RLIMIT_NOFILE, self.open_files)
        if not self.core_dumps:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def clean_env(extra: dict[str, str] | None = None, keep: tuple[str, ...] = BASE_ENV_KEYS) -> dict[str, str]:
    env = {k: os.environ[k] for k in keep if k in os.environ}
    # One BLAS/OpenMP thread per step: steps already run in parallel.
    env.update({"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"})
    for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # needed for correctness on some CPUs here
        if k in os.environ:
            env[k] = os.environ[k]
    env.update(extra or {})
    return env


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


OUTPUT_LIMIT = 1 << 20   # bytes of a step's stdout, and of its stderr, read


def run_step(
    name: str,
    argv: list[str],
    *,
    cwd: str | Path,
    timeout: float,
    env: dict[str, str] | None = None,
    limits: Limits | None = None,
    pass_fds: tuple[int, ...] = (),
    join: tuple[Path, ...] = (),
) -> StepResult:
    """Run argv to completion or until `timeout` seconds, then kill its process group.
    Its stdin is /dev/null.

    stdout/stderr are read in full up to OUTPUT_LIMIT bytes each (a program that
    floods stdout is cut off, not buffered without bound) and truncated for the log.
    `pass_fds` stay open in the child (e.g. a seccomp program for bwrap, the CPU
    runtime's diagnostics file); the child writes its pid to each `join` file
    (a cgroup's `cgroup.procs`) before exec, so everything it starts is counted there.
    """
    limits = limits or Limits()

    def preexec():  # runs in the child: new session = new process group
        os.setsid()
        for procs in join:
            with open(procs, "w") as fh:
                fh.write(str(os.getpid()))
        limits.apply()

    start = time.perf_counter()
    try:
        proc = subprocess.Popen(
            argv, cwd=str(cwd), env=env if env is not None else clean_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=preexec, close_fds=True, pass_fds=pass_fds,
        )
    except OSError as e:
        return StepResult(name, None, 0.0, False, "", f"could not start {argv[0]}: {e}")
    out, err, timed_out, cpu = _communicate(proc, timeout, OUTPUT_LIMIT)
    seconds = time.perf_counter() - start
    return StepResult(name, proc.returncode, seconds, timed_out, truncate_log(out), truncate_log(err),
                      cpu_seconds=cpu)


def _communicate(proc: subprocess.Popen, timeout: float, limit: int):
    """Like Popen.communicate, but bounded in bytes kept and killing the group on timeout."""
    import selectors

    bufs = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    sel = selectors.DefaultSelector()
    for f in bufs:
        sel.register(f, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    timed_out = False
    while sel.get_map():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        for key, _ in sel.select(min(remaining, 0.5)):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                continue
            buf = bufs[key.fileobj]
            if len(buf) < limit:
                buf.extend(chunk[: limit - len(buf)])
    sel.close()
    cpu = None
    if timed_out:
        _kill_group(proc)
    else:
        # The direct child closed its pipes; wait for it, bounded by what is left.
        cpu = _reap(proc, max(0.1, deadline - time.monotonic()))
        if proc.returncode is None:
            timed_out = True
            _kill_group(proc)
    if proc.returncode is None:
        cpu = _reap(proc, None)
    # Orphans of a finished child (e.g. a daemonised fork) die with the group too.
    _kill_group(proc)
    for f in bufs:
        f.close()
    return bytes(bufs[proc.stdout]), bytes(bufs[proc.stderr]), timed_out, cpu


def _reap(proc: subprocess.Popen, timeout: float | None) -> float | None:
    """Wait for `proc` (at most `timeout` seconds; None: until it ends) and reap it with
    wait4: its CPU seconds (user + system) include every descendant it waited for (a
    compiler driver's cc1plus and as; bwrap's whole namespace). None while it still runs,
    or when it was reaped elsewhere (then only its exit status is known)."""
    end = None if timeout is None else time.monotonic() + timeout
    while True:
        try:
            pid, status, usage = os.wait4(proc.pid, 0 if end is None else os.WNOHANG)
        except ChildProcessError:   # reaped by someone else: Popen knows its status
            proc.wait()
            return None
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return usage.ru_utime + usage.ru_stime
        if time.monotonic() >= end:
            return None
        time.sleep(0.01)
