"""CPU backend speed: context switches, two reference kernels, compile time.

Measured in one run on this machine, medians over --repeats runs of each
program (times are taken inside the program around the kernel launch, so
process start-up and data set-up are excluded):

- context switch per thread: a block of 1,024 threads passes 200 __syncthreads;
  each pass suspends and resumes every thread once (64 blocks). Also shown:
  a warp shuffle per thread, and a thread that never waits (plain call).
- 512x512 tiled matmul with 16x16 tiles (shared memory, two barriers per tile).
- 16M-element vector add.
- compile time of a small program with the precompiled header, next to the
  same compile parsing the runtime header from source.

Targets (issue 8): switch <= 50 ns, matmul <= 2 s, vector add <= 0.5 s,
compile <= 3 s.

Workers (issue 17), the `parallel` order with 1 and with 2 worker OS threads,
side by side in one run (wall time inside the program, and the process's CPU
time): a naive 1024x1024 matmul (no barriers) and a 1024x1024 tiled matmul
(barriers), target speed-up >= 1.7x on 2 cores. With --big also the naive
batch-norm (4096x1024 threads, each summing its column over 4096 rows) and a
naive 1024x2048x4096 matmul with 2 workers, target <= 30 s each. The load
average is printed next to the numbers: other work on the machine distorts
the speed-ups.

Paths (issue 41), with --paths: the same executable with block loops (kernels
that need no fiber run as loops over a block's threads, uniform loops hoisted,
those writing no memory with the threads innermost, vectorised), with block loops
whose hoisted loops all run chunked (CUSET_CPU_BLOCK_LOOP=chunks: the previous
step) and without (CUSET_CPU_BLOCK_LOOP=0: every kernel on fibers), side by side in
one run, each as a whole sample costs: the sum over the default orders
(forward, random:1, parallel:1 with 2 workers) of the process wall time. Rows:
the naive batch-norm (4096x1024 threads, 4096 rows per column) and the naive
1024x2048x4096 matmul, target <= 15 s per sample with block loops. --paths-scale 4
divides the sizes by 4 (a quick look on a busy machine; not the target rows).

Order proof (issue 41), with --proof: the same two rows as a whole sample with every
order (block loops, no instrumentation) next to the sample with the order proof
(forward instrumented; random:1 and parallel:1 run only when the runtime does not prove
every launch order-independent, as the pipeline decides), in one run, wall and CPU
time of the processes (--paths-scale applies).

    .venv/bin/python bench/cpu_backend.py [--repeats 5] [--json out.json] [--no-workers] [--big]
    .venv/bin/python bench/cpu_backend.py --paths [--paths-scale 1]
    .venv/bin/python bench/cpu_backend.py --proof [--paths-scale 1]
    .venv/bin/python bench/cpu_backend.py --barrier-paths [--paths-scale 1]
    .venv/bin/python bench/cpu_backend.py --block-order [--repeats 3]
    .venv/bin/python bench/cpu_backend.py --order-cost [--repeats 5]

Block order (issue 41), with --block-order: the bundled suite's Bitonic_Sort (16M
elements, 300 launches of 65,536 blocks), Scaled_Dot_Product_Attention (32 heads x
2048 queries, one block per query and head) and Sort_Rows_Float (65536 rows of 1024,
one block per row, barrier regions) at their largest sizes, forward and
random:1 with the blocks in one affine permutation of the whole grid
(CUSET_CPU_BLOCK_CHUNK=1, the random order before 2026-11-27) and in chunks of 64
neighbouring blocks (the default), alternated, medians of --repeats: process wall and
CPU time, every output checked with the task's compare.py.

Barrier regions (issue 41), with --barrier-paths: the 65536x1024 shared-memory row
sort (one block per row, a bitonic network with a barrier after each of its 55
steps: the bundled suite's Sort_Rows_Float at its largest size) per order, forward
and random:1, on the fibers (CUSET_CPU_BLOCK_LOOP=0) and split into barrier regions
(the default), side by side in one run: process wall time and CPU time. Target
<= 20 s per order on 2 cores, random within 1.3x of forward. Then the bundled suite's
largest attention reference (32 heads x 2048 x 128: five barriers, four warp shuffles,
block-stride loops) as a whole sample costs (forward, random:1, parallel:1 with 2
workers), on the fibers and as barrier regions, with the task's own inputs, every
output checked against its reference and compared across paths (target <= 60 s).

What the random order itself costs (issue 41), with --order-cost: where the row sort's
random/forward ratio comes from. A standalone C++ replica of its barrier regions (the
loops the rewriter emits, without the runtime), compiled with the CPU backend's own
flags, sorts 8192 rows of 1024 in one process under six thread orders, alternated,
medians of --repeats: index order (forward's loop), the identity through the order
table (the random path's loop with no permutation), the runtime's random orders (warps
shuffled, each warp's lanes in the order l ^ mask, a pool of 32 drawn after each
barrier), each half of that alone, and a uniform shuffle of the block. Every run's rows
are checked sorted. A replica, not the runtime: it attributes the ratio, it is not the
target row.
"""

from __future__ import annotations

