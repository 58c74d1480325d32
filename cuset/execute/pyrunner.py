"""Run the task's Python scripts (gen.py, compare.py) fast, each still in its own process.

Starting Python and importing numpy costs 0.2-0.7 s on a small machine, more than
the scripts themselves. `PyForkServer` keeps one warm interpreter with the common
modules imported; every script runs in a *fork* of it: its own process, its own
session (so its process group is killed on timeout), its own cwd, environment and
stdout/stderr files, and a pristine module state (the fork happens before any
script code runs). The server is single-threaded (fork-safe): it multiplexes
requests on stdin and child exits on pidfds.

`run_script` falls back to a plain `python script.py` subprocess when no server is
given, so behaviour is the same either way, only slower.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path

from cuset.execute.process import Limits, clean_env, run_step
from cuset.execute.result import StepResult, truncate_log

SERVER_CODE = r'''
import json, os, selectors, sys, traceback
for _m in MODULES:
    try:
        __import__(_m)
    except Exception:
        pass
sel = selectors.DefaultSelector()
stdin = os.fdopen(0, "rb", buffering=0)
out = os.fdopen(1, "wb", buffering=0)
sel.register(stdin, selectors.EVENT_READ, None)
buf = b""
children = {}

def child(req):
    os.setsid()
    try:
        if req.get("memory_bytes"):
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (req["memory_bytes"], req["memory_bytes"]))
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        fd0 = os.open(os.devnull, os.O_RDONLY)
        fd1 = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        fd2 = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd0, 0); os.dup2(fd1, 1); os.dup2(fd2, 2)
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        sys.argv = [req["script"]]
        sys.path[0] = req["cwd"]
        import runpy
        # A fork skips interpreter start-up: run the sitecustomize a PYTHONPATH entry
        # provides (cuset.evaluate.devicemap), as a fresh interpreter would.
        for _d in req["env"].get("PYTHONPATH", "").split(os.pathsep):
            if _d and os.path.isfile(os.path.join(_d, "sitecustomize.py")):
                runpy.run_path(os.path.join(_d, "sitecustomize.py"), run_name="sitecustomize")
                break
        code = 0
        try:
            runpy.run_path(req["script"], run_name="__main__")
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else (print(e.code, file=sys.stderr) or 1))
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush(); sys.stderr.flush()
    except BaseException:
        code = 1
    os._exit(code)

while True:
    for key, _ in sel.select():
        if key.data is None:
            chunk = stdin.read(65536)
            if not chunk:
                sys.exit(0)
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                req = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    child(req)
                fd = os.pidfd_open(pid)
                children[fd] = (req["id"], pid)
                sel.register(fd, selectors.EVENT_READ, fd)
                out.write(json.dumps({"id": req["id"], "pid": pid}).encode() + b"\n")
        else:
            rid, pid = children.pop(key.data)
            sel.unregister(key.data)
            os.close(key.data)
            _, status = os.waitpid(pid, 0)
            code = os.waitstatus_to_exitcode(status)
            out.write(json.dumps({"id": rid, "exit": code}).encode() + b"\n")
'''


class PyForkServer:
    """A warm interpreter that forks one process per script. Thread-safe."""

    def __init__(self, preload: tuple[str, ...] = ("numpy",), python: str = sys.executable,
                 env: dict[str, str] | None = None):
        self.preload = tuple(preload)
        code = SERVER_CODE.replace("MODULES", repr(list(self.preload)))
        env = clean_env({"MPLBACKEND": "Agg", **(env or {})})
        self._proc = subprocess.Popen([python, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      env=env, start_new_session=True)
        self._lock = threading.Lock()
        self._next = 0
        self._pending: dict[int, dict] = {}
        self._events: dict[int, threading.Event] = {}
        self._tmp = Path(tempfile.mkdtemp(prefix="cuset-py-"))
        # The server and its dir of script logs go with this object, at the latest when the
        # interpreter exits (a module-level server is never closed by hand): nothing of it
        # outlives the evaluation that started it.
        self._finalizer = weakref.finalize(self, _shut_down, self._proc, self._tmp)
        self._reader = threading.Thread(target=self._read, daemon=True, name="pyforkserver")
        self._reader.start()

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def _read(self) -> None:
        for line in self._proc.stdout:
            msg = json.loads(line)
            with self._lock:
                state = self._pending.get(msg["id"])
                if state is None:
                    continue
                state.update(msg)
                if "exit" in msg:
                    self._events[msg["id"]].set()
                elif "pid" in msg:
                    state["pid_event"].set()
        with self._lock:  # server gone: wake everyone
            for rid, ev in self._events.items():
                self._pending[rid].setdefault("exit", None)
                self._pending[rid]["pid_event"].set()
                ev.set()

    def run(self, name: str, script: str, *, cwd: Path, timeout: float, env: dict[str, str],
            output_limit: int = 1 << 20, memory_bytes: int | None = None) -> StepResult:
        with self._lock:
            rid = self._next
            self._next += 1
            state = {"pid_event": threading.Event()}
            self._pending[rid] = state
            done = self._events[rid] = threading.Event()
        out_path, err_path = self._tmp / f"{rid}.out", self._tmp / f"{rid}.err"
        req = {"id": rid, "script": script, "cwd": str(cwd), "env": env, "stdout": str(out_path), "stderr": str(err_path),
               "memory_bytes": memory_bytes}
        start = time.perf_counter()
        try:
            with self._lock:
                self._proc.stdin.write(json.dumps(req).encode() + b"\n")
                self._proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            return StepResult(name, None, 0.0, False, "", f"python fork server is gone: {e}")
        timed_out = not done.wait(timeout)
        if timed_out:
            state["pid_event"].wait(5)
            if "pid" in state:
                try:
                    os.killpg(state["pid"], signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            done.wait(10)
        seconds = time.perf_counter() - start
        with self._lock:
            self._pending.pop(rid, None)
            self._events.pop(rid, None)
        stdout, stderr = _read_head(out_path, output_limit), _read_head(err_path, output_limit)
        for p in (out_path, err_path):
            p.unlink(missing_ok=True)
        code = state.get("exit")
        if code is None and not timed_out:
            stderr += "\npython fork server died"
        return StepResult(name, code, seconds, timed_out, truncate_log(stdout), truncate_log(stderr))

    def close(self) -> None:
        self._finalizer()


def _shut_down(proc: subprocess.Popen, tmp: Path) -> None:
    """End a fork server (stdin closed, killed after 5 s) and remove its dir of script logs."""
    if proc.poll() is None:
        try:
            proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
    shutil.rmtree(tmp, ignore_errors=True)


def _read_head(path: Path, limit: int) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit)
    except FileNotFoundError:
        return b""


def run_script(name: str, script: str, *, cwd: Path, timeout: float, extra_env: dict[str, str],
               server: PyForkServer | None = None, memory_bytes: int | None = None) -> StepResult:
    """Run `script` (a file in `cwd`) with the project's Python: in a fork of `server`
    when it is alive, else as a fresh `python script` subprocess. `memory_bytes` caps the
    script's address space (RLIMIT_AS): an allocation past it raises MemoryError there."""
    env = clean_env({"MPLBACKEND": "Agg", **extra_env})
    if server is not None and server.alive:
        return server.run(name, script, cwd=cwd, timeout=timeout, env=env, memory_bytes=memory_bytes)
    return run_step(name, [sys.executable, script], cwd=cwd, timeout=timeout, env=env,
                    limits=Limits(address_space_bytes=memory_bytes))
