"""Corrupted copies of a correct output: what a task's checker must reject.

Each corruption aims at one way a checker can be weaker than it looks:

| name          | changes                                  | a checker that misses it                       |
|---------------|------------------------------------------|------------------------------------------------|
| one_element   | the last element                         | reads a prefix (the first element, first row)  |
| suffix        | the second half                          | reads the first half only                      |
| every_element | every element                            | reads integers as float32 (see `wrong_values`) |
| zeros         | every element set to 0                   | accepts an output left unwritten (zeroed)      |
| nan           | every element NaN (floating point only)  | `abs(a - b) > tol` is False for NaN            |
| reversed      | the elements in reverse order            | compares sums, means or sorted values          |

A corruption that does not change the output (zeros of an all-zero output, the reverse
of a palindrome, NaN on integers) does not apply: `corrupt` returns None.

Wrong values (`wrong_values`) are far beyond any tolerance for floating point
(v + (1 + |v|) / 2, 1 where the value is not finite) and the smallest change for
integers (v + 1, wrapping; bool negated): an int32 read as float32 is a denormal
below 1e-38, so a float tolerance accepts any such change, and a checker that reads
integers right rejects even +1.
"""

from __future__ import annotations

import numpy as np

CORRUPTIONS: dict[str, str] = {
    "one_element": "the last element changed",
    "suffix": "the second half of the elements changed",
    "every_element": "every element changed (integers by +1)",
    "zeros": "every element set to 0 (an output left unwritten)",
    "nan": "every element NaN",
    "reversed": "the elements in reverse order (same sum, same sorted values)",
}


def wrong_values(values: np.ndarray) -> np.ndarray:
    """A wrong value for every element of `values` (flat, same dtype; see the module doc)."""
    if values.dtype == np.bool_:
        return ~values
    if np.issubdtype(values.dtype, np.integer):
        with np.errstate(over="ignore"):
            return values + values.dtype.type(1)
    v = values.astype(np.float64)
    wrong = np.where(np.isfinite(v), v + (1.0 + np.abs(np.nan_to_num(v))) / 2, 1.0)
    return wrong.astype(values.dtype)


def corrupt(values: np.ndarray, name: str) -> np.ndarray | None:
    """A corrupted copy of the flat array `values`, or None where corruption `name` does
    not apply (it would leave the output as it is)."""
    if name not in CORRUPTIONS:
        raise ValueError(f"unknown corruption {name!r}; one of {', '.join(CORRUPTIONS)}")
    values = np.asarray(values).reshape(-1)
    n = values.size
    if n == 0:
        return None
    floating = np.issubdtype(values.dtype, np.floating)
    if name == "nan" and not floating:
        return None
    out = values.copy()
    if name == "one_element":
        out[-1:] = wrong_values(values[-1:])
    elif name == "suffix":
        out[n // 2:] = wrong_values(values[n // 2:])
    elif name == "every_element":
        out = wrong_values(values)
    elif name == "zeros":
        out = np.zeros_like(values)
    elif name == "nan":
        out = np.full_like(values, np.nan)
    elif name == "reversed":
        out = values[::-1].copy()
    return None if _same(out, values) else out


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal values (-0.0 is 0.0, NaN is NaN): such an output is not wrong."""
    return bool(np.array_equal(a, b, equal_nan=np.issubdtype(a.dtype, np.floating)))
