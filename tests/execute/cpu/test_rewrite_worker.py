"""Issue 37: the rewriter and the feature check run on untrusted sources in a forked
worker under the compile timeout, never in the evaluator's own thread without one."""

from __future__ import annotations

import tempfile
from pathlib import Path

from cuset.execute.cpu import CpuBackend, rewrite_worker
from cuset.execute.cpu.features import find_unsupported
from cuset.execute.cpu.rewriter import rewrite
from cuset.execute.result import Status

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "adversarial"
# 6,000 empty device functions: the rewriter is quadratic in them (about 82 s measured in-process)
SLOW = "".join(f"__device__ void f{i}() {{}}\n" for i in range(6000)) + "int main() { return 0; }\n"


def test_the_worker_gives_what_the_rewriter_gives():
    source = (FIXTURES / "reference.cu").read_text()
    wmma = "#include <mma.h>\n__global__ void k() { nvcuda::wmma::fragment<int> f; }\nint main() {}\n"
    got = rewrite_worker.analyse([source, wmma], 60)
    for (rewritten, unsupported), src in zip(got, (source, wmma)):
        expected = rewrite(src)
        assert rewritten == expected
        assert unsupported == find_unsupported(list(expected.tokens), list(expected.decls))
    assert got[0][1] == [] and got[1][1] != []


def test_a_pathological_source_stops_at_the_time_limit_and_the_worker_goes_on():
    try:
        rewrite_worker.analyse([SLOW], 2)
    except rewrite_worker.RewriteTimeout as e:
        assert str(e) == "the CPU rewriter did not finish in 2 s on this source"
    else:
        raise AssertionError("the rewriter finished a source it takes minutes on within 2 s")
    source = (FIXTURES / "reference.cu").read_text()
    assert rewrite_worker.analyse([source], 60)[0][0].source == rewrite(source).source


def test_the_cpu_backend_reports_a_slow_rewrite_as_a_compile_error_not_cached(tmp_path):
    with tempfile.TemporaryDirectory(dir=tmp_path) as d:
        out = CpuBackend().compile(SLOW, Path(d), 2)
    assert out.status is Status.COMPILE_ERROR and out.detail == "the CPU rewriter did not finish in 2 s on this source"
    assert out.step.timed_out   # load-dependent: the compile cache does not keep it


def test_the_worker_runs_under_a_memory_limit_and_the_next_source_is_unaffected():
    # A limit below what the rewriter needs: the worker ends with a MemoryError (its
    # address space is capped, RLIMIT_AS), the evaluator gets RewriteFailed naming it.
    # 100,000 array elements: some 400,000 tokens, tens of MiB of Python objects
    big = "__device__ int a[] = {" + ",".join(map(str, range(100_000))) + "};\nint main() { return 0; }\n"
    try:
        rewrite_worker.analyse([big], 60, memory_bytes=32 << 20)
    except rewrite_worker.RewriteFailed as e:
        assert "MemoryError" in str(e), e
    else:
        raise AssertionError("the rewriter ran within 32 MiB of address space")
    assert rewrite_worker.analyse([big], 60)[0][0].source.count(",") == 99_999
