"""The order proof: which kernels are instrumented (order_proof.py), what the runtime
reports for their launches (runtime/src/order_proof.cpp), and how the backend reads it
(diagnostics.order_proof_result). The pipeline's side is tests/evaluate/test_order_proof.py."""

from __future__ import annotations

import os
import subprocess

import pytest

from cpu_helpers import needs_gxx
from cuset.execute.cpu.diagnostics import order_proof_result
from cuset.execute.cpu.order_proof import plan_proofs
from cuset.execute.cpu.rewriter import rewrite


def plan(src: str):
    [p] = plan_proofs(src)
    return p


# ---------------------------------------------------------------- static eligibility
def test_a_naive_kernel_is_checked_with_its_written_and_read_parameters():
    p = plan("""__global__ void bn(const float* x, float* y, int rows, int cols) {
  int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows || c >= cols) return;
  float s = 0.0f;
  for (int i = 0; i < rows; ++i) s += x[i * cols + c];
  y[r * cols + c] = x[r * cols + c] - s / rows;
}""")
    assert (p.eligible, p.written, p.read_only) == (True, ("y",), ("x",)), p.reason


@pytest.mark.parametrize("body, reason", [
    ("__shared__ float s[32]; s[threadIdx.x] = 1; o[0] = s[0];", "shared memory"),
    ("atomicAdd(o, 1);", "atomicAdd"),
    ("__syncthreads(); o[threadIdx.x] = 1;", "__syncthreads"),
    ("o[threadIdx.x] = __shfl_sync(0xffffffffu, 1, 0);", "__shfl_sync"),
    ("printf(\"%d\", 1); o[threadIdx.x] = 1;", "printf"),
    ("o[threadIdx.x] = clock();", "clock"),
    ("o[threadIdx.x] = g;", "memory not traced"),                     # a file-scope __device__ variable
    ("int a; o[threadIdx.x] = a;", "without an initial value"),
    ("int a[4] = {0}; o[threadIdx.x] = a[threadIdx.x & 3];", "a local array"),
    ("int v = 1; int* q = &v; o[threadIdx.x] = *q;", "address"),
    ("int* q = o + 1; q[threadIdx.x] = 1;", "other than as o[i]"),
    ("*o = 1;", "other than as o[i]"),
    ("o[threadIdx.x] = ::cuset::rt::proof_active;", "declared outside the kernel"),  # the runtime's own flag
    ("o[threadIdx.x] = ext(1);", "calls ext"),
])
def test_kernels_the_runtime_cannot_check_are_left_alone(body, reason):
    p = plan(f"__device__ int g; __device__ int ext(int);\n"
             f"__global__ void k(int* o, const int* i) {{ {body} }}")
    assert not p.eligible and reason in p.reason, p.reason
    assert p.edits == ()


@pytest.mark.parametrize("src, reason", [
    # a pointer in a typedef'd or template parameter, passed to a function that writes through it
    ("typedef int* ip; __device__ void put(ip q) { q[0] = 1; }\n"
     "__global__ void k(int* o, ip i) { put(i); o[threadIdx.x] = 1; }", "ip i may hold a pointer"),
    ("template <class P> __global__ void k(int* o, P i) { o[threadIdx.x] = i[0]; }", "P i may hold a pointer"),
    # an address smuggled through an integer into a function that writes there
    ("__device__ void put(long a) { ((int*)a)[0] = 1; }\n"
     "__global__ void k(int* o, const int* i) { put((long)i); o[threadIdx.x] = 1; }", "not traced"),
])
def test_pointers_the_analysis_cannot_follow_through_calls(src, reason):
    p = plan(src)
    assert not p.eligible and reason in p.reason, p.reason


def test_device_functions_taking_pointers_count_as_writing_through_them():
    p = plan("__device__ float get(const float* a, int i) { return a[i]; }\n"
             "__global__ void k(const float* a, float* b) { b[threadIdx.x] = get(a, threadIdx.x); }")
    assert not p.eligible and "other than as a[i]" in p.reason  # `a` is passed: counted as written
    p = plan("__device__ float twice(float v) { return 2 * v; }\n"
             "__global__ void k(const float* a, float* b, unsigned long n, float4 c) "
             "{ b[threadIdx.x] = twice(a[threadIdx.x]) + c.x + n; }")
    assert (p.eligible, p.written, p.read_only) == (True, ("b",), ("a",)), p.reason


def test_read_only_loads_through_ldg_are_reads():
    p = plan("__global__ void k(const float* a, float* b) { b[threadIdx.x] = __ldg(&a[threadIdx.x]); }")
    assert (p.eligible, p.written, p.read_only) == (True, ("b",), ("a",)), p.reason
    p = plan("__global__ void k(float* b) { b[threadIdx.x] = __ldg(&b[threadIdx.x + 1]); }")
    assert not p.eligible and "other than as b[i]" in p.reason


