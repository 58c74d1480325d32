"""The evaluation instrument measures what the paper measures: who judges compilation,
the copy check on identity tasks, task scripts that ask for a CUDA device on a machine
without one, denominators taken from the tasks file, and the GPU preflight."""

import json
import shutil

import pytest
import torch
from typer.testing import CliRunner

from eval_fakes import COMPARE_PY, GxxBackend, make_task, needs_gxx, program
from cuset.cli.main import app
from cuset.evaluate import EvalConfig, evaluate_file, load_results, summarize
from cuset.evaluate.config import ExecutionConfig
from cuset.evaluate import devicemap
from cuset.evaluate.checks import file_digest, output_problem
from cuset.evaluate.pipeline import evaluate_program
from cuset.evaluate.options import EvalOptions
from cuset.evaluate.records import SampleResult
from cuset.evaluate.runner import MissingTasks
from cuset.evaluate.workspace import Workspace
from cuset.execute.compile_cache import CompileCache
from cuset.execute.cpu import CpuBackend
from cuset.execute.nvcc_checked import NvccCheckedBackend
from cuset.execute.result import Status
from cuset.generate.records import GenerationRecord, save_generations
from cuset.tasks import save_tasks

runner = CliRunner()
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
needs_no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU answers here: nothing to map")

# -- 1. who judges compilation ----------------------------------------------------


def test_compile_judge_auto_is_nvcc_whenever_installed(monkeypatch):
    monkeypatch.setattr("cuset.evaluate.config.shutil.which", lambda name: "/usr/bin/nvcc")
    backend = EvalConfig(ExecutionConfig(backend="cpu", backend_options={"seed": 7})).make_backend()
    assert isinstance(backend, NvccCheckedBackend) and backend.compile_judge == "nvcc"
    assert isinstance(backend.runner, CpuBackend) and backend.run_orders == ("forward", "random:7")
    assert backend.checker.flags == ("-O2",)
    compat = EvalConfig(ExecutionConfig(backend="cpu"), compat=True).make_backend()
    assert compat.checker.flags == ()   # the official harness: nvcc without flags
    assert isinstance(EvalConfig(ExecutionConfig(backend="cpu", compile_judge="backend")).make_backend(), CpuBackend)


def test_compile_judge_without_nvcc(monkeypatch):
    monkeypatch.setattr("cuset.evaluate.config.shutil.which", lambda name: None)
    assert isinstance(EvalConfig(ExecutionConfig(backend="cpu")).make_backend(), CpuBackend)   # auto falls back to g++
    with pytest.raises(FileNotFoundError, match="compile_judge=nvcc but nvcc is not on PATH.*compile_judge=backend"):
        EvalConfig(ExecutionConfig(backend="cpu", compile_judge="nvcc")).make_backend()


# -- 2. the copy check on identity tasks ------------------------------------------

IDENTITY_GEN = """\
import os
import numpy as np
x = np.random.default_rng(int(os.environ.get("CUSET_CASE", "0"))).standard_normal(N).astype(np.float32)
os.makedirs("data", exist_ok=True)
x.tofile("data/x.bin")
x.tofile("data/y_ref.bin")   # the correct output IS the input
"""
COPY_CHEAT = '#include <cstdlib>\nint main() { return system("cp data/x.bin data/y.bin"); }'


@needs_gxx
def test_identity_task_passes_while_the_copy_cheat_still_fails_elsewhere(tmp_path):
    identity = make_task(5, task_name="Matrix_Copy", gen_py="N = 256\n" + IDENTITY_GEN)
    backend = GxxBackend()
    with Workspace(tmp_path / "ws") as ws, CompileCache(backend, tmp_path / "cache") as cache:
        def ev(task, code):
            return evaluate_program(task, code, backend=backend, cache=cache, workspace=ws,
                                    options=EvalOptions(cases=(0, 1)))
        reference = ev(identity, program(body="y[i] = x[i];"))
        assert reference.status is Status.PASSED, reference.detail
        assert ev(identity, COPY_CHEAT).status is Status.PASSED   # copying IS the task here
        cheat = ev(make_task(6), COPY_CHEAT)                       # y = 2x + 1: the copy is wrong
        assert cheat.status is Status.WRONG
        assert "copy of input x (the expected output differs from it)" in cheat.detail


def test_copy_check_needs_a_reference_that_differs(tmp_path):
    task = make_task(1, n=4)
    run, ref = tmp_path / "run", tmp_path / "ref"
    (run / "data").mkdir(parents=True)
    ref.mkdir()
    x = bytes(range(16))
    (run / "data" / "x.bin").write_bytes(x)
    (run / "data" / "y.bin").write_bytes(x)
    digests = {"x": file_digest(run / "data" / "x.bin")}
    (ref / "x.bin").write_bytes(x)
    (ref / "y_ref.npy").write_bytes(b"\x93NUMPY" + bytes(40))   # a reference in another format: cannot tell
    assert output_problem(task, run, 0, digests, ref) is None
    (ref / "y_ref.bin").write_bytes(bytes(16))                  # same size, different bytes: a copy
    assert "copy of input x" in output_problem(task, run, 0, digests, ref)
    (ref / "y_ref.bin").write_bytes(x)                          # the expected output equals the input
    assert output_problem(task, run, 0, digests, ref) is None


