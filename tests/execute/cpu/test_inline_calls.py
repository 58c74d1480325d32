"""Helpers with barriers inlined for the barrier planner (cuset/execute/cpu/inline_calls.py):
a kernel whose `__syncthreads()` sit in a device function it calls runs as barrier regions,
bit for bit as on the fibers (which keep the call), and what cannot be inlined exactly keeps
the kernel on the fibers."""

from __future__ import annotations

import os
import struct
import subprocess

import pytest

from cpu_helpers import needs_gxx
from cpu_helpers import plan_kernels
from cuset.execute.cpu.diagnostics import kernel_paths

REDUCE = """
__device__ float block_sum(float v, float* buf) {
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];  // a comment ends at its line
        __syncthreads();
    }
    float total = buf[0];
    __syncthreads();
    return total;
}
template <int N, bool MAX>
__device__ float block_op(float v, float* buf) {
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int s = N / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] = MAX ? fmaxf(buf[threadIdx.x], buf[threadIdx.x + s])
                                                    : buf[threadIdx.x] + buf[threadIdx.x + s];
        __syncthreads();
    }
    float r = buf[0];
    __syncthreads();
    return r;
}
"""

KERNELS = REDUCE + """
__global__ void sums(const float* __restrict__ x, float* __restrict__ out, int cols) {
    extern __shared__ float buf[];
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += x[(size_t)blockIdx.x * cols + c];
    float total = block_sum(s, buf);
    if (threadIdx.x == 0) out[blockIdx.x] = total;
}
__global__ void norm(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float buf[128];
    float m = -1e30f;
    for (int c = threadIdx.x; c < cols; c += 128) m = fmaxf(m, x[(size_t)blockIdx.x * cols + c]);
    m = block_op<128, true>(m, buf);
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += 128) s += x[(size_t)blockIdx.x * cols + c] - m;
    s = block_op<128, false>(s, buf);
    for (int c = threadIdx.x; c < cols; c += 128) y[(size_t)blockIdx.x * cols + c] = (x[(size_t)blockIdx.x * cols + c] - m) / s;
}
"""


def plans(src):
    return {p.name: p for p in plan_kernels(src)}


def test_kernels_calling_helpers_with_barriers_run_as_regions():
    got = plans(KERNELS)
    assert got["sums"].loop and (got["sums"].barriers, got["sums"].hoisted, got["sums"].inlined) == (3, 1, 1)
    assert got["norm"].loop and (got["norm"].barriers, got["norm"].hoisted, got["norm"].inlined) == (6, 2, 2)
    assert got["norm"].describe() == ("norm: block loop with barrier regions (6 barrier(s), 2 loop(s) with barriers "
                                      "hoisted, 2 call(s) of helpers with barriers inlined)")
    # the helpers' names are renamed per call, the template's parameters spelled as the call did
    assert "cuset_i0_total" in got["sums"].text and "cuset_i1_r" in got["norm"].text
    assert "(128) / 2" in got["norm"].text and "(true) ? fmaxf" in got["norm"].text
    assert "block_sum(" not in got["sums"].text and "block_op<" not in got["norm"].text


@pytest.mark.parametrize("helper, call", [
    ("__device__ float h(float v, float* b) { b[threadIdx.x] = v; __syncthreads(); if (v > 0) return b[0]; "
     "return b[1]; }", "float r = h(1.0f, buf);"),                                 # two returns
    ("__device__ void h(float& v, float* b) { b[threadIdx.x] = v; __syncthreads(); v = b[0]; }",
     "float v = 1; h(v, buf);"),                                                     # by reference
    ("__device__ float h(float v, float* b) { static float last; b[threadIdx.x] = v; __syncthreads(); "
     "return b[0]; }", "float r = h(1.0f, buf);"),                                   # a static local
    ("template <typename T> __device__ T h(T v, T* b) { b[threadIdx.x] = v; __syncthreads(); return b[0]; }",
     "float r = h(1.0f, buf);"),                                                     # deduced template argument
    ("__device__ float h(float v, float* b) { b[threadIdx.x] = v; __syncthreads(); return b[0]; }",
     "float r = buf[0] + h(1.0f, buf);"),                         # beside the call, a read the helper may change
    ("#define FIRST buf[0]\n__device__ float h(float v, float* b) { b[threadIdx.x] = v; __syncthreads(); "
     "return b[0]; }", "float r = FIRST + h(1.0f, buf);"),      # the same read, behind a macro
    ("__device__ float h(float v, float* b) { b[threadIdx.x] = v; __syncthreads(); return b[0]; }",
     "if (threadIdx.x < 16) { float r = h(1.0f, buf); }"),                           # not at the top level
])
def test_calls_that_cannot_be_inlined_exactly_keep_the_fibers(helper, call):
    src = helper + "\n__global__ void k(float* p) { __shared__ float buf[256]; " + call + " p[threadIdx.x] = 1; }\n"
    [plan] = plan_kernels(src)
    assert not plan.loop, plan.describe()


