"""The one careful path for files a sandboxed program left behind (run dirs).

Everything the harness does with them afterwards (size checks, hashing, copies
for compare.py, removal) goes through here, outside any sandbox and often as
root, so nothing may follow a link the program planted or read more than the
task declares:

- `open_output`: walks the path one component at a time from the run dir with
  O_NOFOLLOW (a symlinked `data/` or output is refused), accepts regular files
  only (no devices, fifos, sockets; O_NONBLOCK so a fifo cannot block the open),
  and checks the size from the open file against the declared one before a
  single byte is read;
- `read_digest` / `copy_output`: read at most the checked size from that fd;
- `read_bounded`: a small file the harness reads back (a verdict, a progress note, a
  JSON description), refused before reading when it holds more than its limit;
- `write_new`: a file the harness itself writes into a dir a program used (a
  cache entry's outcome.json): whatever the program left at that name is removed
  unfollowed, and the file is created anew, so the write lands nowhere else;
- `remove_tree`: iterative removal through directory fds (a 3000-level tree
  needs neither recursion nor paths longer than PATH_MAX); it never raises and
  returns what it could not remove.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20


class UnsafeOutput(Exception):
    """The file is not a regular file of the declared size reachable without links."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a fifo"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def open_output(run_dir: Path, rel: str, size: int | None) -> tuple[int, os.stat_result]:
    """An fd (caller closes) on run_dir/rel and its stat; raises FileNotFoundError when
    it is missing, UnsafeOutput when it is a link, not regular, or not `size` bytes."""
    parts = [p for p in rel.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        raise ValueError(f"output path {rel!r} must be relative, without . or ..")
    fd = os.open(run_dir, _DIR_FLAGS)
    try:
        for i, part in enumerate(parts[:-1]):
            st = os.stat(part, dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                raise UnsafeOutput(f"{'/'.join(parts[:i + 1])}/ is {_kind(st.st_mode)}, not a directory")
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
        st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeOutput(f"{rel} is {_kind(st.st_mode)}, not a regular file")
        if size is not None and st.st_size != size:
            raise UnsafeOutput(f"{rel} has {st.st_size} bytes")
        out = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
    finally:
        os.close(fd)
    st2 = os.fstat(out)
    if not stat.S_ISREG(st2.st_mode) or (st2.st_dev, st2.st_ino) != (st.st_dev, st.st_ino) \
            or (size is not None and st2.st_size != size):
        os.close(out)
        raise UnsafeOutput(f"{rel} changed while it was opened")
    return out, st2


def _chunks(fd: int, size: int):
    left = size
    while left > 0:
        chunk = os.read(fd, min(_CHUNK, left))
        if not chunk:
            return
        left -= len(chunk)
        yield chunk


def read_digest(fd: int, size: int) -> str:
    """sha256 of the first `size` bytes of fd (never more, whatever the file does)."""
    h = hashlib.sha256()
    for chunk in _chunks(fd, size):
        h.update(chunk)
    return h.hexdigest()


def read_bounded(run_dir: Path, rel: str, limit: int) -> bytes | None:
    """The bytes of run_dir/rel (checked as in open_output), None when it is missing;
    UnsafeOutput when it is a link, not a regular file, or larger than `limit` bytes."""
    try:
        fd, st = open_output(run_dir, rel, None)
    except FileNotFoundError:
        return None
    try:
        if st.st_size > limit:
            raise UnsafeOutput(f"{rel} holds {st.st_size} bytes, more than the {limit} allowed")
        return b"".join(_chunks(fd, st.st_size))
    finally:
        os.close(fd)


def copy_output(run_dir: Path, rel: str, size: int | None, target: Path) -> None:
    """Copy run_dir/rel (checked as in open_output) to a new file `target`."""
    fd, st = open_output(run_dir, rel, size)
    try:
        with open(target, "xb") as out:
            for chunk in _chunks(fd, st.st_size):
                out.write(chunk)
    finally:
        os.close(fd)


def write_new(directory: Path, name: str, data: bytes) -> None:
    """Write `data` as directory/name, a file of the harness's own in a directory a sandboxed
    program wrote to. What the program left at `name` (a link to a host file, a file, a tree)
    is removed without being followed, and the file is created through the directory's fd with
    O_EXCL | O_NOFOLLOW: the write can land nowhere but in a new regular file there. UnsafeOutput
    when the name cannot be cleared or is taken again meanwhile (a program still running)."""
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"write_new takes one path component, not {name!r}")
    dfd = os.open(directory, _DIR_FLAGS)
    try:
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISDIR(st.st_mode):
            left = remove_tree(Path(directory) / name)
            if left:
                raise UnsafeOutput(f"{name} in {directory} is a directory that could not be removed: {left[0]}")
        elif st is not None:
            os.unlink(name, dir_fd=dfd)
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                         dir_fd=dfd)
        except FileExistsError:
            raise UnsafeOutput(f"{name} in {directory} was made again while it was replaced") from None
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    finally:
        os.close(dfd)


