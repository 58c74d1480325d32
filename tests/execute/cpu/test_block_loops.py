"""Block loops (cuset/execute/cpu/block_loop.py): kernels that need no fiber run
as loops over a block's threads, with uniform loops hoisted out. The same
executable runs either path (CUSET_CPU_BLOCK_LOOP=0: fibers only), so the tests
compare them bit for bit, check the path each kernel took, and that races stay
visible."""

from __future__ import annotations

import os
import subprocess

import pytest

from cpu_helpers import FIXTURES, needs_gxx, parse_kv
from cpu_helpers import plan_kernels as _plan_kernels
from cuset.execute.cpu.diagnostics import kernel_paths


def plan_kernels(src):
    """The block loops' plans alone (no barrier planner)."""
    return _plan_kernels(src, regions=False)


def _plans(src: str) -> dict[str, object]:
    return {p.name: p for p in plan_kernels(src)}


# ---------------------------------------------------------------- planning (no compiler)
def test_fixture_kernels_get_the_expected_paths():
    plans = _plans((FIXTURES / "block_loops.cu").read_text())
    for name in ("colsum", "matmul", "early_exit", "contract", "grid_stride", "ragged", "alias_race"):
        assert plans[name].loop and plans[name].hoisted == 1, plans[name]
    # total (block_race) and buf (hidden_race) are written in one region and read in another
    for name, param in (("block_race", "total"), ("hidden_race", "buf")):
        assert not plans[name].loop and plans[name].reason.startswith(f"writes {param} in one region"), plans[name]
    assert plans["elementwise"].loop and plans["elementwise"].hoisted == 0
    assert not plans["divergent"].loop and plans["divergent"].reason == "shared memory"
    assert not plans["shuffle"].loop  # the barrier planner (barrier_regions.py) takes it, warp after warp
    from cpu_helpers import plan_kernels as plan_with_regions

    [shuffle] = [p for p in plan_with_regions((FIXTURES / "block_loops.cu").read_text()) if p.name == "shuffle"]
    assert shuffle.describe() == "shuffle: block loop with barrier regions (1 warp operation(s))"
    assert not plans["shared_race"].loop


@pytest.mark.parametrize("body, reason", [
    ("int i = threadIdx.x; atomicAdd(p, i);", "atomicAdd"),
    ("__syncthreads(); p[0] = 1;", "__syncthreads"),  # barriers: barrier_regions.py
    ("volatile int* q = p; q[0] = 1;", "volatile memory"),
    # a spin (while loops stay on the fibers)
    ("int i = threadIdx.x; while (p[i] == 0) { } p[i] = 2;", "thread-dependent control flow"),
    # a loop a thread may leave early with break
    ("int s = 0; for (int i = 0; i < n; ++i) { if (p[i]) break; s += i; } p[threadIdx.x] = s;", "break out of"),
    # a loop under a condition that is not a pure guard
    ("if (p[threadIdx.x] > 0) { for (int i = 0; i < n; ++i) p[i] = 0; }", "thread-dependent control flow"),
    ("helper(p);", "calls helper"),  # declared, defined elsewhere
    ("printf(\"%d\", 1);", "printf"),
    # the threads of a block loop share the parameters
    ("p += threadIdx.x; p[0] = 1;", "writes its parameter p"),
    ("int i = threadIdx.x; bump(n); p[i] = n;", "writes its parameter n"),
    # a local read from memory through a macro, memory written by the loop after it:
    # recomputed in the last region, it would read what the loop wrote
    ("int v = LOAD; for (int i = 0; i < n; ++i) p[i] = 0; p[threadIdx.x] = v;", "memory written in one region"),
])
def test_kernels_that_need_a_fiber_keep_it(body, reason):
    src = ("#define LOAD p[threadIdx.x]\n__device__ void helper(int* p);\n__device__ void bump(int& v) { v += 1; }\n"
           "__global__ void k(int* p, int n) { " + body + " }\n")
    [plan] = plan_kernels(src)
    assert not plan.loop and reason in plan.reason, plan


