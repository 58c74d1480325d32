"""The fast paths and the order proof never change a verdict (issue 58): one test per
root cause an outside tester found, each a program the fibers judge right in every
order, which the default backend must judge alike.

- Load and store intrinsics are memory accesses, not pure functions (memory_intrinsics.py):
  `__ldg(in + i)` in an in-place launch is seen by the order proof; a value loaded
  before a barrier is neither recomputed after it nor loaded once for the block.
- Region lanes trace local pointers into a written array as writes are traced.
- Every `extern __shared__` array is one memory object (one storage on a GPU).
- `__restrict__` is checked when a block starts, not trusted.
- A macro is read from its expansion (macro_effects.py): one that assigns, or reaches
  memory through its arguments, keeps the kernel on the fibers and out of the proof.
"""

from __future__ import annotations

import struct

import pytest

from cpu_helpers import needs_gxx, path_runner
from cpu_helpers import plan_kernels
from cuset.execute.cpu.order_proof import plan_proofs

SIDE_BY_SIDE = "block-stride loop(s) run with the threads side by side"

SMOOTH = r"""
__global__ void smooth(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n - 1) out[i] = 0.5f * (__ldg(in + i) + __ldg(in + i + 1));
}
"""

# thread c adds its right neighbour's element, read through a local pointer, in place
LANES_ALIAS = r"""
__global__ void lanes_alias(float* __restrict__ o) {
  __shared__ float s[B + 1];
  for (int c = threadIdx.x; c <= B; c += blockDim.x) s[c] = (float)c;
  __syncthreads();
  float* nxt = s + 1;
  for (int c = threadIdx.x; c < B; c += blockDim.x) s[c] = s[c] + nxt[c];
  __syncthreads();
  for (int c = threadIdx.x; c < B; c += blockDim.x) o[blockIdx.x * B + c] = s[c];
}
"""

# a tile loop staging through one extern shared array and reading through another (one
# storage): the barrier after the reads is missing, so the next tile overwrites them
EXTERN_TILES = r"""
__global__ void extern_tiles(const float* a, float* out, int n) {
  extern __shared__ float stage[];
  extern __shared__ float tile[];
  float acc = 0.0f;
  for (int t = 0; t < n; t += blockDim.x) {
    stage[threadIdx.x] = a[t + threadIdx.x];
    __syncthreads();
    for (int k = 0; k < blockDim.x; ++k) acc += tile[k] * (k + 1);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
"""

# correct: every thread loads its element before the barrier and stores it mirrored after
REVERSE = r"""
__global__ void reverse_ldcs(float* d) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = __ldcs(d + i);
  __syncthreads();
  d[blockIdx.x * blockDim.x + blockDim.x - 1 - threadIdx.x] = v;
}
"""

# correct: thread 0 writes the block's first element, every thread reads it after the barrier
BROADCAST = r"""
__global__ void broadcast_ldg(float* d, float* o) {
  if (threadIdx.x == 0) d[blockIdx.x * blockDim.x] = 100.0f + blockIdx.x;
  __syncthreads();
  float s = __ldg(d + blockIdx.x * blockDim.x);
  o[blockIdx.x * blockDim.x + threadIdx.x] = s + threadIdx.x;
}
"""

# correct: each thread loads its element, clears it, then writes it n times in a hoisted loop
HOIST = r"""
__global__ void hoist_ldg(float* p, float* o, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = __ldg(p + i);
  p[i] = 0.0f;
  for (int j = 0; j < n; ++j) o[i * n + j] = v + j;
}
"""

# every thread writes o[0] through a macro: a race the kernel's own tree does not show
SET_MACRO = r"""
#define SET(x, v) ((x) = (v))
__global__ void set_macro(const float* in, float* o) { SET(o[0], in[blockIdx.x * blockDim.x + threadIdx.x]); }
"""

# the even threads all write o[0] through a conditional target: a race, though no
# assignment's target is an access by itself
CHOOSE = r"""
__global__ void choose_write(const float* in, float* o) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  (i % 2 ? o[i + 1] : o[0]) = in[i];
}
"""

# correct: a local incremented through a macro before a hoisted loop (no value to recompute)
INC_MACRO = r"""
#define INCK k++
__global__ void inc_macro(float* o, int n) {
  int k = blockIdx.x * blockDim.x + threadIdx.x;
  INCK;
  for (int j = 0; j < n; ++j) o[(k - 1) * n + j] = k;
}
"""

