"""Block loops interleave a block's threads exactly as the fibers' loop ticks do
(issue 58, fuzzer finding F2): on the fibers a thread lets the next one run at every
32nd condition check of its ticking loops, counted across its loops (the first switch
at its 32nd check: 31 iterations of a first loop), and the block's threads take turns
in its order, one slice each. A hoisted loop writing memory runs those slices, a loop
writing nothing another thread sees only counts its checks (nested loops included),
and the statements after loops whose counts differ run round by round.

Each kernel below takes tickets (`t = c[0]; c[0] = t + 1; lg[t] = id`): the log is the
order its events ran in, which both paths must give alike in every order, bit for bit.
"""

from __future__ import annotations

import struct

import pytest

from cpu_helpers import needs_gxx, path_runner
from cpu_helpers import plan_kernels

# thread 0 writes a[0] at iteration 31, thread 1 reads it at iteration 32: the fibers'
# second slice (iterations 31..62) holds both, chunks from iteration 0 (0..31, 32..63) did not
PHASE = r"""
__global__ void phase(float* a, float* out, int n) {
  for (int j = 0; j < n; ++j) {
    if (threadIdx.x == 0 && j == 31) a[0] = 1.0f;
    if (threadIdx.x == 1 && j == 32) out[0] = a[0];
  }
}
"""

KERNELS = PHASE + r"""
// one ticking loop: slices of 31, 32, 32... iterations
__global__ void one(unsigned* c, unsigned* lg, int n) {
  for (int j = 0; j < n; ++j) { unsigned t = c[0]; c[0] = t + 1u; lg[t] = threadIdx.x * 1000u + j; }
}
// a loop writing no memory first: its 11 checks carry over (a first slice of 20 iterations)
__global__ void carry(const float* in, unsigned* c, unsigned* lg, float* o, int m, int n) {
  float acc = 0.0f;
  for (int i = 0; i < m; ++i) acc += in[i];
  for (int j = 0; j < n; ++j) { unsigned t = c[0]; c[0] = t + 1u; lg[t] = threadIdx.x * 1000u + j; }
  o[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
// a loop of each thread's own length, then one ticket: round by round
__global__ void own_then_ticket(const float* in, unsigned* c, unsigned* lg, float* o) {
  float acc = 0.0f;
  for (int i = 0; i < (int)(threadIdx.x % 7) * 20; ++i) acc += in[i];
  unsigned t = c[0]; c[0] = t + 1u; lg[t] = threadIdx.x;
  o[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
// then a loop every thread runs alike, from counts that differ
__global__ void own_then_loop(const float* in, unsigned* c, unsigned* lg, float* o, int n) {
  float acc = 0.0f;
  for (int i = 0; i < (int)(threadIdx.x % 7) * 20; ++i) acc += in[i];
  for (int j = 0; j < n; ++j) { unsigned t = c[0]; c[0] = t + 1u; lg[t] = threadIdx.x * 1000u + j; }
  o[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
// loops nested in a loop writing no memory tick too: for, while, do ... while
__global__ void nested(const float* in, unsigned* c, unsigned* lg, float* o, int m) {
  float acc = 0.0f;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < (int)(threadIdx.x % 5) * 7; ++j) acc += in[j];
    int k = 0;
    while (k < (int)(threadIdx.x % 9)) { acc += in[k]; ++k; }
    int r = threadIdx.x % 4;
    do { acc += in[r]; } while (r-- > 0);
  }
  unsigned t = c[0]; c[0] = t + 1u; lg[t] = threadIdx.x;
  o[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
// a thread's own array written in a loop with a nested loop (a median filter's window)
__global__ void own_array(const float* in, unsigned* c, unsigned* lg, float* o, int m) {
  float w[8];
  int q = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < (int)(threadIdx.x % 6) * 3; ++j) w[(q++) & 7] = in[j];
  }
  unsigned t = c[0]; c[0] = t + 1u; lg[t] = threadIdx.x;
  o[blockIdx.x * blockDim.x + threadIdx.x] = q > 0 ? w[(q - 1) & 7] : 0.0f;
}
// a loop with a small literal trip count does not tick: each thread runs it whole
__global__ void small(unsigned* c, unsigned* lg) {
  for (int j = 0; j < 40; ++j) { unsigned t = c[0]; c[0] = t + 1u; lg[t] = threadIdx.x * 1000u + j; }
}
// threads that return in the middle of the loop
__global__ void leave(unsigned* c, unsigned* lg, int n) {
  for (int j = 0; j < n; ++j) {
    if (threadIdx.x % 3 == 0 && j == 40) return;
    unsigned t = c[0]; c[0] = t + 1u; lg[t] = threadIdx.x * 1000u + j;
  }
}
// a grid-stride loop whose threads run different numbers of iterations
__global__ void stride(unsigned* c, unsigned* lg, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    unsigned t = c[0]; c[0] = t + 1u; lg[t] = (unsigned)i;
  }
}
// on the fibers (a while loop with a barrier): each thread's tick count is its own,
// kept while it waits at the barrier (not the count of the thread that ran before it)
__global__ void own_count(unsigned* c, unsigned* lg, int n) {
  int i = 0;
  while (i < n) { unsigned t = c[0]; c[0] = t + 1u; lg[t] = threadIdx.x * 1000u + i; ++i; }
  __syncthreads();
  int j = 0;
  while (j < n) { unsigned t = c[0]; c[0] = t + 1u; lg[t] = threadIdx.x * 1000u + 100u + j; ++j; }
}
"""

