"""A test-only backend that compiles plain C++ with g++, and tasks built for it.

The pipeline does not care what the backend compiles, so its behaviour (gen
data, sandboxed runs, output checks, compare.py, statuses) is tested on portable
C++ programs while the CUDA-on-CPU backend is tested on real CUDA elsewhere.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cuset.execute.interface import CompileOutcome, Invocation
from cuset.execute.process import clean_env, run_step
from cuset.execute.result import Status
from cuset.tasks import Task, TensorSpec

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")


class GxxBackend:
    """Compiles a C++ program; runs it natively. Orders are only labels here."""

    name = "fake"

    def __init__(self, run_orders=("default",), max_data_bytes=None, flags=("-O1",)):
        self.run_orders = tuple(run_orders)
        self.max_data_bytes = max_data_bytes
        self.flags = tuple(flags)
        self.compiles = 0

    def fingerprint(self) -> str:
        version = subprocess.run(["g++", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
        return f"fake|{version}|{' '.join(self.flags)}"

    def compile(self, source, workdir, timeout):
        self.compiles += 1
        workdir = Path(workdir)
        (workdir / "prog.cpp").write_text(source)
        step = run_step("compile", ["g++", *self.flags, "prog.cpp", "-o", "prog"], cwd=workdir,
                        timeout=timeout, env=clean_env())
        if step.returncode == 0:
            return CompileOutcome(True, workdir / "prog", step)
        errors = [line for line in step.stderr.splitlines() if "error" in line]
        return CompileOutcome(False, None, step, Status.COMPILE_ERROR, errors[0] if errors else step.stderr[:200])

    def invocation(self, executable, order):
        # The order reaches the program as an env var so tests can write order-dependent programs.
        return Invocation([str(executable)], {"FAKE_ORDER": order})

    def classify_failure(self, step):
        if "UNSUPPORTED_FEATURE" in step.stderr:
            return Status.UNSUPPORTED, "uses a feature the fake backend cannot run"
        return None


GEN_PY = """\
import os
import numpy as np
case = int(os.environ.get("CUSET_CASE", "0"))
rng = np.random.default_rng(1234 + case)
x = rng.standard_normal(N).astype(np.float32)
os.makedirs("data", exist_ok=True)
x.tofile("data/x.bin")
(2.0 * x + 1.0).astype(np.float32).tofile("data/y_ref.bin")
"""

COMPARE_PY = """\
import numpy as np
y = np.fromfile("data/y.bin", dtype=np.float32)
ref = np.fromfile("data/y_ref.bin", dtype=np.float32)
print("T" if y.shape == ref.shape and np.allclose(y, ref, atol=1e-5) else "F")
"""

# A correct solution, written as plain C++ with the same I/O contract as CUDABench.
AXPB_CPP = r"""
#include <cstdio>
#include <vector>
int main() {
    const int n = N_ELEMS;
    std::vector<float> x(n), y(n);
    FILE* f = fopen("data/x.bin", "rb"); if (!f) return 1;
    if (fread(x.data(), 4, n, f) != (size_t)n) return 1; fclose(f);
    for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i] + 1.0f;
    FILE* g = fopen("data/y.bin", "wb"); fwrite(y.data(), 4, n, g); fclose(g);
    return 0;
}
"""


def make_task(task_id=0, n=256, **changes) -> Task:
    fields = dict(
        id=task_id, task_name="Axpb", task_description="Compute y = 2x + 1.",
        inputs=(TensorSpec("x", "float32", f"({n},)"),), outputs=(TensorSpec("y", "float32", f"({n},)"),),
        gpu="unknown", bench_cu=AXPB_CPP.replace("N_ELEMS", str(n)), gen_py=f"N = {n}\n" + GEN_PY,
        compare_py=COMPARE_PY, level1_prompt="y = 2x + 1", level2_prompt="affine", level3_prompt="Axpb",
        family="axpb",
    )
    fields.update(changes)
    return Task(**fields)


def program(n=256, body="y[i] = 2.0f * x[i] + 1.0f;", extra="") -> str:
    return AXPB_CPP.replace("N_ELEMS", str(n)).replace("y[i] = 2.0f * x[i] + 1.0f;", body).replace(
        "int main() {", extra + "\nint main() {")