def test_the_checked_pointer_goes_in_before_the_block_loop_and_lines_stay():
    src = "__global__ void k(const float* a,\n float* b, int n) {\n  int i = threadIdx.x;\n  if (i < n) b[i] = a[i];\n}\n"
    out = rewrite(src, block_loops=True, order_proofs=True)
    [body_line] = [ln for ln in out.source.splitlines() if "proof_wrap" in ln]
    assert body_line.index("auto b = ::cuset::rt::proof_wrap(cuset_pp_b);") < body_line.index("take_block_loop")
    assert "float* cuset_pp_b" in out.source and out.source.count("\n") == src.count("\n")
    assert "proof_wrap" not in out.fallback_source
    assert "proof_wrap" not in rewrite(src, block_loops=True).source


# ---------------------------------------------------------------- reading the report
SECRET = "00ff" * 8


def report(*kernel_lines: str, summary: str = "3 of 3 launches independent, 2 kernels", token: str = SECRET) -> str:
    lines = [f"CUSET-CPU: order-proof: {k}" for k in kernel_lines]
    return "\n".join(lines + [f"CUSET-CPU: order-proof: {summary}, token {token}"]) + "\n"


GOOD = ("kernel 'a': 1 of 1 launch independent", "kernel 'b': 2 of 2 launches independent")


def test_a_full_proof_reads_as_the_reason_to_skip():
    assert order_proof_result(report(*GOOD), SECRET) == \
        "every launch proven order-independent (2 kernels, 3 launches)"
    assert order_proof_result(report(summary="0 of 0 launches independent, 0 kernels"), SECRET) == "no kernel launched"


@pytest.mark.parametrize("channel", [
    report(*GOOD, token="1234"),                                               # another run's (or a made-up) token
    report(*GOOD) + report(*GOOD),                                             # two reports
    report("kernel 'a': 1 of 1 launch independent", "kernel 'b': 1 of 2 launches independent: why",
           summary="2 of 3 launches independent, 2 kernels"),
    report(*GOOD, summary="2 of 3 launches independent, 2 kernels"),
    report(*GOOD) + "CUSET-CPU: order-proof: kernel 'c' launched after the report: not proven\n",
    report(GOOD[0]),                                                           # a kernel line missing
    "",
])
def test_anything_less_proves_nothing(channel):
    assert order_proof_result(channel, SECRET) == ""


def test_without_a_channel_or_secret_nothing_is_proven():
    assert order_proof_result(None, SECRET) == ""
    assert order_proof_result(report(*GOOD, token=""), "") == ""


