"""Robust verification of CUDABench-format tasks: seed offsets per input case, the
strict every-element check, the robust verdict next to the plain one, and the plain and
robust Pass@k side by side in metrics and reports."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest

from eval_fakes import GxxBackend, make_task, needs_gxx, program
from cuset.evaluate.config import EvalConfig, ExecutionConfig
from cuset.evaluate.metrics import summarize
from cuset.evaluate.cudabench import ROBUST_NOT_RUN
from cuset.evaluate.pipeline import evaluate_program
from cuset.evaluate.options import EvalOptions
from cuset.evaluate.records import SampleResult, load_results, save_results
from cuset.evaluate.report import render_markdown
from cuset.evaluate.seeds import offset_seeds
from cuset.evaluate.strict import compare_arrays, element_mismatch, find_reference
from cuset.evaluate.workspace import Workspace
from cuset.execute.compile_cache import CompileCache
from cuset.execute.result import ExecResult, Status
from cuset.tasks import TensorSpec
from cuset.tasks.io import load_tasks

# ---------------------------------------------------------------- seed offsets


@pytest.mark.parametrize("original, case2", [
    ("import numpy as np\nnp.random.seed(42)\n", "import numpy as np\nnp.random.seed(44)\n"),
    ("import numpy as np\nrng = np.random.default_rng(7)\n", "import numpy as np\nrng = np.random.default_rng(9)\n"),
    ("import numpy as np\nrs = np.random.RandomState(0)\n", "import numpy as np\nrs = np.random.RandomState(2)\n"),
    ("import torch\ntorch.manual_seed(0)\n", "import torch\ntorch.manual_seed(2)\n"),
    ("import random\nrandom.seed(1)\n", "import random\nrandom.seed(3)\n"),
    ("import torch\ng = torch.Generator().manual_seed(5)\n", "import torch\ng = torch.Generator().manual_seed(7)\n"),
    ("import torch\ng = torch.Generator()\ng.manual_seed(5)\n", "import torch\ng = torch.Generator()\ng.manual_seed(7)\n"),
    # aliases and keyword seeds
    ("from numpy import random\nrandom.seed(10)\n", "from numpy import random\nrandom.seed(12)\n"),
    ("import numpy.random as npr\nnpr.seed(seed=10)\n", "import numpy.random as npr\nnpr.seed(seed=12)\n"),
    ("from numpy.random import default_rng as mk\nr = mk(3)\n", "from numpy.random import default_rng as mk\nr = mk(5)\n"),
    ("import numpy\nnumpy.random.seed(0)\n", "import numpy\nnumpy.random.seed(2)\n"),
    ("from torch import manual_seed\nmanual_seed(100)\n", "from torch import manual_seed\nmanual_seed(102)\n"),
    ("import random as r\nr.seed(a=4)\n", "import random as r\nr.seed(a=6)\n"),
    ("import numpy as np\nr = np.random.RandomState(-1)\n", "import numpy as np\nr = np.random.RandomState(1)\n"),
])
def test_each_seeding_form_is_offset_by_the_case(original, case2):
    rw = offset_seeds(original, 2)
    assert rw.kind == "offset" and rw.source == case2 and rw.reproducible_cases
    assert len(rw.sites) == 1 and rw.non_literal == ()
    assert offset_seeds(original, 0).source == original   # case 0 is the original data


def test_only_the_seed_literal_changes_byte_for_byte():
    src = ("# np.random.seed(42) in a comment stays\nimport numpy as np  # é\n"
           "s = 'np.random.seed(42)'\nnp.random.seed( 42 )  # and this comment\nx = 42\n")
    rw = offset_seeds(src, 1)
    assert rw.source == src.replace("seed( 42 )", "seed( 43 )")
    assert rw.sites[0].line == 4 and rw.sites[0].value == 42 and rw.sites[0].call == "numpy.random.seed"


def test_a_named_constant_is_followed_and_rewritten_once():
    src = "import numpy as np\nimport torch\nSEED = 42\ndef main():\n    np.random.seed(SEED)\n    torch.manual_seed(SEED)\nmain()\n"
    rw = offset_seeds(src, 3)
    assert rw.source == src.replace("SEED = 42", "SEED = 45")
    assert [(s.call, s.via) for s in rw.sites] == [("numpy.random.seed", "SEED"), ("torch.manual_seed", "SEED")]
    annotated = "import random\nSEED: int = 7\nif __name__ == '__main__':\n    random.seed(SEED)\n"
    assert offset_seeds(annotated, 1).source == annotated.replace("SEED: int = 7", "SEED: int = 8")


def test_non_literal_seeds_are_left_alone_and_reported():
    src = "import numpy as np\nimport time\nnp.random.seed(int(time.time()))\n"
    rw = offset_seeds(src, 1)
    assert rw.kind == "non_literal" and rw.source == src and not rw.reproducible_cases
    assert rw.non_literal == ("line 3: numpy.random.seed(int(time.time()))",)
    assert "not constants" in rw.describe()
    # A name bound twice is not a constant; the literal seed beside it is still offset.
    mixed = "import numpy as np\nimport random\ns = 1\ns = 2\nnp.random.seed(s)\nrandom.seed(9)\n"
    rw = offset_seeds(mixed, 1)
    assert rw.kind == "offset" and rw.source == mixed.replace("seed(9)", "seed(10)")
    assert rw.non_literal == ("line 5: numpy.random.seed(s)",)
    assert "seeds left alone (not constants): line 5: numpy.random.seed(s)" in rw.describe()
    # default_rng() draws from the OS
    assert offset_seeds("import numpy as np\nr = np.random.default_rng()\n", 1).kind == "non_literal"


def test_unseeded_case_aware_and_broken_scripts_are_not_rewritten():
    unseeded = "import numpy as np\nimport mylib\nmylib.seed(3)\nx = np.random.rand(4)\n"
    rw = offset_seeds(unseeded, 1)
    assert rw.kind == "unseeded" and rw.source == unseeded and "not be" not in rw.describe()
    assert "no other reproducible input case" in rw.describe()
    aware = "import os\nimport numpy as np\nnp.random.seed(5 + int(os.environ.get('CUSET_CASE', '0')))\n"
    rw = offset_seeds(aware, 2)
    assert rw.kind == "reads_case" and rw.source == aware and rw.reproducible_cases
    assert offset_seeds("def broken(:\n", 1).kind == "unparsable"
    with pytest.raises(ValueError, match=">= 0"):
        offset_seeds("x = 1\n", -1)


# ---------------------------------------------------------------- strict check

def spec(dtype="float32", shape="(8,)"):
    return TensorSpec("y", dtype, shape)


def test_float32_tolerance_scales_with_the_output():
    ref = np.array([100.0, 0.0, -50.0, 1.0], dtype=np.float32)
    # tolerance per element: 1e-3 * 100 (the largest |ref|) + 1e-3 * |ref| = 0.2, 0.1, 0.15, 0.101
    ok = ref + np.array([0.15, 0.09, 0, 0], dtype=np.float32)
    assert compare_arrays(spec(shape="(4,)"), ok, ref) is None
    bad = ref.copy()
    bad[2] = -50.2
    bad[3] = 1.5
    why = compare_arrays(spec(shape="(4,)"), bad, ref, "y_ref.bin")
    assert why.startswith("output y: 2 of 4 elements differ from y_ref.bin (float32, rtol=0.001, atol=0.001*100)")
    assert "first at index 2: got np.float32(-50.2), expected np.float32(-50.0)" in why


def test_element_mismatch_records_the_first_elements_and_their_errors():
    ref = np.array([1.0, np.nan, np.inf, 2.0], dtype=np.float32)
    out = np.array([1.0, 0.0, -np.inf, 2.5], dtype=np.float32)
    m = element_mismatch(spec(shape="(2, 2)"), out, ref, "y_ref.bin")
    assert (m["output"], m["reference"], m["n_bad"], m["n_total"], m["max_abs_error"]) == ("y", "y_ref.bin", 3, 4, 0.5)
    assert m["first"] == [
        {"index": 1, "at": "1 (0, 1)", "got": "0.0", "expected": "nan", "abs_error": None, "rel_error": None},
        {"index": 2, "at": "2 (1, 0)", "got": "-inf", "expected": "inf", "abs_error": None, "rel_error": None},
        {"index": 3, "at": "3 (1, 1)", "got": "2.5", "expected": "2.0", "abs_error": 0.5, "rel_error": 0.25}]
    assert [e["index"] for e in element_mismatch(spec(shape="(4,)"), out, ref, "r", limit=2)["first"]] == [1, 2]
    same = element_mismatch(spec(shape="(4,)"), ref.copy(), ref, "r")   # compare.py may reject what this rule accepts
    assert (same["n_bad"], same["first"], same["max_abs_error"]) == (0, [], None)


def test_nan_inf_and_dtypes():
    ref = np.array([1.0, np.nan, np.inf, 2.0], dtype=np.float32)
    assert compare_arrays(spec(shape="(4,)"), ref.copy(), ref) is None           # NaN where the reference has NaN
    out = ref.copy()
    out[3] = np.nan
    assert "1 of 4 elements differ" in compare_arrays(spec(shape="(4,)"), out, ref)
    out = ref.copy()
    out[2] = 1e30
    assert "first at index 2" in compare_arrays(spec(shape="(4,)"), out, ref)
    # float16 is looser than float32, float64 tighter, integers exact
    r = np.array([1.0, 2.0], dtype=np.float64)
    off = r * (1 + 5e-3)   # float16 allows 1e-2 * 2 + 1e-2 * |r|; float32 1e-3 * 2 + 1e-3 * |r|
    assert compare_arrays(spec("float16", "(2,)"), off.astype(np.float16), r.astype(np.float16)) is None
    assert compare_arrays(spec("float32", "(2,)"), off.astype(np.float32), r.astype(np.float32)) is not None
    assert compare_arrays(spec("float32", "(2,)"), (r * (1 + 1e-4)).astype(np.float32), r.astype(np.float32)) is None
    assert compare_arrays(spec("float64", "(2,)"), r * (1 + 1e-5), r) is not None
    assert compare_arrays(spec("float64", "(2,)"), r * (1 + 1e-7), r) is None
    ints = np.array([1, 2, 3], dtype=np.int32)
    assert "exact" in compare_arrays(spec("int32", "(3,)"), ints + np.array([0, 0, 1], dtype=np.int32), ints)
    two_d = compare_arrays(spec(shape="(2, 2)"), np.zeros(4, np.float32), np.array([0, 0, 0, 1], np.float32))
    assert "first at index 3 (1, 1)" in two_d


def test_reference_file_is_found_or_left_unchecked(tmp_path):
    task = make_task(n=8)
    d = tmp_path / "data"
    d.mkdir()
    np.zeros(8, np.float32).tofile(d / "x.bin")
    np.ones(8, np.float32).tofile(d / "expected.bin")
    np.ones(4, np.float32).tofile(d / "other.bin")          # another size: never a candidate
    assert find_reference(task.outputs[0], d, task) == d / "expected.bin"
    np.ones(8, np.float32).tofile(d / "scratch.bin")
    assert find_reference(task.outputs[0], d, task) is None  # two candidates, nothing tells them apart
    named = make_task(n=8, compare_py="import numpy as np\nref = np.fromfile('data/expected.bin')\n")
    assert find_reference(named.outputs[0], d, named) == d / "expected.bin"
    np.ones(8, np.float32).tofile(d / "y_ref.bin")
    assert find_reference(task.outputs[0], d, task) == d / "y_ref.bin"


# ---------------------------------------------------------------- the pipeline

# Official CUDABench style: constant seed, CUSET_CASE ignored, inputs and references in one run.
SEEDED_GEN = """\
import os
import numpy as np
np.random.seed(42)
x = np.random.standard_normal(N).astype(np.float32)
os.makedirs("data", exist_ok=True)
x.tofile("data/x.bin")
(2.0 * x + 1.0).astype(np.float32).tofile("data/y_ref.bin")
"""

UNSEEDED_GEN = SEEDED_GEN.replace("np.random.seed(42)\n", "")

# A checker that reads only the first 8 elements.
WEAK_COMPARE = """\
import numpy as np
y = np.fromfile("data/y.bin", dtype=np.float32)[:8]
ref = np.fromfile("data/y_ref.bin", dtype=np.float32)[:8]
print("T" if np.allclose(y, ref, atol=1e-5) else "F")
"""

N = 256


def seeded_task(**changes):
    return make_task(n=N, gen_py=f"N = {N}\n" + SEEDED_GEN, **changes)


@pytest.fixture
def env(tmp_path):
    backend = GxxBackend()
    with Workspace(tmp_path / "ws") as ws, CompileCache(backend, tmp_path / "cache") as cache:
        def ev(code, task, **opts):
            opts.setdefault("robust", True)
            return evaluate_program(task, code, backend=backend, cache=cache, workspace=ws, options=EvalOptions(**opts))
        ev.ws = ws
        yield ev


def replay_case0(ws, task) -> str:
    """A program that writes case 0's reference output whatever its input."""
    ref = (ws.prepare(task, 0).data_dir / "data" / "y_ref.bin").read_bytes()
    return ("#include <cstdio>\nstatic const unsigned char Y[] = {" + ",".join(map(str, ref)) + "};\n"
            'int main() { FILE* g = fopen("data/y.bin", "wb"); fwrite(Y, 1, sizeof Y, g); fclose(g); return 0; }')


