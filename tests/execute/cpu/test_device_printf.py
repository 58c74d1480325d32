"""Device printf output appears where a GPU prints it (found in review, 2026-12-07).

A GPU holds a kernel's printf output in a buffer that the host prints at the start of
the next launch, at cudaDeviceSynchronize / cudaStreamSynchronize / cudaEventSynchronize,
at a blocking cudaMemcpy*, cudaDeviceReset and before a stream callback; never at exit
(CUDA C++ Programming Guide, "Formatted Output"). The backend printed at the call: host
lines printed between a launch and its synchronisation came out after the kernel's, and
a program that never synchronised printed output a GPU never shows.
"""

from __future__ import annotations

import pytest

from cpu_helpers import needs_gxx

BEFORE_SYNC = r"""
#include <cstdio>
__global__ void k(int x) { if (threadIdx.x == 0) printf("kernel %d\n", x); }
int main() {
  printf("host before\n");
  k<<<1, 2>>>(1);
  printf("host after launch\n");
  cudaDeviceSynchronize();
  printf("host after sync\n");
  k<<<1, 1>>>(2);
  cudaDeviceSynchronize();
  return 0;
}
"""

FLUSH_POINTS = r"""
#include <cstdio>
__global__ void k(int v) { if (threadIdx.x == 0) printf("kernel %d\n", v); }
void CUDART_CB callback(void* p) { printf("callback\n"); }
int main() {
  int* d; int h; cudaMalloc(&d, 4);
  cudaStream_t s; cudaStreamCreate(&s);
  cudaEvent_t e; cudaEventCreate(&e);
  k<<<1, 2>>>(1); printf("host a\n");
  k<<<1, 2>>>(2); printf("host b\n");               // the launch printed kernel 1
  cudaMemcpyAsync(&h, d, 4, cudaMemcpyDeviceToHost, s); printf("host c\n");   // not flushing
  cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost); printf("host d\n");            // kernel 2
  k<<<1, 1, 0, s>>>(3); cudaStreamSynchronize(s); printf("host e\n");
  k<<<1, 1>>>(4); cudaEventRecord(e); cudaEventSynchronize(e); printf("host f\n");
  k<<<1, 1>>>(5); cudaLaunchHostFunc(s, callback, nullptr); printf("host g\n");
  k<<<1, 1>>>(6); cudaMemset(d, 0, 4); cudaFree(d); printf("host h\n");       // neither flushes
  cudaDeviceReset(); puts("puts");
  k<<<1, 1>>>(7);
  return 0;                                          // kernel 7 is never printed
}
"""

FLUSH_EXPECTED = """host a
kernel 1
host b
host c
kernel 2
host d
kernel 3
host e
kernel 4
host f
kernel 5
callback
host g
host h
kernel 6
puts
"""

MANY_BLOCKS = r"""
#include <cstdio>
__global__ void k() { printf("block %d thread %d\n", blockIdx.x, threadIdx.x); }
int main() { k<<<8, 4>>>(); printf("host\n"); cudaDeviceSynchronize(); return 0; }
"""


@needs_gxx
@pytest.mark.parametrize("order", ["forward", "parallel:1"])
def test_host_lines_before_the_synchronisation_come_first(order, workroot):
    from cuset.execute.cpu import run_program

    r = run_program(BEFORE_SYNC, workroot / f"before-sync-{order.replace(':', '-')}", order=order)
    assert r.ok, r.run.stderr[-2000:]
    assert r.run.stdout == "host before\nhost after launch\nkernel 1\nhost after sync\nkernel 2\n"


@needs_gxx
def test_each_flushing_call_prints_and_the_others_do_not(workroot):
    from cuset.execute.cpu import run_program

    r = run_program(FLUSH_POINTS, workroot / "flush-points")
    assert r.ok, r.run.stderr[-2000:]
    assert r.run.stdout == FLUSH_EXPECTED
    assert "9 bytes of device printf output were never printed" in r.run.stderr


@needs_gxx
def test_lines_of_blocks_on_several_workers_stay_whole(workroot):
    from cuset.execute.cpu import run_program

    r = run_program(MANY_BLOCKS, workroot / "many-blocks", order="parallel:3")
    assert r.ok, r.run.stderr[-2000:]
    lines = r.run.stdout.splitlines()
    assert lines[0] == "host"
    assert sorted(lines[1:]) == sorted(f"block {b} thread {t}" for b in range(8) for t in range(4))