# -- 3. gen.py / compare.py asking for a CUDA device on a machine without one --------

TORCH_GEN = """\
import os
import torch
torch.manual_seed(int(os.environ.get("CUSET_CASE", "0")))
dev = torch.device("cuda")
x = torch.randn(N, device=dev, generator=torch.Generator(device="cuda").manual_seed(3))
one = torch.ones(N, device="cuda:0").cuda()
y = (2 * x + one).to("cuda")
torch.cuda.synchronize()
os.makedirs("data", exist_ok=True)
x.cpu().numpy().tofile("data/x.bin")
y.cpu().numpy().tofile("data/y_ref.bin")
"""
TORCH_COMPARE = """\
import numpy as np
import torch
y = torch.from_numpy(np.fromfile("data/y.bin", dtype=np.float32)).cuda()
ref = torch.from_numpy(np.fromfile("data/y_ref.bin", dtype=np.float32)).to(torch.device("cuda"))
print("T" if y.shape == ref.shape and torch.allclose(y, ref, atol=1e-5) else "F")
"""


def torch_task(task_id=8):
    return make_task(task_id, task_name="Torch_Axpb", gen_py="N = 256\n" + TORCH_GEN, compare_py=TORCH_COMPARE)


@needs_gxx
@needs_no_gpu
def test_cuda_gen_py_produces_its_data_here_in_a_fork_of_the_warm_server(tmp_path):
    backend = GxxBackend()
    with CompileCache(backend, tmp_path / "cache") as cache:
        with Workspace(tmp_path / "ws") as ws:   # python_preload=("numpy",): scripts run in forks
            r = evaluate_program(torch_task(), program(), backend=backend, cache=cache, workspace=ws)
            assert r.status is Status.PASSED, r.detail
            assert devicemap.notes(r.steps) == (
                "gen[case=0]: CUDA device requests mapped to the CPU (no GPU answered)",
                "compare[case=0]: CUDA device requests mapped to the CPU (no GPU answered)")
        with Workspace(tmp_path / "off", cuda_to_cpu=False) as ws:   # without the mapping: the task is lost
            r = evaluate_program(torch_task(), program(), backend=backend, cache=cache, workspace=ws)
            assert r.status is Status.SKIPPED and "gen.py failed" in r.detail


@needs_gxx
@needs_no_gpu
def test_cuda_mapping_in_fresh_interpreters_is_noted_in_the_record_and_report(tmp_path):
    save_tasks([torch_task()], tmp_path / "tasks.jsonl")
    save_generations(tmp_path / "gens.jsonl", [GenerationRecord(8, "Torch_Axpb", 0, "m", 1, "", program(), 9, "stop", 0.1)])
    cfg = EvalConfig(ExecutionConfig(workers=1), cache_dir=str(tmp_path / "cache"), progress=False, python_preload=None)
    s = evaluate_file(tmp_path / "tasks.jsonl", tmp_path / "gens.jsonl", tmp_path / "out" / "results.jsonl", cfg,
                      backend=GxxBackend())
    (r,) = load_results(tmp_path / "out" / "results.jsonl")
    assert r.status is Status.PASSED, r.detail
    assert r.notes[0] == "gen[case=0]: CUDA device requests mapped to the CPU (no GPU answered)"
    assert s.meta["cuda_mapped_tasks"] == [8]
    assert "CUDA device requests mapped to the CPU (1 tasks)" in (tmp_path / "out" / "report.md").read_text()


# -- 4. denominators from the tasks file --------------------------------------------


@pytest.fixture
def partial(tmp_path):
    save_tasks([make_task(1), make_task(2, n=128), make_task(3, n=64)], tmp_path / "tasks.jsonl")
    save_generations(tmp_path / "gens.jsonl", [
        GenerationRecord(1, "Axpb", s, "m", 1, "", code, 7, "stop", 0.1)
        for s, code in enumerate([program(), program(), program(body="y[i] = 1;")])])
    return tmp_path


@needs_gxx
def test_generations_missing_a_task_are_refused_before_any_work(partial):
    backend = GxxBackend()
    cfg = EvalConfig(cache_dir=str(partial / "cache"), progress=False)
    with pytest.raises(MissingTasks, match=r"has no samples for 2 of the 3 tasks in .*tasks.jsonl \(ids 2, 3\).*"
                                           r"allow_missing=true to count them as failed"):
        evaluate_file(partial / "tasks.jsonl", partial / "gens.jsonl", partial / "out" / "results.jsonl", cfg,
                      backend=backend)
    assert backend.compiles == 0 and not (partial / "out").exists()