@pytest.mark.parametrize("body, innermost", [
    ("float s = 0; for (int i = 0; i < n; ++i) s += q[i * n + c]; p[c] = s;", True),
    ("float s = 0; for (int i = 0; i < n; i += 2) { if (q[i] < 0) continue; s += SQ(q[i]); } p[c] = s;", True),
    ("float s = 0; for (int i = 0; i < n; ++i) { float v = q[i]; s += fmaxf(v, 0.0f); } p[c] = s;", True),
    # memory written inside the loop: another thread may read it, so the order matters
    ("for (int i = 0; i < n; ++i) p[i * n + c] = 1;", False),
    ("float s = 0; for (int i = 0; i < n; ++i) { float* w = p + c; *w = s; s += 1; }", False),
    ("for (int i = 0; i < n; ++i) counter = i;", False),          # a file-scope variable
    ("for (int i = 0; i < n; ++i) SET(i);", False),               # a macro that assigns
    ("float s = 0; for (int i = 0; i < n; ++i) s += helper(q, i); p[c] = s;", True),  # reads through q
    ("float s = 0; for (int i = 0; i < n; ++i) s += bump(p, i);", False),  # writes through p
    ("float s = 0; for (int i = 0; i < n; ++i) s += tally(i);", False),  # writes a global
    ("float a, b; for (int i = 0; i < n; ++i) sincosf(q[i], &a, &b); p[c] = a + b;", False),
    ("float s = 0; for (int i = 0; i < n; ++i) { s += q[i]; if (s > 1) return; } p[c] = s;", False),
])
def test_loops_writing_no_memory_run_with_the_threads_innermost(body, innermost):
    src = ("#define SQ(v) ((v) * (v))\n#define SET(i) p[i] = 1\n__device__ int counter;\n"
           "__device__ float helper(const float* q, int i) { float v = q[i]; i += 1; return v * i; }\n"
           "__device__ float bump(float* q, int i) { q[i] += 1; return q[i]; }\n"
           "__device__ float tally(int i) { counter += i; return 1.0f; }\n"
           "__global__ void k(float* p, const float* q, int n) { int c = threadIdx.x; " + body + " }\n")
    [plan] = plan_kernels(src)
    assert plan.loop and plan.hoisted == 1, plan
    assert plan.thread_innermost == int(innermost), plan
    assert ("GCC ivdep" in plan.text) == innermost
    assert ("threads innermost" in plan.describe()) == innermost
    assert "cuset_from" in plan.text  # the chunked region: the fallback, or the only version


@pytest.mark.parametrize("body, kind", [
    ("for (int i = threadIdx.x; i < n; i += blockDim.x) p[i] = 1;", "private"),  # grid-stride
    ("int m = q[threadIdx.x]; for (int i = 0; i < m; ++i) p[i] = 0;", "private"),  # bound read from memory
    ("float s = 0; for (int i = 0; i < n; ++i) s += q[i]; p[threadIdx.x] = s;", "uniform"),
    ("float s = 0; for (int i = 0; i < LAST; ++i) s += q[i]; p[threadIdx.x] = s;", "uniform"),  # a value macro
    # a macro of threadIdx is no value every thread computes alike
    ("float s = 0; for (int i = TID; i < n; ++i) s += q[i]; p[threadIdx.x] = s;", "private"),
])
def test_top_level_loops_run_in_chunks(body, kind):
    head = "#define TID (threadIdx.x + 0)\n#define LAST (2 * 16)\n"
    [plan] = plan_kernels(head + "__global__ void k(int* p, const int* q, int n) { " + body + " }\n")
    assert plan.loop and plan.hoisted == 1
    assert ("cuset_pl0" in plan.text) == (kind == "private")  # a private loop keeps its state per thread


def test_a_called_function_with_a_barrier_or_threadIdx_blocks_the_loop():
    src = ("__device__ void bar() { __syncthreads(); }\n__device__ int me() { return threadIdx.x; }\n"
           "#define SYNC bar()\n"
           "__global__ void a(int* p) { bar(); }\n__global__ void b(int* p) { p[me()] = 1; }\n"
           "__global__ void c(int* p) { SYNC; }\n")
    plans = _plans(src)
    assert "__syncthreads" in plans["a"].reason and "threadIdx" in plans["b"].reason
    assert "__syncthreads" in plans["c"].reason


def test_variant_keeps_every_line_in_place():
    from cuset.execute.cpu.rewriter import rewrite

    src = (FIXTURES / "block_loops.cu").read_text()
    r = rewrite(src, block_loops=True)
    assert r.fallback_source and r.source != r.fallback_source
    assert r.source.count("\n") == src.count("\n") == r.fallback_source.count("\n")
    assert rewrite(src).source == r.fallback_source  # the default (other callers, e.g. KernelBench): none
    assert "take_block_loop" not in r.fallback_source


