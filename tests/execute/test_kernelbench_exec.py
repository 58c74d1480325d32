"""KernelBench candidates on the CPU backend: load_inline built as a CPU extension,
verified in the sandbox against the PyTorch reference (plain and robust)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from cuset.evaluate.kernelbench import evaluate_kernelbench, robust_checks
from cuset.evaluate.pipeline import evaluate_program
from cuset.evaluate.options import EvalOptions, Timeouts
from cuset.execute.compile_cache import CompileCache
from cuset.execute.kernelbench.build import ExtensionBuilder, ExtensionSpec, bindings_source
from cuset.execute.kernelbench.options import VerifyOptions
from cuset.execute.kernelbench.verify import extract_specs, plain_checks, verify
from cuset.execute.result import Status
from cuset.tasks import KernelBenchTask

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench"
REFERENCE = (FIXTURES / "relu_ref.py").read_text()
RELU_OK = (FIXTURES / "relu_ok.py").read_text()
# Every variant below keeps relu_ok's load_inline call: one extension build for all of them.
RELU_HEAD = RELU_OK.split("class ModelNew")[0]
OPTIONS = EvalOptions(timeouts=Timeouts(compile=600, run=30))


TASK = KernelBenchTask("kb_relu", "ReLU", REFERENCE)


@pytest.fixture(scope="module")
def cache():
    """One extension cache for the file (content-addressed, in the user cache dir:
    later sessions reuse the builds)."""
    with CompileCache(ExtensionBuilder(), timeout=600) as c:
        yield c


def run(candidate, cache, n_trials=2, **settings):
    """`candidate` on `n_trials` plain trials; `settings`: VerifyOptions fields besides the file's own."""
    options = VerifyOptions(**{"compile_timeout": 600, "step_timeout": 30, **settings})
    return verify(REFERENCE, candidate, plain_checks(n_trials), options=options, cache=cache)


def candidate(model_new: str) -> str:
    return RELU_HEAD + model_new


# ---------------------------------------------------------------- plain verdicts
def test_correct_candidate_passes_through_evaluate_program(cache):
    """Device placement maps to the CPU: x.is_cuda()/kCUDA CHECKs in C++, the current
    stream, C10_CUDA_KERNEL_LAUNCH_CHECK, and .cuda()/.to("cuda")/device="cuda"/x.is_cuda in Python."""
    from cuset.execute.registry import get_backend

    result = evaluate_program(TASK, RELU_OK, backend=get_backend("cpu"), options=OPTIONS, cache=cache)
    assert result.status is Status.PASSED, result.detail
    assert result.backend == "cpu" and result.robust_status is None
    # the forward-order trials, then the random thread order (its build is a cache hit)
    assert [s.name for s in result.steps] == ["compile", "kernelbench[cpu]"] * 2


def test_off_by_one_is_wrong_with_the_max_error(cache):
    v = run((FIXTURES / "relu_off_by_one.py").read_text(), cache)
    assert v.status is Status.WRONG
    assert (v.check, v.trial, v.seed) == ("trials", 0, 42)
    torch.manual_seed(42)
    x = torch.randn(4, 1000).flatten()                 # relu_ref.get_inputs() under seed 42
    shifted = torch.cat([x[1:], x[-1:]])               # the candidate reads x[i + 1]
    expected = (torch.relu(shifted) - torch.relu(x)).abs().max().item()
    assert v.max_abs_err == pytest.approx(expected, rel=1e-6)
    assert "elements differ beyond atol=0.01, rtol=0.01" in v.detail


def test_compile_error_carries_the_compiler_log(cache):
    v = run((FIXTURES / "relu_compile_error.py").read_text(), cache)
    assert v.status is Status.COMPILE_ERROR
    assert "load_inline('relu_broken')" in v.detail and "cuda.cu:6:" in v.detail
    assert "cuda.cu:6:" in v.log and "error" in v.log