# ---------------------------------------------------------------- the runtime
PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>
__global__ void bn(const float* x, float* y, int rows, int cols) {
  int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows || c >= cols) return;
  float s = 0.0f;
  for (int i = 0; i < rows; ++i) s += x[i * cols + c];
  y[r * cols + c] = x[r * cols + c] - s / rows;
}
// every thread reads the whole output it writes (region_memory keeps it off the block loops)
__global__ void sums_output(float* y, int n) {
  float s = 0.0f;
  for (int k = 0; k < n; ++k) s += y[k];
  y[threadIdx.x] = s;
}
__global__ void put(int* t, int n, int at) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) t[at + i] = i; }
__global__ void reverse(int* t, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) t[n - 1 - i] = i; }
__global__ void count(int* t) { atomicAdd(t, 1); }
int* g_t;
void at_exit() { put<<<1, 32>>>(g_t, 32, 0); cudaDeviceSynchronize(); }
// Registered before the runtime's report (its constructor has priority 102): runs after it.
__attribute__((constructor(101))) static void early() { if (getenv("EARLY")) atexit(at_exit); }
int main(int argc, char** argv) {
  const char* what = argv[1];
  float *x, *y;
  int *t, *u;
  cudaMalloc(&x, 64 * 64 * 4); cudaMalloc(&y, 64 * 64 * 4);
  cudaMalloc(&t, 1024 * 4); cudaMalloc(&u, 1024 * 4);
  g_t = t;
  printf("token=%s\n", getenv("CUSET_CPU_PROOF_TOKEN") ? "visible" : "gone");
  if (!strcmp(what, "bn")) {
    bn<<<dim3(2, 8), dim3(32, 8)>>>(x, y, 64, 64);
    put<<<4, 256>>>(t, 1024, 0);
    reverse<<<4, 256>>>(t, 1024);  // other threads than the last launch's, same words: a new launch
  } else if (!strcmp(what, "sums")) {
    sums_output<<<1, 64>>>(y, 64);
  } else if (!strcmp(what, "outside")) {
    put<<<1, 32>>>(t, 32, (int)(u - t));  // t[at + i] lands in u's allocation
  } else if (!strcmp(what, "atexit")) {
    atexit(at_exit);  // runs before the report: counted
  } else if (!strcmp(what, "atomic")) {
    count<<<2, 32>>>(t);
  }
  cudaDeviceSynchronize();
  return 0;
}
"""


@pytest.fixture(scope="module")
def proof_run(backend, compile_source):
    compiled = compile_source(PROGRAM, "order-proof")
    assert compiled.compiled.ok, compiled.compiled.detail + compiled.compiled.step.stderr
    assert "order proofs: bn: checked (writes y); sums_output: checked (writes y)" in compiled.compiled.step.stdout
    assert "count: not checked (calls atomicAdd)" in compiled.compiled.step.stdout

    def run(what: str, order: str = "forward", **env) -> tuple[str, list[str]]:
        inv = backend.invocation(compiled.compiled.executable, order)
        assert (order == "forward") == bool(inv.secret)
        r = subprocess.run(inv.argv + [what], cwd=compiled.dir, capture_output=True, text=True, timeout=120,
                           env={**os.environ, **inv.env, "CUSET_CPU_REPORT_PATHS": "1", **env})
        assert r.returncode == 0, r.stderr
        lines = [ln.split("order-proof: ", 1)[1] for ln in r.stderr.splitlines() if "order-proof: " in ln]
        assert not lines or lines[-1].endswith(f"token {inv.secret}") or "after the report" in lines[-1]
        return r.stdout, [ln.split(", token")[0] for ln in lines]

    return run


@needs_gxx
@pytest.mark.parametrize("fibers", [False, True])
def test_independent_launches_are_proven_on_both_paths(proof_run, fibers):
    out, lines = proof_run("bn", **({"CUSET_CPU_BLOCK_LOOP": "0"} if fibers else {}))
    assert "token=gone" in out
    assert lines == ["kernel 'bn': 1 of 1 launch independent", "kernel 'put': 1 of 1 launch independent",
                     "kernel 'reverse': 1 of 1 launch independent", "3 of 3 launches independent, 3 kernels"]


@needs_gxx
@pytest.mark.parametrize("what, why", [
    ("outside", "an access through a written parameter outside its allocation"),
    ("atomic", "not checked (see the compile step's order proofs)"),
])
def test_launches_the_runtime_cannot_prove(proof_run, what, why):
    _, lines = proof_run(what)
    assert any(line.endswith(f"0 of 1 launch independent: {why}") for line in lines), lines
    assert lines[-1].startswith("0 of 1 launches independent")


@needs_gxx
def test_reading_what_other_threads_write_is_a_conflict(proof_run):
    _, lines = proof_run("sums")
    assert lines[0].startswith("kernel 'sums_output': 0 of 1 launch independent: thread 0 of block 0 and thread 1 "
                               "of block 0 access the same memory")


@needs_gxx
def test_launches_from_exit_handlers_count_and_one_after_the_report_voids_it(proof_run):
    _, lines = proof_run("atexit")
    assert lines == ["kernel 'put': 1 of 1 launch independent", "1 of 1 launches independent, 1 kernels"]
    # (the host-access check would touch the runtime's allocation table, destroyed by then)
    _, lines = proof_run("none", EARLY="1", CUSET_CPU_CHECK_HOST_ACCESS="0")
    assert lines == ["0 of 0 launches independent, 0 kernels", "kernel 'put' launched after the report: not proven"]
    assert order_proof_result("".join(f"CUSET-CPU: order-proof: {ln}, token {SECRET}\n" for ln in lines[:1])
                              + f"CUSET-CPU: order-proof: {lines[1]}\n", SECRET) == ""


@needs_gxx
def test_other_orders_prove_nothing(proof_run):
    out, lines = proof_run("bn", order="random:7")
    assert lines == [] and "token=gone" in out


@needs_gxx
def test_the_proof_gives_up_past_its_access_budget_and_proves_nothing_after(proof_run):
    """bn writes y once per thread (64 x 64 = 4,096 checked accesses), put and reverse
    1,024 each: with a budget of 5,000 the proof holds for bn, gives up inside put, and
    reverse is not checked at all, so the run is not proven and every order runs."""
    _, lines = proof_run("bn", CUSET_CPU_PROOF_ACCESSES="5000")
    assert lines == [
        "kernel 'bn': 1 of 1 launch independent",
        "kernel 'put': 0 of 1 launch independent: the proof gave up: more than 5000 checked accesses in this run "
        "(its cost would pass what the other orders cost)",
        "kernel 'reverse': 0 of 1 launch independent: not checked: the proof gave up earlier in this run "
        "(more than 5000 checked accesses)",
        "1 of 3 launches independent, 3 kernels"]
    _, lines = proof_run("bn", CUSET_CPU_PROOF_ACCESSES="6144")   # exactly bn + put + reverse: still proven
    assert lines[-1] == "3 of 3 launches independent, 3 kernels"
