"""The evaluation pipeline on plain C++ programs through the g++ test backend."""

import dataclasses
import json

import numpy as np
import pytest

from eval_fakes import GxxBackend, make_task, needs_gxx, program
from cuset.evaluate.records import SampleResult
from cuset.evaluate.cudabench import NO_OUTPUTS_DETAIL
from cuset.evaluate.pipeline import evaluate_program
from cuset.evaluate.options import EvalOptions, Timeouts
from cuset.evaluate.workspace import Workspace
from cuset.execute.compile_cache import CompileCache
from cuset.execute.result import Status

pytestmark = needs_gxx


@pytest.fixture
def env(tmp_path):
    backend = GxxBackend()
    with Workspace(tmp_path / "ws") as ws, CompileCache(backend, tmp_path / "cache") as cache:
        def ev(code, task=None, backend_=None, **opts):
            b = backend_ or backend
            c = cache if backend_ is None else CompileCache(b, tmp_path / "cache2")
            return evaluate_program(task or make_task(), code, backend=b, cache=c, workspace=ws,
                                    options=EvalOptions(**opts))
        ev.ws = ws
        ev.backend = backend
        yield ev


def test_correct_program_passes_with_timings_and_steps(env):
    r = env(program())
    assert r.status is Status.PASSED, r.detail
    assert [s.name for s in r.steps] == ["gen[case=0]", "compile", "run[case=0,order=default]", "compare[case=0]"]
    assert set(r.timings) >= {"gen", "compile", "run", "compare", "total"}
    assert r.backend == "fake"


def test_no_code(env):
    assert env(None).status is Status.NO_CODE
    assert env("  \n").status is Status.NO_CODE


def test_compile_error_names_the_error(env):
    r = env("int main() { return undefined_name; }")
    assert r.status is Status.COMPILE_ERROR and "undefined_name" in r.detail


def test_wrong_values(env):
    r = env(program(body="y[i] = 2.0f * x[i];"))
    assert r.status is Status.WRONG and "rejected" in r.detail
    # every element is off by one: the count, and only the first MISMATCH_ELEMENTS of them
    [y] = r.mismatch["outputs"]
    assert (y["n_bad"], y["n_total"], [e["index"] for e in y["first"]]) == (256, 256, [0, 1, 2, 3, 4])
    assert all(abs(e["abs_error"] - 1.0) < 1e-6 for e in y["first"])     # (2x + 1) - 2x, rounded to float32


def test_wrong_values_record_their_first_mismatching_elements(env):
    r = env(program(body="y[i] = (i == 3 || i == 100) ? 0.0f : 2.0f * x[i] + 1.0f;"))
    assert r.status is Status.WRONG
    m = r.mismatch
    assert (m["case"], m["order"], m["verdict"], m["check"], m["not_compared"]) == (0, "default", "plain", "compare.py", [])
    [y] = m["outputs"]
    ref = np.fromfile(env.ws.prepare(make_task(), 0).data_dir / "data" / "y_ref.bin", dtype=np.float32)
    assert (y["output"], y["reference"], y["dtype"], y["n_bad"], y["n_total"]) == ("y", "y_ref.bin", "float32", 2, 256)
    assert [(e["index"], e["at"], e["got"], e["expected"]) for e in y["first"]] == [
        (3, "3", "0.0", str(ref[3])), (100, "100", "0.0", str(ref[100]))]
    assert [e["abs_error"] for e in y["first"]] == [float(ref[3]), float(ref[100])]   # |0 - ref|
    assert [e["rel_error"] for e in y["first"]] == [1.0, 1.0]
    assert y["max_abs_error"] == max(abs(float(ref[3])), abs(float(ref[100])))
    # kept in the results line (a few hundred bytes) and read back as written
    line = SampleResult.from_exec(r, task_id=0, task_name="Axpb", family="axpb", sample=0, compiled=True,
                                  ran_ok=True, n_tokens=None, code_sha256=None).to_json()
    assert len(json.dumps(line["mismatch"])) < 1000
    assert SampleResult.from_json(json.loads(json.dumps(line))).mismatch == m
    assert env(program()).mismatch is None                                # a pass records none


def test_nonzero_exit_is_runtime_error(env):
    r = env(program(body="y[i] = x[i];").replace("return 0;\n}", "return 4;\n}"))
    assert r.status is Status.RUNTIME_ERROR and "exit code 4" in r.detail


def test_crash_reports_signal(env):
    r = env("int main() { volatile int* p = nullptr; *p = 1; return 0; }")
    assert r.status is Status.RUNTIME_ERROR and "SIGSEGV" in r.detail


def test_timeout(env):
    r = env("int main() { for (;;) {} }", timeouts=Timeouts(run=1.0))
    assert r.status is Status.TIMEOUT and "killed" in r.detail


def test_backend_classification_wins(env):
    r = env('#include <cstdio>\nint main() { fprintf(stderr, "UNSUPPORTED_FEATURE tex2D\\n"); return 1; }')
    assert r.status is Status.UNSUPPORTED


def test_missing_output_is_wrong_even_if_exit_zero(env):
    r = env("int main() { return 0; }")
    assert r.status is Status.WRONG and "y was not written" in r.detail
    assert r.mismatch is None   # nothing to compare: no mismatch record


def test_output_of_wrong_size(env):
    r = env(program(n=256).replace("fwrite(y.data(), 4, n, g)", "fwrite(y.data(), 4, n / 2, g)"))
    assert r.status is Status.WRONG and "512 bytes" in r.detail and "1024" in r.detail


