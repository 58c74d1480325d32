"""Checks on a finished run: were the declared outputs really written by it,
and what did compare.py say."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from cuset.evaluate.untrusted_files import UnsafeOutput, open_output, read_digest
from cuset.tasks import Task


def output_problem(task: Task, run_dir: Path, started_ns: int, input_digests: dict[str, str]) -> str | None:
    """None if every declared output exists as a regular file of the declared size,
    written after the run started and not a copy of an input; else what is wrong."""
    for spec in task.outputs:
        rel = f"data/{spec.name}.bin"
        checked = inspect_output(run_dir, spec)
        if isinstance(checked, str):
            return checked
        st, digest = checked
        if st.st_mtime_ns < started_ns:
            return f"{rel} predates this run (stale output)"
        for name, d in input_digests.items():
            if d == digest and spec.nbytes > 0:
                return f"{rel} is a byte-for-byte copy of input {name}"
    return None


def inspect_output(run_dir: Path, spec) -> tuple[os.stat_result, str] | str:
    """(stat, sha256) of a declared output, read through the careful path (no links,
    regular files only, the size checked before reading); else what is wrong."""
    rel = f"data/{spec.name}.bin"
    try:
        fd, st = open_output(run_dir, rel, None)
    except FileNotFoundError:
        return f"output {spec.name} was not written ({rel} missing)"
    except (UnsafeOutput, OSError) as e:
        return str(e) if isinstance(e, UnsafeOutput) else f"{rel} cannot be opened safely ({e.strerror})"
    try:
        if st.st_size != spec.nbytes:
            return f"{rel} has {st.st_size} bytes; declared {spec.dtype} {spec.shape} = {spec.nbytes} bytes"
        return st, read_digest(fd, spec.nbytes)
    finally:
        os.close(fd)


def outputs_digest(task: Task, run_dir: Path) -> str:
    """One hash over all declared outputs (missing ones included as such)."""
    h = hashlib.sha256()
    for spec in task.outputs:
        checked = inspect_output(run_dir, spec)
        h.update(spec.name.encode() + b"\0")
        h.update(checked[1].encode() if not isinstance(checked, str) else b"<unusable>")
    return h.hexdigest()


def file_digest(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def compare_verdict(stdout: str, compat: bool) -> bool:
    """compare.py prints T or F. The harness accepts any output without an `F`
    (so an empty one passes); by default we also require a `T`."""
    if "F" in stdout:
        return False
    return True if compat else "T" in stdout
