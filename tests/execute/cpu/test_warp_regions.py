"""Warp shuffles in barrier regions (cuset/execute/cpu/barrier_regions.py): between two
barriers the fibers run a kernel with shuffles warp after warp, each stretch between two
shuffles lane after lane in the order the last shuffle released them. The regions do the
same with no fiber: the tickets a kernel takes between its shuffles (the order its lanes
ran in), its shuffled values and its outputs are bit for bit the fibers', under forward
and random; a shuffle the regions do not reproduce keeps the kernel on the fibers."""

from __future__ import annotations

import struct

import pytest

from cpu_helpers import both_paths, needs_gxx, path_runner
from cpu_helpers import plan_kernels

KERNELS = r"""
#define FULL 0xffffffffu
#define SLOTS 40

__device__ float warp_sum(float v) {
    for (int o = warpSize / 2; o > 0; o >>= 1) v += __shfl_down_sync(FULL, v, o);
    return v;
}

// Tickets (a per-block counter) taken between shuffles record the order the lanes ran in.
__global__ void tickets(int* counter, int* ticket, float* out) {
    __shared__ float partial[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int slot = blockIdx.x * SLOTS * blockDim.x + threadIdx.x;
    float v = (float)(threadIdx.x * 3 % 17) + blockIdx.x;
    ticket[slot] = atomicAdd(counter + blockIdx.x, 1);
    for (int offset = 16; offset > 0; offset >>= 1) {
        float other = __shfl_down_sync(FULL, v, offset);
        v += other;
        ticket[slot + offset * blockDim.x] = atomicAdd(counter + blockIdx.x, 1);
    }
    float first = __shfl_sync(FULL, v, 0);
    int up = __shfl_up_sync(FULL, lane * 7, 3, 16);
    ticket[slot + 17 * blockDim.x] = atomicAdd(counter + blockIdx.x, 1);
    if (lane == 0) partial[warp] = v + first;
    __syncthreads();
    if (warp == 0) {
        float s = lane < (int)(blockDim.x >> 5) ? partial[lane] : 0.0f;
        ticket[slot + 18 * blockDim.x] = atomicAdd(counter + blockIdx.x, 1);
        s = __shfl_xor_sync(FULL, s, 1);
        for (int m = 2; m < 32; m <<= 1) {
            ticket[slot + (18 + m) * blockDim.x] = atomicAdd(counter + blockIdx.x, 1);
            float o = __shfl_xor_sync(FULL, s, m, 32);
            s += o;
        }
        if (lane == 0) out[blockIdx.x] = s;
    }
    __syncthreads();
    out[gridDim.x + blockIdx.x * blockDim.x + threadIdx.x] = first + (float)up;
}

// A warp reduction helper inlined, called at the top level and under a warp-uniform if.
__global__ void rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float part[32];
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += x[(size_t)blockIdx.x * cols + c];
    s = warp_sum(s);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        float t = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.0f;
        t = warp_sum(t);
        if (threadIdx.x == 0) y[blockIdx.x] = t;
    }
    __syncthreads();
}

// A warp per row; warps past the last row return before their first shuffle.
__global__ void gemv(const float* __restrict__ a, const float* __restrict__ x, float* __restrict__ y,
                     int rows, int cols) {
    const int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    float acc = 0.0f;
    for (int c = lane; c < cols; c += 32) acc += a[(size_t)row * cols + c] * x[c];
    acc = warp_sum(acc);
    if (lane == 0) y[row] = acc;
}

// Threads past n return: the warp holding n splits there, so its block takes the fibers.
__global__ void tail(const float* __restrict__ x, float* __restrict__ y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    v += __shfl_xor_sync(FULL, v, 1);
    y[i] = v;
}

__device__ __forceinline__ float combine(float a, float b) { return fmaxf(a, b); }

// A shuffle inside a value, a helper inside a pure function's argument, an if around
// shuffles ending the kernel: each warp's lanes must agree on it (checked per block).
__global__ void maxnorm(const float* __restrict__ x, float* __restrict__ y, int split) {
    const int lane = threadIdx.x & 31;
    float v = x[blockIdx.x * blockDim.x + threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) v = combine(v, __shfl_down_sync(FULL, v, o));
    float s = sqrtf(warp_sum(v * v) + 1.0f);
    if ((int)threadIdx.x < split) {
        s = __shfl_xor_sync(FULL, s, 1) + lane;
    }
    y[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// Votes and __syncwarp, with tickets taken after each: the order the lanes went on in.
__global__ void votes(const int* __restrict__ x, unsigned* __restrict__ out, int* counter, int* ticket) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    const int v = x[t];
    unsigned b = __ballot_sync(FULL, v > 0);
    ticket[t * 2] = atomicAdd(counter + blockIdx.x, 1);
    __syncwarp();
    ticket[t * 2 + 1] = atomicAdd(counter + blockIdx.x, 1);
    int any = __any_sync(FULL, v > 5);
    int all = 10 * __all_sync(FULL, v > -100);   // a vote inside a value
    out[t * 2] = b;
    out[t * 2 + 1] = (unsigned)(any + all);
}

// Lanes 0-15 enter, 16-31 go on to the barrier: a deadlock on a GPU and on the fibers.
__global__ void divergent(float* out) {
    float v = threadIdx.x;
    if ((threadIdx.x & 31) < 16) {
        v = __shfl_xor_sync(FULL, v, 1);
    }
    __syncthreads();
    out[threadIdx.x] = v;
}
"""