@needs_gxx
def test_hard_coded_case0_outputs_pass_plain_and_fail_robust(env):
    task = seeded_task()
    r = env(replay_case0(env.ws, task), task)
    assert r.status is Status.PASSED and r.detail == ""
    assert r.robust_status is Status.WRONG and r.robust_check == "cases" and r.robust_passed is False
    assert r.robust_detail.startswith("case 1: compare.py rejected the outputs")
    assert "[case 1 (constant seeds offset by the case number)]" in r.robust_detail
    names = [s.name for s in r.steps]
    assert names[:4] == ["gen[case=0]", "compile", "run[case=0,order=default]", "compare[case=0]"]
    assert names[4:] == ["robust:gen[case=1]", "robust:run[case=1,order=default]", "robust:compare[case=1]"]
    assert "robust" in r.timings and "strict" in r.timings
    # The same program under the plain verdict alone: nothing robust recorded.
    off = env(replay_case0(env.ws, task), task, robust=False)
    assert off.passed and off.robust_status is None and off.robust_passed is None


@needs_gxx
def test_offset_cases_get_their_own_consistent_references(env):
    task = seeded_task()
    r = env(program(n=N), task, robust_cases=3)
    assert r.status is Status.PASSED and r.robust_status is Status.PASSED and r.robust_check == ""
    assert r.robust_detail == "cases 0, 1, 2 passed compare.py and the strict check"
    data = [env.ws.prepare(dataclasses.replace(task, gen_py=offset_seeds(task.gen_py, c).source), c) for c in range(3)]
    xs = [np.fromfile(p.data_dir / "data" / "x.bin", dtype=np.float32) for p in data]
    refs = [np.fromfile(p.data_dir / "data" / "y_ref.bin", dtype=np.float32) for p in data]
    assert not np.array_equal(xs[0], xs[1]) and not np.array_equal(xs[1], xs[2])
    np.random.seed(43)   # case 1 is exactly the original script with seed 42 + 1
    assert np.array_equal(xs[1], np.random.standard_normal(N).astype(np.float32))
    for x, ref in zip(xs, refs):
        assert np.array_equal(ref, (2.0 * x + 1.0).astype(np.float32))


