"""Per-program memory and process limits with a cgroup (v2, else the v1 memory and
pids controllers), so a program's whole process tree shares one budget; and, where
the cpu controller can be used, one CPU share per program (a group of its own at the
default weight), so a program whose children call setsid() gets no more CPU than one
that does not (without it, the kernel's per-session autogroups give each new session
its own share, and an honest run next to such a program slows down).

`ProgramCgroup.create(memory, pids)` makes a fresh group under the harness's own
group; `run_step(join=group.procs_files)` moves the child into it before exec, so
everything the program starts is counted. After the run, `oom_kills()` tells if the
kernel killed something for exceeding the memory limit, and `close()` removes the
group (killing any leftover). Where no controller can be used (no delegation, a
read-only /sys/fs/cgroup, not root), `create` returns None and `unavailable()`
says why: the sandbox then falls back to per-process RLIMIT_AS and per-uid
RLIMIT_NPROC (a program's children may then together use more memory).
"""

from __future__ import annotations

import functools
import itertools
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
_counter = itertools.count()


def _own_paths() -> dict[str, str]:
    """controller ("" for the unified hierarchy) -> our group's path, from /proc/self/cgroup."""
    paths = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            paths[c] = path
    return paths


_LAYOUT_LOCK = threading.Lock()


def _layout() -> tuple[str, dict[str, Path]] | str:
    """The cgroup layout, probed once per process. Serialised: evaluation threads that
    create their first groups at the same moment must not race on the probe (one of them
    failing with EEXIST would cache "unavailable" for the whole process)."""
    with _LAYOUT_LOCK:
        return _probe_layout()


@functools.lru_cache(maxsize=1)
def _probe_layout() -> tuple[str, dict[str, Path]] | str:
    """("v2", {"": group}) or ("v1", {"memory": group, "pids": group[, "cpu": group]}), else why not."""
    try:
        own = _own_paths()
    except OSError as e:
        return f"cannot read /proc/self/cgroup: {e}"
    for base in (ROOT, ROOT / "unified"):
        ctl = base / "cgroup.controllers"
        if "" in own and ctl.is_file():
            group = base / own[""].lstrip("/")
            own_ctl = group / "cgroup.controllers"
            available = set(own_ctl.read_text().split()) if own_ctl.is_file() else set()
            if {"memory", "pids"} <= available:
                try:
                    (group / "cgroup.subtree_control").write_text("+memory +pids")
                except OSError as e:
                    why = f"cgroup v2 at {group}: cannot enable memory+pids for children ({e.strerror})"
                    break
                if "cpu" in available:
                    try:   # optional: fair CPU sharing between programs (cpu_unavailable says why not)
                        (group / "cgroup.subtree_control").write_text("+cpu")
                    except OSError:
                        pass
                return "v2", {"": group}
    else:
        why = "no cgroup v2 hierarchy with the memory and pids controllers"
    if "memory" in own and "pids" in own and (ROOT / "memory").is_dir() and (ROOT / "pids").is_dir():
        groups = {c: ROOT / c / own[c].lstrip("/") for c in ("memory", "pids")}
        if _v1_writable(groups):
            if "cpu" in own and (ROOT / "cpu").is_dir():   # optional: fair CPU sharing between programs
                cpu = {"cpu": ROOT / "cpu" / own["cpu"].lstrip("/")}
                if _v1_writable(cpu):
                    groups.update(cpu)
            return "v1", groups
        why += "; cgroup v1 memory/pids not writable"
    return why


def _v1_writable(groups: dict[str, Path]) -> bool:
    """A group can be made under each of `groups` (v1: one hierarchy per controller)."""
    probe = {c: g / f"cuset-probe-{os.getpid()}-{next(_counter)}" for c, g in groups.items()}
    try:
        for p in probe.values():
            p.mkdir()
        return True
    except OSError:
        return False
    finally:
        for p in probe.values():
            try:
                p.rmdir()
            except OSError:
                pass


def unavailable() -> str | None:
    """None when per-program cgroups work here, else the reason."""
    layout = _layout()
    return layout if isinstance(layout, str) else None


def cpu_unavailable() -> str | None:
    """None when each program also gets its own CPU share (the cpu controller), else why not."""
    layout = _layout()
    if isinstance(layout, str):
        return layout
    version, parents = layout
    if version == "v1":
        return None if "cpu" in parents else "the cgroup v1 cpu controller is not mounted or not writable"
    try:
        enabled = (parents[""] / "cgroup.subtree_control").read_text().split()
    except OSError as e:
        return f"cannot read cgroup.subtree_control ({e.strerror})"
    return None if "cpu" in enabled else "the cgroup v2 cpu controller cannot be enabled for children here"


@dataclass
class ProgramCgroup:
    version: str
    dirs: dict[str, Path]           # controller ("" on v2) -> this program's group

    @classmethod
    def create(cls, memory_bytes: int | None, pids: int | None) -> "ProgramCgroup | None":
        layout = _layout()
        if isinstance(layout, str) or (memory_bytes is None and pids is None):
            return None
        version, parents = layout
        name = f"cuset-{os.getpid()}-{next(_counter)}"
        dirs = {c: p / name for c, p in parents.items()}
        group = cls(version, {})
        try:
            for c, d in dirs.items():
                d.mkdir()
                group.dirs[c] = d
            if version == "v2":
                d = dirs[""]
                if memory_bytes is not None:
                    (d / "memory.max").write_text(str(memory_bytes))
                    if (d / "memory.swap.max").exists():  # no escape into swap
                        (d / "memory.swap.max").write_text("0")
                if pids is not None:
                    (d / "pids.max").write_text(str(pids))
            else:
                if memory_bytes is not None:
                    (dirs["memory"] / "memory.limit_in_bytes").write_text(str(memory_bytes))
                    memsw = dirs["memory"] / "memory.memsw.limit_in_bytes"
                    if memsw.exists():  # no escape into swap
                        memsw.write_text(str(memory_bytes))
                if pids is not None:
                    (dirs["pids"] / "pids.max").write_text(str(pids))
        except OSError:
            group.close()
            raise
        return group

    @property
    def procs_files(self) -> tuple[Path, ...]:
        return tuple(d / "cgroup.procs" for d in self.dirs.values())

    def oom_kills(self) -> int:
        d = self.dirs.get("") or self.dirs.get("memory")
        name = "memory.events" if self.version == "v2" else "memory.oom_control"
        try:
            for line in (d / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def close(self) -> None:
        """Kill whatever is left in the group and remove it; errors are ignored (the
        group is empty once its processes are reaped; an undeletable one is harmless)."""
        for d in self.dirs.values():
            for _ in range(50):
                try:
                    pids = [int(p) for p in (d / "cgroup.procs").read_text().split()]
                except OSError:
                    break
                if not pids:
                    break
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                time.sleep(0.01)
            try:
                d.rmdir()
            except OSError:
                pass
