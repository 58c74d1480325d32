"""The strict output check of robust verification: every element of every declared
output against gen.py's reference, in the trusted harness (this process).

Some task checkers read fewer elements than the output holds (the first row, a
prefix, a sample), so a program right only there passes them. This check reads the
whole output through the careful path (no links, the declared size) and compares
it element by element:

- integers and bool: exactly;
- floats: |out - ref| <= atol * scale + rtol * |ref|, with scale = max(1, max |ref|)
  so the absolute part follows the output's magnitude (a sum of 4096 terms carries
  the rounding of its terms, whatever its value); float16/bfloat16 looser, float64
  tighter (TOLERANCES). Inf must match exactly; NaN passes only where the reference
  has NaN too.

The reference of output `y` is data/y_ref.bin when gen.py wrote it (the bundled suite
and most CUDABench tasks); else the one other file gen.py wrote of y's exact size, the
files compare.py names breaking ties. An output without such a file is not checked
(and said so), rather than compared with a guess.
"""

from __future__ import annotations

import ast
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cuset.execute.untrusted_files import UnsafeOutput, open_output
from cuset.tasks import Task
from cuset.tasks.schema import TensorSpec

# dtype -> (rtol, atol relative to the output's scale). The check is there to find the
# elements a checker never reads, not to judge precision again: it must not reject what
# the task's own tolerance accepts. At 1e-4 it did, on 3 of the 60 bundled CPU-suite
# tasks (a 4096-term sum checked at atol 0.026, n-body forces at atol 0.009 + 1e-3
# relative, a linear layer at 3.8e-4): float32 is 1e-3 of the output's magnitude, which
# still rejects any element that is merely left unwritten or wrong.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
    "float32": (1e-3, 1e-3),
    "float64": (1e-6, 1e-6),
}


@dataclass(frozen=True)
class StrictVerdict:
    ok: bool
    detail: str = ""                  # the first output that failed: index, values, count
    unchecked: tuple[str, ...] = ()   # "y (no reference file identified)": outputs not compared
    mismatch: dict | None = None      # a failure's mismatch_record (set by the pipeline, which has the run)


@dataclass(frozen=True)
class _OutputPair:
    """One declared output read from the run, beside its reference file (None: none identified)."""

    spec: TensorSpec
    ref_path: Path | None
    out: np.ndarray | None = None        # the run's values; None when unread or unreadable
    unreadable: Exception | None = None  # why the run's file could not be read

    def reference(self) -> np.ndarray:
        return decode(self.ref_path.read_bytes(), self.spec.dtype)


def _output_pairs(task: Task, run_dir: Path, reference_dir: Path, specs) -> Iterator[_OutputPair]:
    """Each output of `specs` with its reference file and the run's values, in order; the
    run's file is read only where a reference was identified (the one pairing both the
    verdict and the mismatch record use)."""
    for spec in specs:
        ref_path = find_reference(spec, reference_dir, task)
        if ref_path is None:
            yield _OutputPair(spec, None)
            continue
        try:
            out = read_output(run_dir, spec)
        except (UnsafeOutput, OSError, ValueError) as e:
            yield _OutputPair(spec, ref_path, unreadable=e)
            continue
        yield _OutputPair(spec, ref_path, out)


def strict_check(task: Task, run_dir: Path, reference_dir: Path) -> StrictVerdict:
    """Compare every declared output in run_dir/data with its reference in reference_dir."""
    unchecked: list[str] = []
    for pair in _output_pairs(task, run_dir, reference_dir, task.outputs):
        spec = pair.spec
        if pair.ref_path is None:
            unchecked.append(f"{spec.name} (no reference file identified)")
            continue
        if pair.unreadable is not None:
            return StrictVerdict(False, f"output {spec.name}: cannot be read ({pair.unreadable})", tuple(unchecked))
        why = compare_arrays(spec, pair.out, pair.reference(), pair.ref_path.name)
        if why is not None:
            return StrictVerdict(False, why, tuple(unchecked))
    return StrictVerdict(True, "", tuple(unchecked))


def _bad_elements(spec: TensorSpec, out: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, str]:
    """(mask of the elements of `out` that differ from `ref` under the dtype's rule, the rule)."""
    if spec.dtype in TOLERANCES:
        rtol, atol = TOLERANCES[spec.dtype]
        o, r = out.astype(np.float64), ref.astype(np.float64)
        finite = np.isfinite(r)
        scale = max(1.0, float(np.max(np.abs(r[finite]), initial=0.0)))
        with np.errstate(invalid="ignore", over="ignore"):
            close = np.abs(o - r) <= atol * scale + rtol * np.abs(r)
        # Inf only equals the same Inf; NaN only where the reference has NaN.
        bad = ~np.where(finite, close & np.isfinite(o), (o == r) | (np.isnan(o) & np.isnan(r)))
        return bad, f"rtol={rtol:g}, atol={atol:g}*{scale:.4g}"
    return out != ref, "exact"


def _where(spec: TensorSpec, flat: int) -> str:
    where = f"index {flat}"
    if len(spec.dims) > 1:
        where += f" {tuple(int(i) for i in np.unravel_index(flat, spec.dims))}"
    return where


def compare_arrays(spec: TensorSpec, out: np.ndarray, ref: np.ndarray, ref_name: str = "reference") -> str | None:
    """None if `out` matches `ref` element for element under the dtype's rule; else
    what differs: the first bad index, both values and how many elements differ."""
    if out.shape != ref.shape:
        return f"output {spec.name}: {out.size} elements, the reference {ref_name} has {ref.size}"
    bad, rule = _bad_elements(spec, out, ref)
    n_bad = int(np.count_nonzero(bad))
    if n_bad == 0:
        return None
    first = int(np.flatnonzero(bad)[0])
    return (f"output {spec.name}: {n_bad} of {out.size} elements differ from {ref_name} ({spec.dtype}, {rule}); "
            f"first at {_where(spec, first)}: got {out[first]!r}, expected {ref[first]!r}")