@needs_gxx
def test_right_only_where_a_weak_checker_reads_fails_the_strict_check(env):
    task = seeded_task(compare_py=WEAK_COMPARE)
    partial = program(n=N, body="y[i] = 2.0f * x[i] + (i < 8 ? 1.0f : 0.0f);")
    r = env(partial, task)
    assert r.status is Status.PASSED
    assert r.robust_status is Status.WRONG and r.robust_check == "strict"
    assert r.robust_detail.startswith(f"case 0: strict check: output y: {N - 8} of {N} elements differ from "
                                      "y_ref.bin (float32, rtol=0.001")
    x = np.fromfile(env.ws.prepare(task, 0).data_dir / "data" / "x.bin", dtype=np.float32)
    got, expected = x[8] * np.float32(2), (2.0 * x[8:9] + 1.0).astype(np.float32)[0]
    assert r.robust_detail.endswith(f"first at index 8: got {got!r}, expected {expected!r}")
    assert not any(s.name.startswith("robust:") for s in r.steps)   # decided on case 0's runs
    m = r.mismatch                                   # the strict check's failure, element by element
    assert (m["case"], m["verdict"], m["check"], m["outputs"][0]["n_bad"], m["outputs"][0]["first"][0]["index"]) == \
        (0, "robust", "strict", N - 8, 8)
    assert m["outputs"][0]["first"][0]["got"] == str(got) and m["outputs"][0]["first"][0]["expected"] == str(expected)
    good = env(program(n=N), task)
    assert good.passed and good.robust_passed is True


