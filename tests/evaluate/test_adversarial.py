"""Hostile CUDA programs (tests/fixtures/adversarial) against the whole pipeline.

Each must be contained and fail with its expected status, and the harness must
still evaluate the honest reference correctly afterwards. They run on the CPU
backend (nothing CUDA runs on this machine's GPU-less hardware); compiling them
with nvcc checks that they are complete CUDA programs.
"""

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cuset.evaluate.pipeline import evaluate_program

from cuset.evaluate.options import EvalOptions, Timeouts
from cuset.evaluate.workspace import Workspace
from cuset.execute.compile_cache import CompileCache
from cuset.execute.cpu import CpuBackend
from cuset.execute.result import Status
from cuset.execute.sandbox import SandboxPolicy
from cuset.tasks import Task
from sandbox_tools import AUTO_MODE, needs_a_sandbox

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "adversarial"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())
TASK = Task.from_json(json.loads((FIXTURES / "task.json").read_text()))
ESCAPES = [Path("/tmp/cuset_escape.bin"), Path("/var/tmp/cuset_escape.bin"), Path("/dev/shm/cuset_escape.bin"),
           Path("/root/cuset_escape.bin"), Path("/cuset_escape.bin")]


def cpu_backend():
    return CpuBackend()


def test_fixture_set_is_complete():
    programs = sorted(p.name for p in FIXTURES.glob("*.cu") if p.name != "reference.cu")
    assert programs == sorted(EXPECTED)
    assert len(programs) == 11


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_fixtures_are_complete_cuda_programs(tmp_path):
    from cuset.execute.gpu import GpuBackend

    with CompileCache(GpuBackend(), tmp_path / "cache", workers=os.cpu_count()) as cache:
        futures = {p.name: cache.submit(p.read_text()) for p in sorted(FIXTURES.glob("*.cu"))}
        for name, fut in futures.items():
            outcome = fut.result()
            assert outcome.ok, f"{name}: {outcome.detail}\n{outcome.step.stderr}"


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """Evaluate every fixture once, in order, with the reference before and after, in the
    mode cuset picks here (bubblewrap wherever it is installed: a broken one fails)."""
    if AUTO_MODE is None:
        pytest.skip(needs_a_sandbox.kwargs["reason"])
    backend = cpu_backend()
    root = tmp_path_factory.mktemp("adv")
    for p in ESCAPES:
        if p.exists():
            p.unlink()
    results = {}
    with Workspace(root / "ws") as ws, CompileCache(backend, root / "cache") as cache:
        opts = EvalOptions(timeouts=Timeouts(run=5.0), sandbox=SandboxPolicy(mode=AUTO_MODE, processes=64))
        prep = ws.prepare(TASK, 0)
        ref_path = prep.data_dir / "data" / "y_ref.bin"
        ref_digest = hashlib.sha256(ref_path.read_bytes()).hexdigest()
        names = ["reference.cu", *sorted(EXPECTED), "reference.cu"]
        for i, name in enumerate(names):
            r = evaluate_program(TASK, (FIXTURES / name).read_text(), backend=backend, cache=cache, workspace=ws,
                                 options=opts)
            results[name if i < len(names) - 1 else "reference.cu (after)"] = r
        results["_ref_digest_after"] = hashlib.sha256(ref_path.read_bytes()).hexdigest() == ref_digest
        results["_run_dirs_left"] = sorted(p.name for p in (ws.root / "runs").iterdir())
        results["_runs_root"] = str(ws.root / "runs")
    return results


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_adversarial_program_fails_with_expected_status(evaluated, name):
    r = evaluated[name]
    expected = Status(EXPECTED[name])
    if name == "kills_parent.cu" and AUTO_MODE == "unshare":
        # unshare mode: its parent is the namespace's init, whose death ends the run.
        assert r.status in (Status.WRONG, Status.RUNTIME_ERROR), r.detail
    else:
        assert r.status is expected, f"{name}: {r.status.value}: {r.detail}"
    assert not r.passed


def test_reference_passes_before_and_after(evaluated):
    assert evaluated["reference.cu"].status is Status.PASSED, evaluated["reference.cu"].detail
    assert evaluated["reference.cu (after)"].status is Status.PASSED


def test_reference_data_untouched_and_nothing_escaped(evaluated):
    assert evaluated["_ref_digest_after"]
    assert [p for p in ESCAPES if p.exists()] == []
    assert evaluated["_run_dirs_left"] == []


def test_no_process_survives(evaluated):
    # a program runs from its run dir under the workspace's runs/ (bound at the same path in the
    # sandbox); any other job's "/runs/" on this machine is not this test's business
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    survivors = [line for line in out.splitlines() if "fork_bomb" in line or evaluated["_runs_root"] in line]
    assert survivors == []


def test_flood_is_bounded_in_the_log(evaluated):
    step = [s for s in evaluated["floods_stdout.cu"].steps if s.name.startswith("run[")][0]
    assert step.timed_out and len(step.stdout) < 10_000


def test_details_explain(evaluated):
    assert "not written" in evaluated["writes_nothing.cu"].detail
    assert "not written" in evaluated["copy_reference.cu"].detail
    assert "rejected" in evaluated["writes_constant.cu"].detail
    assert "not written" in evaluated["prints_T.cu"].detail
    assert "exit code 3" in evaluated["network.cu"].detail