# the barrier sits in a helper: the kernel meets at it as if it called __syncthreads()
# itself, so its `for` loop does not tick on the fibers (it did: with the tick count of
# the threads resumed before it, a thread switched in the middle of the stretch), and
# the stretch after the barrier runs thread after thread on both paths: the last thread
# of the block's order writes a[blockIdx.x]
HELPER_BARRIER = r"""
__device__ void meet(float* s) { __syncthreads(); }
__global__ void helper_barrier(float* a) {
  __shared__ float s0[8];
  meet(s0);
  for (unsigned c = threadIdx.x; c < 128u; c += blockDim.x) {}
  a[blockIdx.x] = threadIdx.x;
}
"""

# a and b promise not to alias and the launch passes one buffer for both (fuzzer finding F4):
# a block loop runs every thread in one call of the kernel, where g++ may trust the promise
# across threads and move one thread's load past another's store
RESTRICT_LOOP = r"""
__global__ void restrict_loop(float* __restrict__ a, float* __restrict__ b) {
  unsigned t = threadIdx.x;
  float v = __ldg(a + t);
  b[blockIdx.x] = fminf((float)(blockIdx.x * blockDim.x + t), __ldg(b + t));
  a[(t + 3u) & 511u] = v + (float)t;
}
"""

# in and out promise not to alias; the launch passes one buffer for both
RESTRICT = r"""
__global__ void restrict_shift(const float* __restrict__ in, float* __restrict__ out, int n) {
  __shared__ float w[1];
  if (threadIdx.x == 0) w[0] = 2.0f;
  __syncthreads();
  for (int c = threadIdx.x; c < n; c += blockDim.x) out[c] = in[c + 1] * w[0];
}
"""


def _plan(src: str):
    [plan] = plan_kernels(src)
    return plan


# ---------------------------------------------------------------- what the analyses see
def test_a_load_intrinsic_reads_its_pointer_for_the_order_proof():
    [p] = plan_proofs(SMOOTH)
    assert (p.eligible, p.written, p.read_only) == (True, ("out",), ("in",)), p.reason
    [p] = plan_proofs("__global__ void k(float* o) { o[threadIdx.x] = __ldcs(o + threadIdx.x + 1); }")
    assert not p.eligible and "other than as o[i]" in p.reason
    [p] = plan_proofs("__global__ void k(const float* a, float* o) { __stcs(o + threadIdx.x, a[threadIdx.x]); }")
    assert not p.eligible and "other than as o[i]" in p.reason   # a store writes o


def test_a_load_stays_where_the_kernel_has_it():
    """A load is no value of the thread index to recompute in a later region, nor a value
    of the block to compute once ahead of the region it stands in."""
    text = _plan(REVERSE).text
    assert text.count("__ldcs") == 1 and text.index("__ldcs") < text.index("block_loop_barrier")
    assert "cuset_r_v[cuset_t] = __ldcs(d + i)" in text   # kept per thread across the barrier
    text = _plan(BROADCAST).text
    assert text.count("__ldg") == 1 and text.index("__ldg") > text.index("block_loop_barrier")
    [plan] = plan_kernels(HOIST)
    assert plan.hoisted == 1 and plan.text.count("__ldg") == 1, plan.text   # loaded before p[i] = 0 only


@pytest.mark.parametrize("src, reason", [
    (SET_MACRO, "macro SET writes a variable"),
    (INC_MACRO, "macro INCK writes a variable"),
    ("#define LD(p) (*(p))\n" + SMOOTH.replace("__ldg", "LD"), "macro LD may reach memory through its arguments"),
])
def test_macros_that_write_or_reach_memory_through_arguments_keep_the_fibers(src, reason):
    [plan] = plan_kernels(src)
    [proof] = plan_proofs(src)
    assert not plan.loop and reason in plan.reason, plan.describe()
    assert not proof.eligible and reason in proof.reason, proof.describe()


