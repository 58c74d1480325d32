"""Float-to-integer conversions in device code give a GPU's values or `unsupported`
(found in review, 2026-12-07).

C++ leaves an out-of-range conversion (and NaN) undefined and x86 gives INT_MIN; a GPU's
cvt.rzi saturates to 32 or 64 bits, NaN gives 0, and a narrower target keeps the low bits
(nvcc converts `(signed char)x` with cvt.rzi.s32.f32 and `(unsigned char)x` with
cvt.rzi.u32.f32: `nvcc -ptx` shows it). A quantiser casting before it clamps printed
"10 -128 -128 5" here and "10 127 -128 5" on a GPU: `wrong` for a right program.
The expected values below follow those instructions by hand.
"""

from __future__ import annotations

import pytest

from cpu_helpers import needs_gxx
from cuset.execute.cpu.conversions import gpu_conversions


def test_device_casts_go_through_the_helper_and_host_code_is_untouched():
    src = (
        "__device__ int f(float x) { return (int)x + static_cast<unsigned>(x) + int(x) + (size_t)(x * 2)"
        " + (unsigned long long)-x + std::int8_t(x); }\n"
        "int host(float x) { return (int)x; }\n"
        "#define Q(x) (int)(x)\n"
        "__global__ void k(float* a, int* b) { b[0] = (int)(unsigned)a[0] * 2; b[1] = (float)a[1]; b[2] = Q(a[2]); }\n")
    assert gpu_conversions(src) == (
        "__device__ int f(float x) { return __cuset_cvt((int)0, x) + __cuset_cvt((unsigned)0, x)"
        " + __cuset_cvt((int)0, x) + __cuset_cvt((size_t)0, (x * 2))"
        " + __cuset_cvt((unsigned long long)0, -x) + __cuset_cvt((std::int8_t)0, x); }\n"
        "int host(float x) { return (int)x; }\n"
        "#define Q(x) (int)(x)\n"
        "__global__ void k(float* a, int* b) { b[0] = (int)__cuset_cvt((unsigned)0, a[0]) * 2;"
        " b[1] = (float)a[1]; b[2] = Q(a[2]); }\n")


def test_casts_of_integers_by_the_files_declarations_stay_as_written():
    src = (
        "__constant__ int K;\n"
        "__global__ void k(const int* __restrict__ rp, const float* a, float* out, int n, unsigned long long m) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x; float f = a[i]; int w[4]; double n2 = 2;\n"
        "  out[(size_t)i * n] = (size_t)rp[i] + (long)blockIdx.x + (int)(i < n) + (int)(m >> 3) + (int)w[0]"
        " + (int)K + (unsigned)sizeof(float) + (int)'a' + (int)-i + (int)(i ? n : 3) + (int)0x10;\n"
        "  out[0] = (int)a[i] + (int)f + (int)1e3 + (int)(i * 0.5) + (int)n2 + (int)(i + f);\n"
        "}\n"
        "__device__ float n2g(float n2) { return n2; }\n")
    out = gpu_conversions(src).splitlines()
    assert out[3] == src.splitlines()[3]          # every operand an integer: untouched
    assert out[4] == ("  out[0] = __cuset_cvt((int)0, a[i]) + __cuset_cvt((int)0, f) + __cuset_cvt((int)0, 1e3)"
                      " + __cuset_cvt((int)0, (i * 0.5)) + __cuset_cvt((int)0, n2) + __cuset_cvt((int)0, (i + f));")


def test_the_bundled_suites_keep_every_kernel_path_and_proof():
    """The planners read the converted source: a cast they could read became a call they
    cannot only where the operand may be a float, and none of the suites' kernels lost its
    block loop, regions or order proof to it."""
    import json
    from pathlib import Path

    from cuset.execute.cpu.barrier_regions import plan_kernels
    from cuset.execute.cpu.order_proof import plan_proofs
    from cuset.execute.cpu.rewriter import ticking_loops

    root = Path(__file__).resolve().parents[3] / "suites"
    converted = 0
    for suite in ("cuset-bench.jsonl", "cuset-bench-cpu.jsonl"):
        for line in (root / suite).read_text().splitlines():
            src = json.loads(line)["bench.cu"]
            new = gpu_conversions(src)
            if new == src:
                continue
            converted += 1
            assert [p.describe() for p in plan_proofs(new)] == [p.describe() for p in plan_proofs(src)]
            assert [(p.name, p.loop, p.reason) for p in plan_kernels(new, ticking=ticking_loops(new))] == \
                [(p.name, p.loop, p.reason) for p in plan_kernels(src, ticking=ticking_loops(src))]
    assert converted >= 4   # the histogram's and the bilinear resizes' float casts


