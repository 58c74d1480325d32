"""Volatile pointers keep a kernel on the fibers (found in review, 2026-12-07).

The rewriter turns a `volatile T*` parameter into `::cuset::vptr<T>`, whose every access
reports to the fiber running it. The planners looked at kernel and helper bodies only,
where the uses of such a parameter do not say it is volatile: they took the block loop
or the barrier regions, and the first access crashed (`runtime_error`, "invalid memory
access") in every order, for race-free programs the fibers run right. The CUDA sample
threadFenceReduction (a `volatile float*` partial sums, `atomicInc` for the last block)
was one of them.
"""

from __future__ import annotations

import pytest

from cpu_helpers import needs_gxx, plan_kernels
from cuset.execute.cpu.order_proof import plan_proofs

# a volatile kernel parameter, with one barrier (the regions path) or none (the block loop)
PARAM_REGIONS = r"""
#include <cstdio>
__global__ void k(volatile int* out) {
  __shared__ int s[32];
  int t = threadIdx.x;
  s[t] = t;
  __syncthreads();
  out[t] = s[31 - t];
}
int main() {
  int* d; cudaMalloc(&d, 32 * 4);
  k<<<1, 32>>>(d);
  int h[32]; cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  printf("%d %d\n", h[0], h[31]);
  return 0;
}
"""

# a helper taking a volatile pointer, called from a barrier-free kernel
HELPER_LOOP = r"""
#include <cstdio>
__device__ void put(volatile int* p, int i, int v) { p[i] = v; }
__global__ void k(int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) put(out, i, 3 * i);
}
int main() {
  const int n = 256;
  int* d; cudaMalloc(&d, n * 4);
  k<<<4, 64>>>(d, n);
  int h[n]; cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  printf("%d %d %d\n", h[0], h[1], h[255]);
  return 0;
}
"""

# threadFenceReduction: each block's partial sum through a volatile pointer, the last block adds them
FENCE_REDUCTION = r"""
#include <cstdio>
__device__ unsigned int count = 0;
__global__ void sum(const float* in, volatile float* partial, float* total, int n) {
  __shared__ float s[64];
  __shared__ bool last;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partial[blockIdx.x] = s[0];
    __threadfence();
    unsigned int ticket = atomicInc(&count, gridDim.x);
    last = ticket == gridDim.x - 1;
  }
  __syncthreads();
  if (last && threadIdx.x == 0) {
    float t = 0.0f;
    for (int b = 0; b < gridDim.x; ++b) t += partial[b];
    *total = t;
    count = 0;
  }
}
int main() {
  const int n = 300, blocks = 5;
  float h[n];
  for (int i = 0; i < n; ++i) h[i] = (float)(i % 7);
  float *in, *partial, *total;
  cudaMalloc(&in, sizeof h); cudaMalloc(&partial, blocks * 4); cudaMalloc(&total, 4);
  cudaMemcpy(in, h, sizeof h, cudaMemcpyHostToDevice);
  sum<<<blocks, 64>>>(in, partial, total, n);
  float t; cudaMemcpy(&t, total, 4, cudaMemcpyDeviceToHost);
  printf("%.1f\n", t);
  return 0;
}
"""

# sum(i % 7 for i in range(300)) = 42 * 21 + (0 + 1 + ... + 5) = 897
PROGRAMS = {"param_regions": (PARAM_REGIONS, "31 0"), "helper_loop": (HELPER_LOOP, "0 3 765"),
            "fence_reduction": (FENCE_REDUCTION, "897.0")}


@pytest.mark.parametrize("regions", [True, False], ids=["regions", "block_loops"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_a_volatile_parameter_keeps_the_kernel_on_the_fibers(name, regions):
    [plan] = plan_kernels(PROGRAMS[name][0], regions=regions)
    assert not plan.loop and plan.reason == "volatile memory", plan.describe()


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_a_volatile_parameter_is_never_proven(name):
    [plan] = plan_proofs(PROGRAMS[name][0])
    assert not plan.eligible and plan.reason == "volatile memory", plan.describe()


@needs_gxx
@pytest.mark.parametrize("order", ["forward", "random:1", "parallel:1"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_race_free_volatile_programs_run_right_in_every_order(name, order, workroot):
    from cuset.execute.cpu import run_program

    source, expected = PROGRAMS[name]
    r = run_program(source, workroot / f"volatile-{name}-{order.replace(':', '-')}", order=order)
    assert r.ok, (r.classified, r.run.stderr[-2000:] if r.run else r.compiled.detail)
    assert r.run.stdout.strip() == expected
