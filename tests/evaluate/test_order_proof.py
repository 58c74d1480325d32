"""The pipeline skips the random and parallel orders only when the CPU runtime proved,
in the forward run, that every kernel launch is order-independent (order_proof.py,
runtime/src/order_proof.cpp) - and every program the other orders would catch still
gets the verdict it gets with all orders.

Only for trusted programs (EvalOptions.trusted_programs: references, the project's own
tasks): the proof is written from inside the program's process, so a model answer's is
never believed (issue 59: forged with the real token below).

One program (y = 2x + 1, the adversarial fixtures' task) with a probe kernel chosen by
the environment (PROBE): each probe fills an int buffer t, and the host adds
t[i] - (what the forward order gives) to y, so a probe passes in forward and fails
wherever another order changes t. Expectations worked out by hand per probe below;
the verdict with every order comes from the same executable with the proof unused
(`AllOrders`: one compile for both).
"""

import json
from pathlib import Path

import pytest

from cuset.evaluate.options import EvalOptions, Timeouts
from cuset.evaluate.pipeline import evaluate_program
from cuset.evaluate.workspace import Workspace
from cuset.execute.compile_cache import CompileCache
from cuset.execute.cpu import CpuBackend
from cuset.execute.result import Status
from cuset.execute.sandbox import SandboxPolicy
from cuset.tasks import Task
from sandbox_tools import AUTO_MODE, needs_a_sandbox

pytestmark = needs_a_sandbox

TASK = Task.from_json(json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "adversarial" / "task.json")
                                 .read_text()))

PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>
#include <cuda_runtime.h>
// The token, read before the runtime takes it out of the environment (its reader runs at
// priority 102): what a program can find in its own process.
static char g_token[80] = "";
__attribute__((constructor(101))) static void steal_token() {
  const char* t = getenv("CUSET_CPU_PROOF_TOKEN");
  if (t) snprintf(g_token, sizeof g_token, "%s", t);
}
__global__ void axpb(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i] + 1.0f;
}
__global__ void fill(int* t, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) t[i] = i; }
// in place: reads the element the previous thread writes
__global__ void stencil(int* t, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i > 0 && i < n) t[i] = t[i - 1] + t[i];
}
__global__ void last_thread(int* t) { t[0] = blockIdx.x * blockDim.x + threadIdx.x; }
__global__ void last_block(int* t) { if (threadIdx.x == 0) t[0] = blockIdx.x; }
__global__ void shift(const int* src, int* dst, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n - 1) dst[i] = src[i] + 1;
}
// in place: `__ldg` reads the element the next thread writes (a load is an access, not a pure function)
__global__ void smooth(const int* in, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __ldg(in + i) + __ldg(in + i + 1);
}
__global__ void copy(const int* src, int* dst, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) dst[i] = src[i]; }
__global__ void views(int* words, unsigned char* bytes, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { words[i] = i; bytes[4 * i + 5] = 0; }
}
__global__ void unset_local(int* t, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int acc;
  for (int k = 0; k < 2; ++k) acc = k;
  if (i < n) t[i] = i + acc - 1;
}
__global__ void reads_unwritten(const int* u, int* t, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) t[i] = i + (u[i] == 0x7fffffff ? 0 : 1);
}
int main() {
  const int n = 1024;
  static float hx[n], hy[n];
  static int ht[n + 4];
  const char* probe = getenv("PROBE");
  FILE* f = fopen("data/x.bin", "rb");
  if (!probe || !f || fread(hx, sizeof(float), n, f) != n) return 1;
  fclose(f);
  float *dx, *dy;
  int *dt, *du;
  cudaMalloc(&dx, n * sizeof(float));
  cudaMalloc(&dy, n * sizeof(float));
  cudaMalloc(&dt, (n + 4) * sizeof(int));
  cudaMalloc(&du, n * sizeof(int));
  cudaMemcpy(dx, hx, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(dt, 0, (n + 4) * sizeof(int));
  axpb<<<4, 256>>>(dx, dy, n);
  for (int i = 0; i < n; ++i) ht[i] = 1;
  long expect[n];
  for (int i = 0; i < n; ++i) expect[i] = i;
  if (!strcmp(probe, "fill")) {
    fill<<<4, 256>>>(dt, n);
  } else if (!strcmp(probe, "stencil") || !strcmp(probe, "forged") || !strcmp(probe, "forged_token")) {
    cudaMemcpy(dt, ht, n * sizeof(int), cudaMemcpyHostToDevice);  // all ones: forward leaves i + 1
    stencil<<<4, 256>>>(dt, n);
    for (int i = 0; i < n; ++i) expect[i] = i + 1;
  } else if (!strcmp(probe, "last_thread")) {
    last_thread<<<4, 256>>>(dt);
    for (int i = 0; i < n; ++i) expect[i] = i == 0 ? 1023 : 0;
  } else if (!strcmp(probe, "last_block")) {
    last_block<<<64, 16>>>(dt);
    for (int i = 0; i < n; ++i) expect[i] = i == 0 ? 63 : 0;
  } else if (!strcmp(probe, "shift")) {
    shift<<<4, 256>>>(dt, dt + 1, n);  // forward: t[i + 1] = t[i] + 1 from t[0] = 0
  } else if (!strcmp(probe, "smooth")) {
    fill<<<4, 256>>>(dt, n);
    smooth<<<4, 256>>>(dt, dt, n);  // forward: t[i] = i + (i + 1), t[n - 1] = n - 1 + t[n] = n - 1
    for (int i = 0; i < n; ++i) expect[i] = i < n - 1 ? 2 * i + 1 : n - 1;
  } else if (!strcmp(probe, "copy")) {
    fill<<<4, 256>>>(dt, n);
    copy<<<4, 256>>>(dt, dt, n);
  } else if (!strcmp(probe, "views")) {
    views<<<4, 256>>>(dt, (unsigned char*)dt, n);  // forward: thread i + 1 rewrites the byte thread i cleared
  } else if (!strcmp(probe, "unset_local")) {
    unset_local<<<4, 256>>>(dt, n);
  } else if (!strcmp(probe, "reads_unwritten")) {
    reads_unwritten<<<4, 256>>>(du, dt, n);  // poisoned: u reads 0x7fffffff; fresh memory: 0
  }
  cudaMemcpy(hy, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(ht, dt, n * sizeof(int), cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i) hy[i] += (float)(ht[i] - expect[i]);
  FILE* g = fopen("data/y.bin", "wb");
  fwrite(hy, sizeof(float), n, g);
  fclose(g);
  if (!strcmp(probe, "forged_token")) {
    // The proof's summary with the real token (stolen above), on every open descriptor
    // (the diagnostics channel among them), then out before the runtime's own report.
    char line[256];
    int m = snprintf(line, sizeof line, "CUSET-CPU: order-proof: kernel 'stencil': 1 of 1 launch independent\n"
                     "CUSET-CPU: order-proof: 1 of 1 launches independent, 1 kernels, token %s\n", g_token);
    for (int d = 3; d < 1024; ++d)
      if (fcntl(d, F_GETFD) != -1) { ssize_t ignored = write(d, line, m); (void)ignored; }
    _exit(0);
  }
  if (!strcmp(probe, "forged")) {
    // Claim every launch independent: with the token if the environment still shows it,
    // on stdout, stderr and every other open descriptor (the diagnostics channel among
    // them), then leave without the runtime's own report.
    char env[65536] = "", token[80] = "0123456789abcdef0123456789abcdef";
    int fd = open("/proc/self/environ", O_RDONLY);
    ssize_t len = fd >= 0 ? read(fd, env, sizeof env - 1) : 0;
    for (ssize_t k = 0; k + 22 < len; ++k)
      if (!memcmp(env + k, "CUSET_CPU_PROOF_TOKEN=", 22)) snprintf(token, sizeof token, "%s", env + k + 22);
    char line[256];
    int m = snprintf(line, sizeof line, "CUSET-CPU: order-proof: kernel 'stencil': 1 of 1 launch independent\n"
                     "CUSET-CPU: order-proof: 2 of 2 launches independent, 1 kernels, token %s\n", token);
    for (int d = 1; d < 1024; ++d)
      if (fcntl(d, F_GETFD) != -1) { ssize_t ignored = write(d, line, m); (void)ignored; }
    fflush(stdout);
    _exit(0);
  }
  return 0;
}
"""


class AllOrders(CpuBackend):
    """The same executable (one fingerprint) run under every order, as before the proof."""

    def orders_to_skip(self, step, invocation):
        return (), ""


@pytest.fixture(scope="module")
def evaluate(tmp_path_factory):
    root = tmp_path_factory.mktemp("order-proof")
    backends = {(skip, poison): (CpuBackend if skip else AllOrders)(workers=2, poison_device_memory=poison)
                for skip in (True, False) for poison in (False, True)}
    with Workspace(root / "ws") as ws:
        caches = {poison: CompileCache(backends[True, poison], root / f"cache{poison}") for poison in (False, True)}
        results = {}

        def run(probe: str, skip: bool = True, poison: bool = False, trusted: bool = True):
            """`trusted`: evaluated as a reference (EvalOptions.trusted_programs), whose proof
            is believed; False: as a model answer, whose proof is not."""
            if (probe, skip, poison, trusted) not in results:
                opts = EvalOptions(timeouts=Timeouts(run=60.0), sandbox=SandboxPolicy(mode=AUTO_MODE),
                                   extra_env={"PROBE": probe}, trusted_programs=trusted)
                results[probe, skip, poison, trusted] = evaluate_program(
                    TASK, PROGRAM, backend=backends[skip, poison], cache=caches[poison], workspace=ws, options=opts)
            return results[probe, skip, poison, trusted]

        yield run
        for c in caches.values():
            c.close()


def run_orders(result) -> list[str]:
    return [s.name.split("order=")[1].rstrip("]") for s in result.steps if s.name.startswith("run[")]


def skipped(result) -> str:
    return "".join(s.stdout for s in result.steps if s.name.startswith("orders["))


def test_independent_kernels_skip_the_other_orders_and_say_so(evaluate):
    r = evaluate("fill")
    assert r.status is Status.PASSED, r.detail
    assert run_orders(r) == ["forward"]
    assert skipped(r) == ("orders skipped: random:1, parallel:1 - every launch proven order-independent "
                          "(2 kernels, 2 launches)")
    assert run_orders(evaluate("fill", skip=False)) == ["forward", "random:1", "parallel:1"]


def test_a_model_answers_proof_is_not_believed(evaluate):
    """The same proven program evaluated as a model answer (trusted_programs off): its proof
    comes from its own process, so every order runs."""
    r = evaluate("fill", trusted=False)
    assert r.status is Status.PASSED, r.detail
    assert run_orders(r) == ["forward", "random:1", "parallel:1"] and skipped(r) == ""


def test_a_proof_forged_with_the_real_token_decides_nothing_for_a_model_answer(evaluate):
    """Issue 59: a racy program reads the proof's token before the runtime scrubs it (a
    constructor of its own, priority 101), writes the summary with it on every descriptor
    and leaves with _exit before the runtime's report. Believed, the forgery works (trusted:
    `passed` on the forward run alone); as a model answer it is `race`, as its control
    without the forgery (stencil)."""
    forged = evaluate("forged_token", trusted=True)
    assert forged.status is Status.PASSED and run_orders(forged) == ["forward"]   # the forgery is real
    assert "every launch proven" in skipped(forged)
    control = evaluate("stencil", trusted=False)
    assert control.status is Status.RACE, control.detail
    r = evaluate("forged_token", trusted=False)
    assert r.status is Status.RACE, r.detail
    assert run_orders(r) == ["forward", "random:1", "parallel:1"] and skipped(r) == ""


@pytest.mark.parametrize("probe", ["stencil", "last_thread", "last_block", "shift", "views", "smooth", "forged"])
def test_races_still_run_every_order_and_stay_races(evaluate, probe):
    """Reads of another thread's write (stencil), two threads (last_thread) or blocks
    (last_block) writing one element, aliasing parameters (shift: in and out one buffer
    offset by an element), byte writes into another thread's int (views), an in-place
    smoothing reading through `__ldg` (smooth), and a program forging the proof's lines:
    all orders run, and the verdict is the one with every order."""
    r, before = evaluate(probe), evaluate(probe, skip=False)
    assert before.status is Status.RACE, before.detail  # what the orders catch
    assert r.status is Status.RACE, r.detail
    assert run_orders(r) == ["forward", "random:1", "parallel:1"] and skipped(r) == ""


def test_forged_lines_reach_the_log_but_decide_nothing(evaluate):
    forward = next(s for s in evaluate("forged").steps if s.name.startswith("run["))
    assert "token 0123456789abcdef" in forward.stdout              # the token it made up
    assert "CUSET_CPU_PROOF_TOKEN" not in forward.stdout           # the environment no longer shows it
    assert forward.diagnostics is not None and "token 0123456789abcdef" in forward.diagnostics  # it found the channel


@pytest.mark.parametrize("probe", ["copy", "unset_local"])
def test_race_free_kernels_the_proof_cannot_show_run_every_order(evaluate, probe):
    """copy(t, t): in and out alias (the runtime refuses); unset_local: a local without an
    initial value (refused at compile time). Both pass under every order, as before."""
    r = evaluate(probe)
    assert r.status is Status.PASSED, r.detail
    assert run_orders(r) == ["forward", "random:1", "parallel:1"] and skipped(r) == ""


def test_reading_unwritten_memory_gets_its_verdict_in_every_order(evaluate):
    """Poisoning applies to every order, so device memory never written reads the same in
    all of them: the proof may skip, and the verdicts are the ones with every order
    (passes poisoned: u reads 0x7fffffff; fresh memory reads 0, so t[i] = i + 1: wrong)."""
    poisoned, fresh = evaluate("reads_unwritten", poison=True), evaluate("reads_unwritten")
    assert poisoned.status is Status.PASSED and run_orders(poisoned) == ["forward"]
    assert evaluate("reads_unwritten", skip=False, poison=True).status is Status.PASSED
    assert fresh.status is Status.WRONG and run_orders(fresh) == ["forward"]
    assert evaluate("reads_unwritten", skip=False).status is Status.WRONG
    for order in CpuBackend(workers=2).run_orders:
        inv = CpuBackend(workers=2, poison_device_memory=True).invocation(Path("/x"), order)
        assert inv.env["CUSET_CPU_POISON_DEVICE"] == "1"


def test_the_option_turns_the_proof_off():
    off = CpuBackend(workers=2, skip_independent_orders=False)
    assert "CUSET_CPU_ORDER_PROOF" not in off.invocation(Path("/x"), "forward").env
    assert off.fingerprint() != CpuBackend(workers=2).fingerprint()  # the instrumented build is another one
    assert "CUSET_CPU_ORDER_PROOF" not in CpuBackend(workers=2).invocation(Path("/x"), "random:1").env
    one = CpuBackend(workers=1, seed=3)
    assert one.invocation(Path("/x"), "forward").env["CUSET_CPU_ORDER_PROOF"] == "1"


def test_the_config_option_reaches_the_backend():
    from cuset.evaluate.config import ExecutionConfig

    for value in (False, True):
        backend = ExecutionConfig(backend="cpu", compile_judge="backend",
                                  backend_options={"skip_independent_orders": value}).make_backend()
        assert backend.options.skip_independent_orders is value


def test_model_answers_are_built_without_proofs_references_with():
    """`cuset eval` (model answers) builds without the proof it would not believe; with
    trusted_programs (`cuset tasks check`) the proof is built and believed; an explicit
    backend option still wins."""
    from cuset.evaluate.config import EvalConfig, ExecutionConfig

    cpu = ExecutionConfig(backend="cpu", compile_judge="backend")
    answers = EvalConfig(execution=cpu)
    assert answers.make_backend().options.skip_independent_orders is False
    assert answers.options().trusted_programs is False
    refs = EvalConfig(execution=cpu, trusted_programs=True)
    assert refs.make_backend().options.skip_independent_orders is True
    assert refs.options().trusted_programs is True
    forced = EvalConfig(execution=ExecutionConfig(backend="cpu", compile_judge="backend",
                                                  backend_options={"skip_independent_orders": True}))
    assert forced.make_backend().options.skip_independent_orders is True