# ---------------------------------------------------------------- runs
@pytest.fixture(scope="module")
def program(tmp_path_factory):
    from cuset.execute.cpu import CpuBackend, compile_program

    backend = CpuBackend(seed=3, workers=2)
    workdir = tmp_path_factory.mktemp("block-loops")
    compiled = compile_program((FIXTURES / "block_loops.cu").read_text(), workdir, timeout=300, backend=backend)
    assert compiled.ok, compiled.detail
    assert "cuset-cpu: kernel paths: colsum: block loop" in compiled.step.stdout

    def run(mode: str, order: str, loops: bool | str) -> tuple[subprocess.CompletedProcess, bytes, dict[str, str]]:
        """loops: True (the default), False (fibers only) or "chunks" (every hoisted loop chunked)."""
        run_dir = workdir / f"{mode}-{order.replace(':', '-')}-{loops}"
        run_dir.mkdir(exist_ok=True)
        env = dict(backend.invocation(compiled.executable, order).env, CUSET_CPU_REPORT_PATHS="1",
                   PATH=os.environ.get("PATH", ""))
        if loops is False:
            env["CUSET_CPU_BLOCK_LOOP"] = "0"
        elif loops == "chunks":
            env["CUSET_CPU_BLOCK_LOOP"] = "chunks"
        p = subprocess.run([str(compiled.executable), mode], cwd=run_dir, env=env, capture_output=True, text=True,
                           timeout=120)
        out = (run_dir / "out.bin").read_bytes() if (run_dir / "out.bin").exists() else b""
        return p, out, kernel_paths(p.stderr)

    return run


LOOP_KERNELS = {"colsum", "matmul", "early_exit", "elementwise"}


def test_fixture_paths_name_the_loops_run_with_the_threads_innermost(program):
    plans = _plans((FIXTURES / "block_loops.cu").read_text())
    innermost = {name for name, p in plans.items() if p.loop and p.thread_innermost}
    assert innermost == {"colsum", "matmul", "contract", "lanes", "alias_race"}  # contract calls a reader
    assert plans["early_exit"].hoisted == 1 and not plans["early_exit"].thread_innermost  # writes, returns
    assert plans["loop_race"].hoisted == 1 and not plans["loop_race"].thread_innermost


@pytest.mark.parametrize("order", ["forward", "random:3", "parallel:3"])
def test_threads_innermost_chunks_and_fibers_agree_bit_for_bit(program, order):
    # lanes: full blocks take the vectorised region, the last column and row of
    # blocks the chunked one (threads out of range); 12 threads wide is a group of 8
    # lanes and 4 more; 100 iterations are 12 groups of 8 and 4.
    runs = {loops: program("lanes", order, loops) for loops in (True, "chunks", False)}
    for p, _, _ in runs.values():
        assert p.returncode == 0, p.stderr
    outs = {loops: out for loops, (_, out, _) in runs.items()}
    assert len(outs[True]) == 4 * 2 * 30 * 200 and outs[True] == outs["chunks"] == outs[False]
    import struct
    values = struct.unpack(f"{2 * 30 * 200}f", outs[True])
    assert all(v != 0.0 for v in values)  # every thread in range wrote its result
    assert runs[True][2] == runs["chunks"][2] == {"lanes": "block loop"} and runs[False][2] == {"lanes": "fibers"}