@needs_gxx
def test_unseeded_gen_counts_as_cases_unavailable_not_a_failure(env):
    task = make_task(n=N, gen_py=f"N = {N}\n" + UNSEEDED_GEN)
    r = env(program(n=N), task)
    assert r.robust_status is Status.PASSED and r.robust_check == "cases_unavailable"
    assert "no other reproducible input case" in r.robust_detail
    assert r.robust_detail.startswith("case 0 passed compare.py and the strict check")
    wrong = env(program(n=N, body="y[i] = 2.0f * x[i] + (i < 8 ? 1.0f : 0.0f);"),
                dataclasses.replace(task, compare_py=WEAK_COMPARE))
    assert wrong.passed and wrong.robust_check == "strict"   # the strict check still applies


@needs_gxx
def test_reference_under_another_name_or_not_identified(env):
    # gen.py writes the reference as y_expected.bin next to a scratch file of the same size
    gen = SEEDED_GEN.replace('"data/y_ref.bin"', '"data/y_expected.bin"') + 'x.tofile("data/y_scratch.bin")\n'
    cmp_named = WEAK_COMPARE.replace('"data/y_ref.bin"', '"data/y_expected.bin"')
    partial = program(n=N, body="y[i] = 2.0f * x[i] + (i < 8 ? 1.0f : 0.0f);")
    named = make_task(n=N, gen_py=f"N = {N}\n" + gen, compare_py=cmp_named)
    r = env(partial, named)   # compare.py names y_expected.bin: that is the reference
    assert r.passed and r.robust_check == "strict" and "differ from y_expected.bin" in r.robust_detail
    hidden = make_task(n=N, gen_py=f"N = {N}\n" + gen,
                       compare_py=WEAK_COMPARE.replace('"data/y_ref.bin"', '"data/y_" + "expected.bin"'))
    r = env(partial, hidden)  # two candidates, nothing tells them apart: not element-checked, and said so
    assert r.robust_passed is True and r.robust_check == ""
    assert r.robust_detail == ("cases 0, 1, 2 passed compare.py and the strict check; "
                               "outputs not element-checked: y (no reference file identified)")