NAMES = ("phase", "one", "carry", "own_then_ticket", "own_then_loop", "nested", "own_array", "small", "leave",
         "stride", "own_count")
PATHS = {n: "fibers" if n == "own_count" else "block loop" for n in NAMES}
SLOT = 8192   # words of output per kernel

PROGRAM = "#include <cstdio>\n#include <cstring>\n#include <vector>\n" + KERNELS + r"""
int main() {
  const int S = 8192;
  std::vector<unsigned> out(S * 11, 0u);
  std::vector<float> h(256);
  for (int i = 0; i < 256; ++i) h[i] = (float)(i % 13);
  float *in, *o, *a, *r;
  unsigned *c, *lg;
  cudaMalloc(&in, 256 * 4); cudaMalloc(&o, 256 * 4); cudaMalloc(&a, 4); cudaMalloc(&r, 4);
  cudaMalloc(&c, 4); cudaMalloc(&lg, S * 4);
  cudaMemcpy(in, h.data(), 256 * 4, cudaMemcpyHostToDevice);
  for (int k = 0; k < 11; ++k) {
    cudaMemset(c, 0, 4); cudaMemset(lg, 0xff, S * 4); cudaMemset(o, 0, 256 * 4);
    cudaMemset(a, 0, 4); cudaMemset(r, 0, 4);
    switch (k) {
      case 0: phase<<<1, 64>>>(a, r, 64); cudaMemcpy(lg, r, 4, cudaMemcpyDeviceToDevice); break;
      case 1: one<<<2, 64>>>(c, lg, 60); break;
      case 2: carry<<<2, 64>>>(in, c, lg, o, 10, 50); break;
      case 3: own_then_ticket<<<2, 64>>>(in, c, lg, o); break;
      case 4: own_then_loop<<<1, 64>>>(in, c, lg, o, 40); break;
      case 5: nested<<<2, 64>>>(in, c, lg, o, 3); break;
      case 6: own_array<<<2, 64>>>(in, c, lg, o, 4); break;
      case 7: small<<<1, 64>>>(c, lg); break;
      case 8: leave<<<1, 64>>>(c, lg, 70); break;
      case 9: stride<<<2, 64>>>(c, lg, 6000); break;
      case 10: own_count<<<1, 64>>>(c, lg, 20); break;
    }
    cudaMemcpy(out.data() + k * S, lg, S * 4, cudaMemcpyDeviceToHost);
    if (k == 2 || k == 3 || k == 5 || k == 6) cudaMemcpy(out.data() + k * S + S - 256, o, 256 * 4,
                                                         cudaMemcpyDeviceToHost);
  }
  FILE* f = fopen("out.bin", "wb"); fwrite(out.data(), 4, out.size(), f); fclose(f);
  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}
"""