@pytest.mark.parametrize("body, expect", [
    ("    def forward(self, x):\n        raise ValueError('boom')\n", "ValueError: boom"),
    # TORCH_CHECK inside the extension (data_ptr<float> of a double tensor) -> RuntimeError
    ("    def forward(self, x):\n        return relu.relu_cuda(x.double())\n", "RuntimeError"),
    # wrong arity through the bindings -> TypeError
    ("    def forward(self, x):\n        return relu.leaky_cuda(x, 0.0)\n",
     "TypeError: leaky_cuda() takes 3 positional arguments but 2 were given"),
])
def test_exception_in_forward_is_runtime_error(cache, body, expect):
    v = run(candidate("class ModelNew(nn.Module):\n" + body), cache)
    assert v.status is Status.RUNTIME_ERROR, v.detail
    assert expect in v.detail and "trial 0, seed 42" in v.detail


def test_out_of_bounds_kernel_is_runtime_error_naming_the_kernel(cache):
    oob = RELU_OK.replace("if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;", "if (i < n) y[i + (1ll << 34)] = x[i];")
    v = run(oob, cache, n_trials=1)
    assert v.status is Status.RUNTIME_ERROR
    assert "invalid memory access" in v.detail and "in kernel 'relu_kernel' (launched at cuda.cu:" in v.detail
    assert "during candidate forward" in v.detail


def test_kernel_that_never_ends_is_timeout(cache):
    v = run((FIXTURES / "relu_spin.py").read_text(), cache, step_timeout=4)
    assert v.status is Status.TIMEOUT
    assert v.detail.startswith("candidate forward still running after 4 s")
    assert (v.check, v.trial, v.seed) == ("trials", 0, 42)


def test_unsupported_feature_is_named(cache):
    blas = RELU_OK.replace("    CHECK_CUDA(x);\n    auto y", "    CHECK_CUDA(x);\n    cublasHandle_t h;\n"
                           "    cublasCreate(&h);\n    auto y")
    v = run(blas, cache)
    assert v.status is Status.UNSUPPORTED
    assert "load_inline('relu'): uses cuBLAS" in v.detail and "cublasHandle_t" in v.detail


def test_triton_candidate_is_unsupported_on_the_cpu():
    triton = "import torch\nimport triton\nimport triton.language as tl\n\n\nclass ModelNew(torch.nn.Module):\n" \
             "    def forward(self, x):\n        return torch.relu(x)\n"
    v = verify(REFERENCE, triton, plain_checks(1))
    assert v.status is Status.UNSUPPORTED
    assert v.detail == "imports triton (Triton kernels), which does not run on the CPU backend"


def test_no_code_and_no_model_new():
    assert verify(REFERENCE, "  \n").status is Status.NO_CODE
    v = verify(REFERENCE, "import torch\nclass Model2(torch.nn.Module):\n    pass\n")
    assert v.status is Status.NO_CODE and "ModelNew" in v.detail


def test_sources_built_at_run_time_are_found_by_the_harness(cache):
    """No literal sources for the static scan: the harness asks, the parent builds, runs again."""
    dynamic = RELU_OK.replace("cuda_sources=relu_source", 'cuda_sources="".join(list(relu_source))')
    assert extract_specs(dynamic) == []
    v = run(dynamic, cache)
    assert v.status is Status.PASSED, v.detail
    assert [s.name for s in v.steps] == ["kernelbench[cpu]", "compile", "kernelbench[cpu]"]


def test_run_time_builds_stop_at_the_samples_build_budget(cache):
    """Issue 37: the extension builds of one sample share one budget of wall time."""
    dynamic = RELU_OK.replace("cuda_sources=relu_source", 'cuda_sources="".join(list(relu_source))')
    v = run(dynamic, cache, build_budget_seconds=0.0)
    assert v.status is Status.COMPILE_ERROR
    assert v.detail == ("the candidate's extension builds took 0.0 s of wall time and 0.0 s of CPU time, its "
                        "whole budget of 0 s, and it asks for 1 more")
    assert [s.name for s in v.steps] == ["kernelbench[cpu]"]   # nothing built


def test_device_mapping_is_scoped_to_the_candidate():
    """x.is_cuda reads True in the candidate's code only: the reference (and torch's own
    Python code) still see the CPU tensor it is."""
    reference = REFERENCE.replace("return torch.relu(x)", "return torch.relu(x) + (1.0 if x.is_cuda else 0.0)")
    pure_torch = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n" \
                 "        assert x.is_cuda\n        return torch.relu(x)\n"
    v = verify(reference, pure_torch, plain_checks(1), options=VerifyOptions(step_timeout=30))
    assert v.status is Status.PASSED, v.detail + v.log