@needs_gxx
def test_case_aware_gen_reuses_the_plain_cases(env):
    task = make_task(n=N)   # its gen.py reads CUSET_CASE: case i is run as it is, no rewrite
    r = env(program(n=N), task, cases=(0, 1), robust_cases=3)
    assert r.robust_passed is True
    robust_steps = [s.name for s in r.steps if s.name.startswith("robust:")]
    assert robust_steps == ["robust:gen[case=2]", "robust:run[case=2,order=default]", "robust:compare[case=2]"]


@needs_gxx
def test_plain_failure_is_the_robust_verdict_and_compat_turns_robust_off(env):
    task = seeded_task()
    r = env(program(n=N, body="y[i] = 2.0f * x[i];"), task)
    assert r.status is Status.WRONG and r.robust_status is Status.WRONG
    assert r.robust_detail == ROBUST_NOT_RUN and r.robust_check == ""
    assert env(None, task).robust_status is Status.NO_CODE
    compat = env(program(n=N), task, compat=True)
    assert compat.passed and compat.robust_status is None


def test_config_plumbs_robust_and_refuses_compat():
    opts = EvalConfig(robust=True, robust_cases=4).options()
    assert opts.robust is True and opts.robust_cases == 4
    assert EvalConfig().options().robust is False
    with pytest.raises(ValueError, match="robust=true with compat=true"):
        EvalConfig(robust=True, compat=True)
    with pytest.raises(ValueError, match="robust_cases must be >= 1"):
        EvalConfig(robust=True, robust_cases=0)