def test_lines_are_kept_and_a_source_without_device_code_is_returned_as_it_is():
    src = "__global__ void k(float* a, int* b) {\n  b[0] = (int) /* a\n comment */ a[0];\n}\n"
    out = gpu_conversions(src)
    assert out.count("\n") == src.count("\n") and "__cuset_cvt((int)0, \n" in out
    host = "int main() { float x = 3; return (int)x; }\n"
    assert gpu_conversions(host) is host


def test_a_function_tree_sitter_cannot_parse_is_left_alone():
    src = "__global__ void k(float* a, int* b) { b[0] = (int)a[0]; b[1] = ) ; }\n"
    assert gpu_conversions(src) == src


CASTS = r"""
#include <cstdio>
#include <cstdint>
#include <cmath>
__device__ __host__ int both(float x) { return (int)x; }
__global__ void k(const float* x, const double* y, long long* out) {
  int t = threadIdx.x;
  float v = x[t]; double w = y[t];
  long long* o = out + t * 12;
  o[0] = (int)v;
  o[1] = (unsigned)v;
  o[2] = (signed char)v;
  o[3] = (unsigned char)v;
  o[4] = static_cast<long long>(v);
  o[5] = (long long)static_cast<unsigned long long>(w);
  o[6] = int(w);
  o[7] = (uint32_t)(w * 2.0);
  o[8] = (short)-v;
  o[9] = both(v);
  o[10] = (int)(unsigned)(v);
  o[11] = (int)/* comment */ v + 1;
}
int main() {
  const int n = 8;
  float hx[n] = {1.5f, -2.7f, 3e10f, -3e10f, NAN, INFINITY, 300.5f, -1.0f};
  double hy[n] = {1.5, -2.7, 3e19, -3e19, NAN, -INFINITY, 4294967296.5, 1e300};
  float* dx; double* dy; long long* d;
  cudaMalloc(&dx, sizeof hx); cudaMalloc(&dy, sizeof hy); cudaMalloc(&d, n * 12 * 8);
  cudaMemcpy(dx, hx, sizeof hx, cudaMemcpyHostToDevice);
  cudaMemcpy(dy, hy, sizeof hy, cudaMemcpyHostToDevice);
  k<<<1, n>>>(dx, dy, d);
  long long h[n * 12];
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  for (int t = 0; t < n; t++) { for (int j = 0; j < 12; j++) printf("%lld ", h[t * 12 + j]); printf("\n"); }
  volatile float big = 3e10f;
  printf("host %d\n", both(big));   // host code keeps x86's conversion, as on a GPU machine
}
"""

# Per input: (int), (unsigned), (signed char), (unsigned char), static_cast<long long>,
# static_cast<unsigned long long>(w) read as signed, int(w), (uint32_t)(2w), (short)-v,
# a __host__ __device__ helper, (int)(unsigned), (int)v + 1 (wrapping, as nvcc's).
INT_MAX, INT_MIN, UINT_MAX = 2147483647, -2147483648, 4294967295
EXPECTED = [
    [1, 1, 1, 1, 1, 1, 1, 3, -1, 1, 1, 2],                       # 1.5, 1.5
    [-2, 0, -2, 0, -2, 0, -2, 0, 2, -2, 0, -1],                  # -2.7, -2.7: unsigned targets saturate at 0
    [INT_MAX, UINT_MAX, -1, 255, 30000001024, -1, INT_MAX, UINT_MAX, 0, INT_MAX, -1, INT_MIN],  # 3e10, 3e19
    [INT_MIN, 0, 0, 0, -30000001024, 0, INT_MIN, 0, -1, INT_MIN, 0, INT_MIN + 1],          # -3e10, -3e19
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],                        # NaN gives 0
    [INT_MAX, UINT_MAX, -1, 255, 2**63 - 1, 0, INT_MIN, 0, 0, INT_MAX, -1, INT_MIN],      # inf, -inf
    [300, 300, 44, 44, 300, 4294967296, INT_MAX, UINT_MAX, -300, 300, 300, 301],           # 300.5, 2^32 + 0.5
    [-1, 0, -1, 0, -1, -1, INT_MAX, UINT_MAX, 1, -1, 0, 0],                                 # -1, 1e300
]