def test_rnn_reference_with_parameter_gradients_under_the_device_map():
    reference = (FIXTURES / "lstm_ref.py").read_text()
    pure_torch = reference.replace("class Model(", "class ModelNew(").replace(
        "return self.fc(out[:, -1])",
        "assert x.is_cuda and torch.cuda.is_available()\n        return self.fc(out[:, -1].cuda())")
    v = verify(reference, pure_torch, plain_checks(2, backward=True), options=VerifyOptions(step_timeout=30))
    assert v.status is Status.PASSED, v.detail + v.log


def test_static_scan_and_bindings():
    (spec,) = extract_specs(RELU_OK)
    assert spec.name == "relu" and spec.functions == ("relu_cuda", "leaky_cuda")
    assert spec.cpp_sources[0].strip().startswith("torch::Tensor relu_cuda")
    assert 'cuset_kb::invoke("leaky_cuda", &leaky_cuda, args)' in bindings_source(spec)
    with pytest.raises(ValueError, match="not C\\+\\+ identifiers"):
        bindings_source(ExtensionSpec("x", ("",), (), ("f(); system",)))


# ---------------------------------------------------------------- isolation
def test_candidate_patching_the_comparison_is_wrong(cache):
    """The comparison runs in the parent: patching torch/numpy in the candidate's process changes nothing."""
    forger = RELU_HEAD + (
        "import torch, numpy\n"
        "torch.allclose = lambda *a, **k: True\n"
        "torch.isclose = lambda a, b, **k: torch.ones_like(a, dtype=torch.bool)\n"
        "numpy.allclose = lambda *a, **k: True\n"
        "class ModelNew(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x * 0 + 7\n")
    v = run(forger, cache)
    assert v.status is Status.WRONG, v.detail
    assert (v.check, v.trial, v.seed) == ("trials", 0, 42)
    torch.manual_seed(42)
    expected = (7 - torch.relu(torch.randn(4, 1000))).abs().max().item()
    assert v.max_abs_err == pytest.approx(expected, rel=1e-6)


def test_candidate_finds_no_reference_outputs_on_disk(cache):
    """The reference's outputs (and source) are never where the candidate's process can look."""
    snoop = candidate('''import glob, os


def _found():
    seen = []
    here = os.getcwd()
    for root in {here, os.path.dirname(here), os.path.dirname(os.path.dirname(here)), "/tmp"}:
        for pattern in ("**/*.safetensors", "**/*.npy", "**/*.pt", "**/reference.py", "**/expected*"):
            seen += [p for p in glob.glob(os.path.join(root, pattern), recursive=True)
                     if "/inputs/" not in p and "/outputs/" not in p]
    return sorted(set(seen))


class ModelNew(nn.Module):
    def forward(self, x):
        found = _found()
        if found:
            raise RuntimeError("found " + ", ".join(found))
        return relu.relu_cuda(x) + 1.0
''')
    v = run(snoop, cache)
    assert v.status is Status.WRONG, v.detail   # not runtime_error: nothing was found
    assert "max abs error 1;" in v.detail


def test_malformed_candidate_outputs_are_a_runtime_error(tmp_path):
    from cuset.execute.kernelbench.compare import judge

    checks = [{"name": "trials", "seeds": [42]}]
    expected = {"c0_t0": ({"outputs": [{"t": "out.0"}]}, {"out.0": torch.zeros(3)})}
    (tmp_path / "c0_t0.json").write_text('{"outputs": [{"t": "out.0"}]}')
    (tmp_path / "c0_t0.safetensors").write_bytes(b"\x80\x04pickle, not safetensors")
    r = judge(checks, expected, tmp_path, {"status": "ran"}, 1e-2, 1e-2)
    assert r["status"] == "runtime_error" and "malformed" in r["detail"] and "unreadable" in r["detail"]
    (tmp_path / "c0_t0.safetensors").write_bytes(b"\0" * (2 * 12 + (1 << 20) + 1))
    r = judge(checks, expected, tmp_path, {"status": "ran"}, 1e-2, 1e-2)
    assert r["status"] == "runtime_error" and "more than" in r["detail"]
    # no files and a run that claims to have finished
    r = judge(checks, expected, tmp_path / "none", {"status": "ran"}, 1e-2, 1e-2)
    assert r == {"status": "runtime_error",
                 "detail": "the candidate's run ended without writing the outputs of check trials, trial 0"}


