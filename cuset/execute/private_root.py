"""The unshare fallback's filesystem: the world bubblewrap would build, built by hand.

    unshare --net --pid --fork --kill-child --mount -- python -I -S private_root.py OUTER OPS -- COMMAND...

Run as the first process of fresh mount and PID namespaces (root there: the evaluating
root, or the mapped root of a user namespace), before any privilege is dropped. OPS is a
JSON list of the bwrap options `cuset.execute.sandbox.world_ops` wrote for the step (one
description of the world for both modes): `--ro-bind`, `--bind`, `--dev-bind`,
`--symlink`, `--perms` + `--dir`/`--tmpfs`, `--tmpfs`, `--dev`, `--proc`, `--chdir`,
`--seccomp FD`. OUTER is the mount namespace of the process that started unshare (as
/proc/self/ns/mnt names it): the set-up refuses to touch that one. The new root is an empty tmpfs holding only what they bind; the host's
root is then detached (`pivot_root`, `umount -l`), so nothing else of the host exists for
COMMAND, which is exec'd in its place (typically setpriv dropping to the throw-away uid).

Standard library only (it runs with `-I -S`, outside the evaluating package's import
path). Any failure: a line "cuset-sandbox: set-up failed: ..." on stderr and exit status
SETUP_FAILED, before COMMAND ever runs.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import re
import signal
import stat
import sys
import warnings  # noqa: F401 - os.execvp imports it lazily, when the interpreter's own files may be gone

SETUP_FAILED = 125
MARKER = "cuset-sandbox: set-up failed: "

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
MNT_DETACH = 2
# statvfs f_flag bits -> the mount flags a remount must repeat (a user namespace may not
# clear the flags its parent namespace set: they are locked)
_KEPT_FLAGS = {os.ST_NOSUID: MS_NOSUID, os.ST_NODEV: MS_NODEV, os.ST_NOEXEC: MS_NOEXEC,
               os.ST_NOATIME: MS_NOATIME, os.ST_NODIRATIME: MS_NODIRATIME, os.ST_RELATIME: MS_RELATIME}
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
# what bwrap's --dev gives: these host nodes, and links into /proc
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
             "stderr": "/proc/self/fd/2", "core": "/proc/kcore", "ptmx": "pts/ptmx"}
NEW_ROOT = "/tmp"   # where the new root's tmpfs is mounted (in this namespace only)

_libc = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    pass


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(err)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda s: None if s is None else os.fsencode(s))
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {source or fstype} on {target}")


def _mounts() -> list[tuple[int, int, str]]:
    """(mount id, parent id, mount point) of every mount of this namespace, in order."""
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as fh:
        for line in fh:
            fields = line.split()
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])   # \040: a space
            found.append((int(fields[0]), int(fields[1]), point))
    return found


def _mount_points_below(target: str) -> list[str]:
    """The mount just made on `target` and every mount its recursive bind brought along
    (found by parent ids, not by path: the host's own mounts below the covered /tmp are
    still listed)."""
    mounts = _mounts()
    top = [m for m in mounts if m[2] == target]
    if not top:
        raise SetupError(f"the bind on {target} is not in the mount table")
    tree, grown = {top[-1][0]}, True
    while grown:
        grown = False
        for mount_id, parent, _ in mounts:
            if parent in tree and mount_id not in tree:
                tree.add(mount_id)
                grown = True
    return [point for mount_id, _, point in mounts if mount_id in tree]


def _remount_readonly(target: str) -> None:
    for point in _mount_points_below(target):
        try:
            kept = os.statvfs(point).f_flag
        except OSError:
            continue   # a mount hidden under another one: not reachable
        flags = MS_BIND | MS_REMOUNT | MS_RDONLY
        for bit, flag in _KEPT_FLAGS.items():
            if kept & bit:
                flags |= flag
        mount(None, point, None, flags)


class World:
    """Builds the new root under NEW_ROOT from bwrap's options."""

    def __init__(self, sources: dict[str, int]):
        self.sources = sources   # host path -> an O_PATH fd opened before the host's /tmp was covered
        self.perms: int | None = None
        self.chdir = "/"
        self.seccomp: bytes | None = None

    def inside(self, path: str) -> str:
        return NEW_ROOT + os.path.normpath("/" + path.lstrip("/"))

    def _mode(self, default: int) -> int:
        mode, self.perms = (self.perms if self.perms is not None else default), None
        return mode

    def _parents(self, path: str) -> None:
        parent = os.path.dirname(self.inside(path))
        if not os.path.lexists(parent):
            os.makedirs(parent, mode=0o755)

    def _target(self, source_fd: int, dest: str) -> str:
        """The mount point for a bind of `source_fd`: an empty dir or file, made unless
        something (a path bound earlier) is there already."""
        target = self.inside(dest)
        if not os.path.lexists(target):
            self._parents(dest)
            if stat.S_ISDIR(os.fstat(source_fd).st_mode):
                os.mkdir(target, 0o755)
            else:
                os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
        return target

    def bind(self, source: str, dest: str, readonly: bool) -> None:
        fd = self.sources[source]
        target = self._target(fd, dest)
        mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
        if readonly:
            _remount_readonly(target)

    def tmpfs(self, dest: str) -> None:
        target = self.inside(dest)
        if not os.path.lexists(target):
            self._parents(dest)
            os.mkdir(target, 0o755)
        mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={self._mode(0o755):o}")

    def directory(self, dest: str) -> None:
        target = self.inside(dest)
        mode = self._mode(0o755)
        if not os.path.isdir(target):
            self._parents(dest)
            os.mkdir(target, mode)
        os.chmod(target, mode)

    def symlink(self, link_target: str, dest: str) -> None:
        self._parents(dest)
        os.symlink(link_target, self.inside(dest))

    def dev(self, dest: str) -> None:
        self.tmpfs(dest)
        for node in DEV_NODES:
            host = f"/dev/{node}"
            if host in self.sources:
                self.bind(host, f"{dest}/{node}", readonly=False)
        for name, target in DEV_LINKS.items():
            os.symlink(target, self.inside(f"{dest}/{name}"))
        for sub in ("shm", "pts"):
            os.mkdir(self.inside(f"{dest}/{sub}"), 0o755)

    def proc(self, dest: str) -> None:
        target = self.inside(dest)
        if not os.path.lexists(target):
            self._parents(dest)
            os.mkdir(target, 0o555)
        mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


