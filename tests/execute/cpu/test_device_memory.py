"""Uninitialised device memory: GPU-like by default (fresh = zero, reused after cudaFree = old contents),
poisoned with NaN / INT_MAX words under `poison_device_memory`."""

from __future__ import annotations

import pytest

from cpu_helpers import needs_gxx  # noqa: F401  (skips without g++)

pytestmark = needs_gxx

REUSE = r"""#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>
__global__ void fill(float* x, int n, float v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = v;
}
static void show(const char* name, const void* d, size_t bytes) {
  float f[4]; int k[4];
  cudaMemcpy(f, d, sizeof f, cudaMemcpyDeviceToHost);
  memcpy(k, f, sizeof k);
  float last;
  cudaMemcpy(&last, (const char*)d + bytes - 4, 4, cudaMemcpyDeviceToHost);
  printf("%s %g %g %d %g\n", name, f[0], f[3], k[1], last);
}
int main() {
  const int n = 1 << 16;
  float *a, *b, *c;
  cudaMalloc(&a, n * 4);
  show("fresh", a, n * 4);
  fill<<<n / 256, 256>>>(a, n, 1.5f);
  cudaFree(a);
  cudaMalloc(&b, n * 4);          // takes a's block over
  show("reused", b, n * 4);
  cudaMalloc(&c, 1000 * 4);       // nothing freed left: fresh
  show("fresh2", c, 1000 * 4);
  return 0;
}
"""

ONE_HOT = r"""#include <cstdio>
#include <cuda_runtime.h>
// Writes only the 'on' entries: the rest of `out` is never written (a bug a GPU may hide or not).
__global__ void one_hot(const int* labels, float* out, int n, int classes) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i * classes + labels[i]] = 1.0f;
}
int main() {
  const int n = 64, classes = 4;
  int h_labels[n];
  for (int i = 0; i < n; ++i) h_labels[i] = i % classes;
  int* labels; float* out;
  cudaMalloc(&labels, sizeof h_labels);
  cudaMalloc(&out, n * classes * sizeof(float));
  cudaMemcpy(labels, h_labels, sizeof h_labels, cudaMemcpyHostToDevice);
  one_hot<<<1, n>>>(labels, out, n, classes);
  float h[n * classes];
  cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost);
  double sum = 0;
  for (int i = 0; i < n * classes; ++i) sum += h[i];
  printf("sum %g\n", sum);
  return 0;
}
"""


@pytest.fixture(scope="module")
def poisoning_backend():
    from cuset.execute.cpu import CpuBackend

    return CpuBackend(seed=7, poison_device_memory=True)


def _run(compiled, backend, order="forward"):
    from cuset.execute.cpu import run_compiled

    return run_compiled(compiled.compiled, compiled.dir, None, 60.0, order, backend)


def test_fresh_memory_reads_zero_and_reused_memory_keeps_its_contents(compile_source):
    prog = compile_source(REUSE, "device_reuse")
    assert prog.compiled.ok, prog.compiled.detail
    for order in ("forward", "random:5"):  # the host-access check (forward) and without it
        r = prog.run(order)
        assert r.ok, r
        assert r.run.stdout.splitlines() == ["fresh 0 0 0 0", "reused 1.5 1.5 1069547520 1.5", "fresh2 0 0 0 0"], order


def test_poison_fills_every_new_allocation(compile_source, poisoning_backend):
    prog = compile_source(REUSE, "device_reuse_poison")
    r = _run(prog, poisoning_backend)
    assert r.ok, r
    nan_line = "{} nan nan 2147483647 nan"
    assert r.run.stdout.splitlines() == [nan_line.format(w) for w in ("fresh", "reused", "fresh2")]


def test_a_kernel_reading_unwritten_memory_passes_by_default_and_is_caught_by_poison(compile_source,
                                                                                      poisoning_backend):
    prog = compile_source(ONE_HOT, "one_hot")
    assert prog.run().run.stdout == "sum 64\n"  # the 'off' entries read as 0: right by luck, as on a fresh GPU
    assert _run(prog, poisoning_backend).run.stdout == "sum nan\n"


def test_poison_is_refused_in_compat_mode():
    from cuset.evaluate.config import EvalConfig, ExecutionConfig

    cfg = EvalConfig(ExecutionConfig(backend="cpu", backend_options={"poison_device_memory": True}), compat=True)
    with pytest.raises(ValueError, match="poison_device_memory=true with compat"):
        cfg.make_backend()


RELU_RELYING_ON_ZEROS = r"""#include <cstdio>
#include <cuda_runtime.h>
__global__ void relu(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && x[i] > 0.0f) y[i] = x[i];   // y[i] = 0 left to the allocator
}
int main() {
  const int n = 1024;
  static float h[n];
  FILE* f = fopen("data/x.bin", "rb");
  if (!f || fread(h, 4, n, f) != (size_t)n) return 1;
  fclose(f);
  float *x, *y;
  cudaMalloc(&x, sizeof h);
  cudaMalloc(&y, sizeof h);
  cudaMemcpy(x, h, sizeof h, cudaMemcpyHostToDevice);
  relu<<<n / 256, 256>>>(x, y, n);
  cudaMemcpy(h, y, sizeof h, cudaMemcpyDeviceToHost);
  FILE* g = fopen("data/y.bin", "wb");
  fwrite(h, 4, n, g);
  fclose(g);
  return 0;
}
"""


def test_the_evaluation_names_unwritten_memory_as_the_probable_cause(tmp_path):
    from cuset.evaluate.pipeline import evaluate_program
    from cuset.evaluate.options import EvalOptions
    from cuset.evaluate.workspace import Workspace
    from cuset.execute.compile_cache import CompileCache
    from cuset.execute.cpu import CpuBackend
    from cuset.execute.result import Status
    from cuset.tasks import Task, TensorSpec

    gen = ("import numpy as np, os\nx = np.random.default_rng(int(os.environ.get('CUSET_CASE', 0)))"
           ".standard_normal(1024).astype(np.float32)\nos.makedirs('data', exist_ok=True)\n"
           "x.tofile('data/x.bin')\nnp.maximum(x, 0).astype(np.float32).tofile('data/y_ref.bin')\n")
    compare = ("import numpy as np\ny = np.fromfile('data/y.bin', np.float32)\n"
               "print('T' if np.array_equal(y, np.fromfile('data/y_ref.bin', np.float32)) else 'F')\n")
    task = Task(id=0, task_name="Relu", task_description="y = max(x, 0)",
                inputs=(TensorSpec("x", "float32", "(1024,)"),), outputs=(TensorSpec("y", "float32", "(1024,)"),),
                gpu="unknown", bench_cu=RELU_RELYING_ON_ZEROS, gen_py=gen, compare_py=compare,
                level1_prompt="relu", level2_prompt="relu", level3_prompt="relu")
    verdicts = {}
    with Workspace(tmp_path / "ws") as ws:
        for poison in (False, True):
            backend = CpuBackend(seed=3, poison_device_memory=poison)
            with CompileCache(backend, tmp_path / f"cache{poison}") as cache:
                verdicts[poison] = evaluate_program(task, RELU_RELYING_ON_ZEROS, backend=backend, cache=cache,
                                                    workspace=ws, options=EvalOptions())
    assert verdicts[False].status is Status.PASSED, verdicts[False].detail
    assert verdicts[True].status is Status.WRONG
    assert verdicts[True].detail.endswith("the program probably reads global memory it never wrote")
