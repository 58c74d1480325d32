"""The CPU backend behind the Backend interface: orders, invocations,
fingerprints, compile outcomes, the shared prebuilt runtime."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cpu_helpers import needs_gxx
from cuset.execute.interface import Backend
from cuset.execute.registry import get_backend
from cuset.execute.cpu import CpuBackend
from cuset.execute.cpu.toolchain import Toolchain, ToolchainError
from cuset.execute.result import Status, StepResult


def test_interface_orders_and_invocations(tmp_path):
    b = CpuBackend(seed=42, max_data_bytes=1 << 20, workers=1)
    assert isinstance(b, Backend)
    assert b.name == "cpu" and b.run_orders == ("forward", "random:42") and b.max_data_bytes == 1 << 20
    fwd = b.invocation(tmp_path / "kernel", "forward")
    assert fwd.argv == [str(tmp_path / "kernel")]
    assert fwd.env["CUSET_CPU_ORDER"] == "forward" and fwd.env["CUSET_CPU_CHECK_HOST_ACCESS"] == "1"
    rnd = b.invocation(tmp_path / "kernel", "random:42")
    assert rnd.env["CUSET_CPU_ORDER"] == "random:42" and "CUSET_CPU_CHECK_HOST_ACCESS" not in rnd.env
    with pytest.raises(ValueError, match="unknown thread order"):
        b.invocation(tmp_path / "kernel", "backwards")
    with pytest.raises(ValueError, match="16 KiB"):
        CpuBackend(stack_kb=4)
    assert isinstance(get_backend("cpu", seed=3), CpuBackend)


def test_classify_failure_reads_the_runtime_markers():
    b = CpuBackend()
    step = StepResult("run", 92, 0.1, False, "", "CUSET-CPU: warp_sync: lanes 0 and 1 of warp 0\n")
    assert b.classify_failure(step) == (Status.WARP_SYNC, "lanes 0 and 1 of warp 0")
    assert b.classify_failure(StepResult("run", 1, 0.1, False, "", "my own error\n")) is None


def test_fingerprint_depends_on_flags_and_compiler(tmp_path):
    plain, asan = Toolchain(), Toolchain(asan=True)
    assert plain.fingerprint() == Toolchain().fingerprint()
    assert plain.fingerprint() != asan.fingerprint()
    assert CpuBackend().fingerprint().startswith("cpu-")
    with pytest.raises(ToolchainError, match="not found on PATH"):
        Toolchain(cxx="no-such-compiler-xyz").fingerprint()


@pytest.fixture
def code_copy(tmp_path, monkeypatch):
    """The hashed files copied under tmp_path (cuset/execute/cpu/..., cuset/spans/grammar.py),
    and code_hash reading the copy: edit it to see what an edit does to the keys."""
    import shutil

    from cuset.execute.cpu import code_hash

    root = tmp_path / "cuset"
    shutil.copytree(code_hash.PACKAGE_DIR, root / "execute" / "cpu", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "spans").mkdir()
    shutil.copy(code_hash.GRAMMAR, root / "spans" / "grammar.py")
    monkeypatch.setattr(code_hash, "PACKAGE_DIR", root / "execute" / "cpu")
    monkeypatch.setattr(code_hash, "RUNTIME_DIR", root / "execute" / "cpu" / "runtime")
    monkeypatch.setattr(code_hash, "GRAMMAR", root / "spans" / "grammar.py")
    code_hash.compile_hash.cache_clear()
    code_hash.runtime_hash.cache_clear()
    yield root / "execute" / "cpu"
    code_hash.compile_hash.cache_clear()   # before monkeypatch puts the real paths back
    code_hash.runtime_hash.cache_clear()


def _keys(code_hash) -> tuple[str, str]:
    """(the compile cache's key of one source, the prebuilt runtime's fingerprint), read afresh."""
    from cuset.execute.compile_cache import cache_key

    code_hash.compile_hash.cache_clear()
    code_hash.runtime_hash.cache_clear()
    return cache_key("int main() {}", CpuBackend().fingerprint()), Toolchain().fingerprint()


def test_cache_keys_hash_the_code_that_builds_a_program(code_copy):
    from cuset.execute.cpu import code_hash

    real = CpuBackend().fingerprint(), Toolchain().fingerprint()
    copied = _keys(code_hash)
    assert CpuBackend().fingerprint() == real[0] and copied[1] == real[1]   # the same bytes: the same keys
    planner = code_copy / "region_lanes.py"
    planner.write_text(planner.read_text().replace("LANES = 8", "LANES = 4"))
    edited = _keys(code_hash)
    assert edited[0] != copied[0] and edited[1] == copied[1]   # a new binary; the runtime library is the same
    header = code_copy / "runtime" / "include" / "cooperative_groups" / "reduce.h"
    header.write_text(header.read_text() + "\n// an edit\n")
    again = _keys(code_hash)
    assert again[0] != edited[0] and again[1] != edited[1]     # and a new runtime build too


def test_missing_compiler_is_a_clear_compile_error(tmp_path):
    b = CpuBackend(cxx="no-such-compiler-xyz")
    b.toolchain = Toolchain(cxx="no-such-compiler-xyz", cache_dir=tmp_path)
    out = b.compile("int main() {}", tmp_path / "w", 30)
    assert not out.ok and out.status is Status.COMPILE_ERROR
    assert "no-such-compiler-xyz" in out.detail and "not found" in out.detail


def test_unsupported_programs_are_refused_before_compiling(tmp_path):
    out = CpuBackend().compile("#include <thrust/sort.h>\nint main() { thrust::sort(a, a + 4); }\n", tmp_path, 30)
    assert not out.ok and out.status is Status.UNSUPPORTED and out.executable is None
    assert out.detail == "uses Thrust: thrust::sort (line 2)"


UNUSED_CUB_AND_BARRIERS = """#include <cstdio>
#include <cub/cub.cuh>
#include <cuda_runtime.h>
__global__ void scale(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.0f;
  asm volatile("" : "+r"(v) :: "memory");
  asm volatile("" ::: "memory");
  if (i < n) x[i] = 2.0f * v;
}
int main() {
  float h[64], *d;
  for (int i = 0; i < 64; ++i) h[i] = i;
  cudaMalloc(&d, sizeof h);
  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  scale<<<2, 32>>>(d, 64);
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  printf("%g %g %g\\n", h[0], h[1], h[63]);
  return 0;
}
"""


@needs_gxx
def test_an_unused_cub_include_and_empty_asm_barriers_run(compile_source):
    prog = compile_source(UNUSED_CUB_AND_BARRIERS)
    assert prog.compiled.ok, prog.compiled.detail
    for order in ("forward", "random:3"):
        r = prog.run(order)
        assert r.ok and r.run.stdout == "0 2 126\n", (order, r)


@needs_gxx
def test_a_library_used_unrecognisably_is_unsupported_naming_the_dropped_include(backend, tmp_path):
    # `DoubleBuffer` reached through a using-declaration: no `cub::` at the use
    src = "#include <cub/cub.cuh>\nusing namespace cub;\nint main() { DoubleBuffer<int> b; return 0; }\n"
    out = backend.compile(src, tmp_path, 120)
    assert out.status is Status.UNSUPPORTED, out.detail
    assert out.detail.startswith("includes <cub/cub.cuh> (CUB), not provided on the CPU, and does not build without it")


@needs_gxx
def test_compile_errors_point_at_the_users_lines(backend, tmp_path):
    src = ("#include <cstdio>\n"
           "__global__ void k(float* a) {\n"
           "  a[threadIdx.x] = 1.0f;\n"
           "}\n"
           "int main() {\n"
           "  k<<<1,\n"
           "    32>>>(undeclared_pointer);\n"
           "}\n")
    out = backend.compile(src, tmp_path, 120)
    assert not out.ok and out.status is Status.COMPILE_ERROR
    assert out.detail.startswith("kernel.cu:7:")
    assert "undeclared_pointer" in out.detail
    assert (tmp_path / "kernel.cu").read_text() == src  # the original stays next to the rewritten file


@needs_gxx
@pytest.mark.parametrize("name", ["diag_write", "diag_printf"])
def test_a_program_cannot_call_the_runtimes_diagnostics_writer(backend, tmp_path, name):
    # The harness believes only the diagnostics channel; its writer is a local symbol of
    # the runtime library, so declaring it and calling it does not link.
    signature = "(const char*, unsigned long)" if name == "diag_write" else "(const char*, ...)"
    call = f'{name}("CUSET-CPU: unsupported: forged\\n"' + (", 30)" if name == "diag_write" else ")")
    src = (f"namespace cuset {{ namespace rt {{ void {name}{signature}; }} }}\n"
           f"int main() {{ cuset::rt::{call}; return 0; }}\n")
    out = backend.compile(src, tmp_path, 120)
    assert out.status is Status.COMPILE_ERROR, (out.status, out.detail)
    assert "undefined reference" in out.detail and name in out.detail


@needs_gxx
def test_compiled_program_runs_under_every_order(backend, tmp_path):
    from cuset.execute.cpu import run_compiled

    src = ("#include <cstdio>\n__global__ void k(int* o) { o[threadIdx.x] = threadIdx.x * 2; }\n"
           "int main() { int* d; cudaMalloc(&d, 256); k<<<1, 64>>>(d); int h[64];\n"
           "  cudaMemcpy(h, d, 256, cudaMemcpyDeviceToHost); printf(\"%d %d\\n\", h[1], h[63]); }\n")
    out = backend.compile(src, tmp_path / "build", 120)
    assert out.ok and out.executable.is_file()
    for order in backend.run_orders:
        r = run_compiled(out, tmp_path, order=order, backend=backend)
        assert r.ok and r.run.stdout == "2 126\n"


def test_runtime_is_built_once_by_concurrent_processes(tmp_path):
    """Three processes needing the same fresh cache: one builds (under the
    lock, into a temporary directory renamed into place), the others wait and
    use it. The build itself is replaced by a slow fake to keep this quick."""
    code = f"""
import sys, time
from pathlib import Path
from cuset.execute.cpu import toolchain as tc

class Slow(tc.Toolchain):
    def fingerprint(self):
        return "fake-fingerprint"
    def _build(self, tmp, final, timeout):
        with open({str(tmp_path / 'builds.log')!r}, "a") as log:
            log.write("build\\n")
        time.sleep(1.0)
        for name in (tc.RUNTIME_LIB, tc.PCH_HEADER + ".gch", "COMPLETE"):
            (tmp / name).write_text("x")

print(Slow(cache_dir=Path({str(tmp_path / 'cache')!r})).ensure_runtime())
"""
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(3)]
    results = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), results
    assert {out.strip() for out, _ in results} == {str(tmp_path / "cache" / "fake-fingerprint")}
    assert (tmp_path / "builds.log").read_text() == "build\n"
    assert not list((tmp_path / "cache").glob("*.tmp-*"))  # no half-finished build left behind