def remove_tree(path: Path) -> list[str]:
    """Remove `path` and everything under it without following links; never raises.
    Returns one line per thing that could not be removed (empty when all went)."""
    errors: list[str] = []
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return errors
    except OSError as e:
        return [f"{path}: {e.strerror}"]
    if not stat.S_ISDIR(st.st_mode):
        try:
            os.unlink(path)
        except OSError as e:
            errors.append(f"{path}: {e.strerror}")
        return errors
    try:
        top = os.open(path, _DIR_FLAGS)
    except OSError as e:
        return [f"{path}: {e.strerror}"]
    # One frame per open level: (its name in the parent, subdirectories still to visit).
    # Only the current dir's fd is held; going up is openat("..").
    stack: list[tuple[str, list[str]]] = [("", _clear_files(top, errors, str(path)))]
    fd = top
    depth_path: list[str] = []
    try:
        while stack:
            name, subdirs = stack[-1]
            if subdirs:
                child = subdirs.pop()
                try:
                    nfd = os.open(child, _DIR_FLAGS, dir_fd=fd)
                except OSError as e:
                    if e.errno == errno.EACCES:
                        _make_accessible(fd, child)
                        try:
                            nfd = os.open(child, _DIR_FLAGS, dir_fd=fd)
                        except OSError as e2:
                            errors.append(f"{_where(path, depth_path, child)}: {e2.strerror}")
                            continue
                    else:
                        if e.errno != errno.ENOENT:
                            errors.append(f"{_where(path, depth_path, child)}: {e.strerror}")
                        continue
                os.close(fd)
                fd = nfd
                depth_path.append(child)
                stack.append((child, _clear_files(fd, errors, _where(path, depth_path[:-1], child))))
                continue
            stack.pop()
            if not stack:
                break
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            depth_path.pop()
            try:
                os.rmdir(name, dir_fd=fd)
            except OSError as e:
                errors.append(f"{_where(path, depth_path, name)}: {e.strerror}")
    except OSError as e:
        errors.append(f"{path}: {e.strerror}")
    finally:
        os.close(fd)
    try:
        os.rmdir(path)
    except OSError as e:
        errors.append(f"{path}: {e.strerror}")
    return errors[:20]


def _where(root: Path, parts: list[str], name: str) -> str:
    """A readable position (deep trees are abbreviated)."""
    if len(parts) > 4:
        return f"{root}/{parts[0]}/.../({len(parts)} levels)/{name}"
    return "/".join([str(root), *parts, name])


def _make_accessible(dir_fd: int, name: str) -> None:
    try:
        os.chmod(name, 0o700, dir_fd=dir_fd, follow_symlinks=False)
    except (OSError, NotImplementedError):
        pass


def _clear_files(fd: int, errors: list[str], where: str) -> list[str]:
    """Unlink every non-directory in the dir at fd; return its subdirectory names."""
    subdirs: list[str] = []
    try:
        with os.scandir(fd) as it:
            entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
    except OSError as e:
        if e.errno == errno.EACCES:
            try:
                os.fchmod(fd, 0o700)
                with os.scandir(fd) as it:
                    entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
            except OSError as e2:
                errors.append(f"{where}: {e2.strerror}")
                return subdirs
        else:
            errors.append(f"{where}: {e.strerror}")
            return subdirs
    for name, is_dir in entries:
        if is_dir:
            subdirs.append(name)
            continue
        try:
            os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            pass
        except OSError as e:
            errors.append(f"{where}/{name}: {e.strerror}")
    return subdirs