@pytest.mark.parametrize("body, reason, apart", [
    # written before the loop, read inside it: the same parameter
    ("p[c] = 1; float s = 0; for (int i = 0; i < n; ++i) s += p[i]; q[c] = s;", "writes p in one region", ()),
    # through a local pointer computed from it
    ("float* w = p + c; *w = 1; float s = 0; for (int i = 0; i < n; ++i) s += p[i]; q[c] = s;",
     "writes p in one region", ()),
    # a pointer loaded from memory may point anywhere
    ("float* w = (float*)ptrs[c]; float s = 0; for (int i = 0; i < n; ++i) s += q[i]; w[0] = s;",
     "memory written in one region", ()),
    ("float s = 0; for (int i = 0; i < n; ++i) s += q[i]; total = s;", "memory written in one region", ()),
    ("float s = 0; for (int i = 0; i < n; ++i) s += q[i]; OUT(c) = s;", "memory written in one region", ()),
    ("float s = 0; for (int i = 0; i < n; ++i) s += q[i]; store(p, c, s);", "", (("p", "q"),)),
    # different parameters: checked at run time; a thread's own array is no memory
    ("float s = 0; for (int i = 0; i < n; ++i) s += q[i]; p[c] = s;", "", (("p", "q"),)),
    ("float a[4]; a[c % 4] = 1; float s = 0; for (int i = 0; i < n; ++i) s += q[i] + a[i % 4]; p[c] = s;", "",
     (("p", "q"),)),
    ("p[c] = 0; float s = 0; for (int i = 0; i < n; ++i) s += 1; s += n;", "", ()),  # one region touches memory
    ("float s = 0; for (int i = 0; i < n; ++i) s += coeff[i % 4]; p[c] = s;", "", ()),  # __constant__: read-only
])
def test_regions_never_separate_a_write_from_an_access_of_the_same_memory(body, reason, apart):
    src = ("#define OUT(i) p[i]\n__device__ float total;\n__constant__ float coeff[4];\n"
           "__device__ void store(float* d, int i, float v) { d[i] = v; }\n"
           "__global__ void k(float* p, const float* q, long long* ptrs, int n) { int c = threadIdx.x; " + body + " }\n")
    [plan] = plan_kernels(src)
    if reason:
        assert not plan.loop and plan.reason.startswith(reason), plan
        return
    assert plan.loop and plan.hoisted == 1, plan
    checks = [f"(const void*)({a}), (const void*)({b})" for a, b in apart]
    assert ("block_loop_apart" in plan.text) == bool(apart)
    for check in checks:
        assert check in plan.text


def test_a_race_across_regions_is_still_seen(program):
    # hidden_race: on the fibers (one parameter); alias_race: a block loop whose
    # regions write and read two parameters, declined where they are one allocation.
    for mode in ("hidden_race", "alias_same"):
        forward, out_forward, paths = program(mode, "forward", True)
        _, out_random, _ = program(mode, "random:3", True)
        assert forward.returncode == 0 and len(out_forward) == 4 * 64
        assert set(paths.values()) == {"fibers"}, (mode, paths)
        assert out_forward != out_random, mode  # the pipeline reports this as `race`
        assert (out_forward, out_random) == (program(mode, "forward", False)[1], program(mode, "random:3", False)[1])
    forward, out_forward, paths = program("alias_apart", "forward", True)
    assert paths == {"alias_race": "block loop"}
    assert out_forward == program("alias_apart", "random:3", True)[1] == program("alias_apart", "forward", False)[1]


def test_a_race_inside_a_hoisted_loop_still_differs_from_forward(program):
    # loop_race writes memory its neighbour reads inside the loop: chunked, so under
    # random the chunks run in another order, as on the fibers.
    for loops in (True, False):
        forward = program("loop_race", "forward", loops)[1]
        random = program("loop_race", "random:3", loops)[1]
        assert len(forward) == 4 * 96 and forward != random, loops


@pytest.mark.parametrize("order", ["forward", "random:3"])
def test_private_loops_agree_bit_for_bit_with_the_fibers(program, order):
    on, out_on, paths_on = program("private", order, True)
    off, out_off, _ = program("private", order, False)
    assert on.returncode == off.returncode == 0, (on.stderr, off.stderr)
    assert len(out_on) == 4 * (60000 + 500) and out_on == out_off
    assert paths_on == {"grid_stride": "block loop", "ragged": "block loop"}
    import struct
    ragged = struct.unpack("500f", out_on[-2000:])
    assert any(v < 0 for v in ragged) and any(v > 0 for v in ragged)  # early returns and full runs both happen


@pytest.mark.parametrize("order", ["forward", "random:3", "parallel:3"])
def test_block_loops_and_fibers_give_bit_identical_outputs(program, order):
    on, out_on, paths_on = program("loops", order, True)
    off, out_off, paths_off = program("loops", order, False)
    assert on.returncode == off.returncode == 0, (on.stderr, off.stderr)
    assert len(out_on) == 4 * (300 * 200 * 2 + 100 * 70 + 2 * 200)
    assert out_on == out_off and on.stdout == off.stdout
    assert paths_on == dict.fromkeys(LOOP_KERNELS, "block loop")
    assert paths_off == dict.fromkeys(LOOP_KERNELS, "fibers")


def test_orders_agree_where_gxx_contracts_the_versions_differently(program):
    # Every order runs the same version of a kernel, so FMA contraction (which may
    # differ between the block loop and the fiber version) never reads as a race.
    outs = {order: program("contract", order, True)[1] for order in ("forward", "random:3", "parallel:3")}
    assert len(outs["forward"]) == 4 * 200 and len(set(outs.values())) == 1


