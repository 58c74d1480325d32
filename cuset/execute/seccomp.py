"""A small seccomp filter for bubblewrap (`--seccomp FD`), written as classic BPF.

It denies what the namespaces leave open:
- `socket(AF_UNIX, ...)`: filesystem sockets outside the masked directories (a
  D-Bus, database or Docker socket somewhere readable) would otherwise be reachable;
  the network namespace already cuts TCP/UDP and abstract sockets.
- new user namespaces (`unshare`/`clone` with CLONE_NEWUSER); `clone3` answers
  ENOSYS, so the C library falls back to `clone`, whose flags the filter can read.
- every system call of a foreign ABI (x32, or i386 through `int 0x80`), which would
  use other numbers and slip past the checks above.

With `allow_unix_sockets` (GPU sandboxes) `socket(AF_UNIX)` is allowed: the CUDA
driver library creates one during initialisation and fails on any error (measured on
an H100 machine: EACCES, EPERM, EAFNOSUPPORT, ENOSYS, EMFILE and ENOMEM all made
cuInit report "OS call failed"). Host sockets stay out of reach where the masks hide
them (/tmp, /run, the home dir, workspaces); abstract ones live in the network namespace.

Only x86-64 and aarch64 are known; elsewhere `program()` returns None and the
sandbox runs without the filter (its status says so).
"""

from __future__ import annotations

import errno
import platform
import struct

# (audit arch, syscall numbers) per machine.
_ARCHES = {
    "x86_64": (0xC000003E, {"socket": 41, "clone": 56, "unshare": 272, "clone3": 435}),
    "aarch64": (0xC00000B7, {"socket": 198, "clone": 220, "unshare": 97, "clone3": 435}),
}
_ARCHES["AMD64"] = _ARCHES["x86_64"]
_ARCHES["arm64"] = _ARCHES["aarch64"]

AF_UNIX = 1
CLONE_NEWUSER = 0x10000000
_X32_BIT = 0x40000000

_LD_ABS_W = 0x20    # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15         # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35         # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45        # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06         # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000

# struct seccomp_data: int nr; u32 arch; u64 ip; u64 args[6] (low word first on little-endian).
_NR, _ARCH, _ARG0 = 0, 4, 16


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None, *, allow_unix_sockets: bool = False) -> bytes | None:
    """The compiled filter for this machine, or None where it is not known."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit_arch, nr = arch
    eperm, eacces, enosys = (_ERRNO | errno.EPERM, _ERRNO | errno.EACCES, _ERRNO | errno.ENOSYS)
    body = [
        _ins(_LD_ABS_W, _ARCH),
        _ins(_JEQ, audit_arch, 1, 0),
        _ins(_RET, eperm),                              # foreign ABI
        _ins(_LD_ABS_W, _NR),
        _ins(_JGE, _X32_BIT, 0, 1),
        _ins(_RET, eperm),                              # x32 numbers
        _ins(_JEQ, nr["clone3"], 0, 1),
        _ins(_RET, enosys),
        _ins(_JEQ, nr["socket"], 0, 4),
        _ins(_LD_ABS_W, _ARG0),
        _ins(_JEQ, AF_UNIX, 0, 1),
        _ins(_RET, _ALLOW if allow_unix_sockets else eacces),
        _ins(_RET, _ALLOW),
        _ins(_JEQ, nr["unshare"], 1, 0),
        _ins(_JEQ, nr["clone"], 0, 4),
        _ins(_LD_ABS_W, _ARG0),
        _ins(_JSET, CLONE_NEWUSER, 0, 1),
        _ins(_RET, eperm),
        _ins(_RET, _ALLOW),
        _ins(_RET, _ALLOW),
    ]
    return b"".join(body)
