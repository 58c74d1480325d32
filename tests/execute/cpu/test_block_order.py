"""The order blocks run in under the random orders (runtime/src/scheduler.cpp,
BlockPermutation): every block exactly once; chunks of 64 consecutive blocks run
whole, in a random order, each in a random affine order; a grid of at most 64 blocks
is one affine permutation, as the whole grid was before the chunks; and neighbouring
blocks still run in either order."""

from __future__ import annotations

import math
import subprocess

import pytest

from cpu_helpers import needs_gxx
from cuset.execute.cpu import CpuBackend, compile_program, run_compiled

pytestmark = needs_gxx

CHUNK = 64
GRIDS = (1, 5, 64, 65, 130, 1000, 4099)

# orders.txt, one line per grid: the blocks in the order they ran (thread 0 of each block
# takes a ticket).
PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
__global__ void record(int* seq, int* counter) {
  if (threadIdx.x == 0) seq[atomicAdd(counter, 1)] = blockIdx.x;
}
int main(int argc, char** argv) {
  FILE* out = fopen("orders.txt", "w");
  for (int a = 1; a < argc; ++a) {
    int n = atoi(argv[a]);
    int *seq, *counter;
    cudaMalloc(&seq, n * sizeof(int));
    cudaMalloc(&counter, sizeof(int));
    cudaMemset(counter, 0, sizeof(int));
    record<<<n, 32>>>(seq, counter);
    int* h = (int*)malloc(n * sizeof(int));
    cudaMemcpy(h, seq, n * sizeof(int), cudaMemcpyDeviceToHost);
    for (int i = 0; i < n; ++i) fprintf(out, "%d%c", h[i], i + 1 < n ? ' ' : '\n');
    free(h);
    cudaFree(seq);
    cudaFree(counter);
  }
  fclose(out);
  return 0;
}
"""


@pytest.fixture(scope="module")
def block_orders(tmp_path_factory):
    backend = CpuBackend(seed=1, workers=1)
    workdir = tmp_path_factory.mktemp("block-order")
    compiled = compile_program(PROGRAM, workdir, timeout=300, backend=backend)
    assert compiled.ok, compiled.detail

    def run(order: str) -> dict[int, list[int]]:
        r = run_compiled(compiled, workdir, timeout=60, order=order, backend=backend,
                         args=[str(n) for n in GRIDS], run_name=order.replace(":", "-"))
        assert r.ok, r.run.stderr
        lines = r.files["orders.txt"].decode().split("\n")[:len(GRIDS)]
        return {n: [int(x) for x in line.split()] for n, line in zip(GRIDS, lines)}

    run.executable = compiled.executable
    return run


def affine(seq: list[int]) -> bool:
    """True iff seq[i] = (a*i + c) mod len(seq) for some a coprime with the length."""
    n = len(seq)
    c = seq[0]
    a = (seq[1] - c) % n if n > 1 else 1
    return math.gcd(a, n) == 1 and all(seq[i] == (a * i + c) % n for i in range(n))


def test_forward_runs_blocks_in_index_order(block_orders):
    assert block_orders("forward") == {n: list(range(n)) for n in GRIDS}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_order_runs_each_block_once_chunk_by_chunk(block_orders, seed):
    orders = block_orders(f"random:{seed}")
    for n, seq in orders.items():
        assert sorted(seq) == list(range(n)), n
        if n <= CHUNK:  # one chunk: one affine permutation of the grid
            assert affine(seq), (n, seq)
            continue
        # The chunks run whole: the run is ceil(n / 64) stretches, one per chunk.
        stretches = [seq[:1]]
        for b in seq[1:]:
            if b // CHUNK == stretches[-1][-1] // CHUNK:
                stretches[-1].append(b)
            else:
                stretches.append([b])
        chunks = [s[0] // CHUNK for s in stretches]
        assert sorted(chunks) == list(range(math.ceil(n / CHUNK))), n
        for s in stretches:  # each chunk in an affine order of its own blocks
            assert affine([b - s[0] // CHUNK * CHUNK for b in s]), (n, s)
    assert orders[4099] != list(range(4099))
    assert [s // CHUNK for s in orders[4099][::CHUNK]][:5] != [0, 1, 2, 3, 4]  # the chunks' order is drawn too


def test_neighbouring_blocks_run_in_either_order(block_orders):
    """A race between neighbouring blocks (block b reads what b+1 writes) shows only when b+1
    runs first: over three seeds, about half of the neighbour pairs run that way, inside
    chunks and across them."""
    inside = across = inside_flipped = across_flipped = 0
    for seed in (1, 2, 3):
        seq = block_orders(f"random:{seed}")[4099]
        at = {b: i for i, b in enumerate(seq)}
        for b in range(4098):
            flipped = at[b + 1] < at[b]
            if (b + 1) % CHUNK:
                inside, inside_flipped = inside + 1, inside_flipped + flipped
            else:
                across, across_flipped = across + 1, across_flipped + flipped
    assert 0.2 < inside_flipped / inside < 0.8
    assert 0.2 < across_flipped / across < 0.8


def test_chunk_size_of_one_is_the_whole_grid_permutation(block_orders, tmp_path):
    """CUSET_CPU_BLOCK_CHUNK=1: one affine permutation of the whole grid, the order before
    the chunks (what bench/cpu_backend.py --block-order compares with); a bad value is an error."""
    env = {"CUSET_CPU_ORDER": "random:1", "CUSET_CPU_BLOCK_CHUNK": "1"}
    r = subprocess.run([str(block_orders.executable), "4099"], cwd=tmp_path, env=env, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    seq = [int(x) for x in (tmp_path / "orders.txt").read_text().split()]
    assert sorted(seq) == list(range(4099)) and affine(seq)
    bad = subprocess.run([str(block_orders.executable), "5"], cwd=tmp_path, capture_output=True, timeout=60,
                         env={**env, "CUSET_CPU_BLOCK_CHUNK": "0"})
    assert bad.returncode == 90 and b"CUSET_CPU_BLOCK_CHUNK='0' is not a positive block count" in bad.stderr