# ---------------------------------------------------------------- robust verdicts
HARDCODED = candidate('''class ModelNew(nn.Module):
    """Ignores its input: regenerates what the default seeds (42, 43, ...) give."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        torch.manual_seed(42 + self.calls)
        self.calls += 1
        return relu.relu_cuda(torch.randn(4, 1000))
''')

AUTOGRAD = candidate('''class ReluFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return relu.relu_cuda(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return GRADIENT


class ModelNew(nn.Module):
    def forward(self, x):
        return ReluFn.apply(x)
''')


def robust_task(**kw):
    return dataclasses.replace(TASK, n_trials=3, **kw)


def robust_eval(task, code, cache):
    return evaluate_kernelbench(task, code, backend="cpu", cache=cache,
                                options=dataclasses.replace(OPTIONS, robust=True, robust_cases=2))


def test_hardcoded_outputs_pass_plain_and_fail_robust(cache):
    r = robust_eval(robust_task(), HARDCODED, cache)
    assert r.status is Status.PASSED
    assert r.robust_status is Status.WRONG and r.robust_check == "seeds"
    assert "seed 10000" in r.robust_detail and r.robust_passed is False


def test_backward_catches_a_wrong_gradient(cache):
    r = robust_eval(robust_task(backward=True), AUTOGRAD.replace("GRADIENT", "grad"), cache)
    assert r.status is Status.PASSED
    assert r.robust_status is Status.WRONG and r.robust_check == "backward"
    assert "backward: gradient of input 0" in r.robust_detail