def test_value_macros_keep_the_fast_paths():
    src = ("#define IDX(r, c) ((r) * 64 + (c))\n#define SQ(x) ((x) * (x))\n"
           "__global__ void k(const float* a, float* o) { int i = threadIdx.x; "
           "o[IDX(blockIdx.x, i)] = SQ(a[IDX(blockIdx.x, i)]); }")
    [plan] = plan_kernels(src)
    [proof] = plan_proofs(src)
    assert plan.loop and proof.eligible and proof.read_only == ("a",), (plan.describe(), proof.describe())


def test_region_lanes_trace_local_pointers_into_the_written_array():
    plan = _plan("#define B 256\n" + LANES_ALIAS)
    assert f"(2 barrier(s), 1 {SIDE_BY_SIDE})" in plan.describe()   # the last loop only (o[...] = s[c])
    two = _plan("__global__ void k(float* __restrict__ o) { extern __shared__ float a[]; extern __shared__ float b[]; "
                "a[threadIdx.x] = 1; __syncthreads(); "
                "for (int c = threadIdx.x; c < 64; c += blockDim.x) a[c] = b[c + 1]; }")
    assert SIDE_BY_SIDE not in two.describe()   # b is a's storage


def test_a_helper_writing_through_a_reference_is_an_access_of_its_argument():
    src = ("__device__ void bump(float& x) { x += 1.0f; }\n"
           "__global__ void k(float* __restrict__ o, int D) { __shared__ float w[65]; w[threadIdx.x % 65] = 1; "
           "__syncthreads(); for (int c = threadIdx.x; c < D; c += blockDim.x) { o[c] = w[c]; bump(w[c + 1]); } }")
    assert SIDE_BY_SIDE not in _plan(src).describe()


def test_extern_shared_arrays_are_one_memory_object_at_a_junction():
    plan = _plan(EXTERN_TILES)
    assert not plan.loop and "joins two stretches that may race" in plan.reason, plan.describe()


def test_restrict_parameters_are_checked_to_be_apart_when_a_block_starts():
    text = _plan(RESTRICT).text
    assert "::cuset::rt::block_loop_apart({(const void*)(in), (const void*)(out)})" in text
    plan = _plan(RESTRICT_LOOP)   # a block loop (no barrier) too
    assert plan.loop and "::cuset::rt::block_loop_apart({(const void*)(a), (const void*)(b)})" in plan.text
    untraced = _plan("__global__ void k(float* __restrict__ o, float** p) { o[threadIdx.x] = p[0][threadIdx.x]; }")
    assert not untraced.loop and "cannot trace beside a __restrict__ parameter" in untraced.reason


# ---------------------------------------------------------------- runs on both paths
PROGRAM = "#include <cstdio>\n#include <cstring>\n#include <vector>\n#define B 256\n" + "".join(
    (SMOOTH, LANES_ALIAS, EXTERN_TILES, REVERSE, BROADCAST, HOIST, RESTRICT, SET_MACRO,
                                                              INC_MACRO, HELPER_BARRIER, RESTRICT_LOOP, CHOOSE)) + r"""
int main(int argc, char** argv) {
  const char* what = argv[1];
  const int n = 64 * 256;
  std::vector<float> h(n + 1), out;
  for (int i = 0; i <= n; ++i) h[i] = (float)(i % 97);
  float *d, *o;
  cudaMalloc(&d, (n + 1) * 4); cudaMalloc(&o, (n + 1) * 4);
  cudaMemcpy(d, h.data(), (n + 1) * 4, cudaMemcpyHostToDevice);
  if (!strcmp(what, "smooth")) smooth<<<64, 256>>>(d, d, n);
  if (!strcmp(what, "lanes_alias")) lanes_alias<<<4, 64>>>(o);
  if (!strcmp(what, "extern_tiles")) extern_tiles<<<4, 64, 64 * sizeof(float)>>>(d, o, 1024);
  if (!strcmp(what, "reverse_ldcs")) reverse_ldcs<<<64, 256>>>(d);
  if (!strcmp(what, "broadcast_ldg")) broadcast_ldg<<<64, 256>>>(d, o);
  if (!strcmp(what, "hoist_ldg")) hoist_ldg<<<4, 64>>>(d, o, 64);
  if (!strcmp(what, "set_macro")) set_macro<<<4, 64>>>(d, o);
  if (!strcmp(what, "inc_macro")) inc_macro<<<4, 64>>>(o, 64);
  if (!strcmp(what, "restrict_shift")) restrict_shift<<<1, 64>>>(d, d, 256);
  if (!strcmp(what, "helper_barrier")) helper_barrier<<<4, 64>>>(o);
  if (!strcmp(what, "restrict_loop")) restrict_loop<<<4, 64>>>(d, d);
  if (!strcmp(what, "choose_write")) choose_write<<<4, 64>>>(d, o);
  const bool to_o = !strcmp(what, "helper_barrier") || !strcmp(what, "lanes_alias") || !strcmp(what, "extern_tiles") || !strcmp(what, "broadcast_ldg")
                    || !strcmp(what, "hoist_ldg") || !strcmp(what, "set_macro") || !strcmp(what, "inc_macro")
                    || !strcmp(what, "choose_write");
  out.resize(n + 1);
  cudaMemcpy(out.data(), to_o ? o : d, (n + 1) * 4, cudaMemcpyDeviceToHost);
  FILE* f = fopen("out.bin", "wb"); fwrite(out.data(), 4, out.size(), f); fclose(f);
  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}
"""

