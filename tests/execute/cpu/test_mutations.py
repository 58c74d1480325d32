"""Mutation set: the reference program passes under every thread order, and
each classic CUDA bug planted into it fails with the status a judge should
give. The judge here mirrors the evaluation pipeline: a failed run is read by
the backend's classify_failure; finished runs are compared with numpy's
answer, and outputs that differ between thread orders make a race."""

from __future__ import annotations

import numpy as np
import pytest

from cpu_helpers import FIXTURES, needs_gxx
from cuset.execute.result import Status

pytestmark = needs_gxx

N, BLOCK = 1000, 128
BASE = (FIXTURES / "reduce_pipeline.cu").read_text()


def inputs() -> dict[str, bytes]:
    x = (np.arange(N, dtype=np.float32) % 17 - 8) / 4
    return {"data/x.bin": x.tobytes()}


def expected() -> dict[str, np.ndarray]:
    x = np.frombuffer(inputs()["data/x.bin"], dtype=np.float32)
    y = 2 * x + 1
    sums = np.array([y[b:b + BLOCK].sum() for b in range(0, N, BLOCK)], dtype=np.float32)
    return {"data/y.bin": y, "data/sums.bin": sums}


def judge(program, orders=("forward", "random:3", "random:4")) -> tuple[Status, str]:
    if not program.compiled.ok:
        return program.compiled.status, program.compiled.detail
    runs = [program.run(order, inputs()) for order in orders]
    for r in runs:
        if r.run.timed_out:
            return Status.TIMEOUT, ""
        if r.run.returncode != 0:
            return r.classified or (Status.RUNTIME_ERROR, r.run.stderr[-300:])
    want = expected()
    outputs, correct = [], []
    for r in runs:
        got = {name: np.frombuffer(r.files.get(name, b""), dtype=np.float32) for name in want}
        outputs.append(got)
        correct.append(all(g.shape == w.shape and np.allclose(g, w, atol=1e-3) for (g, w) in
                           ((got[k], want[k]) for k in want)))
    if all(correct):
        return Status.PASSED, ""
    differ = any(not all(np.array_equal(o[k], outputs[0][k], equal_nan=True) for k in want) for o in outputs)
    return (Status.RACE if differ else Status.WRONG), ""


def mutate(old: str, new: str) -> str:
    assert BASE.count(old) == 1, f"mutation anchor not unique: {old!r}"
    return BASE.replace(old, new)


MUTANTS = {
    "missing_syncthreads": (
        mutate("    if (tid < stride) s[tid] += s[tid + stride];\n    __syncthreads();\n",
               "    if (tid < stride) s[tid] += s[tid + stride];\n"),
        {Status.WRONG, Status.RACE}),
    "off_by_one_short": (mutate("if (i < n) y[i]", "if (i < n - 1) y[i]"), {Status.WRONG}),
    "wrong_index": (mutate("int i = blockIdx.x * blockDim.x + threadIdx.x;", "int i = blockIdx.x + threadIdx.x;"),
                    {Status.WRONG}),
    "too_many_threads": (mutate("affine<<<blocks, BLOCK>>>", "affine<<<(n + 2047) / 2048, 2048>>>"),
                         {Status.RUNTIME_ERROR}),
    "missing_copy_back": (mutate("  cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost);\n", ""),
                          {Status.WRONG}),
    "shuffle_in_divergent_code": (
        mutate("  if (tid < 32) {\n    float v = warp_sum(s[tid]);\n    if (tid == 0) sums[blockIdx.x] = v;\n  }\n",
               "  if (tid < 16) {\n    float v = warp_sum(s[tid]);\n    if (tid == 0) sums[blockIdx.x] = v;\n  }\n"
               "  __syncthreads();\n"),
        {Status.RUNTIME_ERROR}),
    "shuffle_with_exited_lanes": (
        mutate("  if (tid < 32) {\n", "  if (tid >= 16) return;\n  if (tid < 32) {\n"),
        {Status.WRONG}),
    "warp_synchronous_volatile_tail": (
        mutate("    float v = warp_sum(s[tid]);\n",
               "    volatile float* vs = s;\n"
               "    vs[tid] += vs[tid + 16]; vs[tid] += vs[tid + 8]; vs[tid] += vs[tid + 4];\n"
               "    vs[tid] += vs[tid + 2]; vs[tid] += vs[tid + 1];\n"
               "    float v = vs[0];\n"),
        {Status.WARP_SYNC}),
    "host_reads_device_pointer": (
        mutate("  write_floats(\"data/sums.bin\", sums);\n",
               "  sums[0] = dsums[0];\n  write_floats(\"data/sums.bin\", sums);\n"),
        {Status.RUNTIME_ERROR}),
    "inline_ptx": (
        mutate("__device__ float warp_sum(float v) {\n",
               "__device__ float warp_sum(float v) {\n  unsigned lane;\n"
               "  asm volatile(\"mov.u32 %0, %%laneid;\" : \"=r\"(lane));\n"),
        {Status.UNSUPPORTED}),
}


@pytest.fixture(scope="module")
def verdict(compile_source):
    """Judge each program once per module."""
    cache: dict[str, tuple[Status, str]] = {}

    def get(name: str) -> tuple[Status, str]:
        if name not in cache:
            source = BASE if name == "reference" else MUTANTS[name][0]
            cache[name] = judge(compile_source(source, f"mutant_{name}"))
        return cache[name]

    return get


def test_reference_program_passes(verdict):
    assert verdict("reference") == (Status.PASSED, "")


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_fails_with_expected_status(name, verdict):
    status, detail = verdict(name)
    assert status in MUTANTS[name][1], (status, detail)


def test_details_name_the_problem(verdict):
    _, detail = verdict("shuffle_in_divergent_code")
    assert "deadlock" in detail and "__shfl_down_sync" in detail and "__syncthreads()" in detail
    _, detail = verdict("too_many_threads")
    assert "cudaErrorInvalidConfiguration" in detail and "2048" in detail
    _, detail = verdict("host_reads_device_pointer")
    assert "host code dereferenced device pointer" in detail
    _, detail = verdict("inline_ptx")
    assert detail.startswith("uses inline PTX assembly (asm): \"mov.u32 %0, %%laneid\" (line")
    _, detail = verdict("warp_synchronous_volatile_tail")
    assert "no __syncwarp()" in detail and "in kernel 'block_sums'" in detail


@pytest.mark.slow
def test_out_of_bounds_write_is_caught_by_the_asan_build(workroot):
    """`i <= n` writes one element past the buffer: silent without checks (a
    GPU rarely faults either), reported by the AddressSanitizer build."""
    from cuset.execute.cpu import CpuBackend, run_program

    source = mutate("if (i < n) y[i]", "if (i <= n) y[i]")
    backend = CpuBackend(asan=True)
    r = run_program(source, workroot / "asan_off_by_one", inputs(), timeout=120, backend=backend,
                    compile_timeout=300)
    assert r.classified is not None, r.run.stderr[-2000:]
    status, detail = r.classified
    assert status is Status.RUNTIME_ERROR
    assert "heap-buffer-overflow" in detail and "in kernel 'affine'" in detail