PROGRAM = "#include <cstdio>\n#include <cstring>\n#include <vector>\n" + KERNELS + r"""
int main(int argc, char** argv) {
  const char* what = argv[1];
  FILE* f = fopen("out.bin", "wb");
  if (!strcmp(what, "tickets")) {
    const int blocks = 3, threads = 96;
    int *counter, *ticket; float* out;
    cudaMalloc(&counter, blocks * 4); cudaMemset(counter, 0, blocks * 4);
    cudaMalloc(&ticket, blocks * SLOTS * threads * 4); cudaMemset(ticket, 0xff, blocks * SLOTS * threads * 4);
    cudaMalloc(&out, (blocks + blocks * threads) * 4);
    tickets<<<blocks, threads>>>(counter, ticket, out);
    std::vector<int> t(blocks * SLOTS * threads); std::vector<float> o(blocks + blocks * threads);
    cudaMemcpy(t.data(), ticket, t.size() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(o.data(), out, o.size() * 4, cudaMemcpyDeviceToHost);
    fwrite(t.data(), 4, t.size(), f); fwrite(o.data(), 4, o.size(), f);
  } else if (!strcmp(what, "rows")) {
    const int r = 7, cols = 1000, threads = atoi(argv[2]);
    std::vector<float> h(r * cols);
    for (int i = 0; i < r * cols; ++i) h[i] = (float)((i * 7919) % 1000) / 8.0f;
    float *x, *y;
    cudaMalloc(&x, h.size() * 4); cudaMalloc(&y, r * 4);
    cudaMemcpy(x, h.data(), h.size() * 4, cudaMemcpyHostToDevice);
    rows<<<r, threads>>>(x, y, cols);
    std::vector<float> o(r);
    cudaMemcpy(o.data(), y, r * 4, cudaMemcpyDeviceToHost);
    fwrite(o.data(), 4, r, f);
  } else if (!strcmp(what, "gemv")) {
    // rows = 13: with 4 warps per block the last block has one warp with a row and three without
    const int rows = 13, cols = 77, threads = atoi(argv[2]);
    std::vector<float> ha(rows * cols), hx(cols);
    for (int i = 0; i < rows * cols; ++i) ha[i] = (float)((i * 31) % 29) / 4.0f - 3.0f;
    for (int i = 0; i < cols; ++i) hx[i] = (float)(i % 7) - 2.5f;
    float *a, *x, *y;
    cudaMalloc(&a, ha.size() * 4); cudaMalloc(&x, cols * 4); cudaMalloc(&y, rows * 4);
    cudaMemcpy(a, ha.data(), ha.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(x, hx.data(), cols * 4, cudaMemcpyHostToDevice);
    gemv<<<(rows * 32 + threads - 1) / threads, threads>>>(a, x, y, rows, cols);
    std::vector<float> o(rows);
    cudaMemcpy(o.data(), y, rows * 4, cudaMemcpyDeviceToHost);
    fwrite(o.data(), 4, rows, f);
  } else if (!strcmp(what, "maxnorm")) {
    const int split = atoi(argv[2]);
    std::vector<float> h(3 * 64);
    for (int i = 0; i < 3 * 64; ++i) h[i] = (float)((i * 13) % 17) - 8.0f;
    float *x, *y;
    cudaMalloc(&x, h.size() * 4); cudaMalloc(&y, h.size() * 4);
    cudaMemcpy(x, h.data(), h.size() * 4, cudaMemcpyHostToDevice);
    maxnorm<<<3, 64>>>(x, y, split);
    std::vector<float> o(h.size());
    cudaMemcpy(o.data(), y, o.size() * 4, cudaMemcpyDeviceToHost);
    fwrite(o.data(), 4, o.size(), f);
  } else if (!strcmp(what, "votes")) {
    std::vector<int> h(2 * 64);
    for (int i = 0; i < 2 * 64; ++i) h[i] = (i * 7) % 13 - 6;
    int *x, *counter, *ticket; unsigned* out;
    cudaMalloc(&x, h.size() * 4); cudaMalloc(&counter, 8); cudaMemset(counter, 0, 8);
    cudaMalloc(&ticket, h.size() * 8); cudaMalloc(&out, h.size() * 8);
    cudaMemcpy(x, h.data(), h.size() * 4, cudaMemcpyHostToDevice);
    votes<<<2, 64>>>(x, out, counter, ticket);
    std::vector<unsigned> o(h.size() * 2); std::vector<int> tk(h.size() * 2);
    cudaMemcpy(o.data(), out, o.size() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(tk.data(), ticket, tk.size() * 4, cudaMemcpyDeviceToHost);
    fwrite(o.data(), 4, o.size(), f); fwrite(tk.data(), 4, tk.size(), f);
  } else if (!strcmp(what, "tail")) {
    const int n = 200;
    std::vector<float> h(256);
    for (int i = 0; i < 256; ++i) h[i] = (float)(i * 3 % 11);
    float *x, *y;
    cudaMalloc(&x, 256 * 4); cudaMalloc(&y, 256 * 4); cudaMemset(y, 0, 256 * 4);
    cudaMemcpy(x, h.data(), 256 * 4, cudaMemcpyHostToDevice);
    tail<<<4, 64>>>(x, y, n);
    std::vector<float> o(256);
    cudaMemcpy(o.data(), y, 256 * 4, cudaMemcpyDeviceToHost);
    fwrite(o.data(), 4, 256, f);
  } else {
    float* out;
    cudaMalloc(&out, 64 * 4);
    divergent<<<1, 64>>>(out);
  }
  fclose(f);
  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}
"""