# ---------------------------------------------------------------- records, metrics, report

def sample(task_id, i, status, robust=None, check=""):
    er = ExecResult(status, robust_status=robust, robust_check=check)
    return SampleResult.from_exec(er, task_id=task_id, task_name=f"T{task_id}", family=f"f{task_id}", sample=i,
                                  compiled=True, ran_ok=True, n_tokens=10, code_sha256=None)


P, W = Status.PASSED, Status.WRONG
ROBUST_RUN = [
    sample(1, 0, P, P), sample(1, 1, P, W, "strict"), sample(1, 2, W, W),
    sample(2, 0, P, W, "cases"), sample(2, 1, P, P, "cases_unavailable"), sample(2, 2, W, W),
]


def test_old_records_load_and_robust_fields_round_trip(tmp_path):
    old = {"task_id": 1, "task_name": "T", "family": "f", "sample": 0, "status": "passed", "passed": True}
    r = SampleResult.from_json(old)
    assert r.robust_status is None and r.robust_passed is None and r.robust_check == ""
    path = tmp_path / "r.jsonl"
    save_results(path, ROBUST_RUN)
    assert load_results(path) == ROBUST_RUN
    line = json.loads(path.read_text().splitlines()[1])
    assert line["robust_status"] == "wrong" and line["robust_check"] == "strict"
    with pytest.raises(ValueError, match="unknown robust_status 'great'"):
        SampleResult.from_json({**old, "robust_status": "great"}, "r.jsonl:3")


def test_metrics_show_plain_and_robust_side_by_side():
    s = summarize(ROBUST_RUN)
    o = s.overall
    # each task: 2 of 3 passed plain, 1 of 3 robust; pass@1 = c/n, pass@3 = 1 with any success
    assert math.isclose(o["function@1"], 2 / 3) and math.isclose(o["robust_function@1"], 1 / 3)
    assert o["function@3"] == 1.0 and o["robust_function@3"] == 1.0
    assert o["robust_failures"] == {"strict": 1, "cases": 1}
    assert o["robust_not_applicable"] == 1 and o["n_robust_passed"] == 2 and o["n_robust_unknown"] == 0
    assert s.tasks[1]["robust_failures"] == {"strict": 1} and s.families["f2"]["robust_failures"] == {"cases": 1}
    md = render_markdown(s)
    assert "| scope | Pass@1 Function | Pass@1 Function (robust) | Pass@3 Function | Pass@3 Function (robust) |" in md
    assert "| overall | 66.7 | 33.3 | 100.0 | 100.0 |" in md
    assert "| f1 (1 tasks) | 66.7 | 33.3 | 100.0 | 100.0 |" in md
    assert "failed robust verification: 2 sample(s):" in md and "- strict: 1" in md and "- cases: 1" in md
    assert "No new input case could be made for 1 robust pass(es)" in md
    assert [(f["task_id"], f["sample"], f["check"]) for f in s.robust_failed] == [(1, 1, "strict"), (2, 0, "cases")]
    assert "- task 1 T1 sample 1 [strict]: " in md and "- task 2 T2 sample 0 [cases]: " in md
    assert json.loads(json.dumps(s.to_json()))["overall"]["robust_function@1"] == pytest.approx(1 / 3)


