"""Direct mode of the CPU runtime's scheduler: a block's threads run as plain
calls in a loop until one has to wait (barrier, warp operation, loop tick,
spin); from then on the general scheduler takes over in the state it would
have reached. These programs make that hand-over happen after threads have
already exited, and check the results and the order threads start in."""

from __future__ import annotations

import pytest

from cpu_helpers import parse_kv

ORDERS = ["forward", "random:3", "parallel:5"]

EXIT_THEN_WAIT = r"""
#include <cstdio>
#include <cuda_runtime.h>

// Threads below `skip` exit at once (they finish inside the direct loop); the
// others meet at a barrier and read a neighbour's value from shared memory.
__global__ void exit_then_barrier(const int* in, int* out, int skip) {
    __shared__ int s[128];
    int t = threadIdx.x;
    if (t < skip) { out[blockIdx.x * 128 + t] = -1; return; }
    s[t] = in[blockIdx.x * 128 + t] * 3;
    __syncthreads();
    int next = t + 1 < 128 ? t + 1 : skip;
    out[blockIdx.x * 128 + t] = s[next];
}

// Lanes 0-3 of every warp exit first; __activemask() must not wait for them.
__global__ void exit_then_activemask(unsigned* out) {
    int t = threadIdx.x;
    if (t % 32 < 4) { out[t] = 0; return; }
    out[t] = __activemask();
}

// The order threads start in: a ticket from a counter, before any wait.
__global__ void tickets(int* counter, int* out, int wait_after) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    out[t] = atomicAdd(&counter[blockIdx.x], 1);
    if (wait_after) __syncthreads();
}

// Thread 0 spins on a flag that the last thread of the block sets.
__global__ void spin_on_later_thread(int* flag, int* out) {
    if (threadIdx.x == 0) {
        while (atomicAdd(flag, 0) == 0) {}
        out[0] = 7;
    } else if (threadIdx.x == blockDim.x - 1) {
        atomicExch(flag, 1);
    }
}

int main() {
    const int blocks = 4, n = blocks * 128;
    int *in, *out, *counter, *flag;
    unsigned* mask;
    cudaMallocManaged(&in, n * sizeof(int));
    cudaMallocManaged(&out, n * sizeof(int));
    cudaMallocManaged(&counter, blocks * sizeof(int));
    cudaMallocManaged(&mask, 128 * sizeof(unsigned));
    cudaMallocManaged(&flag, sizeof(int));
    for (int i = 0; i < n; ++i) in[i] = i;

    exit_then_barrier<<<blocks, 128>>>(in, out, 5);
    cudaDeviceSynchronize();
    long sum = 0;
    for (int i = 0; i < n; ++i) sum += out[i];
    printf("barrier_sum=%ld\n", sum);
    printf("barrier_b1=%d,%d,%d,%d\n", out[128 + 4], out[128 + 5], out[128 + 126], out[128 + 127]);

    exit_then_activemask<<<1, 128>>>(mask);
    cudaDeviceSynchronize();
    int ok = 1;
    for (int t = 0; t < 128; ++t) ok &= mask[t] == (t % 32 < 4 ? 0u : 0xfffffff0u);
    printf("activemask_ok=%d\n", ok);

    for (int wait = 0; wait < 2; ++wait) {
        for (int b = 0; b < blocks; ++b) counter[b] = 0;
        tickets<<<blocks, 128>>>(counter, out, wait);
        cudaDeviceSynchronize();
        printf("tickets%d=", wait);
        for (int i = 0; i < n; ++i) printf(i ? ",%d" : "%d", out[i]);
        printf("\n");
    }

    *flag = 0;
    out[0] = 0;
    spin_on_later_thread<<<1, 64>>>(flag, out);
    cudaDeviceSynchronize();
    printf("spin=%d\n", out[0]);
    printf("error=%d\n", (int)cudaGetLastError());
    return 0;
}
"""


@pytest.fixture(scope="module")
def program(compile_source):
    compiled = compile_source(EXIT_THEN_WAIT, "direct_mode")
    assert compiled.compiled.ok, compiled.compiled.detail
    return compiled


def _expected_barrier_sum(blocks: int = 4, skip: int = 5) -> int:
    total = 0
    for b in range(blocks):
        for t in range(128):
            if t < skip:
                total -= 1
            else:
                nxt = t + 1 if t + 1 < 128 else skip
                total += 3 * (b * 128 + nxt)
    return total


@pytest.mark.parametrize("order", ORDERS)
def test_threads_that_exit_before_the_first_wait_are_done(program, order):
    run = program.run(order)
    assert run.ok, run.run.stderr
    kv = parse_kv(run.run.stdout)
    assert int(kv["barrier_sum"]) == _expected_barrier_sum()
    # block 1: thread 4 exited; thread 5 reads thread 6's value; 127 wraps to 5
    assert kv["barrier_b1"] == f"-1,{3 * (128 + 6)},{3 * (128 + 127)},{3 * (128 + 5)}"
    assert kv["activemask_ok"] == "1"
    assert kv["spin"] == "7"
    assert kv["error"] == "0"


def test_start_order_is_index_order_under_forward_whether_or_not_a_thread_waits(program):
    kv = parse_kv(program.run("forward").run.stdout)
    expected = ",".join(str(t % 128) for t in range(4 * 128))
    assert kv["tickets0"] == expected
    assert kv["tickets1"] == expected


def test_random_start_orders_are_permutations_that_vary_between_blocks_and_do_not_depend_on_waiting(program):
    kv = parse_kv(program.run("random:3").run.stdout)
    for key in ("tickets0", "tickets1"):
        values = [int(x) for x in kv[key].split(",")]
        per_block = [values[b * 128:(b + 1) * 128] for b in range(4)]
        for order in per_block:
            assert sorted(order) == list(range(128))
            assert order != list(range(128))
        assert len({tuple(o) for o in per_block}) > 1
    # The same seed gives the same orders, run to run.
    again = parse_kv(program.run("random:3").run.stdout)
    assert again["tickets0"] == kv["tickets0"] and again["tickets1"] == kv["tickets1"]