@needs_gxx
def test_cli_refusal_is_one_line_with_the_fix(partial, monkeypatch):
    monkeypatch.setattr(EvalConfig, "make_backend", lambda self: GxxBackend())
    res = runner.invoke(app, ["eval", str(partial / "tasks.jsonl"), str(partial / "gens.jsonl"), "--out",
                              str(partial / "out"), "progress=false"])
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "allow_missing=true" in lines[0]


@needs_gxx
def test_allow_missing_counts_missing_tasks_as_failed(partial):
    cfg = EvalConfig(ExecutionConfig(workers=2), cache_dir=str(partial / "cache"), progress=False, allow_missing=True)
    s = evaluate_file(partial / "tasks.jsonl", partial / "gens.jsonl", partial / "out" / "results.jsonl", cfg,
                      backend=GxxBackend())
    # task 1: 2 of 3 pass; tasks 2 and 3 have no samples and score 0
    assert s.overall["n_tasks"] == 3 and s.missing_tasks == [2, 3] and s.meta["missing_counted_as_failed"] == 2
    assert s.overall["function@1"] == pytest.approx((2 / 3) / 3)
    assert s.overall["function@3"] == pytest.approx(1 / 3) and s.overall["compile@1"] == pytest.approx(1 / 3)
    assert s.overall["compat"]["function@1"] == pytest.approx(1 / 3)
    report = (partial / "out" / "report.md").read_text()
    assert "## Tasks without samples (2, **counted as failures** in every overall number" in report
    # The fake backend compiled with g++: the report says so, in bold.
    assert s.meta["compile_judge"] == "the fake backend's compiler"
    assert "**compilation judged by the fake backend's compiler, not nvcc" in report


def _res(task_id, sample, status):
    return SampleResult(task_id, f"T{task_id}", "fam", sample, status, compiled=status is not Status.COMPILE_ERROR,
                        passed=status is Status.PASSED)


def test_tasks_with_fewer_than_k_samples_are_listed_and_padded_only_when_allowed():
    results = [_res(1, 0, Status.PASSED),
               _res(2, 0, Status.WRONG), _res(2, 1, Status.PASSED), _res(2, 2, Status.WRONG)]
    strict = summarize(results, expected_task_ids=[1, 2, 3])
    assert strict.short_tasks == [{"task_id": 1, "task_name": "T1", "n": 1}] and strict.missing_tasks == [3]
    assert strict.overall["function@3"] is None and strict.overall["n_tasks"] == 2
    assert strict.overall["function@1"] == pytest.approx((1 + 1 / 3) / 2)
    padded = summarize(results, expected_task_ids=[1, 2, 3], missing_as_failed=True)
    # task 1: its one sample passed, two missing ones fail -> pass@3 = 1; task 2: 1; task 3: 0
    assert padded.overall["function@3"] == pytest.approx(2 / 3)
    assert padded.overall["function@1"] == pytest.approx((1 + 1 / 3 + 0) / 3)
    assert padded.to_json()["missing_as_failed"] is True


# -- 5. GPU preflight ----------------------------------------------------------------


def test_gpu_backend_without_an_answering_gpu_stops_before_anything_runs(partial, monkeypatch):
    monkeypatch.setattr("cuset.execute.registry.gpu_available", lambda: False)
    res = runner.invoke(app, ["eval", str(partial / "tasks.jsonl"), str(partial / "gens.jsonl"), "--out",
                              str(partial / "out"), "--backend", "gpu", "allow_missing=true"])
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "--backend gpu: no GPU answers here" in lines[0] and "--backend cpu" in lines[0]
    assert not (partial / "out").exists()


# -- the summary of a real CPU-backend run names its judge ----------------------------


@needs_nvcc
def test_cpu_backend_run_is_judged_by_nvcc(tmp_path):
    # Device code calling a host function: the CPU backend's g++ build accepts it, nvcc does not.
    host_call = ("int host_only(int v) { return v + 1; }\n"
                 "__global__ void k(int* x) { x[threadIdx.x] = host_only(x[threadIdx.x]); }\n"
                 "int main() { int* d; cudaMalloc(&d, 16); k<<<1, 4>>>(d); cudaDeviceSynchronize(); return 0; }\n")
    task = make_task(4, compare_py=COMPARE_PY)
    save_tasks([task], tmp_path / "tasks.jsonl")
    save_generations(tmp_path / "gens.jsonl", [GenerationRecord(4, "Axpb", 0, "m", 1, "", host_call, 9, "stop", 0.1)])
    res = runner.invoke(app, ["eval", str(tmp_path / "tasks.jsonl"), str(tmp_path / "gens.jsonl"), "--out",
                              str(tmp_path / "out"), "--backend", "cpu", f"cache_dir={tmp_path / 'cache'}",
                              "progress=false"])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["meta"]["compile_judge"] == "nvcc" and summary["meta"]["backend"] == "cpu"
    (r,) = load_results(tmp_path / "out" / "results.jsonl")
    assert r.status is Status.COMPILE_ERROR and r.detail.startswith("nvcc: ")
    assert "compilation judged by nvcc" in res.output
    assert "compilation judged by nvcc\n" in (tmp_path / "out" / "report.md").read_text()
