"""The one compare.py generator (cuset.curation.checker) and its two tolerance rules."""

import subprocess
import sys

import numpy as np
import pytest

from cuset.curation.checker import Check, compare_script, float_tolerance, tolerance
from cuset.tasks import TensorSpec


def test_tolerance_by_dtype_and_depth():
    assert tolerance("int32", 1) == tolerance("uint8", 10**6) == tolerance("bool", 3) == 0.0
    assert tolerance("float32", 1) == 1e-5                          # floor: 8 * 2^-23 = 9.5e-7 < 1e-5
    assert tolerance("float32", 4096) == pytest.approx(8 * 2.0 ** -23 * 64)   # 6.1e-5
    assert tolerance("float32", 10**12) == 0.1                      # capped
    assert tolerance("float16", 1) == pytest.approx(8 * 2.0 ** -10)  # 7.8e-3 > floor 1e-3
    assert tolerance("float64", 1) == 1e-10
    assert tolerance("float64", 10**8) == 1e-10                      # 8 * 2^-52 * 1e4 = 1.8e-11 < floor
    assert tolerance("float64", 10**16) == pytest.approx(8 * 2.0 ** -52 * 1e8)
    assert tolerance("float32", 100) < tolerance("float32", 200) < tolerance("float32", 10_000)
    with pytest.raises(ValueError):
        tolerance("float32", 0)


def test_float_tolerance_grows_with_reduction_depth():
    assert float_tolerance() == (1e-5, 1e-5)
    assert float_tolerance(transcendental=True) == (1e-4, 1e-4)
    assert float_tolerance(10_000, 1.0) == (0.005, 1e-4)        # 5e-5 * sqrt(1e4)
    assert float_tolerance(1 << 24)[0] > float_tolerance(1 << 18)[0]


def test_compare_script_refuses_loose_integer_checks_partial_coverage_and_bfloat16():
    y = TensorSpec("y", "int32", "(4,)")
    with pytest.raises(ValueError, match="compared exactly"):
        compare_script((y,), (Check("y", 1e-3, 0.0),))
    with pytest.raises(ValueError, match="compared exactly"):
        compare_script((TensorSpec("b", "bool", "(4,)"),), (Check("b", 0.0, 1e-3),))
    with pytest.raises(ValueError, match="cover exactly"):
        compare_script((y,), (Check("z"),))
    with pytest.raises(ValueError, match="cover exactly"):
        compare_script((y, TensorSpec("w", "int32", "(4,)")), (Check("y"),))
    with pytest.raises(ValueError, match="at least one output"):
        compare_script((), ())
    with pytest.raises(ValueError, match="bfloat16"):
        compare_script((TensorSpec("h", "bfloat16", "(2,)"),), (Check("h", 1e-2, 1e-2),))