def test_kernels_with_shuffles_are_planned_as_regions():
    plans = {p.name: p for p in plan_kernels(KERNELS)}
    assert plans["tickets"].describe() == "tickets: block loop with barrier regions (2 barrier(s), 5 warp operation(s))"
    assert plans["rows"].describe() == ("rows: block loop with barrier regions (2 barrier(s), 2 warp operation(s), "
                                        "2 call(s) of helpers with barriers inlined)")
    assert plans["divergent"].loop and "block_loop_warp_divergence" in plans["divergent"].text
    assert plans["gemv"].describe() == ("gemv: block loop with barrier regions (1 warp operation(s), 1 call(s) of "
                                        "helpers with barriers inlined)")
    assert "block_loop_warps_agree" in plans["gemv"].text
    assert plans["votes"].describe() == "votes: block loop with barrier regions (4 warp operation(s))"
    assert plans["maxnorm"].describe() == ("maxnorm: block loop with barrier regions (3 warp operation(s), 1 call(s) of "
                                           "helpers with barriers inlined)")
    # blocks of whole warps only; a release after each shuffle
    assert "block_loop_full_warps() &&" in plans["tickets"].text
    assert plans["tickets"].text.count("block_loop_warp_release(cuset_lo)") == 5


# ---------------------------------------------------------------- runs
pytestmark = needs_gxx


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    from cuset.execute.cpu import CpuBackend, compile_program

    backend = CpuBackend(seed=3, workers=2)
    workdir = tmp_path_factory.mktemp("warp-regions")
    compiled = compile_program(PROGRAM, workdir, timeout=300, backend=backend)
    assert compiled.ok, compiled.detail
    assert "tickets: block loop with barrier regions (2 barrier(s), 5 warp operation(s))" in compiled.step.stdout
    return path_runner(compiled, backend, workdir)


BLOCKS, THREADS, SLOTS = 3, 96, 40


def _tickets(out: bytes):
    n = BLOCKS * SLOTS * THREADS
    tickets = struct.unpack(f"{n}i", out[:4 * n])
    values = struct.unpack(f"{len(out) // 4 - n}f", out[4 * n:])
    return tickets, values


def _order(tickets, block: int, slot: int) -> list[int]:
    """The threads that took a ticket in `slot`, in the order they took it."""
    row = tickets[(block * SLOTS + slot) * THREADS:(block * SLOTS + slot + 1) * THREADS]
    return [t for _, t in sorted((v, t) for t, v in enumerate(row) if v >= 0)]


