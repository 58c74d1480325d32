"""Which sandbox modes the tests run: chosen by the tools installed here, never by cuset's
own probe (`cuset.execute.sandbox._probe`).

A mode whose tools are on PATH is tested. Where cuset then finds it unusable, its tests
fail with the reason (`resolve_mode` raises SandboxUnavailable) instead of turning into
skips, so neither a broken probe nor a sandbox that stopped working passes unnoticed.
A test is skipped only for what lies outside the project: a tool that is not installed.
"""

from __future__ import annotations

import os
import platform
import shutil
from pathlib import Path

import pytest

# The tools each mode runs. As root both modes drop to a throw-away uid with setpriv.
_TOOLS = {"bwrap": ("bwrap",), "unshare": ("unshare",)}
_INSTALL = {"bwrap": "apt-get install bubblewrap", "unshare": "util-linux", "setpriv": "util-linux"}


def missing_tool(mode: str) -> str | None:
    """Why `mode` cannot be tested here (a tool not installed), or None."""
    tools = _TOOLS[mode] + (("setpriv",) if os.geteuid() == 0 else ())
    absent = [t for t in tools if shutil.which(t) is None]
    if not absent:
        return None
    return "not installed: " + ", ".join(f"{t} ({_INSTALL[t]})" for t in absent)


HAVE_BWRAP = missing_tool("bwrap") is None
INSTALLED_MODES = tuple(m for m in _TOOLS if missing_tool(m) is None)
# What mode="auto" must resolve to here: cuset prefers bubblewrap, else unshare.
AUTO_MODE = INSTALLED_MODES[0] if INSTALLED_MODES else None
# Machines cuset has a seccomp filter for (docs/sandbox.md: x86-64 and aarch64).
SECCOMP_MACHINE = platform.machine() in ("x86_64", "AMD64", "aarch64", "arm64")

CAP_SYS_ADMIN = 21


def may_mount() -> bool:
    """Root with CAP_SYS_ADMIN: what per-run disk quotas (tmpfs mounts) need, judged apart
    from cuset.execute.disk_quota.unavailable(), which the tests check instead of trust."""
    status = Path("/proc/self/status").read_text()
    cap_eff = int(next(line.split()[1] for line in status.splitlines() if line.startswith("CapEff:")), 16)
    return os.geteuid() == 0 and bool(cap_eff >> CAP_SYS_ADMIN & 1)


needs_bwrap = pytest.mark.skipif(not HAVE_BWRAP, reason=f"bubblewrap: {missing_tool('bwrap')}")
needs_a_sandbox = pytest.mark.skipif(
    AUTO_MODE is None, reason=f"no sandbox tool: bwrap {missing_tool('bwrap')}; unshare {missing_tool('unshare')}")
needs_seccomp_machine = pytest.mark.skipif(
    not SECCOMP_MACHINE, reason=f"cuset has no seccomp filter for {platform.machine()} (x86-64 and aarch64 only)")

# Parameters for a test run in every sandbox mode; a mode whose tool is absent is a skip
# that says so (an empty parameter list would hide the reason).
EVERY_MODE = [pytest.param(m, marks=pytest.mark.skipif(missing_tool(m) is not None, reason=f"{m}: {missing_tool(m)}"))
              for m in _TOOLS]
