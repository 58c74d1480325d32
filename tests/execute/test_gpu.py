import os
import shutil
import tempfile
from pathlib import Path

import pytest

from cuset.execute.gpu import GpuBackend
from cuset.execute.result import Status, StepResult

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")

VECTOR_ADD = r'''#include <cstdio>
__global__ void add(const float* a, float* b, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) b[i] += a[i]; }
int main() { float *a, *b; cudaMalloc(&a, 64); cudaMalloc(&b, 64); add<<<1, 16>>>(a, b, 16);
  cudaError_t e = cudaDeviceSynchronize(); if (e != cudaSuccess) { fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(e)); return 1; }
  return 0; }
'''


def test_flags_and_compat():
    assert GpuBackend().flags == ("-O2",)
    assert GpuBackend(flags=["-O3", "-arch=sm_90"]).flags == ("-O3", "-arch=sm_90")
    assert GpuBackend(flags=["-O3"], compat=True).flags == ()  # the harness: nvcc kernel.cu -o kernel
    assert GpuBackend().run_orders == ("default",)


def test_invocation_pins_the_device(tmp_path):
    inv = GpuBackend(device=3).invocation(tmp_path / "kernel", "default")
    assert inv.argv == [str(tmp_path / "kernel")] and inv.env == {"CUDA_VISIBLE_DEVICES": "3"}


def test_classify_cuda_errors():
    b = GpuBackend()
    step = StepResult("run", 1, 0.1, False, "", "CUDA error: an illegal memory access was encountered\n")
    assert b.classify_failure(step) == (Status.RUNTIME_ERROR, "CUDA error: an illegal memory access was encountered")
    assert b.classify_failure(StepResult("run", 1, 0.1, False, "", "bad input\n")) is None


@needs_nvcc
@pytest.mark.nvcc
def test_nvcc_compiles_and_reports_errors(tmp_path):
    b = GpuBackend()
    assert "release" in b.fingerprint() and b.fingerprint().endswith("|-O2")
    (tmp_path / "ok").mkdir()
    ok = b.compile(VECTOR_ADD, tmp_path / "ok", timeout=120)
    assert ok.ok and ok.executable == tmp_path / "ok" / "kernel" and ok.executable.exists()
    assert ok.step.name == "compile"
    (tmp_path / "bad").mkdir()
    bad = b.compile(VECTOR_ADD.replace("b[i] += a[i]", "b[i] += undefined_thing"), tmp_path / "bad", timeout=120)
    assert not bad.ok and bad.status is Status.COMPILE_ERROR and "undefined_thing" in bad.detail


@needs_nvcc
@pytest.mark.nvcc
def test_compat_fence_quirk_fails_to_compile(tmp_path):
    # extract_code_compat keeps "cuda" from a ```cuda fence: the harness then fails here.
    from cuset.generate.extract import extract_code_compat

    code = extract_code_compat(f"```cuda\n{VECTOR_ADD}```")
    r = GpuBackend(compat=True).compile(code, tmp_path, timeout=120)
    assert not r.ok and r.status is Status.COMPILE_ERROR


@pytest.mark.gpu
def test_runs_on_a_gpu():
    from cuset.execute.registry import gpu_available
    from cuset.execute.sandbox import SandboxPolicy, run_sandboxed

    if not gpu_available():
        pytest.skip("no NVIDIA GPU")
    b = GpuBackend()
    # The sandbox's throw-away uid must reach the executable: without bwrap (unshare mode) only
    # file permissions decide, and pytest's tmp_path lies below a 0700 directory.
    tmp_path = Path(tempfile.mkdtemp(prefix="cuset-gpu-test-"))
    os.chmod(tmp_path, 0o711)
    (tmp_path / "build").mkdir()
    (tmp_path / "run").mkdir()
    out = b.compile(VECTOR_ADD, tmp_path / "build", timeout=120)
    assert out.ok
    inv = b.invocation(out.executable, "default")
    step = run_sandboxed("run", inv.argv, run_dir=tmp_path / "run", timeout=60, env=inv.env,
                         policy=SandboxPolicy(gpu_devices=True), readonly=(out.executable,))
    try:
        assert step.returncode == 0, step.stderr
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)
