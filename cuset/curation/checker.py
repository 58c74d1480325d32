"""compare.py, the checker every generated task carries, and the two tolerance rules.

The checker is written here rather than by the LLM: a model-written checker with
a loose tolerance (or one that prints T unconditionally) would let wrong programs
into the training set. Both kinds of generated task use it: LLM-synthesised tasks
(`cuset.curation.llm_task`) and the deterministic families (`cuset.curation.families`).

The script (`compare_script`) reads data/<y>.bin and data/<y>_ref.bin for every
output y and prints T when all of them match, else F. An output matches when both
files hold exactly the declared number of elements of the declared dtype and
    integers and bool: every element equal;
    floats with atol = rtol = 0: every element equal (NaN never equals NaN);
    other floats: every output element finite (NaN or inf fails, even where the
        reference has the same: a task whose reference overflows fails its own
        check, and validation drops it) and |out - ref| <= atol + rtol * |ref|.
A file that cannot be read fails its output. bfloat16 is refused: numpy cannot
read it, and no generated task declares it.

The tolerances come from one of two rules, by what the task's author knows:

`tolerance(dtype, reduction_depth)`, for LLM tasks, which state only each
output's dtype and the reduction depth (the longest chain of values accumulated
into one output element, 1 for elementwise). One value, used as both atol and rtol:
    integers and bool: 0 (exact);
    floats: max(floor, 8 * eps * sqrt(depth)), at most 0.1,
where eps is the dtype's machine epsilon. Rounding errors of a sum of n terms in
a different order grow like eps * sqrt(n) (the random-walk bound); the factor 8
leaves room for fused multiply-adds and fast intrinsics. The floors are the usual
float32 1e-5 (robust-kbench), and their analogues for lower and higher precision.

`float_tolerance(depth, scale, transcendental=...)`, for the families, whose
builders know their arithmetic: (atol, rtol) for a float32 output accumulating
`depth` terms of magnitude ~`scale`:
    depth 1: atol = rtol = 1e-5, or 1e-4 with transcendental functions (the ulp
        differences between CUDA's and a CPU's libm);
    deeper: atol = 5e-5 * sqrt(depth) * scale rounded to 2 significant digits (at
        least the depth-1 value), rtol = 1e-4.
A float32 sum's rounding error grows like sqrt(depth) for random-sign terms in any
order (tree, atomics or sequential), so atol grows the same way. Families may also
state a Check's atol/rtol directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from string import Template

FLOAT_EPS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23, "float64": 2.0 ** -52}
FLOAT_FLOOR = {"float16": 1e-3, "bfloat16": 1e-2, "float32": 1e-5, "float64": 1e-10}
MAX_TOLERANCE = 0.1


def tolerance(dtype: str, reduction_depth: int) -> float:
    """rtol (= atol) for comparing an output of `dtype` that accumulates `reduction_depth` terms
    (the LLM tasks' rule, see the module doc)."""
    if reduction_depth < 1:
        raise ValueError(f"reduction depth must be >= 1, got {reduction_depth}")
    if dtype not in FLOAT_EPS:
        return 0.0
    return min(MAX_TOLERANCE, max(FLOAT_FLOOR[dtype], 8 * FLOAT_EPS[dtype] * math.sqrt(reduction_depth)))


def float_tolerance(depth: int = 1, scale: float = 1.0, *, transcendental: bool = False) -> tuple[float, float]:
    """(atol, rtol) for a float32 output that accumulates `depth` terms of magnitude ~`scale`
    (the families' rule, see the module doc)."""
    base = 1e-4 if transcendental else 1e-5
    if depth <= 1:
        return base, base
    atol = float(f"{max(base, 5e-5 * math.sqrt(depth) * scale):.2g}")
    return atol, max(base, 1e-4)


@dataclass(frozen=True)
class Check:
    """How compare.py judges one output: exact when atol == rtol == 0."""

    name: str
    atol: float = 0.0
    rtol: float = 0.0


# `$` never appears in the script itself.
_SCRIPT = Template('''import numpy as np


def check(name, dtype, count, atol, rtol):
    """True iff data/<name>.bin holds `count` values matching data/<name>_ref.bin."""
    try:
        out = np.fromfile(f"data/{name}.bin", dtype=dtype)
        ref = np.fromfile(f"data/{name}_ref.bin", dtype=dtype)
    except (OSError, ValueError):
        return False
    if out.size != count or ref.size != count:
        return False
    if atol == 0 and rtol == 0:
        return bool(np.array_equal(out, ref))
    out = out.astype(np.float64)
    ref = ref.astype(np.float64)
    return bool(np.all(np.isfinite(out)) and np.all(np.abs(out - ref) <= atol + rtol * np.abs(ref)))

$body
print("T" if ok else "F")
''')

# numpy names the script uses; np.bool only exists again since numpy 2.
_NP_TYPE = {"bool": "bool_"}
_FLOATS = ("float16", "float32", "float64")


def compare_script(outputs, checks) -> str:
    """compare.py for `outputs` (each with .name, .dtype and .numel: a TensorSpec or a family
    Tensor), judged by `checks`, one per output (see the module doc)."""
    by_name = {t.name: t for t in outputs}
    if not by_name:
        raise ValueError("a checker needs at least one output")
    if {c.name for c in checks} != set(by_name):
        raise ValueError(f"checks {[c.name for c in checks]} must cover exactly the outputs {list(by_name)}")
    calls = []
    for c in checks:
        t = by_name[c.name]
        if t.dtype == "bfloat16":
            raise ValueError(f"output {t.name!r} is bfloat16, which numpy cannot read")
        if t.dtype not in _FLOATS and (c.atol or c.rtol):
            raise ValueError(f"output {t.name!r} is {t.dtype}: integer and bool outputs are compared exactly")
        calls.append(f'check("{t.name}", np.{_NP_TYPE.get(t.dtype, t.dtype)}, {t.numel}, {c.atol!r}, {c.rtol!r})')
    body = "ok = " + calls[0] if len(calls) == 1 else "ok = all([\n" + "".join(f"    {c},\n" for c in calls) + "])"
    return _SCRIPT.substitute(body=body)
