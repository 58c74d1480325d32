"""A disk quota for one run dir: a size-limited tmpfs mounted on it.

A program's run dir becomes its own small filesystem, so writing past the quota
fails with ENOSPC (and `is_full` tells the pipeline to report `disk_limit`); the
pages count against the program's memory cgroup too. Unmounting discards all of
it at once, however many files or levels it holds.

Mounting needs CAP_SYS_ADMIN (root here). Elsewhere `available()` says why not and
run dirs are plain directories: then only RLIMIT_FSIZE (per file) limits what a
program writes, and the pipeline's status says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import re
import tempfile
from pathlib import Path

MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18
MNT_DETACH = 2


@functools.lru_cache(maxsize=1)
def _libc():
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def mount_tmpfs(path: Path, size_bytes: int, inodes: int = 65536) -> None:
    """Mount a tmpfs of `size_bytes` (and `inodes` files) on the existing dir `path`."""
    opts = f"size={max(size_bytes, 4096)},nr_inodes={inodes},mode=0700".encode()
    if _libc().mount(b"tmpfs", os.fsencode(str(path)), b"tmpfs", MS_NOSUID | MS_NODEV, opts) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount tmpfs on {path}: {os.strerror(err)}")


def isolate(path: Path) -> None:
    """Make the existing dir `path` a mount point of its own with private propagation.

    The run dirs' quotas are mounted and unmounted under it while sandboxes start.
    Where / has shared propagation (many container hosts), every such mount or unmount
    also reaches each starting bwrap, whose recursive read-only bind of / then fails
    when a mount it listed has gone ("Can't bind mount /oldroot/ on /newroot/: Unable
    to apply mount flags"). Under a private parent nothing propagates, so a sandbox
    keeps the copy of the mount table it started with."""
    if is_mounted(path):
        return
    libc, target = _libc(), os.fsencode(str(path))
    if libc.mount(target, target, None, MS_BIND, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"bind {path} on itself: {os.strerror(err)}")
    if libc.mount(None, target, None, MS_PRIVATE | MS_REC, None) != 0:
        err = ctypes.get_errno()
        libc.umount2(target, MNT_DETACH)
        raise OSError(err, f"make {path} a private mount: {os.strerror(err)}")


def unmount(path: Path) -> None:
    """Detach the tmpfs at `path` (lazily: a process still holding a file there
    keeps only its own view); ignores a path that is no mount point."""
    _libc().umount2(os.fsencode(str(path)), MNT_DETACH)


def is_mounted(path: Path) -> bool:
    """A mount point, bind mounts of a dir on itself included (os.path.ismount misses
    those: same device, and a parent with another inode)."""
    if os.path.ismount(path):
        return True
    target = os.fsencode(os.path.realpath(path))
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            # field 5 is the mount point, with space, tab, newline and backslash octal-escaped
            return any(_unescape(line.split(b" ")[4]) == target for line in f)
    except OSError:
        return False


def _unescape(field: bytes) -> bytes:
    return re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), field)


def is_full(path: Path, slack: int = 64 << 10) -> bool:
    """Less than `slack` bytes or no inode left on the filesystem at `path`."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize < slack or (st.f_files > 0 and st.f_favail == 0)


@functools.lru_cache(maxsize=1)
def unavailable() -> str | None:
    """None when run dirs can get a quota here, else why not."""
    if os.geteuid() != 0:
        return "not root: mounting a tmpfs per run needs CAP_SYS_ADMIN"
    probe = Path(tempfile.mkdtemp(prefix="cuset-quota-probe-"))
    try:
        mount_tmpfs(probe, 1 << 20)
        unmount(probe)
        return None
    except OSError as e:
        return str(e)
    finally:
        try:
            probe.rmdir()
        except OSError:
            pass