@needs_gxx
@pytest.mark.parametrize("loops", [True, False], ids=["fast_paths", "fibers"])
def test_explicit_casts_in_kernels_convert_as_a_gpu_does(loops, workroot, monkeypatch):
    from cuset.execute.cpu import run_program

    if not loops:
        monkeypatch.setenv("CUSET_CPU_BLOCK_LOOP", "0")
    r = run_program(CASTS, workroot / f"casts-{loops}")
    assert r.ok, (r.classified, r.run.stderr[-2000:] if r.run else r.compiled.detail)
    assert "k: block loop" in r.compiled.step.stdout  # the fast path, unless CUSET_CPU_BLOCK_LOOP=0 turns it off
    lines = r.run.stdout.splitlines()
    assert [[int(v) for v in line.split()] for line in lines[:8]] == EXPECTED
    assert lines[8] == f"host {INT_MIN}"


QUANTISER = r"""
#include <cstdio>
__global__ void quant(const float* x, signed char* q, float scale, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { int v = (int)(x[i] * scale); v = v > 127 ? 127 : (v < -128 ? -128 : v); q[i] = (signed char)v; }
}
int main() {
  float h[4] = {1.0f, 3e9f, -3e9f, 0.5f};
  float* d; signed char* q; cudaMalloc(&d, sizeof h); cudaMalloc(&q, 4);
  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  quant<<<1, 4>>>(d, q, 10.0f, 4);
  signed char r[4]; cudaMemcpy(r, q, 4, cudaMemcpyDeviceToHost);
  printf("%d %d %d %d\n", r[0], r[1], r[2], r[3]);
}
"""

IMPLICIT = r"""
#include <cstdio>
__global__ void k(const float* x, int* out) { int v = x[threadIdx.x] * 10.0f; out[threadIdx.x] = v; }
int main() {
  float h[2] = {1.0f, 3e9f}; float* d; int* o; cudaMalloc(&d, 8); cudaMalloc(&o, 8);
  cudaMemcpy(d, h, 8, cudaMemcpyHostToDevice);
  k<<<1, 2>>>(d, o);
  int r[2]; cudaMemcpy(r, o, 8, cudaMemcpyDeviceToHost); printf("%d %d\n", r[0], r[1]);
}
"""

HOST_IMPLICIT = r"""
#include <cstdio>
__global__ void k(const float* x, int* out) { int v = x[threadIdx.x] * 10.0f; out[threadIdx.x] = v; }
int main() {
  float h[2] = {1.0f, 2.0f}; float* d; int* o; cudaMalloc(&d, 8); cudaMalloc(&o, 8);
  cudaMemcpy(d, h, 8, cudaMemcpyHostToDevice);
  k<<<1, 2>>>(d, o);
  int r[2]; cudaMemcpy(r, o, 8, cudaMemcpyDeviceToHost);
  volatile float big = 3e10f; int host = big;
  printf("%d %d %d\n", r[0], r[1], host);
}
"""


@needs_gxx
def test_a_quantiser_that_casts_before_it_clamps_gives_the_gpus_bytes(workroot):
    from cuset.execute.cpu import run_program

    r = run_program(QUANTISER, workroot / "quantiser", order="random:1")
    assert r.ok and r.run.stdout.strip() == "10 127 -128 5", r.run.stderr[-2000:]


@needs_gxx
@pytest.mark.parametrize("order", ["forward", "parallel:1"])
def test_an_implicit_out_of_range_conversion_in_a_kernel_is_unsupported_not_a_value(order, workroot):
    from cuset.execute.cpu import run_program
    from cuset.execute.interface import Status

    r = run_program(IMPLICIT, workroot / f"implicit-{order.replace(':', '-')}", order=order)
    assert not r.ok and r.classified[0] == Status.UNSUPPORTED
    assert "kernel.cu:3: a conversion from 'float' to 'int' in device code" in r.classified[1]
    assert r.run.stdout == ""


@needs_gxx
def test_host_code_keeps_the_hosts_conversion(workroot):
    from cuset.execute.cpu import run_program

    r = run_program(HOST_IMPLICIT, workroot / "host-implicit")
    assert r.ok, r.classified
    assert r.run.stdout.strip() == f"10 20 {INT_MIN}"
