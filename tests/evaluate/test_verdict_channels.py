"""Issue 59: a runtime marker written from inside the program's process never turns a
worse verdict into a better one. `unsupported` is the one failure that blames the backend
rather than the program, so the parent's own output check decides first: a run whose
declared outputs it can check and compare.py rejects is `wrong`, whatever marker the
program wrote (docs/sandbox.md, "Verdict channels").

The attacks write the runtime's marker line on every open descriptor (the diagnostics
channel among them: the runtime moves it to 100 or above, a loop finds it) and exit with
the runtime's code for it.
"""

import json
from pathlib import Path

import pytest

from cuset.evaluate.metrics import task_metrics
from cuset.evaluate.options import EvalOptions, Timeouts
from cuset.evaluate.pipeline import evaluate_program
from cuset.evaluate.records import SampleResult
from cuset.evaluate.runner import compiled_and_ran
from cuset.evaluate.workspace import Workspace
from cuset.execute.compile_cache import CompileCache
from cuset.execute.cpu import CpuBackend
from cuset.execute.result import Status
from cuset.execute.sandbox import SandboxPolicy
from sandbox_tools import AUTO_MODE, needs_a_sandbox

pytestmark = needs_a_sandbox

TASK_JSON = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "adversarial" / "task.json").read_text())

# y = 2x + OFFSET (the task wants 2x + 1), then MARKER (or nothing) on every descriptor.
PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>
#include <cuda_runtime.h>
__global__ void axpb(const float* x, float* y, int n, float b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i] + b;
}
int main() {
  const int n = 1024;
  static float hx[n], hy[n];
  FILE* f = fopen("data/x.bin", "rb");
  if (!f || fread(hx, sizeof(float), n, f) != n) return 1;
  fclose(f);
  float *dx, *dy;
  cudaMalloc(&dx, n * sizeof(float));
  cudaMalloc(&dy, n * sizeof(float));
  cudaMemcpy(dx, hx, n * sizeof(float), cudaMemcpyHostToDevice);
  axpb<<<4, 256>>>(dx, dy, n, OFFSET);
  cudaMemcpy(hy, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  if (WRITE) { FILE* g = fopen("data/y.bin", "wb"); fwrite(hy, sizeof(float), n, g); fclose(g); }
  const char* line = MARKER;
  if (!*line) return 0;
  for (int d = 1; d < 1024; ++d)
    if (fcntl(d, F_GETFD) != -1) { ssize_t ignored = write(d, line, strlen(line)); (void)ignored; }
  _exit(EXIT);
}
"""
UNSUPPORTED = '"CUSET-CPU: unsupported: grid-wide synchronisation (this_grid().sync())\\n"'


def program(offset: str, marker: str = '""', exit_code: int = 0, write: bool = True) -> str:
    return (PROGRAM.replace("OFFSET", offset).replace("MARKER", marker).replace("EXIT", str(exit_code))
            .replace("WRITE", "1" if write else "0"))


@pytest.fixture(scope="module")
def evaluate(tmp_path_factory):
    from cuset.tasks import Task

    task = Task.from_json(TASK_JSON)
    root = tmp_path_factory.mktemp("channels")
    backend = CpuBackend(workers=1)
    opts = EvalOptions(timeouts=Timeouts(run=60.0), sandbox=SandboxPolicy(mode=AUTO_MODE))
    with Workspace(root / "ws") as ws, CompileCache(backend, root / "cache") as cache:
        yield lambda code: evaluate_program(task, code, backend=backend, cache=cache, workspace=ws, options=opts)


def test_a_wrong_program_writing_an_unsupported_marker_stays_wrong(evaluate):
    control = evaluate(program("0.0f"))                              # 2x: wrong
    assert control.status is Status.WRONG, control.detail
    forged = evaluate(program("0.0f", UNSUPPORTED, 91))
    assert forged.status is Status.WRONG, forged.detail
    assert "compare.py rejected" in forged.detail and "unsupported" in forged.detail  # both said


def test_a_marker_never_takes_a_failure_out_of_the_counts(evaluate):
    """A right answer whose run then reports `unsupported` failed (the run failed); one that
    writes nothing and reports it is `unsupported`: the program's word on which failure,
    since the parent has no output to check. Both count as failures in function@k."""
    right = evaluate(program("1.0f", UNSUPPORTED, 91))
    nothing = evaluate(program("0.0f", UNSUPPORTED, 91, write=False))
    assert evaluate(program("1.0f")).status is Status.PASSED          # the control passes
    assert right.status is Status.UNSUPPORTED and nothing.status is Status.UNSUPPORTED
    rows = []
    for i, r in enumerate((right, nothing)):
        compiled, ran_ok = compiled_and_ran(r)
        rows.append(SampleResult.from_exec(r, task_id=900, task_name="t", family="", sample=i, compiled=compiled,
                                           ran_ok=ran_ok, n_tokens=None, code_sha256=None))
    metrics = task_metrics(rows)
    assert metrics["n"] == 2 and metrics["n_passed"] == 0 and metrics["function@1"] == 0.0
