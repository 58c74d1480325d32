"""Where a result came from: the commit of the code that computed it, whether the checkout had
uncommitted changes, the UTC date and the machine's load. Every result file a user may quote
(bench/ results, a study's or regime map's report) carries this, so a number can be traced to
the code and the conditions that produced it (the load matters on shared 2-core machines)."""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
from pathlib import Path

CODE_ROOT = Path(__file__).resolve().parents[1]  # the checkout cuset is imported from


def _git(root: Path, *args: str) -> str | None:
    if not shutil.which("git"):
        return None
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=20, cwd=root)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def git_state(root: Path = CODE_ROOT, exclude: tuple[str, ...] = ()) -> dict:
    """HEAD of the checkout at `root` and its uncommitted changes (paths under `exclude`,
    relative to `root`, left out: a results folder a run writes into does not mark it dirty)."""
    commit = (_git(root, "rev-parse", "HEAD") or "").strip()
    if not commit:
        # a tree copied without .git (a lent GPU machine): the copier names the commit it sent
        named = os.environ.get("CUSET_COMMIT") or None
        return {"commit": named, "dirty": None,
                "note": "not a git checkout (or git is missing)" + ("; commit as named by $CUSET_COMMIT" if named else "")}
    status = _git(root, "status", "--porcelain", "--", ".", *(f":(exclude){e}" for e in exclude)) or ""
    changed = [line[3:] for line in status.splitlines() if line.strip()]  # "XY path"
    return {"commit": commit, "dirty": bool(changed), "changed_paths": changed[:50]}


def load_average() -> dict:
    one, five, fifteen = os.getloadavg()
    return {"1min": round(one, 2), "5min": round(five, 2), "15min": round(fifteen, 2)}


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def provenance() -> dict:
    """The code's commit (and dirtiness), the date and the load, now."""
    return {**git_state(), "date_utc": utc_now(), "load": load_average()}