def test_copy_of_input_is_rejected(env):
    r = env('#include <cstdlib>\nint main() { return system("cp data/x.bin data/y.bin"); }')
    assert r.status is Status.WRONG and "copy of input x" in r.detail


def test_references_are_not_reachable_from_the_run(env):
    # Try every way the official harness allowed: the reference next to the inputs,
    # or found by walking up to the workspace.
    code = r'''
#include <cstdlib>
int main() {
    int a = system("cp data/y_ref.bin data/y.bin 2>/dev/null");
    int b = system("cp $(timeout 2 find / -name y_ref.bin 2>/dev/null | head -1) data/y.bin 2>/dev/null");
    return 0;
}'''
    r = env(code)
    assert r.status is Status.WRONG and "not written" in r.detail


def test_skipped_when_data_exceed_budget(env):
    r = env(program(), max_data_bytes=100)
    assert r.status is Status.SKIPPED and "budget" in r.detail
    assert r.steps == ()  # nothing ran


def test_budget_from_backend(env):
    small = GxxBackend(max_data_bytes=1000)
    r = env(program(), backend_=small)
    assert r.status is Status.SKIPPED


def test_task_without_outputs_is_reported(env):
    r = env(program(), task=make_task(outputs=()))
    assert r.status is Status.SKIPPED and r.detail == NO_OUTPUTS_DETAIL


def test_broken_gen_py_skips_the_task_not_the_sample(env):
    r = env(program(), task=make_task(gen_py="raise SystemExit('no numpy today')"))
    assert r.status is Status.SKIPPED and "gen.py failed" in r.detail and "no numpy today" in r.detail
    r = env(program(), task=make_task(gen_py="import os\nos.makedirs('data', exist_ok=True)\nopen('data/x.bin','wb').write(b'1')"))
    assert r.status is Status.SKIPPED and "wrote 1 bytes to data/x.bin" in r.detail


def test_several_cases_catch_hard_coded_outputs(env, tmp_path):
    # Record the correct output for case 0 and replay it whatever the input.
    task = make_task()
    ws = env.ws
    prep = ws.prepare(task, 0)
    ref = (prep.data_dir / "data" / "y_ref.bin").read_bytes()
    hexbytes = ",".join(str(b) for b in ref)
    replay = ("#include <cstdio>\nstatic const unsigned char Y[] = {" + hexbytes + "};\n"
              'int main() { FILE* g = fopen("data/y.bin", "wb"); fwrite(Y, 1, sizeof Y, g); fclose(g); return 0; }')
    assert env(replay, task=task, cases=(0,)).status is Status.PASSED
    r = env(replay, task=task, cases=(0, 1))
    assert r.status is Status.WRONG and r.detail.startswith("case 1")
    assert env(program(), task=task, cases=(0, 1)).status is Status.PASSED


def test_order_dependent_output_is_a_race(env):
    racy = program(body='y[i] = (getenv("FAKE_ORDER")[0] == \'f\') ? 2.0f * x[i] + 1.0f : 0.0f;',
                   extra="#include <cstdlib>")
    both = GxxBackend(run_orders=("forward", "random"))
    r = env(racy, backend_=both)
    assert r.status is Status.RACE and "passes under forward" in r.detail
    m = r.mismatch                                  # the rejected order's outputs, element by element
    assert (m["order"], m["check"], m["outputs"][0]["n_bad"], m["outputs"][0]["n_total"]) == ("random", "compare.py", 256, 256)
    assert [e["got"] for e in m["outputs"][0]["first"]] == ["0.0"] * 5
    assert env(program(), backend_=both).status is Status.PASSED


def test_compat_verdict_accepts_silent_compare(env):
    task = make_task(compare_py="pass\n")
    assert env(program(), task=task, compat=True).status is Status.PASSED
    r = env(program(), task=task)
    assert r.status is Status.WRONG and "printed 'nothing'" in r.detail


def test_failing_compare_script(env):
    r = env(program(), task=make_task(compare_py="import sys\nsys.exit('boom')\n"))
    assert r.status is Status.WRONG and "compare.py failed" in r.detail and "boom" in r.detail


def test_gen_runs_once_per_task_and_case(env):
    task = make_task(task_id=9)
    first = env(program(), task=task)
    again = env(program(body="y[i] = 0;"), task=task)
    assert first.steps[0] == again.steps[0]  # same cached gen step


def test_evaluate_program_standalone(tmp_path):
    r = evaluate_program(make_task(), program(), backend=GxxBackend(), workdir=tmp_path,
                         cache=CompileCache(GxxBackend(), tmp_path / "c"))
    assert r.status is Status.PASSED
    assert [p.name for p in tmp_path.iterdir()] == ["c"]  # its temporary workspace is gone


def test_identical_outputs_are_judged_once_but_every_sample_runs(env):
    first = env(program())
    second = env(program())
    assert first.status is second.status is Status.PASSED
    assert [s.name for s in second.steps].count("run[case=0,order=default]") == 1   # the program ran again
    cmp = [s for s in second.steps if s.name.startswith("compare")][0]
    assert cmp.seconds == 0.0 and "verdict reused" in cmp.stderr
    # Different outputs are judged afresh.
    third = env(program(body="y[i] = 2.0f * x[i] - 1.0f;"))
    assert third.status is Status.WRONG
    assert "verdict reused" not in [s for s in third.steps if s.name.startswith("compare")][0].stderr
