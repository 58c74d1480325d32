"""Fast-math intrinsics behave as the CUDA Programming Guide documents them for a GPU:
special cases (`__powf(-2, 2)` is NaN, `__fdividef(1, 1.7e38)` is 0) and error bounds
against a float64 reference; the standard functions stay accurate."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cpu_helpers import needs_gxx

pytestmark = needs_gxx

N = 2048

PROGRAM = r"""#include <cstdio>
#include <cmath>
#include <cuda_runtime.h>
#define N %(n)d
__global__ void fast(const float* x, const float* lx, const float* tx, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N) return;
  out[0 * N + i] = __expf(x[i]);
  out[1 * N + i] = __logf(lx[i]);
  out[2 * N + i] = __sinf(tx[i]);
  out[3 * N + i] = __cosf(tx[i]);
  out[4 * N + i] = __log2f(lx[i]);
}
__global__ void special(float* o) {
  o[0] = __powf(-2.0f, 2.0f);
  o[1] = __fdividef(1.0f, 1.7e38f);
  o[2] = __fdividef(1.0f, 3.0f);
  o[3] = __fdividef(INFINITY, 2.0e38f);
  o[4] = powf(-2.0f, 2.0f);           // the standard functions keep their accurate versions
  o[5] = 1.0f / 1.7e38f;
  o[6] = __powf(2.0f, 10.0f);
  o[7] = __expf(-100.0f);             // 3.7e-44: a denormal, flushed to zero
  o[8] = expf(-100.0f);
  o[9] = __logf(-1.0f);
  o[10] = __logf(0.0f);
  o[11] = __sinf(INFINITY);
  o[12] = __tanf(0.5f);
  o[13] = __powf(0.0f, 2.0f);
}
int main() {
  static float x[N], lx[N], tx[N], out[5 * N];
  for (int i = 0; i < N; ++i) {
    x[i] = -80.0f + 160.0f * i / (N - 1);                      // __expf over [-80, 80]
    lx[i] = ldexpf(1.0f + (i %% 97) / 97.0f, (i %% 61) - 30);    // __logf over 2^-30 .. 2^31
    tx[i] = -3.14159265f + 6.2831853f * i / (N - 1);           // __sinf/__cosf over [-pi, pi]
  }
  float *dx, *dl, *dt, *dout, *ds;
  cudaMalloc(&dx, sizeof x); cudaMalloc(&dl, sizeof lx); cudaMalloc(&dt, sizeof tx);
  cudaMalloc(&dout, sizeof out); cudaMalloc(&ds, 14 * sizeof(float));
  cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice);
  cudaMemcpy(dl, lx, sizeof lx, cudaMemcpyHostToDevice);
  cudaMemcpy(dt, tx, sizeof tx, cudaMemcpyHostToDevice);
  fast<<<N / 256, 256>>>(dx, dl, dt, dout);
  special<<<1, 1>>>(ds);
  float s[14];
  cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost);
  cudaMemcpy(s, ds, sizeof s, cudaMemcpyDeviceToHost);
  FILE* f = fopen("results.txt", "w");
  for (int i = 0; i < 14; ++i) fprintf(f, "special %%d %%a\n", i, s[i]);
  for (int i = 0; i < N; ++i)
    fprintf(f, "%%a %%a %%a %%a %%a %%a %%a %%a\n", x[i], lx[i], tx[i], out[i], out[N + i], out[2 * N + i],
            out[3 * N + i], out[4 * N + i]);
  fclose(f);
  return 0;
}
""" % {"n": N}


@pytest.fixture(scope="module")
def results(backend, workroot):
    from cuset.execute.cpu import compile_program, run_compiled

    compiled = compile_program(PROGRAM, workroot / "fast_math", timeout=180, backend=backend)
    assert compiled.ok, compiled.detail
    r = run_compiled(compiled, workroot / "fast_math", None, 60.0, "forward", backend)
    assert r.ok, r
    special, rows = {}, []
    for line in (workroot / "fast_math" / "run-forward" / "results.txt").read_text().splitlines():
        parts = line.split()
        if parts[0] == "special":
            special[int(parts[1])] = _float(parts[2])
        else:
            rows.append([_float(v) for v in parts])
    return special, np.array(rows, dtype=np.float64)


def _float(text: str) -> float:
    """printf's %a, or nan / -nan / inf as glibc spells them."""
    return float.fromhex(text) if text.lstrip("+-").startswith("0x") else float(text)


def ulp(x: np.ndarray) -> np.ndarray:
    return np.spacing(np.abs(x).astype(np.float32)).astype(np.float64)


def test_documented_special_cases(results):
    s, _ = results
    assert math.isnan(s[0])                         # __powf(-2, 2) = exp2(2 * log2(-2)) = NaN
    assert s[1] == 0.0                              # 2^126 < 1.7e38 < 2^128: __fdividef returns 0
    assert s[2] == pytest.approx(1 / 3, rel=2 ** -22)
    assert math.isnan(s[3])                         # infinity / y for 2^126 < |y| < 2^128: NaN
    assert s[4] == 4.0 and s[5] == pytest.approx(5.88e-39, rel=1e-3)  # the accurate versions
    assert s[6] == 1024.0
    assert s[7] == 0.0 and s[8] > 0.0               # the SFU flushes a denormal result, expf does not
    assert math.isnan(s[9]) and s[10] == -math.inf
    assert math.isnan(s[11])
    assert s[12] == pytest.approx(math.tan(0.5), rel=2 ** -20)
    assert s[13] == 0.0


def test_expf_within_2_plus_1_173_abs_x_ulp(results):
    _, rows = results
    x, got = rows[:, 0], rows[:, 3]
    ref = np.exp(x)
    err_ulp = np.abs(got - ref) / ulp(ref)
    assert np.all(err_ulp <= 2 + np.floor(np.abs(1.173 * x)))
    assert err_ulp.max() > 1  # an approximation, not expf: the error grows with |x|


def test_logf_and_log2f_within_their_bounds(results):
    _, rows = results
    x, got_ln, got_l2 = rows[:, 1], rows[:, 4], rows[:, 7]
    inside = (x >= 0.5) & (x <= 2.0)
    assert inside.any() and (~inside).any()
    assert np.all(np.abs(got_ln - np.log(x))[inside] <= 2 ** -21.41)
    assert np.all((np.abs(got_ln - np.log(x)) / ulp(np.log(x)))[~inside] <= 3)
    assert np.all(np.abs(got_l2 - np.log2(x))[inside] <= 2 ** -22)
    assert np.all((np.abs(got_l2 - np.log2(x)) / ulp(np.log2(x)))[~inside] <= 2)


def test_sinf_and_cosf_within_their_bounds_on_minus_pi_pi(results):
    _, rows = results
    x = rows[:, 2]
    assert np.all(np.abs(rows[:, 5] - np.sin(x)) <= 2 ** -21.41)
    assert np.all(np.abs(rows[:, 6] - np.cos(x)) <= 2 ** -21.19)