@pytest.mark.parametrize("order", ["forward", "random:3"])
def test_regions_take_the_fibers_tickets_and_values_bit_for_bit(program, order):
    out_on, paths_on, _ = both_paths(program, ("tickets",), order)
    assert paths_on == {"tickets": "block loop with barrier regions"}
    assert program(("tickets",), order, False)[2] == {"tickets": "fibers"}
    tickets, values = _tickets(out_on)
    for b in range(BLOCKS):  # every thread took one ticket per slot it reached, each ticket once
        taken = [v for v in tickets[b * SLOTS * THREADS:(b + 1) * SLOTS * THREADS] if v >= 0]
        assert sorted(taken) == list(range(THREADS * 7 + 32 * 5))
    # warp 0 after the barrier: each warp's total doubled, swapped in pairs, then a butterfly
    for b in range(BLOCKS):
        s = [2 * sum(u * 3 % 17 + b for u in range(32 * w, 32 * w + 32)) if w < THREADS // 32 else 0
             for w in range(32)]
        s = [s[lane ^ 1] for lane in range(32)]
        for m in (2, 4, 8, 16):
            s = [s[lane] + s[lane ^ m] for lane in range(32)]
        assert values[b] == s[0] == 2 * sum(u * 3 % 17 + b for u in range(32, 64))
    # first + up: the warp's total, and lane (l - 3) * 7 within each half-warp (own value below 3)
    for b in range(BLOCKS):
        for t in range(THREADS):
            w, lane = divmod(t, 32)
            total = sum(u * 3 % 17 + b for u in range(32 * w, 32 * w + 32))
            up = (lane - 3) * 7 if lane % 16 >= 3 else lane * 7
            assert values[BLOCKS + b * THREADS + t] == total + up


def test_forward_runs_warp_after_warp_with_the_released_lane_first(program):
    tickets, _ = _tickets(program(("tickets",), "forward", True)[1])
    for b in range(BLOCKS):
        assert _order(tickets, b, 0) == list(range(THREADS))
        # after a shuffle the last lane to arrive goes on first, then the others in lane order
        assert _order(tickets, b, 16)[:32] == [31, *range(31)]
        assert _order(tickets, b, 8)[:32] == [30, *range(30), 31]
        assert _order(tickets, b, 4)[:32] == [31, *range(31)]
        # warp after warp: warp 0 takes all its tickets up to the barrier before warp 1 its first
        warp0 = [tickets[(b * SLOTS + s) * THREADS + t] for s in (0, 16, 8, 4, 2, 1, 17) for t in range(32)]
        warp1_first = min(tickets[b * SLOTS * THREADS + 32:b * SLOTS * THREADS + 64])
        assert max(warp0) == 32 * 7 - 1 and warp1_first == 32 * 7
        # only warp 0 enters the if: lanes 0..31 in order (forward after a barrier)
        assert _order(tickets, b, 18) == list(range(32))


def test_random_orders_differ_from_forward_and_from_each_other(program):
    forward = _tickets(program(("tickets",), "forward", True)[1])[0]
    random = _tickets(program(("tickets",), "random:3", True)[1])[0]
    assert _order(random, 0, 16) != _order(forward, 0, 16)
    assert _order(random, 0, 16)[:32] != _order(random, 0, 8)[:32]
    # still warp after warp: a warp's lanes hold consecutive tickets in each slot
    for slot in (16, 8, 4):
        lanes = _order(random, 0, slot)
        assert all(len({t >> 5 for t in lanes[k:k + 32]}) == 1 for k in range(0, THREADS, 32))


@pytest.mark.parametrize("order", ["forward", "random:3"])
def test_an_inlined_warp_reduction_sums_rows(program, order):
    out_on, paths_on, _ = both_paths(program, ("rows", "128"), order)
    assert paths_on == {"rows": "block loop with barrier regions"}
    got = struct.unpack("7f", out_on)
    expected = [sum(float((i * 7919) % 1000) / 8.0 for i in range(r * 1000, (r + 1) * 1000)) for r in range(7)]
    assert got == pytest.approx(expected, rel=1e-6)


def test_blocks_of_part_of_a_warp_run_on_the_fibers(program):
    _, paths_on, _ = both_paths(program, ("rows", "80"), "random:3")
    assert paths_on == {"rows": "fibers"}  # 80 threads: no block took the regions