def test_backward_catches_a_candidate_that_is_not_differentiable(cache):
    r = robust_eval(robust_task(backward=True), candidate(
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return relu.relu_cuda(x)\n"), cache)
    assert r.status is Status.PASSED
    assert r.robust_check == "backward" and "not differentiable" in r.robust_detail


def test_correct_candidate_passes_every_robust_check(cache):
    task = robust_task(backward=True, shape_variants=({"batch_size": 3, "dim": 1537},),
                       value_variants=("negative", "zeros", "large"))
    assert [c.name for c in robust_checks(task, 2)] == [
        "seeds", "shapes[batch_size=3,dim=1537]", "values[negative]", "values[zeros]", "values[large]", "backward"]
    r = robust_eval(task, AUTOGRAD.replace("GRADIENT", "grad * (x > 0).to(grad.dtype)"), cache)
    assert r.status is Status.PASSED, r.detail
    assert r.robust_status is Status.PASSED and r.robust_passed is True, r.robust_detail


def test_shape_and_value_variants_catch_special_cased_candidates(cache):
    fixed_shape = candidate("class ModelNew(nn.Module):\n    def forward(self, x):\n"
                            "        return relu.relu_cuda(x.reshape(4, 1000))\n")
    r = robust_eval(robust_task(shape_variants=({"dim": 1001},)), fixed_shape, cache)
    assert r.status is Status.PASSED and r.robust_check == "shapes"
    assert r.robust_status is Status.RUNTIME_ERROR   # reshape of 4004 elements into (4, 1000) raises
    clamped = candidate("class ModelNew(nn.Module):\n    def forward(self, x):\n"
                        "        return relu.relu_cuda(x).clamp(max=10.0)\n")
    r = robust_eval(robust_task(value_variants=("negative", "large")), clamped, cache)
    assert r.status is Status.PASSED
    assert r.robust_status is Status.WRONG and r.robust_check == "values" and "values[large]" in r.robust_detail


def test_missing_syncthreads_passes_forward_order_but_is_a_race_in_the_plain_verdict(cache):
    # The CPU backend's plain verdict runs a random thread order too, as for CUDABench programs.
    r = robust_eval(robust_task(), (FIXTURES / "relu_racy.py").read_text(), cache)
    assert r.status is Status.RACE, r.detail
    assert "fails in random order random:1" in r.detail and "where the reference is finite" in r.detail
    assert r.robust_status is Status.RACE and r.robust_detail == "the plain verification failed"
    assert sum(s.name == "kernelbench[cpu]" for s in r.steps) == 2   # forward trials, then the random order


# ---------------------------------------------------------------- GPU
@pytest.mark.gpu
def test_correct_candidate_passes_on_a_gpu():
    from cuset.execute.registry import gpu_available

    if not gpu_available():
        pytest.skip("no NVIDIA GPU")
    v = verify(REFERENCE, RELU_OK, plain_checks(2),
               options=VerifyOptions(backend="gpu", compile_timeout=600, step_timeout=60))
    assert v.status is Status.PASSED, v.detail + v.log
    v = verify(REFERENCE, (FIXTURES / "relu_off_by_one.py").read_text(), plain_checks(2),
               options=VerifyOptions(backend="gpu", compile_timeout=600))
    assert v.status is Status.WRONG and v.trial == 0


def test_eval_mode_switches_both_models():
    """Issue 38: KernelBench runs both models as built (train mode); eval_mode="eval" calls
    .eval() on both, as harnesses that do so. Batch norm normalises by the batch in train
    mode and by its running statistics (0 and 1 when new) in eval mode."""
    reference = REFERENCE.replace("super().__init__()", "super().__init__()\n        self.bn = nn.BatchNorm1d(dim)") \
        .replace("return torch.relu(x)", "return self.bn(x)")
    # what batch norm computes in eval mode with fresh running statistics
    running_stats = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n" \
                    "        return x / (1 + 1e-5) ** 0.5\n"
    evaluated = verify(reference, running_stats, plain_checks(1), options=VerifyOptions(step_timeout=30,
                                                                                        eval_mode="eval"))
    assert evaluated.status is Status.PASSED
    trained = verify(reference, running_stats, plain_checks(1), options=VerifyOptions(step_timeout=30))
    assert trained.status is Status.WRONG and (trained.check, trained.trial) == ("trials", 0)
    with pytest.raises(ValueError, match="VerifyOptions.eval_mode='inference': use one of"):
        VerifyOptions(eval_mode="inference")


def test_strict_kernels_fails_a_pure_torch_pass():
    """Issue 38: a pass that launched none of its own kernels is `passed_without_kernel`
    (recorded, still a pass); with strict_kernels it is a failure."""
    from cuset.execute.registry import get_backend

    pure_torch = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n" \
                 "        return torch.relu(x)\n"
    task = dataclasses.replace(TASK, n_trials=1)
    lenient = evaluate_program(task, pure_torch, backend=get_backend("cpu"), options=OPTIONS)
    assert lenient.status is Status.PASSED and lenient.kernel.without_kernel() == "no_kernel_called"
    strict = evaluate_program(task, pure_torch, backend=get_backend("cpu"),
                              options=dataclasses.replace(OPTIONS, strict_kernels=True))
    assert strict.status is Status.WRONG
    assert strict.detail.startswith("strict_kernels: passed without its own kernels: no kernel of its own launched")


@pytest.mark.skipif(not __import__("sandbox_tools").may_mount(), reason="per-run disk quotas need root with CAP_SYS_ADMIN")
def test_a_reference_that_fills_its_disk_quota_is_stopped_there(monkeypatch, tmp_path):
    # A third-party task's reference runs with its own tmpfs quota too (`cuset tasks check`
    # runs every reference): filling it is the reference's disk_limit, not the host's disk.
    import importlib

    verify_module = importlib.import_module("cuset.execute.kernelbench.verify")  # the module, not the function

    # a cold reference: the greedy one passes under the default quota, and a stored run of it
    # (the disk reference store under the cache root) would never reach the small one
    monkeypatch.setenv("CUSET_CACHE", str(tmp_path / "cuset_cache"))
    monkeypatch.setattr(verify_module, "_REFERENCES", verify_module._ReferenceCache(1 << 20))
    monkeypatch.setattr(verify_module, "REFERENCE_RUN_DISK_BYTES", 16 << 20)
    greedy = REFERENCE.replace("import torch", "import torch\nbuf = b'\\0' * (1 << 20)\ntry:\n"
                                                "    for i in range(64):\n        open(f'f{i}', 'wb').write(buf)\n"
                                                "except OSError:\n    pass", 1)
    assert greedy != REFERENCE
    expected, failure = verify_module.reference_outputs(greedy, verify_module.plain_checks(1), workdir=tmp_path)
    assert expected is None and failure.status is Status.DISK_LIMIT
    assert "the task's reference filled its 16 MiB disk quota" in failure.detail
    expected, failure = verify_module.reference_outputs(REFERENCE, verify_module.plain_checks(1), workdir=tmp_path)
    assert failure is None and expected