ORDERS = ("forward", "random:3", "random:5")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from cuset.execute.cpu import CpuBackend, compile_program

    backend = CpuBackend(seed=3)
    workdir = tmp_path_factory.mktemp("soundness")
    compiled = compile_program(PROGRAM, workdir, timeout=300, backend=backend)
    assert compiled.ok, compiled.detail + compiled.step.stderr
    return path_runner(compiled, backend, workdir)


def floats(data: bytes) -> list[float]:
    return list(struct.unpack(f"{len(data) // 4}f", data))


def _same_verdict_as_the_fibers(run, what: str) -> set[bytes]:
    """Each order's output on the default paths equals the fibers' in that order (the
    fibers judge right); returns the distinct outputs over the orders (one: no race)."""
    outputs = set()
    for order in ORDERS:
        on, out_on, _ = run((what,), order, True)
        off, out_off, _ = run((what,), order, False)
        assert on.returncode == 0 and off.returncode == 0, on.stderr + off.stderr
        assert out_on == out_off, f"{what} {order}: the fast path and the fibers disagree"
        outputs.add(out_on)
    return outputs


@needs_gxx
def test_an_in_place_ldg_smoothing_is_a_race_the_proof_does_not_certify(run):
    on, _, _ = run(("smooth",), "forward", True)
    proof = [ln for ln in on.stderr.splitlines() if "order-proof: kernel 'smooth'" in ln]
    assert proof == ["CUSET-CPU: order-proof: kernel 'smooth': 0 of 1 launch independent: a parameter it only "
                     "reads points into an allocation it writes through another parameter"], on.stderr
    assert len(_same_verdict_as_the_fibers(run, "smooth")) > 1   # the orders disagree: race


@needs_gxx
def test_an_aliased_lane_write_gets_the_fibers_verdict(run):
    assert len(_same_verdict_as_the_fibers(run, "lanes_alias")) > 1


@needs_gxx
def test_two_extern_shared_arrays_missing_a_barrier_are_a_race(run):
    assert len(_same_verdict_as_the_fibers(run, "extern_tiles")) > 1


@needs_gxx
def test_loads_before_a_barrier_stay_there(run):
    [out] = _same_verdict_as_the_fibers(run, "reverse_ldcs")
    n = 64 * 256
    assert floats(out)[:n] == [float((b * 256 + 255 - t) % 97) for b in range(64) for t in range(256)]
    _, _, paths = run(("reverse_ldcs",), "forward", True)
    assert paths["reverse_ldcs"] == "block loop with barrier regions", paths
    [out] = _same_verdict_as_the_fibers(run, "broadcast_ldg")
    assert floats(out)[:n] == [100.0 + b + t for b in range(64) for t in range(256)]
    [out] = _same_verdict_as_the_fibers(run, "hoist_ldg")
    assert floats(out)[:n] == [float(i % 97 + j) for i in range(256) for j in range(64)]


@needs_gxx
def test_a_broken_restrict_promise_runs_on_the_fibers(run):
    assert len(_same_verdict_as_the_fibers(run, "restrict_shift")) > 1
    _, _, paths = run(("restrict_shift",), "forward", True)
    assert paths["restrict_shift"] == "fibers", paths   # the block was refused: 0 of 1 as a loop