ARITY = {"--ro-bind": 2, "--bind": 2, "--dev-bind": 2, "--symlink": 2, "--perms": 1, "--dir": 1, "--tmpfs": 1,
         "--dev": 1, "--proc": 1, "--chdir": 1, "--seccomp": 1}


def parse(ops: list[str]) -> list[tuple[str, list[str]]]:
    """(option, its arguments) for each option, all checked before anything is mounted."""
    if not isinstance(ops, list) or not all(isinstance(o, str) for o in ops):
        raise SetupError("the options are not a list of strings")
    parsed, i = [], 0
    while i < len(ops):
        op = ops[i]
        args = ops[i + 1:i + 1 + ARITY.get(op, 0)]
        if op not in ARITY or len(args) != ARITY[op]:
            raise SetupError(f"option {op!r} is not one the unshare fallback builds (or lacks its arguments)")
        parsed.append((op, args))
        i += 1 + len(args)
    return parsed


def sources_of(parsed: list[tuple[str, list[str]]]) -> list[str]:
    """Every host path the options bind (the /dev nodes for --dev)."""
    found = []
    for op, args in parsed:
        if op in ("--ro-bind", "--bind", "--dev-bind"):
            found.append(args[0])
        elif op == "--dev":
            found += [f"/dev/{n}" for n in DEV_NODES if os.path.exists(f"/dev/{n}")]
    return found


def build(ops: list[str], outer: str) -> World:
    """The new root, mounted on NEW_ROOT; the process's umask is 022 meanwhile (the dirs it
    makes must be traversable by the sandbox uid) and given back after. `outer`: the mount
    namespace it must not be in."""
    parsed = parse(ops)
    if os.readlink("/proc/self/ns/mnt") == outer:
        # run by hand, or by an unshare that made no mount namespace: it would remount the host's
        raise SetupError("not in a mount namespace of its own (run it as unshare --mount's child)")
    umask = os.umask(0o022)
    try:
        return _build(parsed)
    finally:
        os.umask(umask)


def _build(parsed: list[tuple[str, list[str]]]) -> World:
    sources = {}
    for path in sources_of(parsed):
        try:
            sources[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError as e:
            raise SetupError(f"cannot open {path} to bind it: {e.strerror}") from None
    mount(None, "/", None, MS_REC | MS_PRIVATE)   # nothing of ours propagates to the host
    mount("tmpfs", NEW_ROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755")
    world = World(sources)
    for op, args in parsed:
        if op in ("--ro-bind", "--bind", "--dev-bind"):
            world.bind(args[0], args[1], readonly=op == "--ro-bind")
        elif op == "--symlink":
            world.symlink(args[0], args[1])
        elif op == "--perms":
            world.perms = int(args[0], 8)
        elif op == "--dir":
            world.directory(args[0])
        elif op == "--tmpfs":
            world.tmpfs(args[0])
        elif op == "--dev":
            world.dev(args[0])
        elif op == "--proc":
            world.proc(args[0])
        elif op == "--chdir":
            world.chdir = args[0]
        elif op == "--seccomp":
            with os.fdopen(int(args[0]), "rb", closefd=True) as fh:
                world.seccomp = fh.read()
    for fd in sources.values():
        os.close(fd)
    return world


def enter(world: World) -> None:
    """Make the new root this namespace's root and forget the host's."""
    number = SYS_PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise SetupError(f"no pivot_root system call number known for {platform.machine()}")
    os.chdir(NEW_ROOT)
    _check(_libc.syscall(ctypes.c_long(number), b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "detach the host's root")
    os.chdir(world.chdir)


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def load_seccomp(program: bytes) -> None:
    """The filter bwrap's --seccomp would load (cuset.execute.seccomp), for this process and
    whatever it execs."""
    count = len(program) // ctypes.sizeof(_SockFilter)
    filters = (_SockFilter * count).from_buffer_copy(program)
    prog = _SockFprog(count, filters)
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp filter")


def main(argv: list[str]) -> None:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write(f"{MARKER}usage: private_root.py OUTER OPS -- COMMAND...\n")
        sys.exit(SETUP_FAILED)
    outer, ops, command = argv[0], argv[1], argv[3:]
    try:
        world = build(json.loads(ops), outer)
        enter(world)
        if world.seccomp is not None:
            load_seccomp(world.seccomp)
    except (SetupError, OSError, ValueError) as e:
        sys.stderr.write(f"{MARKER}{e}\n")
        sys.exit(SETUP_FAILED)
    # Python ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across exec:
    # the program must die of a file-size limit as it does under bwrap
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execvp(command[0], command)
    except OSError as e:
        sys.stderr.write(f"{MARKER}cannot run {command[0]}: {e.strerror}\n")
        sys.exit(SETUP_FAILED)


if __name__ == "__main__":
    main(sys.argv[1:])