def test_runs_without_robust_have_no_robust_columns_and_mixed_runs_say_na():
    plain = summarize([sample(1, i, P) for i in range(3)])
    assert "robust_function@1" not in plain.overall and "robust_function@1" not in plain.tasks[1]
    assert "robust" not in render_markdown(plain).lower().replace("robust verification off", "")
    mixed = summarize([*ROBUST_RUN, sample(3, 0, P), sample(3, 1, P), sample(3, 2, P)])
    assert mixed.tasks[3]["robust_function@1"] is None and mixed.overall["robust_function@1"] is None
    assert mixed.overall["function@1"] == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)
    assert "3 sample(s) were evaluated without robust verification" in render_markdown(mixed)
    padded = summarize(ROBUST_RUN, expected_task_ids=[1, 2, 9], missing_as_failed=True)
    assert padded.overall["robust_function@1"] == pytest.approx((1 / 3 + 1 / 3 + 0) / 3)


@needs_gxx
def test_evaluate_file_records_and_reports_both_verdicts(tmp_path):
    from cuset.evaluate import evaluate_file
    from cuset.generate.records import GenerationRecord, save_generations
    from cuset.tasks import save_tasks

    seeded, weak = seeded_task(task_id=1), seeded_task(task_id=2, compare_py=WEAK_COMPARE, family="weak")
    save_tasks([seeded, weak], tmp_path / "tasks.jsonl")
    with Workspace(tmp_path / "ws0") as ws:
        replay = replay_case0(ws, seeded)
    partial = program(n=N, body="y[i] = 2.0f * x[i] + (i < 8 ? 1.0f : 0.0f);")
    codes = {(1, 0): program(n=N), (1, 1): replay, (1, 2): program(n=N, body="y[i] = 0;"),
             (2, 0): program(n=N), (2, 1): partial, (2, 2): partial}
    save_generations(tmp_path / "gens.jsonl", [GenerationRecord(t, "Axpb", i, "m", 1, f"```cpp\n{c}```", c, 10, "stop", 0.1)
                                               for (t, i), c in codes.items()])
    cfg = EvalConfig(ExecutionConfig(backend="cpu", workers=2), cache_dir=str(tmp_path / "cache"), progress=False, robust=True)
    s = evaluate_file(tmp_path / "tasks.jsonl", tmp_path / "gens.jsonl", tmp_path / "out" / "results.jsonl", cfg,
                      backend=GxxBackend())
    results = {r.key: r for r in load_results(tmp_path / "out" / "results.jsonl")}
    assert [results[k].robust_check for k in sorted(results)] == ["", "cases", "", "", "strict", "strict"]
    assert results[(1, 1)].passed and results[(1, 1)].ran_ok and results[(1, 1)].robust_status is Status.WRONG
    assert results[(1, 2)].robust_detail == ROBUST_NOT_RUN
    assert s.overall["function@1"] == pytest.approx((2 / 3 + 1) / 2)
    assert s.overall["robust_function@1"] == pytest.approx((1 / 3 + 1 / 3) / 2)
    assert s.overall["robust_failures"] == {"cases": 1, "strict": 2}
    assert s.meta["robust"] is True and s.meta["robust_cases"] == 3
    report = (tmp_path / "out" / "report.md").read_text()
    assert "robust verification on (3 cases)" in report and "| overall | 83.3 | 33.3 | 100.0 | 100.0 |" in report


# ---------------------------------------------------------------- the bundled suite

ROOT = Path(__file__).resolve().parents[2]