@pytest.mark.parametrize("order", ["forward", "random:3"])
def test_warps_returning_together_before_their_shuffles_run_as_regions(program, order):
    out_on, paths_on, _ = both_paths(program, ("gemv", "128"), order)
    assert paths_on == {"gemv": "block loop with barrier regions"}
    a = [((i * 31) % 29) / 4.0 - 3.0 for i in range(13 * 77)]
    x = [(i % 7) - 2.5 for i in range(77)]
    expected = [sum(a[r * 77 + c] * x[c] for c in range(77)) for r in range(13)]
    assert struct.unpack("13f", out_on) == pytest.approx(expected, rel=1e-5, abs=1e-4)


@pytest.mark.parametrize("order", ["forward", "random:3"])
def test_a_block_whose_warp_splits_at_a_return_runs_on_the_fibers(program, order):
    out_on, _, stderr = both_paths(program, ("tail",), order)
    assert "kernel 'tail': block loop and fibers, 3 of 4 blocks as a loop" in stderr, stderr
    h = [i * 3 % 11 for i in range(256)]
    assert struct.unpack("256f", out_on) == tuple(h[i] + h[i ^ 1] if i < 200 else 0 for i in range(256))


def _maxnorm(split: int) -> list[float]:
    x = [((i * 13) % 17) - 8.0 for i in range(3 * 64)]
    out = []
    for w in range(6):
        v = x[w * 32:w * 32 + 32]
        for o in (16, 8, 4, 2, 1):   # shfl_down: lanes past the end read their own value
            v = [max(v[lane], v[lane + o] if lane + o < 32 else v[lane]) for lane in range(32)]
        sq = [a * a for a in v]
        for o in (16, 8, 4, 2, 1):
            sq = [sq[lane] + (sq[lane + o] if lane + o < 32 else sq[lane]) for lane in range(32)]
        s = [(q + 1.0) ** 0.5 for q in sq]
        t0 = (w % 2) * 32
        out += [s[lane ^ 1] + lane if t0 + lane < split else s[lane] for lane in range(32)]
    return out


@pytest.mark.parametrize("order", ["forward", "random:3"])
def test_a_shuffle_inside_a_value_and_an_if_ending_the_kernel_run_as_regions(program, order):
    out, paths, _ = both_paths(program, ("maxnorm", "32"), order)
    assert paths == {"maxnorm": "block loop with barrier regions"}
    assert struct.unpack("192f", out) == pytest.approx(_maxnorm(32), rel=1e-6)


def test_a_block_whose_warp_splits_at_an_if_around_shuffles_runs_on_the_fibers(program):
    out, _, stderr = both_paths(program, ("maxnorm", "40"), "random:3")   # lanes 32-39 enter, 40-63 do not
    assert "kernel 'maxnorm': fibers, 0 of 3 blocks as a loop" in stderr, stderr
    assert struct.unpack("192f", out) == pytest.approx(_maxnorm(40), rel=1e-6)


@pytest.mark.parametrize("order", ["forward", "random:3"])
def test_votes_and_syncwarp_run_as_regions_in_the_fibers_order(program, order):
    out, paths, _ = both_paths(program, ("votes",), order)
    assert paths == {"votes": "block loop with barrier regions"}
    values = struct.unpack("256I", out[:1024])
    tickets = struct.unpack("256i", out[1024:])
    x = [(i * 7) % 13 - 6 for i in range(128)]
    for w in range(4):
        lanes = x[w * 32:w * 32 + 32]
        ballot = sum(1 << lane for lane, v in enumerate(lanes) if v > 0)
        vote = int(any(v > 5 for v in lanes)) + 10 * int(all(v > -100 for v in lanes))
        assert values[w * 64:w * 64 + 64] == (ballot, vote) * 32
    if order == "forward":   # the last lane goes on first after each: [31, 0..30], then [30, 0..29, 31]
        for slot, first in ((0, [31, *range(31)]), (1, [30, *range(30), 31])):
            block0 = sorted(range(64), key=lambda t: tickets[t * 2 + slot])
            assert block0[:32] == first and sorted(block0[32:]) == list(range(32, 64))


def test_a_shuffle_in_divergent_code_is_a_deadlock_on_both_paths(program):
    for loops in (True, False):
        p, _, _ = program(("divergent",), "forward", loops)
        assert p.returncode == 90, p.stderr
        assert "CUSET-CPU: runtime_error: deadlock" in p.stderr and "divergent code" in p.stderr, p.stderr
