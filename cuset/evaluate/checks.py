"""Checks on a finished run: were the declared outputs really written by it,
and what did compare.py say."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from cuset.execute.untrusted_files import UnsafeOutput, open_output, read_digest
from cuset.tasks import Task


def output_problem(task: Task, run_dir: Path, started_ns: int, input_digests: dict[str, str],
                   reference_dir: Path | None = None) -> str | None:
    """None if every declared output exists as a regular file of the declared size,
    written after the run started and not a copy of an input; else what is wrong.

    An output byte-identical to an input is a copy only if the task's reference data
    (gen.py's other files in `reference_dir`) show the expected output differs from that
    input: identity tasks (matrix copy, reshapes, clamps that change nothing) must pass."""
    return checked_outputs(task, run_dir, started_ns, input_digests, reference_dir)[1]


def checked_outputs(task: Task, run_dir: Path, started_ns: int, input_digests: dict[str, str],
                    reference_dir: Path | None = None) -> tuple[str, str | None]:
    """(outputs_digest, output_problem) of one run, each output read once."""
    h = hashlib.sha256()
    problem = None
    for spec in task.outputs:
        rel = f"data/{spec.name}.bin"
        checked = inspect_output(run_dir, spec)
        h.update(spec.name.encode() + b"\0")
        h.update(checked[1].encode() if not isinstance(checked, str) else b"<unusable>")
        if problem is not None:
            continue
        if isinstance(checked, str):
            problem = checked
            continue
        st, digest = checked
        if st.st_mtime_ns < started_ns:
            problem = f"{rel} predates this run (stale output)"
            continue
        for name, d in input_digests.items():
            if d == digest and spec.nbytes > 0 and _reference_differs(reference_dir, input_digests, spec.nbytes, d):
                problem = f"{rel} is a byte-for-byte copy of input {name} (the expected output differs from it)"
                break
    return h.hexdigest(), problem


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


def _reference_differs(reference_dir: Path | None, input_digests: dict[str, str], nbytes: int, digest: str) -> bool:
    """Do gen.py's reference files of the output's size exist, and does none equal the input?
    Without such files (no reference dir, a reference in another format) nothing shows that
    the copy is wrong, and compare.py alone decides."""
    if reference_dir is None:
        return True   # no reference data given: an identical input is taken for a copy
    refs = [p for p in reference_dir.iterdir()
            if p.suffix == ".bin" and p.stem not in input_digests and not p.is_symlink()
            and p.is_file() and p.stat().st_size == nbytes]
    return bool(refs) and all(file_digest(p) != digest for p in refs)


def outputs_digest(task: Task, run_dir: Path) -> str:
    """One hash over all declared outputs (missing ones included as such)."""
    return checked_outputs(task, run_dir, 0, {})[0]


def file_digest(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def compare_verdict(stdout: str, compat: bool) -> bool:
    """compare.py prints T or F. The harness accepts any output without an `F`
    (so an empty one passes); by default we also require a `T`."""
    if "F" in stdout:
        return False
    return True if compat else "T" in stdout