def test_early_exits_and_skips_really_happen(program):
    # Not a vacuous comparison: some threads of early_exit returned inside the
    # hoisted loop (no final -acc written) and others ran to the end.
    import struct

    _, out, _ = program("loops", "forward", True)
    floats = struct.unpack(f"{len(out) // 4}f", out)
    last = floats[300 * 200 + 100 * 70 + 200:][:200]  # after colsum, matmul and early_exit's `out`
    returned = sum(1 for v in last if v == 0.0)
    assert 0 < returned < 200


def test_a_warp_reduction_with_a_whole_warp_returning_runs_as_regions_bit_for_bit(program):
    for order in ("forward", "random:3"):
        on, out_on, paths_on = program("shuffle", order, True)
        off, out_off, paths_off = program("shuffle", order, False)
        assert on.returncode == 0 and (on.stdout, out_on) == (off.stdout, out_off)
        assert (paths_on, paths_off) == ({"shuffle": "block loop with barrier regions"}, {"shuffle": "fibers"})


@pytest.mark.parametrize("mode", ["divergent", "shared_race"])
def test_kernels_on_fibers_are_unchanged(program, mode):
    for order in ("forward", "random:3"):
        on, out_on, paths_on = program(mode, order, True)
        off, out_off, _ = program(mode, order, False)
        assert (on.returncode, on.stdout, out_on) == (off.returncode, off.stdout, out_off), mode
        assert set(paths_on.values()) <= {"fibers"}, paths_on


def test_shared_memory_race_still_differs_from_forward(program):
    _, forward, _ = program("shared_race", "forward", True)
    _, random, _ = program("shared_race", "random:3", True)
    assert forward != random  # the pipeline reports this as `race`


def test_divergent_barriers_are_still_an_error(program):
    on, _, _ = program("divergent", "forward", True)
    assert on.returncode == 90 and "CUSET-CPU: runtime_error:" in on.stderr and "__syncthreads" in on.stderr, \
        on.stderr


def test_race_between_blocks_only_parallel_shows_is_still_seen(program):
    forward, _, paths = program("block_race", "forward", True)
    assert paths == {"block_race": "fibers"}  # total read before the loop, written after it
    assert parse_kv(forward.stdout)["total"] == "64"
    random, _, _ = program("block_race", "random:3", True)
    assert parse_kv(random.stdout)["total"] == "64"   # blocks one at a time: no lost update
    totals = set()
    for seed in range(1, 6):
        p, _, _ = program("block_race", f"parallel:{seed}", True)
        totals.add(parse_kv(p.stdout)["total"])
    assert totals - {"64"}  # lost updates: differs from forward, reported as `race`


pytestmark = needs_gxx


def test_pragma_unroll_is_dropped_and_other_directives_keep_the_fibers():
    loop = "for (int i = 0; i < 64; ++i) s += a[i * n + c];"
    head = "__global__ void k(const float* a, float* o, int n) { int c = blockIdx.x * blockDim.x + threadIdx.x; float s = 0;"
    [pragma] = plan_kernels(head + "\n#pragma unroll 4\n" + loop + " o[c] = s; }\n")
    assert pragma.loop and pragma.hoisted == 1 and "#pragma" not in pragma.text and "\n" not in pragma.text
    [ifdef] = plan_kernels(head + "\n#ifdef X\n" + loop + "\n#endif\n o[c] = s; }\n")
    assert not ifdef.loop and ifdef.reason == "preprocessor directive in the body"


def test_a_long_loop_body_is_not_unrolled():
    # Unrolled 8 times a long body would cost compile time out of proportion; it
    # still runs with the threads innermost, iteration by iteration.
    head = "__global__ void k(float* p, const float* q, int n) { int c = threadIdx.x; float s = 0; "
    short = head + "for (int i = 0; i < n; ++i) { s += q[i]; } p[c] = s; }\n"
    long = head + "for (int i = 0; i < n; ++i) { " + " ".join(f"s += q[i] * {k}.0f;" for k in range(300)) + \
        " } p[c] = s; }\n"
    [a], [b] = plan_kernels(short), plan_kernels(long)
    assert a.thread_innermost == b.thread_innermost == 1
    assert '_Pragma("GCC unroll 8")' in a.text and "GCC unroll" not in b.text