@pytest.fixture
def run_compare(tmp_path):
    """Writes the arrays to data/<name>.bin, the generated compare.py next to them, and
    runs it with this interpreter; returns what it printed."""
    def run(outputs, checks, files):
        data = tmp_path / "data"
        data.mkdir(exist_ok=True)
        for old in data.iterdir():
            old.unlink()
        for name, arr in files.items():
            arr.tofile(data / f"{name}.bin")
        (tmp_path / "compare.py").write_text(compare_script(outputs, checks))
        proc = subprocess.run([sys.executable, "compare.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()
    return run


def test_float_output_within_tolerance_passes_a_wrong_or_wrong_size_one_fails(run_compare):
    spec = [TensorSpec("y", "float32", "(2, 3)")]
    ref = np.arange(6, dtype=np.float32)
    tol = tolerance("float32", 1024)  # 3.05e-5
    checks = [Check("y", tol, tol)]
    assert run_compare(spec, checks, {"y": ref + np.float32(0.9 * tol), "y_ref": ref}) == "T"
    # |y - ref| <= tol + tol * |ref| holds for ref >= 1.5 only, so elements 0 and 1 fail
    assert run_compare(spec, checks, {"y": ref + np.float32(2.5 * tol), "y_ref": ref}) == "F"
    wrong = ref.copy()
    wrong[4] = 7.0
    assert run_compare(spec, checks, {"y": wrong, "y_ref": ref}) == "F"
    assert run_compare(spec, checks, {"y": ref[:5], "y_ref": ref}) == "F"                 # short
    assert run_compare(spec, checks, {"y": np.append(ref, 5.0).astype(np.float32), "y_ref": ref}) == "F"  # long
    assert run_compare(spec, checks, {"y": ref, "y_ref": ref[:5]}) == "F"                 # short reference
    assert run_compare(spec, checks, {"y_ref": ref}) == "F"                               # missing output
    # the same error passes a deeper reduction, whose tolerance is larger
    deep = tolerance("float32", 10**6)
    assert run_compare(spec, [Check("y", deep, deep)], {"y": ref + np.float32(2.5 * tol), "y_ref": ref}) == "T"
    # separate atol and rtol: |y - ref| <= atol + rtol * |ref|
    loose_rel = [Check("y", 0.0, 0.5)]
    assert run_compare(spec, loose_rel, {"y": ref * np.float32(1.4), "y_ref": ref}) == "T"
    assert run_compare(spec, loose_rel, {"y": ref * np.float32(1.6), "y_ref": ref}) == "F"


def test_non_finite_outputs_fail_even_where_the_reference_has_them(run_compare):
    spec = [TensorSpec("y", "float32", "(4,)")]
    close = [Check("y", 1e-5, 1e-5)]
    for bad in (np.nan, np.inf):  # so a task whose reference overflows fails its own check
        ref = np.array([1, bad, 3, 4], dtype=np.float32)
        assert run_compare(spec, close, {"y": ref.copy(), "y_ref": ref}) == "F"
    ref = np.array([1, 2, 3, 4], dtype=np.float32)
    for bad in (np.nan, np.inf, -np.inf):
        assert run_compare(spec, close, {"y": np.array([1, bad, 3, 4], np.float32), "y_ref": ref}) == "F"
    nan_ref = np.array([1, np.nan, 3, 4], dtype=np.float32)
    assert run_compare(spec, close, {"y": ref, "y_ref": nan_ref}) == "F"
    # an exact check compares values: inf equals inf, NaN equals nothing
    inf = np.array([1, np.inf], np.float32)
    nan = np.array([1, np.nan], np.float32)
    two = [TensorSpec("y", "float32", "(2,)")]
    assert run_compare(two, [Check("y")], {"y": inf.copy(), "y_ref": inf}) == "T"
    assert run_compare(two, [Check("y")], {"y": nan.copy(), "y_ref": nan}) == "F"


def test_exact_outputs_and_every_output_counts(run_compare):
    spec = [TensorSpec("i", "int32", "(3,)"), TensorSpec("f", "float64", "(2,)"), TensorSpec("b", "bool", "(2,)")]
    checks = [Check("i"), Check("f", 1e-10, 1e-10), Check("b")]
    i = np.array([1, 2, 3], np.int32)
    f = np.array([0.5, 0.25])
    b = np.array([True, False])
    assert run_compare(spec, checks, {"i": i, "i_ref": i, "f": f, "f_ref": f, "b": b, "b_ref": b}) == "T"
    assert run_compare(spec, checks, {"i": i + np.array([0, 0, 1], np.int32), "i_ref": i,
                                      "f": f, "f_ref": f, "b": b, "b_ref": b}) == "F"
    assert run_compare(spec, checks, {"i": i, "i_ref": i, "f": f, "f_ref": f, "b": ~b, "b_ref": b}) == "F"
    assert run_compare(spec, checks, {"i": i, "i_ref": i, "f": f + 1e-6, "f_ref": f, "b": b, "b_ref": b}) == "F"