# The mismatch record of a `wrong` sample (ExecResult.mismatch): small and bounded, since it
# is kept in every results line (compact ones too). Values are written as text (NaN and
# Inf included); errors as numbers, or None where one side is not finite.
MISMATCH_ELEMENTS = 5   # first differing elements recorded per output
MISMATCH_OUTPUTS = 4    # outputs recorded (a task declares one or two; a hostile one many)
MISMATCH_TEXT = 40      # characters of a value or an error message


def _value_text(value) -> str:
    """numpy's own text of a value: the shortest that reads back as the same float32 (1.3052384)."""
    return str(value)[:MISMATCH_TEXT]


def _finite_or_none(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def element_mismatch(spec: TensorSpec, out: np.ndarray, ref: np.ndarray, ref_name: str,
                     limit: int = MISMATCH_ELEMENTS) -> dict:
    """How `out` differs from `ref` under the strict rule: the count, the largest absolute
    error, and the first `limit` differing elements with both values and their errors."""
    bad, rule = _bad_elements(spec, out, ref)
    n_bad = int(np.count_nonzero(bad))
    record = {"output": spec.name, "reference": ref_name, "dtype": spec.dtype, "rule": rule,
              "n_bad": n_bad, "n_total": int(out.size), "max_abs_error": None, "first": []}
    if n_bad == 0:
        return record
    o, r = out.astype(np.float64), ref.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(o - r)
    finite_err = err[bad & np.isfinite(err)]
    record["max_abs_error"] = float(finite_err.max()) if finite_err.size else None
    for flat in np.flatnonzero(bad)[:limit]:
        flat = int(flat)
        abs_error = _finite_or_none(err[flat])
        rel_error = _finite_or_none(abs_error / abs(r[flat])) if abs_error is not None and r[flat] != 0 else None
        record["first"].append({"index": flat, "at": _where(spec, flat).removeprefix("index "),
                                "got": _value_text(out[flat]), "expected": _value_text(ref[flat]),
                                "abs_error": abs_error, "rel_error": rel_error})
    return record


def mismatch_record(task: Task, run_dir: Path, reference_dir: Path) -> dict:
    """Every declared output of run_dir/data against its reference, element by element,
    as `element_mismatch` records (at most MISMATCH_OUTPUTS); outputs that could not be
    compared are named with the reason. For showing a `wrong` verdict; never a verdict."""
    outputs: list[dict] = []
    not_compared: list[str] = []
    for pair in _output_pairs(task, run_dir, reference_dir, task.outputs[:MISMATCH_OUTPUTS]):
        spec = pair.spec
        if pair.ref_path is None:
            not_compared.append(f"{spec.name}: no reference file identified")
        elif pair.unreadable is not None:
            not_compared.append(f"{spec.name}: cannot be read ({str(pair.unreadable)[:MISMATCH_TEXT]})")
        else:
            outputs.append(element_mismatch(spec, pair.out, pair.reference(), pair.ref_path.name))
    if len(task.outputs) > MISMATCH_OUTPUTS:
        not_compared.append(f"{len(task.outputs) - MISMATCH_OUTPUTS} more output(s) not recorded")
    return {"outputs": outputs, "not_compared": not_compared}


def find_reference(spec: TensorSpec, reference_dir: Path, task: Task) -> Path | None:
    """gen.py's reference file for output `spec` (see the module doc); None if not identified."""
    named = reference_dir / f"{spec.name}_ref.bin"
    if _usable(named, spec.nbytes):
        return named
    declared = {s.name for s in (*task.inputs, *task.outputs)}
    try:
        entries = sorted(reference_dir.iterdir())
    except OSError:
        return None
    candidates = [p for p in entries if p.suffix == ".bin" and p.stem not in declared and _usable(p, spec.nbytes)]
    if len(candidates) > 1:
        mentioned = _mentioned_files(task.compare_py)
        read = [p for p in candidates if p.name in mentioned]
        candidates = read or candidates
    if len(candidates) > 1:
        candidates = [p for p in candidates if p.stem.startswith(spec.name) or p.stem.endswith(spec.name)]
    return candidates[0] if len(candidates) == 1 else None


def _usable(path: Path, nbytes: int) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size == nbytes


def _mentioned_files(compare_py: str) -> set[str]:
    """Base names of the string constants in compare.py ("data/out_expected.bin" -> out_expected.bin)."""
    try:
        tree = ast.parse(compare_py)
    except SyntaxError:
        return set()
    return {os.path.basename(n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def read_output(run_dir: Path, spec: TensorSpec) -> np.ndarray:
    fd, _ = open_output(run_dir, f"data/{spec.name}.bin", spec.nbytes)
    try:
        chunks, left = [], spec.nbytes
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                raise ValueError(f"data/{spec.name}.bin shrank while it was read")
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    return decode(b"".join(chunks), spec.dtype)


def decode(raw: bytes, dtype: str) -> np.ndarray:
    """Raw little-endian values; bfloat16 (unknown to numpy) widened to float32 exactly."""
    if dtype == "bfloat16":
        return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    return np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"))


def encode(values: np.ndarray, dtype: str) -> bytes:
    """The raw file bytes of `values` as `dtype` (the inverse of `decode`; bfloat16 keeps
    the upper half of each float32, i.e. truncates)."""
    if dtype == "bfloat16":
        return (np.asarray(values, dtype=np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
    return np.asarray(values).astype(np.dtype(dtype).newbyteorder("<")).tobytes()
