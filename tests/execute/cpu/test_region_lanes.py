"""Barrier regions with a block-stride loop run with groups of threads side by side
(cuset/execute/cpu/region_lanes.py): the same bits as the fibers in every order, the
threads past the last full group, rounds some lanes sit out and blocks of more than
one row included; a region whose threads could see each other's work keeps its loop
over the threads."""

from __future__ import annotations

import struct

import pytest

from cpu_helpers import both_paths, needs_gxx, path_runner
from cpu_helpers import plan_kernels

KERNEL = r"""
__global__ void attend(const float* __restrict__ q, const float* __restrict__ v, float* __restrict__ o,
                       int S, int D) {
    extern __shared__ float w[];
    for (int j = threadIdx.x; j < S; j += blockDim.x) w[j] = q[blockIdx.x * S + j];
    __syncthreads();
    float scale = 1.0f / (1.0f + blockIdx.x);
    float bias = 0.001f * threadIdx.x;
    for (int c = threadIdx.x; c < D; c += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < S; ++j) acc += w[j] * v[(size_t)j * D + c];
        o[(size_t)blockIdx.x * D + c] = acc * scale + bias;
    }
}
"""

SIDE_BY_SIDE = "block-stride loop(s) run with the threads side by side"


def _plan(loop_body: str, before: str = "", params: str = ""):
    src = (f"__global__ void k(const float* __restrict__ v, float* __restrict__ o, float* p, int D{params}) {{ "
           "__shared__ float w[64]; __shared__ float total; w[threadIdx.x % 64] = v[threadIdx.x]; __syncthreads(); "
           f"{before} for (int c = threadIdx.x; c < D; c += blockDim.x) {{ {loop_body} }} }}\n")
    [plan] = plan_kernels(src)
    assert plan.loop, plan
    return plan


def test_the_attention_loop_runs_side_by_side():
    [plan] = plan_kernels(KERNEL)
    assert plan.describe() == f"attend: block loop with barrier regions (1 barrier(s), 2 {SIDE_BY_SIDE})"
    assert '_Pragma("GCC ivdep")' in plan.text and "block_loop_lanes" in plan.text


@pytest.mark.parametrize("body, before", [
    ("float a = w[0] * c; o[c] = a;", ""),
    ("o[c + 1] = w[c % 64];", ""),                            # a shifted index is still the thread's own
    ("float a = 0; for (int j = 0; j < 8; ++j) a += w[j]; o[(size_t)D * blockIdx.x + c] = a;", ""),
])
def test_loops_writing_their_own_elements_run_side_by_side(body, before):
    assert SIDE_BY_SIDE in _plan(body, before).describe()


@pytest.mark.parametrize("body, before", [
    ("o[c / 2] = 1.0f;", ""),                                  # two threads, one element
    ("o[0] = c;", ""),
    ("o[c] = o[c + 1];", ""),                                  # reads a neighbour's element
    ("o[c] = 1.0f;", "if (threadIdx.x == 0) o[0] = 2.0f;"),    # a write before the loop
    ("o[c] = 1.0f; total = c;", ""),                           # a shared scalar
    ("atomicAdd(&o[c], 1.0f);", ""),
    ("p[c] = 1.0f;", ""),                                      # not __restrict__: may alias v
    ("if (w[c % 64] > 0) break; o[c] = 1.0f;", ""),
    ("for (int j = 0; j < 4; ++j) o[c * 4 + j] = 1.0f;", ""),  # a write inside the body's loop
])
def test_loops_whose_threads_could_meet_keep_one_thread_after_another(body, before):
    assert SIDE_BY_SIDE not in _plan(body, before).describe()


def test_other_strides_keep_one_thread_after_another():
    src = ("__global__ void k(float* __restrict__ o, int D) { __shared__ float w[32]; w[threadIdx.x % 32] = 1; "
           "__syncthreads(); for (int c = threadIdx.x; c < D; c += 32) o[c] = w[c % 32]; }\n")
    [plan] = plan_kernels(src)
    assert plan.loop and SIDE_BY_SIDE not in plan.describe()


# ---------------------------------------------------------------- runs
PROGRAM = "#include <cstdio>\n#include <cstdlib>\n#include <vector>\n" + KERNEL + r"""
int main(int argc, char** argv) {
  const int B = 5, S = 37, D = 100, tx = atoi(argv[1]), ty = atoi(argv[2]);
  std::vector<float> hq(B * S), hv(S * D);
  for (int i = 0; i < B * S; ++i) hq[i] = (float)((i * 37) % 23) / 7.0f - 1.5f;
  for (int i = 0; i < S * D; ++i) hv[i] = (float)((i * 7919) % 101) / 13.0f - 3.0f;
  float *q, *v, *o;
  cudaMalloc(&q, hq.size() * 4); cudaMalloc(&v, hv.size() * 4); cudaMalloc(&o, B * D * 4);
  cudaMemcpy(q, hq.data(), hq.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(v, hv.data(), hv.size() * 4, cudaMemcpyHostToDevice);
  attend<<<B, dim3(tx, ty), S * sizeof(float)>>>(q, v, o, S, D);
  std::vector<float> out(B * D);
  cudaMemcpy(out.data(), o, out.size() * 4, cudaMemcpyDeviceToHost);
  FILE* f = fopen("out.bin", "wb"); fwrite(out.data(), 4, out.size(), f); fclose(f);
  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}
"""


def _expected(tx: int) -> list[float]:
    B, S, D = 5, 37, 100
    q = [((i * 37) % 23) / 7.0 - 1.5 for i in range(B * S)]
    v = [((i * 7919) % 101) / 13.0 - 3.0 for i in range(S * D)]
    return [sum(q[b * S + j] * v[j * D + c] for j in range(S)) / (1.0 + b) + 0.001 * (c % tx)
            for b in range(B) for c in range(D)]


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    from cuset.execute.cpu import CpuBackend, compile_program

    backend = CpuBackend(seed=3)
    workdir = tmp_path_factory.mktemp("region-lanes")
    compiled = compile_program(PROGRAM, workdir, timeout=300, backend=backend)
    assert compiled.ok, compiled.detail
    assert SIDE_BY_SIDE in compiled.step.stdout, compiled.step.stdout
    return path_runner(compiled, backend, workdir)


@needs_gxx
@pytest.mark.parametrize("shape", [(64, 1), (44, 1), (16, 2)])  # two rounds; 4 threads past the groups; two rows
def test_side_by_side_gives_the_fibers_bits(program, shape):
    args = tuple(map(str, shape))
    forward = both_paths(program, args, "forward")[0]
    assert both_paths(program, args, "random:3")[0] == forward, "orders disagree"
    got = struct.unpack("500f", forward)
    assert got == pytest.approx(_expected(shape[0]), rel=1e-5, abs=1e-5)