# What this script measures (the CPU backend's runtime, rewriter and build): a record in bench/results is stale once a commit
# after its own touches one of these paths (docs/tools/perf_table.py).
MEASURES = ("cuset/execute/cpu",)

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def children_cpu() -> float:
    """CPU seconds of this process's waited-for children (the benchmark programs)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime

SWITCH = r"""
#include <cstdio>
#include <chrono>
__global__ void barriers(int* out, int iters) {
  int acc = 0;
  for (int k = 0; k < iters; ++k) { acc += k; __syncthreads(); }
  if (threadIdx.x == 0) out[blockIdx.x] = acc;
}
__global__ void shuffles(int* out, int iters) {
  int v = threadIdx.x;
  for (int k = 0; k < iters; ++k) v += __shfl_xor_sync(0xffffffff, v, 1);
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}
__global__ void plain(int* out) { if (threadIdx.x == 1023) out[blockIdx.x] = 1; }
static double seconds_of(void (*f)()) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
static int* d;
int main() {
  cudaMalloc(&d, 1 << 20);
  const double n = 64.0 * 1024 * 200;
  double b = seconds_of([] { barriers<<<64, 1024>>>(d, 200); });
  double s = seconds_of([] { shuffles<<<64, 1024>>>(d, 200); });
  double p = seconds_of([] { plain<<<64 * 200, 1024>>>(d); });
  printf("switch_ns=%.2f shuffle_ns=%.2f plain_ns=%.2f\n", b / n * 1e9, s / n * 1e9, p / n * 1e9);
}
"""

TILED_KERNEL = r"""
#define TILE 16
__global__ void matmul(const float* A, const float* B, float* C, int n) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int t = 0; t < n / TILE; ++t) {
    As[threadIdx.y][threadIdx.x] = A[row * n + t * TILE + threadIdx.x];
    Bs[threadIdx.y][threadIdx.x] = B[(t * TILE + threadIdx.y) * n + col];
    __syncthreads();
    for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  C[row * n + col] = acc;
}
"""

MATMUL = r"""
#include <cstdio>
#include <vector>
""" + TILED_KERNEL + r"""int main() {
  const int n = 512;
  std::vector<float> a(n * n), b(n * n), c(n * n);
  for (int i = 0; i < n * n; ++i) { a[i] = (i % 7) * 0.25f; b[i] = (i % 5) * 0.5f; }
  float *da, *db, *dc;
  cudaMalloc(&da, n * n * 4); cudaMalloc(&db, n * n * 4); cudaMalloc(&dc, n * n * 4);
  cudaMemcpy(da, a.data(), n * n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), n * n * 4, cudaMemcpyHostToDevice);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  cudaEventRecord(e0);
  matmul<<<dim3(n / TILE, n / TILE), dim3(TILE, TILE)>>>(da, db, dc, n);
  cudaEventRecord(e1); cudaEventSynchronize(e1);
  float ms; cudaEventElapsedTime(&ms, e0, e1);
  cudaMemcpy(c.data(), dc, n * n * 4, cudaMemcpyDeviceToHost);
  double want = 0; for (int k = 0; k < n; ++k) want += a[7 * n + k] * b[k * n + 11];
  printf("matmul_s=%.4f check=%d\n", ms / 1000.0, (int)(c[7 * n + 11] == (float)want || (c[7 * n + 11] - want) * (c[7 * n + 11] - want) < 1e-4));
}
"""

VECADD = r"""
#include <cstdio>
#include <vector>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
int main() {
  const int n = 1 << 24;
  std::vector<float> h(n, 1.5f);
  float *a, *b, *c;
  cudaMalloc(&a, n * 4); cudaMalloc(&b, n * 4); cudaMalloc(&c, n * 4);
  cudaMemcpy(a, h.data(), n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(b, h.data(), n * 4, cudaMemcpyHostToDevice);
  cudaMemset(c, 0, n * 4);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  cudaEventRecord(e0);
  add<<<(n + 255) / 256, 256>>>(a, b, c, n);
  cudaEventRecord(e1); cudaEventSynchronize(e1);
  float ms; cudaEventElapsedTime(&ms, e0, e1);
  cudaMemcpy(h.data(), c, n * 4, cudaMemcpyDeviceToHost);
  printf("vecadd_s=%.4f check=%d\n", ms / 1000.0, (int)(h[0] == 3.0f && h[n - 1] == 3.0f));
}
"""

# Kernels for the workers rows: sizes from argv, time inside the program.
WORKERS_PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
__global__ void naive(const float* A, const float* B, float* C, int M, int N, int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
  C[row * N + col] = acc;
}
""" + TILED_KERNEL + r"""// One thread per element; each re-reads its whole column for the mean.
__global__ void batchnorm(const float* x, float* y, int rows, int cols) {
  int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows || c >= cols) return;
  float s = 0.0f;
  for (int i = 0; i < rows; ++i) s += x[i * cols + c];
  y[r * cols + c] = x[r * cols + c] - s / rows;
}
int main(int argc, char** argv) {
  const char* what = argv[1];
  int M = atoi(argv[2]), N = atoi(argv[3]), K = atoi(argv[4]);
  size_t na = strcmp(what, "batchnorm") == 0 ? (size_t)M * N : (size_t)M * K, nb = (size_t)K * N;
  std::vector<float> a(na), b(nb), c((size_t)M * N);
  for (size_t i = 0; i < na; ++i) a[i] = (i % 7) * 0.25f;
  for (size_t i = 0; i < nb; ++i) b[i] = (i % 5) * 0.5f;
  float *da, *db, *dc;
  cudaMalloc(&da, na * 4); cudaMalloc(&db, nb * 4); cudaMalloc(&dc, (size_t)M * N * 4);
  cudaMemcpy(da, a.data(), na * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), nb * 4, cudaMemcpyHostToDevice);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  cudaEventRecord(e0);
  if (strcmp(what, "naive") == 0) naive<<<dim3(N / 16, M / 16), dim3(16, 16)>>>(da, db, dc, M, N, K);
  else if (strcmp(what, "tiled") == 0) matmul<<<dim3(N / TILE, M / TILE), dim3(TILE, TILE)>>>(da, db, dc, N);
  else batchnorm<<<dim3(N / 32, M / 8), dim3(32, 8)>>>(da, dc, M, N);
  cudaEventRecord(e1); cudaEventSynchronize(e1);
  float ms; cudaEventElapsedTime(&ms, e0, e1);
  cudaMemcpy(c.data(), dc, (size_t)M * N * 4, cudaMemcpyDeviceToHost);
  int i = 7 % M, j = 11 % N;
  double want = 0;
  if (strcmp(what, "batchnorm") == 0) {
    for (int r = 0; r < M; ++r) want += a[(size_t)r * N + j];
    want = a[(size_t)i * N + j] - want / M;
  } else {
    for (int k = 0; k < K; ++k) want += a[(size_t)i * K + k] * b[(size_t)k * N + j];
  }
  double got = c[(size_t)i * N + j], tol = 1e-4 * (1 + (want < 0 ? -want : want));
  printf("kernel_s=%.4f check=%d\n", ms / 1000.0, (int)((got - want) * (got - want) <= tol * tol));
}
"""
SORT_PROGRAM = r"""
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
constexpr int LEN = 1024;
// The sort_rows family's kernel (cuset/curation/families/sorting.py), ascending.
template <typename T>
__global__ void sort_rows(const T* __restrict__ in, T* __restrict__ out) {
    __shared__ T s[LEN];
    int t = threadIdx.x;
    size_t base = (size_t)blockIdx.x * LEN;
    s[t] = in[base + t];
    __syncthreads();
    for (int k = 2; k <= LEN; k <<= 1) {
        for (int j = k >> 1; j > 0; j >>= 1) {
            int partner = t ^ j;
            if (partner > t) {
                bool up = ((t & k) == 0) == true;
                T a = s[t];
                T b = s[partner];
                if ((a > b) == up) {
                    s[t] = b;
                    s[partner] = a;
                }
            }
            __syncthreads();
        }
    }
    out[base + t] = s[t];
}
int main(int argc, char** argv) {
  int rows = atoi(argv[1]);
  size_t n = (size_t)rows * LEN;
  std::vector<float> h(n);
  unsigned long long r = 88172645463325252ull;
  for (size_t i = 0; i < n; ++i) { r ^= r << 13; r ^= r >> 7; r ^= r << 17; h[i] = (float)(r % 1000003) / 7.0f; }
  float *din, *dout;
  cudaMalloc(&din, n * 4); cudaMalloc(&dout, n * 4);
  cudaMemcpy(din, h.data(), n * 4, cudaMemcpyHostToDevice);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  cudaEventRecord(e0);
  sort_rows<float><<<rows, LEN>>>(din, dout);
  cudaEventRecord(e1); cudaEventSynchronize(e1);
  float ms; cudaEventElapsedTime(&ms, e0, e1);
  std::vector<float> o(n);
  cudaMemcpy(o.data(), dout, n * 4, cudaMemcpyDeviceToHost);
  int ok = 1;
  for (size_t i = 0; i < n; ++i)
    if (i % LEN && o[i - 1] > o[i]) ok = 0;
  for (int row : {0, rows / 2, rows - 1}) {  // the same values: the host's sort of the row
    std::vector<float> want(h.begin() + (size_t)row * LEN, h.begin() + (size_t)(row + 1) * LEN);
    std::sort(want.begin(), want.end());
    for (int i = 0; i < LEN; ++i)
      if (want[i] != o[(size_t)row * LEN + i]) ok = 0;
  }
  printf("kernel_s=%.4f check=%d\n", ms / 1000.0, ok);
}
"""
SORT_ROWS = 65536

# --order-cost: the row sort's regions as the rewriter emits them, with the thread order
# as the only variable (cuset_rt/core.h for_each_thread; scheduler.cpp random_thread_order).
ORDER_COST_PROGRAM = r"""
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>
constexpr int LEN = 1024;
static float s[LEN];
template <class F> __attribute__((always_inline)) inline void each(const int* order, F&& f) {
  if (order) for (unsigned i = 0; i < LEN; ++i) f((unsigned)order[i]);
  else for (unsigned x = 0; x < LEN; ++x) f(x);
}
__attribute__((noinline)) void sort_rows(const float* in, float* out, int rows, int (*pool)[LEN]) {
  unsigned long long rng = 12345;
  auto next = [&]() -> const int* {
    if (!pool) return nullptr;
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return pool[rng % 32];
  };
  for (int b = 0; b < rows; ++b) {
    size_t base = (size_t)b * LEN;
    const int* o = next();
    each(o, [&](unsigned t) { s[t] = in[base + t]; });
    o = next();
    for (int k = 2; k <= LEN; k <<= 1)
      for (int j = k >> 1; j > 0; j >>= 1) {
        each(o, [&](unsigned u) {
          int t = (int)u, partner = t ^ j;
          if (partner > t) {
            bool up = (t & k) == 0;
            float a = s[t], c = s[partner];
            if ((a > c) == up) { s[t] = c; s[partner] = a; }
          }
        });
        o = next();
      }
    each(o, [&](unsigned t) { out[base + t] = s[t]; });
  }
}
static int pools[6][32][LEN];
int main(int argc, char** argv) {
  int rows = atoi(argv[1]), repeats = atoi(argv[2]);
  size_t n = (size_t)rows * LEN;
  std::vector<float> in(n), out(n);
  unsigned long long r = 88172645463325252ull;
  for (size_t i = 0; i < n; ++i) { r ^= r << 13; r ^= r >> 7; r ^= r << 17; in[i] = (float)(r % 1000003) / 7.0f; }
  std::mt19937 g(1);
  for (int k = 0; k < 32; ++k) {
    int warps[32];
    for (int w = 0; w < 32; ++w) warps[w] = w;
    std::shuffle(warps, warps + 32, g);
    for (int w = 0, i = 0; w < 32; ++w) {
      unsigned mask = g() & 31;
      for (unsigned l = 0; l < 32; ++l, ++i) {
        pools[1][k][i] = i;                                   // identity
        pools[2][k][i] = warps[w] * 32 + (int)(l ^ mask);     // the runtime's random orders
        pools[3][k][i] = warps[w] * 32 + (int)l;              // warps shuffled, lanes in order
        pools[4][k][i] = w * 32 + (int)(l ^ mask);            // warps in order, lanes l ^ mask
        pools[5][k][i] = i;
      }
    }
    std::shuffle(pools[5][k], pools[5][k] + LEN, g);          // a uniform shuffle of the block
  }
  for (int rep = 0; rep < repeats; ++rep)
    for (int m = 0; m < 6; ++m) {
      auto t0 = std::chrono::steady_clock::now();
      sort_rows(in.data(), out.data(), rows, m ? pools[m] : nullptr);
      double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      int ok = 1;
      for (size_t i = 0; i < n; ++i) if (i % LEN && out[i - 1] > out[i]) ok = 0;
      printf("order=%d s=%.4f ok=%d\n", m, sec, ok);
    }
}
"""
ORDER_COST_NAMES = ("index order (forward's loop)", "identity through the order table",
                    "random orders (warps shuffled, lanes l ^ mask)", "warps shuffled, lanes in order",
                    "warps in order, lanes l ^ mask", "uniform shuffle of the block")
ORDER_COST_ROWS = 8192
BARRIER_ORDERS = ("forward", "random:1")
BARRIER_PATHS = ("fibers", "regions")


def barrier_path_rows(workdir: Path, scale: int) -> list[dict]:
    """The shared-memory row sort per order, on the fibers and as barrier regions."""
    from cuset.execute.cpu import CpuBackend, compile_program, run_compiled

    backends = {"fibers": CpuBackend(workers=2, block_loops=False), "regions": CpuBackend(workers=2)}
    compiled = compile_program(SORT_PROGRAM, workdir, timeout=300, backend=backends["regions"])
    if not compiled.ok:
        sys.exit(f"benchmark program failed to compile: {compiled.detail}")
    print(compiled.step.stdout.strip())

    rows = str(SORT_ROWS // scale)
    row = {"label": f"shared-memory row sort {rows}x1024", "args": [rows], "load_before": os.getloadavg()}
    for order in BARRIER_ORDERS:
        for path, backend in backends.items():
            cpu = children_cpu()
            run = run_compiled(compiled, workdir, timeout=600, order=order, backend=backend, args=[rows],
                               run_name=f"sort-{path}-{order.replace(':', '-')}")
            if not run.ok or parse(run.run.stdout).get("check") != 1:
                sys.exit(f"sort {path} {order} failed or sorted wrongly: {run.run.stdout} {run.run.stderr[-1000:]}")
            row[f"{path}_{order}_s"] = run.run.seconds
            row[f"{path}_{order}_cpu_s"] = children_cpu() - cpu
            print(f"  {path:<8}{order:<10}{run.run.seconds:>8.1f}s wall{row[f'{path}_{order}_cpu_s']:>8.1f}s CPU",
                  flush=True)
    f, r = BARRIER_ORDERS
    row["speedup_forward"] = row[f"fibers_{f}_s"] / row[f"regions_{f}_s"]
    row["speedup_random"] = row[f"fibers_{r}_s"] / row[f"regions_{r}_s"]
    row["regions_random_over_forward"] = row[f"regions_{r}_s"] / row[f"regions_{f}_s"]
    row["regions_random_over_forward_cpu"] = row[f"regions_{r}_cpu_s"] / row[f"regions_{f}_cpu_s"]
    row["load_after"] = os.getloadavg()
    return [row, attention_row(workdir)]


def attention_row(workdir: Path) -> dict:
    """The bundled suite's largest attention reference (32 heads x 2048 x 128: five barriers,
    four warp shuffles, a block-stride loop per output) as a whole sample costs, every
    order, on the fibers and as barrier regions: the same executable and inputs."""
    import numpy as np

    from cuset.execute.cpu import CpuBackend, compile_program, run_compiled
    from cuset.tasks import load_tasks

    tasks, _ = load_tasks(ROOT / "suites" / "cuset-bench.jsonl")
    task = max((t for t in tasks if t.family == "sdpa"), key=lambda t: t.data_bytes)
    data = workdir / "attention"
    data.mkdir()
    (data / "gen.py").write_text(task.gen_py)
    subprocess.run([sys.executable, "gen.py"], cwd=data, check=True, timeout=600)
    inputs = {f"data/{p.name}": p.read_bytes() for p in (data / "data").glob("*.bin") if not p.stem.endswith("_ref")}
    reference = np.fromfile(data / "data" / "O_ref.bin", dtype=np.float32)
    backends = {"fibers": CpuBackend(workers=2, block_loops=False), "regions": CpuBackend(workers=2)}
    compiled = compile_program(task.bench_cu, data, timeout=300, backend=backends["regions"])
    if not compiled.ok:
        sys.exit(f"attention failed to compile: {compiled.detail}")
    print(compiled.step.stdout.strip())
    row = {"label": f"attention {task.task_name} #{task.id} (sample: {', '.join(SAMPLE_ORDERS)})",
           "load_before": os.getloadavg()}
    outputs = set()
    for order in SAMPLE_ORDERS:
        for path, backend in backends.items():
            run = run_compiled(compiled, data, inputs, timeout=600, order=order, backend=backend,
                               run_name=f"attention-{path}-{order.replace(':', '-')}")
            out = run.files.get("data/O.bin", b"")
            if not run.ok or not np.allclose(np.frombuffer(out, np.float32), reference, rtol=1e-4, atol=1e-5):
                sys.exit(f"attention {path} {order} failed or wrong: {run.run.stderr[-1000:]}")
            outputs.add(out)
            row[f"{path}_{order}_s"] = run.run.seconds
            print(f"  {path:<8}{order:<11}{run.run.seconds:>8.1f}s wall", flush=True)
    for path in backends:
        row[f"{path}_sample_s"] = sum(row[f"{path}_{o}_s"] for o in SAMPLE_ORDERS)
    row["speedup_sample"] = row["fibers_sample_s"] / row["regions_sample_s"]
    row["bit_identical"] = len(outputs) == 1
    row["load_after"] = os.getloadavg()
    return row


def order_cost_rows(workdir: Path, repeats: int) -> list[dict]:
    """The replica under each thread order, medians of `repeats` alternated runs in one process."""
    from cuset.execute.cpu.toolchain import Toolchain

    src, exe = workdir / "order_cost.cpp", workdir / "order_cost"
    src.write_text(ORDER_COST_PROGRAM)
    flags = Toolchain().program_flags()
    subprocess.run(["g++", *flags, "-o", str(exe), str(src)], check=True)
    out = subprocess.run([str(exe), str(ORDER_COST_ROWS), str(repeats)], capture_output=True, text=True,
                         check=True, timeout=1800).stdout
    times: dict[int, list[float]] = {}
    for line in out.splitlines():
        got = dict(kv.split("=") for kv in line.split())
        if got["ok"] != "1":
            sys.exit(f"order-cost replica sorted wrongly under {ORDER_COST_NAMES[int(got['order'])]}")
        times.setdefault(int(got["order"]), []).append(float(got["s"]))
    base = statistics.median(times[0])
    return [{"order": ORDER_COST_NAMES[m], "seconds": statistics.median(t), "runs": t,
             "over_index_order": statistics.median(t) / base, "rows": ORDER_COST_ROWS, "flags": flags}
            for m, t in sorted(times.items())]


def print_order_cost_rows(rows: list[dict]) -> None:
    print(f"\nRow sort regions, replica ({ORDER_COST_ROWS}x1024), median seconds per thread order\n")
    for r in rows:
        print(f"{r['order']:<50}{r['seconds']:>8.3f} s{r['over_index_order']:>7.2f}x")


def print_barrier_path_rows(rows: list[dict]) -> None:
    print("\nBarrier regions: one order per run (2 workers), process wall time / CPU time\n")
    for r in rows:
        if "fibers_sample_s" in r:
            print(f"{r['label']}: " + ", ".join(f"{o} {r[f'fibers_{o}_s']:.1f} -> {r[f'regions_{o}_s']:.1f} s"
                                               for o in SAMPLE_ORDERS)
                  + f"; sample fibers {r['fibers_sample_s']:.1f} s, regions {r['regions_sample_s']:.1f} s "
                  f"({r['speedup_sample']:.2f}x)  <= 60 s  {'ok' if r['regions_sample_s'] <= 60 else 'MISSED'}  "
                  f"bit-identical: {r['bit_identical']}")
            continue
        for order in BARRIER_ORDERS:
            fib, reg = r[f"fibers_{order}_s"], r[f"regions_{order}_s"]
            print(f"{r['label']:<36}{order:<10} fibers {fib:>7.1f}s ({r[f'fibers_{order}_cpu_s']:.1f}s CPU)  "
                  f"regions {reg:>7.1f}s ({r[f'regions_{order}_cpu_s']:.1f}s CPU)  {fib / reg:>5.2f}x  <= 20 s  "
                  f"{'ok' if reg <= 20 else 'MISSED'}")
        ratio = r["regions_random_over_forward"]
        print(f"{'  regions: random / forward':<46}{ratio:.2f} wall, {r['regions_random_over_forward_cpu']:.2f} CPU"
              f"  <= 1.3  {'ok' if ratio <= 1.3 else 'MISSED'}  load {r['load_before'][0]:.1f} -> "
              f"{r['load_after'][0]:.1f}")


WORKER_ROWS = [  # (label, program arguments)
    ("naive matmul 1024x1024", ["naive", "1024", "1024", "1024"]),
    ("tiled matmul 1024x1024", ["tiled", "1024", "1024", "1024"]),
]
BIG_ROWS = [
    ("naive batch-norm 4096x1024", ["batchnorm", "4096", "1024", "0"]),
    ("naive matmul 1024x2048x4096", ["naive", "1024", "2048", "4096"]),
]

TARGETS = {  # metric -> (target, unit)
    "switch_ns": (50.0, "ns"),
    "matmul_s": (2.0, "s"),
    "vecadd_s": (0.5, "s"),
    "compile_pch_s": (3.0, "s"),
}
LABELS = {
    "switch_ns": "context switch per thread (__syncthreads)",
    "shuffle_ns": "warp shuffle per thread",
    "plain_ns": "thread that never waits (plain call)",
    "matmul_s": "512x512 tiled matmul, 16x16 tiles",
    "vecadd_s": "16M-element vector add",
    "compile_pch_s": "compile with precompiled header",
    "compile_nopch_s": "compile parsing the runtime header",
}


def parse(stdout: str) -> dict[str, float]:
    out = {}
    for word in stdout.split():
        if "=" in word:
            k, v = word.split("=", 1)
            out[k] = float(v)
    return out


def run_program_times(backend, source: str, workdir: Path, repeats: int, order: str) -> dict[str, list[float]]:
    from cuset.execute.cpu import compile_program, run_compiled

    compiled = compile_program(source, workdir, timeout=300, backend=backend)
    if not compiled.ok:
        sys.exit(f"benchmark program failed to compile: {compiled.detail}")
    values: dict[str, list[float]] = {}
    for r in range(repeats):
        run = run_compiled(compiled, workdir, timeout=300, order=order, backend=backend, run_name=f"run{r}")
        if not run.ok:
            sys.exit(f"benchmark program failed: {run.run.stderr[-1000:]}")
        for k, v in parse(run.run.stdout).items():
            values.setdefault(k, []).append(v)
        if values.get("check", [1])[-1] != 1:
            sys.exit("benchmark program computed a wrong result")
    return values


def worker_times(workdir: Path, repeats: int, big: bool) -> list[dict]:
    """Rows of the workers table: the same executable under `parallel:1` with
    1 and 2 workers, alternated run by run (wall inside the program, CPU time
    of the process)."""
    import resource

    from cuset.execute.cpu import CpuBackend, compile_program, run_compiled

    backends = {w: CpuBackend(workers=w) for w in (1, 2)}
    compiled = compile_program(WORKERS_PROGRAM, workdir, timeout=300, backend=backends[2])
    if not compiled.ok:
        sys.exit(f"benchmark program failed to compile: {compiled.detail}")

    def one(args: list[str], w: int, tag: str) -> tuple[float, float]:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        run = run_compiled(compiled, workdir, timeout=600, order="parallel:1", backend=backends[w],
                           args=args, run_name=tag)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if not run.ok or parse(run.run.stdout).get("check") != 1:
            sys.exit(f"benchmark program failed or computed a wrong result: {run.run.stdout} {run.run.stderr[-1000:]}")
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return parse(run.run.stdout)["kernel_s"], cpu

    rows = []
    for label, args in WORKER_ROWS:
        wall: dict[int, list[float]] = {1: [], 2: []}
        cpu: dict[int, list[float]] = {1: [], 2: []}
        for r in range(repeats):
            for w in (1, 2):
                s, c = one(args, w, f"{args[0]}-{w}-{r}")
                wall[w].append(s)
                cpu[w].append(c)
        rows.append({"label": label, "workers_1_s": statistics.median(wall[1]),
                     "workers_2_s": statistics.median(wall[2]), "cpu_1_s": statistics.median(cpu[1]),
                     "cpu_2_s": statistics.median(cpu[2]), "load": os.getloadavg(),
                     "speedup": statistics.median(wall[1]) / statistics.median(wall[2])})
    for label, args in BIG_ROWS if big else []:
        s, c = one(args, 2, f"{args[0]}-big")
        rows.append({"label": label, "workers_2_s": s, "cpu_2_s": c, "load": os.getloadavg()})
    return rows


def print_worker_rows(rows: list[dict]) -> None:
    print("\nWorkers: parallel order, 1 vs 2 worker OS threads (kernel wall time; CPU time of the process)\n")
    print(f"{'kernel':<32}{'1 worker':>10}{'2 workers':>11}{'speed-up':>10}{'CPU 1w':>9}{'CPU 2w':>9}"
          f"{'target':>10}  load avg")
    for row in rows:
        load = " ".join(f"{x:.2f}" for x in row["load"])
        if "workers_1_s" in row:
            up = row["workers_1_s"] / row["workers_2_s"]
            print(f"{row['label']:<32}{row['workers_1_s']:>9.2f}s{row['workers_2_s']:>10.2f}s{up:>9.2f}x"
                  f"{row['cpu_1_s']:>8.1f}s{row['cpu_2_s']:>8.1f}s{'>= 1.7x':>10}  {load}"
                  f"  {'ok' if up >= 1.7 else 'MISSED'}")
        else:
            print(f"{row['label']:<32}{'':>10}{row['workers_2_s']:>10.2f}s{'':>10}{'':>9}{row['cpu_2_s']:>8.1f}s"
                  f"{'<= 30 s':>10}  {load}  {'ok' if row['workers_2_s'] <= 30 else 'MISSED'}")


SAMPLE_ORDERS = ("forward", "random:1", "parallel:1")  # CpuBackend(workers=2).run_orders


class _ChunkedLoops:
    """CpuBackend(workers=2) with CUSET_CPU_BLOCK_LOOP=chunks: block loops, every hoisted
    loop chunked (the block loops before loops writing no memory ran threads innermost)."""

    def __init__(self):
        from cuset.execute.cpu import CpuBackend

        self.backend = CpuBackend(workers=2, skip_independent_orders=False)

    def invocation(self, executable, order):
        from dataclasses import replace

        inv = self.backend.invocation(executable, order)
        return replace(inv, env={**inv.env, "CUSET_CPU_BLOCK_LOOP": "chunks"})

    def classify_failure(self, step):
        return self.backend.classify_failure(step)


PATHS = ("loops", "chunks", "fibers")


def path_rows(workdir: Path, scale: int, paths: tuple[str, ...] = PATHS) -> list[dict]:
    """Old paths (fibers; chunked block loops) vs new (block loops, loops writing no
    memory with the threads innermost), whole sample, alternated order by order."""
    from cuset.execute.cpu import CpuBackend, compile_program, run_compiled

    backends = {"loops": CpuBackend(workers=2, skip_independent_orders=False), "chunks": _ChunkedLoops(),
                "fibers": CpuBackend(workers=2, block_loops=False, skip_independent_orders=False)}
    assert backends["loops"].run_orders == SAMPLE_ORDERS
    backends = {path: backends[path] for path in paths}
    compiled = compile_program(WORKERS_PROGRAM, workdir, timeout=300, backend=backends["loops"])
    if not compiled.ok:
        sys.exit(f"benchmark program failed to compile: {compiled.detail}")
    print(compiled.step.stdout.strip())

    rows = []
    for label, args in BIG_ROWS:
        sizes = [str(max(1, int(a) // scale)) if a.isdigit() and a != "0" else a for a in args]
        if scale != 1:
            label = f"{label} / {scale}"
        row = {"label": label, "args": sizes, "load_before": os.getloadavg()}
        for order in SAMPLE_ORDERS:
            for path, backend in backends.items():
                cpu = children_cpu()
                run = run_compiled(compiled, workdir, timeout=600, order=order, backend=backend, args=sizes,
                                   run_name=f"{sizes[0]}-{path}-{order.replace(':', '-')}")
                if not run.ok or parse(run.run.stdout).get("check") != 1:
                    sys.exit(f"{label} {path} {order} failed or computed a wrong result: {run.run.stdout} "
                             f"{run.run.stderr[-1000:]}")
                row[f"{path}_{order}_s"] = run.run.seconds
                # CPU time of the process: on a loaded machine wall time mostly measures the others
                row[f"{path}_{order}_cpu_s"] = children_cpu() - cpu
        for path in backends:
            row[f"{path}_sample_s"] = sum(row[f"{path}_{o}_s"] for o in SAMPLE_ORDERS)
            row[f"{path}_sample_cpu_s"] = sum(row[f"{path}_{o}_cpu_s"] for o in SAMPLE_ORDERS)
        if paths == PATHS:
            row["speedup"] = row["fibers_sample_s"] / row["loops_sample_s"]
            row["speedup_over_chunks"] = row["chunks_sample_s"] / row["loops_sample_s"]
            row["cpu_speedup"] = row["fibers_sample_cpu_s"] / row["loops_sample_cpu_s"]
            row["cpu_speedup_over_chunks"] = row["chunks_sample_cpu_s"] / row["loops_sample_cpu_s"]
        row["load_after"] = os.getloadavg()
        rows.append(row)
    return rows


class _ProofOnStderr:
    """CpuBackend(workers=2) (order proofs on) whose forward run also writes the proof's
    lines on stderr (CUSET_CPU_REPORT_PATHS=1): run_compiled opens no diagnostics channel.
    Keeps the last forward invocation, whose secret the lines must carry."""

    def __init__(self):
        from cuset.execute.cpu import CpuBackend

        self.backend = CpuBackend(workers=2)
        self.forward = None

    def invocation(self, executable, order):
        from dataclasses import replace

        inv = self.backend.invocation(executable, order)
        if order == "forward":
            inv = self.forward = replace(inv, env={**inv.env, "CUSET_CPU_REPORT_PATHS": "1"})
        return inv

    def classify_failure(self, step):
        return self.backend.classify_failure(step)


def proof_rows(workdir: Path, scale: int, repeats: int = 1) -> list[dict]:
    """A whole sample with every order (the block loops, no order proof: before) vs with
    the order proof (forward instrumented; random and parallel only when the proof fails),
    the two alternated in one run, `repeats` times: back-to-back runs of one program on
    this shared machine differ by up to a third, so each number is the median of the
    repeats (`*_runs` keeps every one). The pipeline's decision, made here on the trusted
    stderr of the bench's own program (diagnostics.order_proof_result)."""

    from cuset.execute.cpu import CpuBackend, compile_program, run_compiled
    from cuset.execute.cpu.diagnostics import order_proof_result

    old = CpuBackend(workers=2, skip_independent_orders=False)
    new = _ProofOnStderr()
    assert old.run_orders == SAMPLE_ORDERS
    builds = {"all_orders": compile_program(WORKERS_PROGRAM, workdir / "old", timeout=300, backend=old),
              "proof": compile_program(WORKERS_PROGRAM, workdir / "new", timeout=300, backend=new.backend)}
    for name, compiled in builds.items():
        if not compiled.ok:
            sys.exit(f"benchmark program ({name}) failed to compile: {compiled.detail}")
        print(compiled.step.stdout.strip())

    def run(path: str, order: str, sizes: list[str], label: str) -> tuple:
        backend = old if path == "all_orders" else new
        cpu = children_cpu()
        r = run_compiled(builds[path], workdir, timeout=600, order=order, backend=backend, args=sizes,
                         run_name=f"{sizes[0]}-{path}-{order.replace(':', '-')}")
        if not r.ok or parse(r.run.stdout).get("check") != 1:
            sys.exit(f"{label} {path} {order} failed or computed a wrong result: {r.run.stdout} "
                     f"{r.run.stderr[-1000:]}")
        return r, r.run.seconds, children_cpu() - cpu

    rows = []
    for label, args in BIG_ROWS:
        sizes = [str(max(1, int(a) // scale)) if a.isdigit() and a != "0" else a for a in args]
        if scale != 1:
            label = f"{label} / {scale}"
        row = {"label": label, "args": sizes, "repeats": repeats, "load_before": os.getloadavg()}
        runs: dict[str, list[float]] = {}

        def note(key: str, wall: float, cpu: float) -> None:
            runs.setdefault(f"{key}_s", []).append(wall)
            runs.setdefault(f"{key}_cpu_s", []).append(cpu)

        decisions = set()
        for _ in range(repeats):
            forward, wall, cpu = run("proof", "forward", sizes, label)
            note("proof_forward", wall, cpu)
            why = order_proof_result(forward.run.stderr, new.forward.secret)
            decisions.add((bool(why), why or "not proven: " + " | ".join(
                ln for ln in forward.run.stderr.splitlines() if "order-proof:" in ln)))
            proof_orders = ["forward"] + ([] if why else list(SAMPLE_ORDERS[1:]))
            sample = {"all_orders": [0.0, 0.0], "proof": [wall, cpu]}
            for order in SAMPLE_ORDERS:
                _, wall, cpu = run("all_orders", order, sizes, label)
                note(f"all_orders_{order}", wall, cpu)
                sample["all_orders"][0] += wall
                sample["all_orders"][1] += cpu
                if order in proof_orders[1:]:
                    _, wall, cpu = run("proof", order, sizes, label)
                    note(f"proof_{order}", wall, cpu)
                    sample["proof"][0] += wall
                    sample["proof"][1] += cpu
            for path, (wall, cpu) in sample.items():
                note(f"{path}_sample", wall, cpu)
        if len(decisions) != 1:   # the proof is deterministic: a program proven once is proven every time
            sys.exit(f"{label}: the proof decided differently across repeats: {sorted(decisions)}")
        proven, row["proof"] = decisions.pop()
        row["proof_orders"] = ["forward"] + ([] if proven else list(SAMPLE_ORDERS[1:]))
        for key, values in runs.items():
            row[key] = statistics.median(values)
            row[key.removesuffix("_s") + "_runs"] = values
        row["cpu_speedup"] = row["all_orders_sample_cpu_s"] / row["proof_sample_cpu_s"]
        row["load_after"] = os.getloadavg()
        rows.append(row)
    return rows


BLOCK_ORDER_FAMILIES = ("bitonic_sort", "sdpa", "sort_rows")
BLOCK_ORDER_RUNS = (("forward", "forward", None), ("random_whole_grid", "random:1", "1"),
                    ("random_chunks", "random:1", None))


def block_order_rows(workdir: Path, repeats: int) -> list[dict]:
    """Forward vs the random order with the whole-grid block permutation vs with chunks of
    neighbouring blocks, on bundled reference programs at their largest sizes (trusted
    code, run directly with the backend's environment), alternated `repeats` times."""
    from cuset.execute.cpu import CpuBackend, compile_program
    from cuset.tasks import load_tasks

    backend = CpuBackend(workers=1, skip_independent_orders=False)
    tasks, _ = load_tasks(ROOT / "suites" / "cuset-bench.jsonl")
    rows = []
    for family in BLOCK_ORDER_FAMILIES:
        task = max((t for t in tasks if t.family == family), key=lambda t: t.data_bytes)
        where = workdir / family
        where.mkdir(parents=True)
        (where / "gen.py").write_text(task.gen_py)
        (where / "compare.py").write_text(task.compare_py)
        subprocess.run([sys.executable, "gen.py"], cwd=where, check=True)
        compiled = compile_program(task.bench_cu, where / "build", timeout=300, backend=backend)
        if not compiled.ok:
            sys.exit(f"{task.task_name} failed to compile: {compiled.detail}")
        row = {"task": f"{task.id} {task.task_name}", "repeats": repeats, "load_before": os.getloadavg()}
        runs: dict[str, list[float]] = {}
        for _ in range(repeats):
            for key, order, chunk in BLOCK_ORDER_RUNS:
                env = dict(backend.invocation(compiled.executable, order).env)
                if chunk:
                    env["CUSET_CPU_BLOCK_CHUNK"] = chunk
                cpu, t = children_cpu(), time.perf_counter()
                run = subprocess.run([str(compiled.executable)], cwd=where, env={**os.environ, **env},
                                     capture_output=True, text=True, timeout=900)
                wall, cpu = time.perf_counter() - t, children_cpu() - cpu
                check = subprocess.run([sys.executable, "compare.py"], cwd=where, capture_output=True, text=True)
                if run.returncode != 0 or check.stdout.strip() != "T":
                    sys.exit(f"{task.task_name} {key}: exit {run.returncode}, compare {check.stdout.strip()!r}: "
                             f"{run.stderr[-1000:]}")
                runs.setdefault(f"{key}_s", []).append(wall)
                runs.setdefault(f"{key}_cpu_s", []).append(cpu)
        for key, values in runs.items():
            row[key] = statistics.median(values)
            row[key.removesuffix("_s") + "_runs"] = values
        row["whole_grid_over_forward_cpu"] = row["random_whole_grid_cpu_s"] / row["forward_cpu_s"]
        row["chunks_over_forward_cpu"] = row["random_chunks_cpu_s"] / row["forward_cpu_s"]
        row["load_after"] = os.getloadavg()
        rows.append(row)
    return rows


def print_block_order_rows(rows: list[dict]) -> None:
    print("\nBlock order of the random orders: one permutation of the whole grid vs chunks of 64 "
          "neighbouring blocks; process CPU time, medians\n")
    print(f"{'task':<36}{'forward':>9}{'whole grid':>12}{'chunks':>9}{'grid/fwd':>10}{'chunks/fwd':>12}"
          "  wall fwd/grid/chunks  load avg before -> after")
    for r in rows:
        load = f"{r['load_before'][0]:.1f} -> {r['load_after'][0]:.1f}"
        print(f"{r['task']:<36}{r['forward_cpu_s']:>8.1f}s{r['random_whole_grid_cpu_s']:>11.1f}s"
              f"{r['random_chunks_cpu_s']:>8.1f}s{r['whole_grid_over_forward_cpu']:>9.2f}x"
              f"{r['chunks_over_forward_cpu']:>11.2f}x  {r['forward_s']:.1f}/{r['random_whole_grid_s']:.1f}/"
              f"{r['random_chunks_s']:.1f} s  {load}")


def print_proof_rows(rows: list[dict]) -> None:
    print("\nOrder proof: whole sample, every order (block loops) vs forward with the proof "
          "(other orders only when it fails); medians of the repeats\n")
    print(f"{'kernel':<36}{'all orders':>12}{'proof':>9}{'CPU all':>10}{'CPU proof':>11}{'CPU ratio':>11}"
          f"{'target':>10}  forward all/proof  load avg before -> after")
    for r in rows:
        load = f"{r['load_before'][0]:.1f} -> {r['load_after'][0]:.1f}"
        print(f"{r['label']:<36}{r['all_orders_sample_s']:>11.1f}s{r['proof_sample_s']:>8.1f}s"
              f"{r['all_orders_sample_cpu_s']:>9.1f}s{r['proof_sample_cpu_s']:>10.1f}s{r['cpu_speedup']:>10.2f}x"
              f"{'<= 15 s':>10}  {r['all_orders_forward_cpu_s']:.1f}/{r['proof_forward_cpu_s']:.1f} s CPU  {load}")
        print(f"{'':<36}{r['proof']}; median of {r['repeats']}: sample CPU all orders "
              f"{min(r['all_orders_sample_cpu_runs']):.1f}-{max(r['all_orders_sample_cpu_runs']):.1f} s, "
              f"proof {min(r['proof_sample_cpu_runs']):.1f}-{max(r['proof_sample_cpu_runs']):.1f} s")


def print_path_rows(rows: list[dict]) -> None:
    print("\nPaths: whole sample (forward + random:1 + parallel:1, 2 workers), process wall time\n")
    if rows and "speedup" not in rows[0]:  # only some paths (--paths-only)
        for r in rows:
            for key in sorted(k for k in r if k.endswith("_sample_s") or k.endswith("_sample_cpu_s")):
                print(f"{r['label']:<36}{key:<24}{r[key]:>8.1f}s  <= 15 s  load {r['load_before'][0]:.1f} -> "
                      f"{r['load_after'][0]:.1f}")
        return
    print("fibers: CUSET_CPU_BLOCK_LOOP=0; chunks: block loops with every hoisted loop chunked "
          "(CUSET_CPU_BLOCK_LOOP=chunks);\nloops: the default (loops writing no memory run threads innermost)\n")
    print(f"{'kernel':<36}{'fibers':>9}{'chunks':>9}{'loops':>9}{'vs fibers':>11}{'vs chunks':>11}{'target':>10}"
          "  per order (fibers / chunks / loops)  load avg before -> after")
    for r in rows:
        per = "  ".join(f"{o.split(':')[0]} {r[f'fibers_{o}_s']:.1f}/{r[f'chunks_{o}_s']:.1f}/{r[f'loops_{o}_s']:.1f}"
                        for o in SAMPLE_ORDERS)
        load = f"{r['load_before'][0]:.1f} -> {r['load_after'][0]:.1f}"
        print(f"{r['label']:<36}{r['fibers_sample_s']:>8.1f}s{r['chunks_sample_s']:>8.1f}s{r['loops_sample_s']:>8.1f}s"
              f"{r['speedup']:>10.2f}x{r['speedup_over_chunks']:>10.2f}x{'<= 15 s':>10}  {per}  {load}")
        print(f"{'  CPU time of the processes':<36}{r['fibers_sample_cpu_s']:>8.1f}s{r['chunks_sample_cpu_s']:>8.1f}s"
              f"{r['loops_sample_cpu_s']:>8.1f}s{r['cpu_speedup']:>10.2f}x{r['cpu_speedup_over_chunks']:>10.2f}x")


def compile_times(backend, workdir: Path, repeats: int) -> dict[str, list[float]]:
    """Wall time of g++ on the vector add program, with and without the PCH."""
    from cuset.execute.cpu.backend import REWRITTEN_NAME, SOURCE_NAME
    from cuset.execute.cpu.rewriter import rewrite
    from cuset.execute.cpu.toolchain import INCLUDE_DIR, RUNTIME_LIB
    from cuset.execute.process import clean_env, run_step

    runtime = backend.toolchain.ensure_runtime()
    times: dict[str, list[float]] = {"compile_pch_s": [], "compile_nopch_s": []}
    src = workdir / REWRITTEN_NAME
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / SOURCE_NAME).write_text(VECADD)
    src.write_text(f'#line 1 "{SOURCE_NAME}"\n' + rewrite(VECADD).source)
    (with_pch,) = backend.toolchain.compile_commands(runtime, src, workdir / "a.out")
    without = [a for a in with_pch]
    k = without.index("-include")
    without[k + 1] = str(INCLUDE_DIR / "cuset_cpu.h")
    for _ in range(repeats):
        for key, argv in (("compile_pch_s", with_pch), ("compile_nopch_s", without)):
            t = time.perf_counter()
            step = run_step("compile", argv, cwd=workdir, timeout=300, env=clean_env())
            if step.returncode != 0:
                sys.exit(f"compile failed: {step.stderr[-1000:]}")
            times[key].append(time.perf_counter() - t)
    assert (runtime / RUNTIME_LIB).is_file()
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--order", default="forward", help="thread order of the timed runs (forward or random:<seed>)")
    ap.add_argument("--json", type=Path, help="also write the medians here")
    ap.add_argument("--no-workers", action="store_true", help="skip the 1- vs 2-worker rows")
    ap.add_argument("--only-workers", action="store_true", help="only the workers rows")
    ap.add_argument("--big", action="store_true", help="also the batch-norm and 1024x2048x4096 rows (minutes)")
    ap.add_argument("--paths", action="store_true", help="only the block loops vs fibers rows (minutes)")
    ap.add_argument("--barrier-paths", action="store_true",
                    help="only the shared-memory row sort on the fibers vs barrier regions (minutes)")
    ap.add_argument("--paths-scale", type=int, default=1, help="divide the --paths sizes by this")
    ap.add_argument("--block-order", action="store_true",
                    help="only the random order's block permutation rows, whole grid vs chunks (minutes)")
    ap.add_argument("--proof", action="store_true", help="only the every-order vs order-proof sample rows (minutes)")
    ap.add_argument("--order-cost", action="store_true",
                    help="only the row sort replica under six thread orders: what the random order costs (a minute)")
    ap.add_argument("--paths-only", default="", help="comma-separated subset of loops,chunks,fibers (default: all, "
                    "side by side); the result file is named after it")
    args = ap.parse_args(argv)
    from _record import start_record

    if args.block_order:
        record = start_record(variant="block-order", argv=None if argv is None else [__file__, *argv])
        with tempfile.TemporaryDirectory(prefix="cuset-cpu-bench-") as tmp:
            rows = block_order_rows(Path(tmp), args.repeats)
        print_block_order_rows(rows)
        record.write({"block_order": rows, "chunk_blocks": 64})
        return 0

    if args.order_cost:
        record = start_record(variant="order-cost", argv=None if argv is None else [__file__, *argv])
        with tempfile.TemporaryDirectory(prefix="cuset-cpu-bench-") as tmp:
            rows = order_cost_rows(Path(tmp), args.repeats)
        print_order_cost_rows(rows)
        record.write({"order_cost": rows})
        return 0

    if args.proof:
        variant = "proof" if args.paths_scale == 1 else f"proof-scale{args.paths_scale}"
        record = start_record(variant=variant, argv=None if argv is None else [__file__, *argv])
        with tempfile.TemporaryDirectory(prefix="cuset-cpu-bench-") as tmp:
            rows = proof_rows(Path(tmp), args.paths_scale, args.repeats)
        print_proof_rows(rows)
        record.write({"proof": rows, "orders": list(SAMPLE_ORDERS)})
        return 0

    if args.barrier_paths:
        variant = "barrier-paths" if args.paths_scale == 1 else f"barrier-paths-scale{args.paths_scale}"
        record = start_record(variant=variant, argv=None if argv is None else [__file__, *argv])
        with tempfile.TemporaryDirectory(prefix="cuset-cpu-bench-") as tmp:
            rows = barrier_path_rows(Path(tmp), args.paths_scale)
        print_barrier_path_rows(rows)
        if args.json:
            args.json.write_text(json.dumps({"barrier_paths": rows}, indent=2))
        record.write({"barrier_paths": rows, "orders": list(BARRIER_ORDERS)})
        return 0

    if args.paths:
        only = tuple(p for p in args.paths_only.split(",") if p) or PATHS
        unknown = sorted(set(only) - set(PATHS))
        if unknown:
            ap.error(f"--paths-only: unknown path(s) {unknown}: use some of {','.join(PATHS)}")
        variant = "paths" if args.paths_scale == 1 else f"paths-scale{args.paths_scale}"
        if only != PATHS:
            variant += "-" + "-".join(only)
        record = start_record(variant=variant, argv=None if argv is None else [__file__, *argv])
        with tempfile.TemporaryDirectory(prefix="cuset-cpu-bench-") as tmp:
            rows = path_rows(Path(tmp), args.paths_scale, only)
        print_path_rows(rows)
        if args.json:
            args.json.write_text(json.dumps({"paths": rows}, indent=2))
        record.write({"paths": rows, "orders": list(SAMPLE_ORDERS)})
        return 0

    # each mode measures other README rows: its own result file
    mode = [name for name, on in (("big", args.big), ("only-workers", args.only_workers),
                                  ("no-workers", args.no_workers)) if on]
    record = start_record(variant="-".join(mode), argv=None if argv is None else [__file__, *argv])

    from cuset.execute.cpu import CpuBackend

    backend = CpuBackend()
    t = time.perf_counter()
    backend.toolchain.ensure_runtime()
    runtime_s = time.perf_counter() - t
    print(f"runtime ready in {runtime_s:.1f} s ({backend.toolchain.runtime_dir()})")
    samples: dict[str, list[float]] = {}
    worker_rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="cuset-cpu-bench-") as tmp:
        root = Path(tmp)
        if not args.no_workers:
            worker_rows = worker_times(root / "workers", args.repeats, args.big)
            print_worker_rows(worker_rows)
        if args.only_workers:
            if args.json:
                args.json.write_text(json.dumps({"workers": worker_rows}, indent=2))
            record.write({"runtime_ready_s": runtime_s, "workers": worker_rows})
            return 0
        for name, source in (("switch", SWITCH), ("matmul", MATMUL), ("vecadd", VECADD)):
            for k, v in run_program_times(backend, source, root / name, args.repeats, args.order).items():
                if k != "check":
                    samples[k] = v
        samples.update(compile_times(backend, root / "compile", args.repeats))

    medians = {k: statistics.median(v) for k, v in samples.items()}
    print(f"\nCPU backend, medians of {args.repeats} runs, order {args.order}\n")
    print(f"{'metric':<46}{'median':>12}{'target':>12}{'target/median':>15}")
    for key, label in LABELS.items():
        value = medians[key]
        unit = "ns" if key.endswith("_ns") else "s"
        shown = f"{value:.1f} ns" if unit == "ns" else f"{value:.3f} s"
        if key in TARGETS:
            target = TARGETS[key][0]
            ratio = target / value
            verdict = "ok" if ratio >= 1 else "MISSED"
            print(f"{label:<46}{shown:>12}{target:>10g} {unit:<2}{ratio:>12.2f}x  {verdict}")
        else:
            print(f"{label:<46}{shown:>12}")
    print(f"\nprecompiled header speed-up: {medians['compile_nopch_s'] / medians['compile_pch_s']:.2f}x")
    doc = {"medians": medians, "samples": samples, "repeats": args.repeats, "order": args.order,
           "workers": worker_rows}
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2))
    record.write({**doc, "runtime_ready_s": runtime_s,
                  "pch_speedup": medians["compile_nopch_s"] / medians["compile_pch_s"],
                  "targets": {k: target for k, (target, _unit) in TARGETS.items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