ORDERS = ("forward",) + tuple(f"random:{s}" for s in range(1, 13))


def test_every_kernel_runs_as_a_block_loop():
    plans = {p.name: p for p in plan_kernels(KERNELS)}
    assert all(plans[n].loop == (PATHS[n] != "fibers") for n in NAMES), [p.describe() for p in plans.values()]
    assert plans["nested"].thread_innermost == 1 and plans["carry"].thread_innermost == 1


def test_a_loop_writing_memory_around_a_ticking_loop_keeps_the_fibers():
    """The fibers switch in the middle of its iteration, which no chunk of it can do."""
    [plan] = plan_kernels("__global__ void k(float* o, int n) { for (int i = 0; i < n; ++i) { "
                          "for (int j = 0; j < n; ++j) o[threadIdx.x] += j; } }")
    assert not plan.loop and "ticks on the fibers in the middle of an iteration" in plan.reason, plan.describe()
    # nested loops that do not tick (a small literal trip count) are no switch
    [plan] = plan_kernels("__global__ void k(float* o, int n) { for (int i = 0; i < n; ++i) { "
                          "for (int j = 0; j < 8; ++j) o[threadIdx.x] += j; } }")
    assert plan.loop, plan.describe()
    # a called function's loops tick where the variant cannot count them
    [plan] = plan_kernels("__device__ float f(int n) { float s = 0; for (int i = 0; i < n; ++i) s += i; return s; }\n"
                          "__global__ void k(float* o, int n) { float a = 0; for (int i = 0; i < n; ++i) a += f(i); "
                          "o[threadIdx.x] = a; }")
    assert not plan.loop and "calls a function with a loop" in plan.reason, plan.describe()


def test_only_arrays_the_kernel_only_subscripts_are_a_threads_own():
    from cuset.execute.cpu.block_loop import KernelVariant
    from cuset.execute.cpu.plan_ir import Unit
    from cuset.spans.grammar import parser

    src = ("__global__ void k(const float* in, float* o, int n) { float w[4]; float v[4]; float* p = v; "
           "for (int i = 0; i < n; ++i) { w[i & 3] = in[i]; } for (int i = 0; i < n; ++i) { v[i & 3] = in[i]; } "
           "for (int i = 0; i < n; ++i) { p[i & 3] = in[i]; } o[0] = w[0] + p[1]; }")
    data = src.encode()
    unit = Unit(data, parser().parse(data).root_node)
    kv = KernelVariant(unit, unit.kernels[0])
    loops = [n for n in kv.body.named_children if n.type == "for_statement"]
    assert kv._own_arrays() == {"w"}   # v's address is taken (p = v)
    assert [kv.writes_only_its_own(n) for n in loops] == [True, False, False]
    assert not any(kv.writes_no_memory(n) for n in loops)   # the threads-innermost path stays as it was


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from cuset.execute.cpu import CpuBackend, compile_program

    backend = CpuBackend(seed=3)
    workdir = tmp_path_factory.mktemp("ticks")
    compiled = compile_program(PROGRAM, workdir, timeout=300, backend=backend)
    assert compiled.ok, compiled.detail + compiled.step.stderr
    return path_runner(compiled, backend, workdir)


def _log(out: bytes, name: str) -> list[int]:
    k = NAMES.index(name)
    words = struct.unpack(f"{SLOT}I", out[k * SLOT * 4:(k + 1) * SLOT * 4])
    return list(words)


@pytest.fixture(scope="module")
def outputs(run):
    """{order: output} of the block loops, each equal to the fibers' in the same order."""
    out = {}
    for order in ORDERS:
        on, out_on, paths = run((), order, True)
        off, out_off, _ = run((), order, False)
        assert on.returncode == 0 and off.returncode == 0, on.stderr + off.stderr
        differ = [n for n in NAMES if _log(out_on, n) != _log(out_off, n)]
        assert not differ, f"{order}: the block loops and the fibers disagree on {differ}"
        assert paths == PATHS, paths
        out[order] = out_on
    return out