# ---------------------------------------------------------------- runs
PROGRAM = "#include <cstdio>\n#include <vector>\n" + KERNELS + """
int main() {
  const int rows = 40, cols = 300;
  std::vector<float> h(rows * cols);
  for (int i = 0; i < rows * cols; ++i) h[i] = (float)((i * 7919) % 1000) / 37.0f - 9.0f;
  float *x, *out, *y;
  cudaMalloc(&x, h.size() * 4); cudaMalloc(&out, rows * 4); cudaMalloc(&y, h.size() * 4);
  cudaMemcpy(x, h.data(), h.size() * 4, cudaMemcpyHostToDevice);
  sums<<<rows, 128, 128 * sizeof(float)>>>(x, out, cols);
  norm<<<rows, 128>>>(x, y, cols);
  std::vector<float> o(rows), n(h.size());
  cudaMemcpy(o.data(), out, rows * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(n.data(), y, h.size() * 4, cudaMemcpyDeviceToHost);
  FILE* f = fopen("out.bin", "wb"); fwrite(o.data(), 4, rows, f); fwrite(n.data(), 4, n.size(), f); fclose(f);
  return 0;
}
"""


@needs_gxx
@pytest.mark.parametrize("order", ["forward", "random:3"])
def test_inlined_regions_and_fibers_give_bit_identical_outputs(tmp_path, order):
    from cuset.execute.cpu import CpuBackend, compile_program

    backend = CpuBackend(seed=3)
    compiled = compile_program(PROGRAM, tmp_path, timeout=300, backend=backend)
    assert compiled.ok, compiled.detail
    assert "sums: block loop with barrier regions (3 barrier(s), 1 loop(s) with barriers hoisted, 1 call(s) of " \
           "helpers with barriers inlined)" in compiled.step.stdout, compiled.step.stdout
    outs = {}
    for loops in (True, False):
        run_dir = tmp_path / f"run-{loops}"
        run_dir.mkdir()
        env = dict(backend.invocation(compiled.executable, order).env, CUSET_CPU_REPORT_PATHS="1",
                   PATH=os.environ.get("PATH", ""))
        if not loops:
            env["CUSET_CPU_BLOCK_LOOP"] = "0"
        p = subprocess.run([str(compiled.executable)], cwd=run_dir, env=env, capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0, p.stderr
        outs[loops] = (run_dir / "out.bin").read_bytes()
        assert kernel_paths(p.stderr) == dict.fromkeys(("sums", "norm"),
                                                       "block loop with barrier regions" if loops else "fibers")
    assert outs[True] == outs[False]
    sums = struct.unpack("40f", outs[True][:160])
    expected = [sum((float((i * 7919) % 1000) / 37.0 - 9.0) for i in range(r * 300, (r + 1) * 300)) for r in range(40)]
    assert sums == pytest.approx(expected, rel=1e-4, abs=1e-3)


def test_helpers_that_would_grow_the_kernel_without_bound_keep_the_fibers():
    from cuset.execute.cpu import inline_calls
    from cuset.execute.cpu.plan_ir import Unit
    from cuset.spans.grammar import parser

    # each level calls the next 20 times: inlined, w3 would be 8,000 copies of w0 (within ROUNDS)
    levels = ["__device__ float w0(float v) { return __shfl_xor_sync(0xffffffff, v, 1); }"]
    for k in range(1, 4):
        calls = " ".join(f"v = w{k - 1}(v);" for _ in range(20))
        levels.append(f"__device__ float w{k}(float v) {{ {calls} return v; }}")
    src = "\n".join(levels) + "\n__global__ void k(float* p) { float v = p[threadIdx.x]; v = w3(v); p[threadIdx.x] = v; }\n"
    unit = Unit(src.encode(), parser().parse(src.encode()).root_node)
    assert inline_calls.inline_barrier_calls(unit, unit.kernels[0]) is None   # past GROWTH
    [plan] = plan_kernels(src)
    assert not plan.loop, plan.describe()
    # one level down it fits (helpers called by helpers, round after round) and runs as regions
    [small] = plan_kernels(src.replace("v = w3(v);", "v = w1(v);"))
    assert small.loop and small.shuffles == 20 and small.inlined == 21, small.describe()
