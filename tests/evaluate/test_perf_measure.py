"""perf=true: what a sample's perf record says on each backend, and (with a GPU) a real
timing of a bundled KernelBench answer."""

from pathlib import Path

import pytest

from cuset.evaluate.config import EvalConfig, ExecutionConfig
from cuset.evaluate.perf.measure import measure
from cuset.evaluate.perf.options import PerfOptions
from cuset.evaluate.perf.records import NCU_NOT_INSTALLED, NOT_ON_CPU, NOT_PASSED
from cuset.execute.result import ExecResult, Status
from cuset.tasks import load_tasks

BUNDLE = Path(__file__).resolve().parents[2] / "suites" / "kernelbench"


class CudaBenchTask:
    kind = "cudabench"


def test_nothing_is_timed_on_the_cpu_backend_or_for_a_failure():
    passed = ExecResult(Status.PASSED)
    assert measure(CudaBenchTask(), "int main(){}", passed, "cpu", PerfOptions()) == {
        "status": "not_measured", "kind": "cudabench", "reason": NOT_ON_CPU}
    assert measure(CudaBenchTask(), "x", ExecResult(Status.WRONG), "gpu", PerfOptions())["reason"] == NOT_PASSED
    # no ncu by that name: said per sample, before anything runs
    assert measure(CudaBenchTask(), "x", passed, "gpu", PerfOptions(ncu="no-such-ncu"))["reason"] == NCU_NOT_INSTALLED


def test_perf_options_are_config_keys_and_bad_counts_are_refused():
    cfg = EvalConfig(perf=True, perf_timing=PerfOptions(warmup=1, trials=5))
    assert cfg.perf and cfg.perf_timing.trials == 5
    with pytest.raises(ValueError, match="trials >= 1"):
        PerfOptions(trials=0)


@pytest.mark.gpu
def test_a_bundled_kernelbench_answer_is_timed_on_the_gpu():
    from cuset.evaluate.perf.kernelbench_runner import time_kernelbench

    from cuset.execute.registry import gpu_available

    if not gpu_available():
        pytest.skip("no NVIDIA GPU")
    tasks = {t.id: t for t in load_tasks(BUNDLE)[0]}
    code = (BUNDLE / "solutions" / "kb_gelu.correct.py").read_text()
    perf = time_kernelbench(tasks["kb_gelu"], code, options=PerfOptions(warmup=2, trials=20, run_timeout=600))
    assert perf["status"] == "measured", perf
    assert perf["candidate_ms"]["n"] == 20 and perf["candidate_ms"]["min"] > 0
    assert perf["speedup_eager"] == pytest.approx(perf["eager_ms"]["mean"] / perf["candidate_ms"]["mean"])
    assert perf["speedup_compile"] is not None and perf["device"]
    wrong = (BUNDLE / "solutions" / "kb_gelu.wrong.py").read_text()
    assert time_kernelbench(tasks["kb_gelu"], wrong, options=PerfOptions(warmup=1, trials=5))["status"] == "failed"


@pytest.mark.gpu
def test_a_bundled_cudabench_reference_is_profiled_with_the_real_ncu(tmp_path):
    """cuset eval perf=true on the GPU backend: a bundled CUDABench reference passes and is
    profiled by Nsight Compute; its roofline numbers are ratios of a real GPU's peaks."""
    import shutil

    from cuset.evaluate import EvalConfig, evaluate_file, load_results
    from cuset.execute.registry import gpu_available
    from cuset.generate.records import GenerationRecord, save_generations

    if not gpu_available() or shutil.which("nvcc") is None or shutil.which("ncu") is None:
        pytest.skip("needs an NVIDIA GPU, nvcc and ncu")
    tasks = {t.id: t for t in load_tasks(Path(__file__).resolve().parents[2] / "suites" / "cuset-bench.jsonl")[0]}
    task = tasks[min(tasks)]
    save_generations(tmp_path / "gens.jsonl", [GenerationRecord(task.id, task.task_name, 0, "reference", 1,
                                                                f"```cuda\n{task.bench_cu}```", task.bench_cu, 1,
                                                                "stop", 0.0)])
    out = tmp_path / "out" / "results.jsonl"
    cfg = EvalConfig(ExecutionConfig(backend="gpu", workers=1), cache_dir=str(tmp_path / "cache"), progress=False, perf=True, allow_missing=True)
    evaluate_file([task], tmp_path / "gens.jsonl", out, cfg)
    (r,) = load_results(out)
    assert r.passed, r.detail
    assert r.perf["status"] == "measured", r.perf
    roof = r.perf["roofline"]
    assert 0 < roof["bandwidth_utilisation"] <= 1.5 and 0 <= roof["compute_efficiency"] <= 1.5
    assert roof["score"] == pytest.approx(max(roof["bandwidth_utilisation"], roof["compute_efficiency"]))
    assert r.perf["launches"] >= 1 and r.perf["device"] and "unknown" not in r.perf["device"]