@needs_gxx
def test_a_race_between_iterations_31_and_32_is_seen_as_on_the_fibers(outputs):
    """Fuzzer finding F2: the fibers read 0 under some random orders and 1 under forward
    (a race); chunks cut from iteration 0 read 1 in every order (`passed`)."""
    seen = {order: struct.unpack("f", out[:4])[0] for order, out in outputs.items()}
    assert seen["forward"] == 1.0
    assert seen["random:5"] == 0.0, seen


@needs_gxx
def test_the_log_of_one_ticking_loop_is_the_fibers_slices(outputs):
    log = _log(outputs["forward"], "one")
    # block 0: 64 threads x 31 iterations (checks 1..31), then the other 29 (checks 32..61)
    first = [t * 1000 + j for t in range(64) for j in range(31)]
    second = [t * 1000 + j for t in range(64) for j in range(31, 60)]
    assert log[:64 * 60] == first + second
    assert log[64 * 60:2 * 64 * 60] == first + second   # block 1 alike


@needs_gxx
def test_checks_carry_over_from_a_loop_writing_no_memory(outputs):
    log = _log(outputs["forward"], "carry")
    # 11 checks before the second loop: its first slice is 20 iterations (checks 12..31)
    assert log[:64 * 50] == ([t * 1000 + j for t in range(64) for j in range(20)]
                             + [t * 1000 + j for t in range(64) for j in range(20, 50)])


@needs_gxx
def test_threads_after_loops_of_their_own_lengths_go_round_by_round(outputs):
    # thread t makes (t % 7) * 20 + 1 checks: rounds 0, 0, 1, 1, 2, 3, 3 by t % 7
    rounds = {0: 0, 1: 0, 2: 1, 3: 1, 4: 2, 5: 3, 6: 3}
    expected = sorted(range(64), key=lambda t: (rounds[t % 7], t))
    log = _log(outputs["forward"], "own_then_ticket")
    assert log[:64] == expected and log[64:128] == expected
    assert len({tuple(_log(outputs[o], "own_then_ticket")[:128]) for o in ORDERS}) > 1   # the order matters


@needs_gxx
def test_a_loop_after_counts_that_differ_starts_each_thread_in_its_own_phase(outputs):
    log = _log(outputs["forward"], "own_then_loop")
    # thread t enters with (t % 7) * 20 + 1 checks: its checks number those + 1 + j
    checks = {t: (t % 7) * 20 + 1 for t in range(64)}
    events = sorted(((checks[t] + 1 + j) // 32, t, j) for t in range(64) for j in range(40))
    assert log[:64 * 40] == [t * 1000 + j for _, t, j in events]


@needs_gxx
def test_the_log_of_a_loop_that_does_not_tick_is_thread_after_thread(outputs):
    assert _log(outputs["forward"], "small")[:64 * 40] == [t * 1000 + j for t in range(64) for j in range(40)]


@needs_gxx
def test_every_order_gives_the_fibers_bytes(outputs):
    """The fixture compared every kernel's log on both paths in 13 orders; the orders
    themselves differ (the logs are races by design)."""
    assert len({bytes(out) for out in outputs.values()}) > 1


def test_the_chunks_count_the_runtimes_ticks():
    """CHUNK is the runtime's kLoopTicks: the block loops cut where the fibers switch."""
    import re
    from pathlib import Path

    from cuset.execute.cpu import block_loop

    core = (Path(block_loop.__file__).parent / "runtime" / "include" / "cuset_rt" / "core.h").read_text()
    [ticks] = re.findall(r"constexpr unsigned kLoopTicks = (\d+);", core)
    assert int(ticks) == block_loop.CHUNK


@needs_gxx
def test_a_threads_tick_count_is_its_own_across_a_barrier(outputs):
    """Each thread makes 21 checks before the barrier and goes on from there after it:
    its 32nd check switches before j = 10, whatever the threads before it counted."""
    log = _log(outputs["forward"], "own_count")
    assert log[:64 * 40] == ([t * 1000 + i for t in range(64) for i in range(20)]
                             + [t * 1000 + 100 + j for t in range(64) for j in range(10)]
                             + [t * 1000 + 100 + j for t in range(64) for j in range(10, 20)])
