"""`paper` span mode (the paper's wording) vs `broad` (the default) on a hand-checked program."""

import pytest

from cuset.spans import SPAN_MODES, detect

PROGRAM = """#include <cuda_runtime.h>
__device__ float scale = 2.0f;
__device__ float twice(float v) { return scale * v; }
__global__ void k(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = twice(x[i]);
}
int main() {
  int n = 1 << 20;
  int threads = 256;
  int blocks = (n + threads - 1) / threads;
  dim3 grid(blocks);
  float* x;
  cudaMalloc(&x, n * 4);
  k<<<grid, threads>>>(x, n);
  cudaFree(x);
}
"""

KERNEL = PROGRAM[PROGRAM.index("__global__"):PROGRAM.index("}\nint main") + 1]


def spans(mode):
    return sorted((s.kind, PROGRAM[s.start:s.end]) for s in detect(PROGRAM, mode=mode))


def test_paper_mode_is_global_bodies_chevrons_and_their_direct_declarations():
    assert spans("paper") == sorted([
        ("kernel_body", KERNEL),
        ("launch_config", "<<<grid, threads>>>"),
        ("launch_config", "int threads = 256;"),   # named in the configuration
        ("launch_config", "dim3 grid(blocks);"),   # named in the configuration
    ])  # not: `int blocks = ...` and `int n = ...` (read by those), helpers, device variables, cudaMalloc


def test_broad_mode_adds_helpers_variables_the_whole_slice_and_calls():
    broad = spans("broad")
    assert set(spans("paper")) < set(broad)
    for extra in [("kernel_body", "__device__ float scale = 2.0f;"),
                  ("kernel_body", "__device__ float twice(float v) { return scale * v; }"),
                  ("launch_config", "int blocks = (n + threads - 1) / threads;"),
                  ("launch_config", "int n = 1 << 20;"),
                  ("memory_api", "cudaMalloc(&x, n * 4)"),
                  ("thread_index", "blockIdx.x * blockDim.x + threadIdx.x")]:
        assert extra in broad


def test_paper_mode_recovers_truncated_global_kernels_only():
    text = "__device__ int f(int a) { return a;\n__global__ void k(int* o) { o[0] = 1;"  # cut off
    assert [(s.kind, text[s.start:s.end]) for s in detect(text, mode="paper")] == \
        [("kernel_body", "__global__ void k(int* o) { o[0] = 1;")]


def test_unknown_mode_is_a_clear_error():
    assert SPAN_MODES == ("broad", "paper")
    with pytest.raises(ValueError, match="span mode 'narrow': use one of broad, paper"):
        detect(PROGRAM, mode="narrow")