@needs_gxx
def test_a_race_written_through_a_macro_is_not_certified(run):
    on, _, _ = run(("set_macro",), "forward", True)
    assert "CUSET-CPU: order-proof: kernel 'set_macro': 0 of 1 launch independent: not checked" in on.stderr
    assert len(_same_verdict_as_the_fibers(run, "set_macro")) > 1


def test_a_conditional_target_writes_both_of_its_choices():
    [proof] = plan_proofs(CHOOSE)
    assert proof.eligible and proof.written == ("o",) and proof.read_only == ("in",), proof.describe()


@needs_gxx
def test_a_race_through_a_conditional_target_is_not_certified(run):
    """On main the order proof took `o` for a parameter the kernel only reads (no
    assignment's target was `o[...]` itself): it checked nothing and certified the launch,
    so the pipeline skipped the orders that show the race."""
    on, _, _ = run(("choose_write",), "forward", True)
    proof = [ln for ln in on.stderr.splitlines() if "order-proof: kernel 'choose_write'" in ln]
    assert len(proof) == 1 and "0 of 1 launch independent: thread" in proof[0], on.stderr
    assert len(_same_verdict_as_the_fibers(run, "choose_write")) > 1   # the orders disagree: race


@needs_gxx
def test_a_local_a_macro_increments_keeps_its_value(run):
    [out] = _same_verdict_as_the_fibers(run, "inc_macro")
    assert floats(out)[:256 * 64] == [float(k + 1) for k in range(256) for _ in range(64)]


def test_a_kernel_meeting_at_a_helpers_barrier_has_no_ticking_loop():
    """The rewriter's ticking loops are the planners' one list: a `for` in a kernel that
    meets at barriers through a helper ticks no more than one in a kernel calling
    `__syncthreads()` itself, and a loop that still ticks keeps the kernel on the fibers."""
    from cuset.execute.cpu.rewriter import ticking_loops

    assert ticking_loops(HELPER_BARRIER) == frozenset()
    assert _plan(HELPER_BARRIER).loop
    ticking = HELPER_BARRIER.replace("{}\n", "{}\n  for (int w = 0; w < (int)a[0]; ) {}\n")
    assert len(ticking_loops(ticking)) == 0   # a `for`: the kernel meets at barriers
    spin = HELPER_BARRIER.replace("{}\n", "{}\n  while (a[0] < 0.0f) {}\n")
    [at] = ticking_loops(spin)
    assert spin[at:at + 5] == "while"
    plan = _plan(spin)
    assert not plan.loop and "a while loop" in plan.reason, plan.describe()
    helper = ("__device__ float total(const float* a, int n) { float s = 0; for (int i = 0; i < n; ++i) s += a[i]; "
              "return s; }\n" + HELPER_BARRIER.replace("a[blockIdx.x] = threadIdx.x;", "a[blockIdx.x] = total(a, 9);"))
    plan = _plan(helper)
    assert not plan.loop and "calls a function with a loop" in plan.reason, plan.describe()
    # whatever the planner's own checks let through, a loop the rewriter ticks keeps the fibers
    [plan] = plan_kernels(HELPER_BARRIER, ticking=frozenset({HELPER_BARRIER.index("for (")}))
    assert not plan.loop and plan.reason == "a loop that ticks on the fibers (line 6)", plan.describe()


@needs_gxx
def test_a_barrier_in_a_helper_orders_the_stretch_after_it_alike_on_both_paths(run):
    """Fuzzer finding F3 (issue 58): bytes differed under forward."""
    outputs = _same_verdict_as_the_fibers(run, "helper_barrier")
    forward = run(("helper_barrier",), "forward", True)[1]
    assert floats(forward)[:4] == [63.0] * 4   # thread 63 of each block writes last
    assert len(outputs) > 1   # the last writer depends on the order: a race


@needs_gxx
def test_a_block_loop_with_a_broken_restrict_promise_runs_on_the_fibers(run):
    """Fuzzer finding F4 (issue 58): bytes differed under random:1."""
    _same_verdict_as_the_fibers(run, "restrict_loop")
    _, _, paths = run(("restrict_loop",), "forward", True)
    assert paths["restrict_loop"] == "fibers", paths   # every block refused: 0 of 4 as a loop