def _suite_robust(cache_root, data_root, names=None):
    """bench/robust_suite.py's run over the CPU suite file (all tasks, or those named),
    with the run's shared compile cache and gen.py data."""
    spec_ = importlib.util.spec_from_file_location("robust_suite", ROOT / "bench" / "robust_suite.py")
    bench = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(bench)
    tasks, _ = load_tasks(ROOT / "suites" / "cuset-bench-cpu.jsonl", strict=True)
    if names is not None:
        tasks = [t for t in tasks if t.task_name in names]
        assert {t.task_name for t in tasks} == set(names)
    with tempfile.TemporaryDirectory(prefix="cuset-robust-") as tmp:
        rows = bench.run_suite(tasks, robust_cases=3, workers=2, root=Path(tmp), cache_root=cache_root,
                               data_root=data_root)
    failures = {t.task_name: f"{r.status.value}/{r.robust_status.value}: {r.detail[:200]} {r.robust_detail[:300]}"
                for t, r, _ in rows if not (r.passed and r.robust_passed)}
    assert failures == {}
    assert all(r.robust_detail == "cases 0, 1, 2 passed compare.py and the strict check" for _, r, _ in rows)
    return rows


@needs_gxx
def test_sample_of_bundled_references_pass_robust_on_the_cpu_backend(run_compile_cache, run_gen_data):
    # A float reduction with a scaled tolerance, attention (softmax + matmuls), an exact
    # integer output: the CPU backend's results against gen.py's references, every element.
    _suite_robust(run_compile_cache, run_gen_data, {"Sum_Reduction", "Scaled_Dot_Product_Attention", "Byte_Histogram"})


@pytest.mark.slow
@needs_gxx
def test_every_bundled_reference_passes_robust_on_the_cpu_backend(run_compile_cache, run_gen_data):
    assert len(_suite_robust(run_compile_cache, run_gen_data)) >= 40


def test_the_verdict_and_the_mismatch_record_pair_outputs_with_references_alike(tmp_path):
    """One run dir, three outputs: y differs from its reference in element 2, z has no
    reference file, w is a symlink (never read). The strict verdict stops at the first
    unreadable output in declaration order; the mismatch record names each case."""
    from cuset.evaluate.strict import mismatch_record, strict_check
    from cuset.tasks.schema import TensorSpec

    outputs = (TensorSpec("y", "float32", "(4,)"), TensorSpec("z", "float32", "(4,)"),
               TensorSpec("w", "float32", "(4,)"))
    task = make_task(n=4, outputs=outputs, compare_py="print('compare')\n")  # names no file: only y_ref/w_ref match
    run, ref = tmp_path / "run", tmp_path / "ref"
    (run / "data").mkdir(parents=True)
    ref.mkdir()
    np.array([1, 2, 3, 4], np.float32).tofile(run / "data" / "y.bin")
    np.array([1, 2, 9, 4], np.float32).tofile(ref / "y_ref.bin")
    np.zeros(4, np.float32).tofile(run / "data" / "z.bin")
    np.zeros(4, np.float32).tofile(ref / "w_ref.bin")
    np.zeros(4, np.float32).tofile(tmp_path / "elsewhere.bin")
    (run / "data" / "w.bin").symlink_to(tmp_path / "elsewhere.bin")

    verdict = strict_check(dataclasses.replace(task, outputs=outputs[1:]), run, ref)
    assert not verdict.ok and verdict.detail.startswith("output w: cannot be read (")
    assert verdict.unchecked == ("z (no reference file identified)",)
    first = strict_check(task, run, ref)
    assert first.detail.startswith("output y: 1 of 4 elements differ from y_ref.bin") and "first at index 2" in first.detail

    record = mismatch_record(task, run, ref)
    (y,) = record["outputs"]
    assert y["output"] == "y" and y["n_bad"] == 1 and y["first"][0]["index"] == 2
    assert record["not_compared"][0] == "z: no reference file identified"
    assert record["not_compared"][1].startswith("w: cannot be read (") and len(record["not_compared"]) == 2
