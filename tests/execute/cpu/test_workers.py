"""Blocks on several worker OS threads (`parallel:<seed>`): real atomics
across workers, races between blocks exposed, cross-block spin-waits that
end (as `unsupported` or by running), `forward` reproducible bit for bit."""

from __future__ import annotations

import pytest

from cpu_helpers import FIXTURES, needs_gxx, parse_kv
from cuset.execute.cpu import CpuBackend, compile_program, run_compiled
from cuset.execute.result import Status

pytestmark = needs_gxx


def test_workers_option_orders_and_environment(tmp_path, monkeypatch):
    one = CpuBackend(seed=5, workers=1)
    assert one.run_orders == ("forward", "random:5") and one.options.workers == 1
    two = CpuBackend(seed=5, workers=2)
    assert two.run_orders == ("forward", "random:5", "parallel:5")
    inv = two.invocation(tmp_path / "kernel", "parallel:5")
    assert inv.env["CUSET_CPU_ORDER"] == "parallel:5" and inv.env["CUSET_CPU_WORKERS"] == "2"
    assert "CUSET_CPU_CHECK_HOST_ACCESS" not in inv.env
    # The sanitizer builds keep one OS thread.
    assert CpuBackend(workers=4, race_check=True).run_orders == ("forward", "random:1")
    with pytest.raises(ValueError, match="workers=0"):
        CpuBackend(workers=0)
    monkeypatch.setenv("CUSET_CPU_WORKERS", "3")
    assert CpuBackend().options.workers == 3
    monkeypatch.setenv("CUSET_CPU_WORKERS", "many")
    with pytest.raises(ValueError, match="CUSET_CPU_WORKERS='many'"):
        CpuBackend()


@pytest.fixture(scope="module")
def workers_program(tmp_path_factory):
    backend = CpuBackend(seed=7, workers=2)
    workdir = tmp_path_factory.mktemp("workers")
    compiled = compile_program((FIXTURES / "workers.cu").read_text(), workdir, timeout=300, backend=backend)
    assert compiled.ok, compiled.detail

    def run(order: str, *args: str):
        return run_compiled(compiled, workdir, timeout=60, order=order, backend=backend, args=list(args),
                            run_name=f"{order.replace(':', '-')}-{'-'.join(args)}")

    return run


def test_atomics_from_many_blocks_sum_exactly(workers_program):
    n = 512 * 256
    for order in ("forward", "parallel:1", "parallel:2"):
        r = workers_program(order, "atomics")
        assert r.ok, r.run.stderr
        assert parse_kv(r.run.stdout) == {"sum": str(n * (n - 1) // 2), "count": f"{n}.0", "max": str(n - 1),
                                          "tickets": str(n)}


def test_inter_block_race_shows_under_the_parallel_order(workers_program):
    forward = workers_program("forward", "race")
    assert forward.ok and parse_kv(forward.run.stdout) == {"x": "2", "seen": "2000"}
    # Concurrent blocks in seeded orders: the last writer or what the reader
    # saw differs from forward, which the pipeline reports as `race`.
    outputs = set()
    for seed in range(1, 9):
        r = workers_program(f"parallel:{seed}", "race")
        assert r.ok, r.run.stderr
        outputs.add(r.run.stdout)
    assert outputs - {forward.run.stdout}


def test_cross_block_spin_wait_is_unsupported_or_runs(workers_program):
    # 64 blocks wait for each other, 2 run at a time: reported, not hung.
    for order in ("forward", "parallel:1"):
        r = workers_program(order, "barrier", "64")
        assert r.status is Status.UNSUPPORTED, (order, r.run.stderr)
        assert "busy-wait" in r.classified[1] and "inter-block synchronisation" in r.classified[1]
    # As many blocks as workers: all are resident, the barrier works.
    r = workers_program("parallel:1", "barrier", "2")
    assert r.ok and parse_kv(r.run.stdout) == {"barrier": "no"}, r.run.stderr


def test_forward_is_bit_identical_and_shared_memory_is_per_worker(workers_program):
    runs = [workers_program("forward", "tiled") for _ in range(2)]
    assert all(r.ok for r in runs) and runs[0].run.stdout == runs[1].run.stdout
    fwd = parse_kv(runs[0].run.stdout)
    assert fwd["close"] == "1"
    # Each worker's tiles are its own: every element equals forward's bit for
    # bit (only the float atomic's summation order may differ).
    par = parse_kv(workers_program("parallel:3", "tiled").run.stdout)
    assert par["matrix"] == fwd["matrix"] and par["close"] == "1"


def test_evaluation_shares_the_cores_and_the_budget_follows_memory(monkeypatch):
    from cuset.evaluate.config import EvalConfig, ExecutionConfig
    from cuset.execute.cpu import backend as cpu_backend

    monkeypatch.setattr(cpu_backend, "usable_cores", lambda: 8)
    # (compile_judge=backend: the CPU backend itself, not wrapped by the nvcc judge)
    # 2 samples at a time on 8 cores: 4 worker threads per run; 8 samples: 1 each.
    assert EvalConfig(ExecutionConfig(backend="cpu", compile_judge="backend", workers=2)).make_backend().options.workers == 4
    one_each = EvalConfig(ExecutionConfig(backend="cpu", compile_judge="backend", workers=8)).make_backend()
    assert one_each.options.workers == 1 and one_each.run_orders == ("forward", "random:1")
    assert EvalConfig(ExecutionConfig(backend="cpu", compile_judge="backend", workers=16)).make_backend().options.workers == 1
    # the per-program thread count has its own name; the old spelling names it
    assert ExecutionConfig(backend="cpu", compile_judge="backend", workers=2, program_threads=3).make_backend().options.workers == 3
    with pytest.raises(ValueError, match="backend_options.workers was renamed program_threads"):
        ExecutionConfig(backend="cpu", backend_options={"workers": 3})
    # Default data budget: a quarter of physical memory; still overridable.
    import os

    quarter = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4
    assert CpuBackend(workers=1).max_data_bytes == quarter == cpu_backend.default_max_data_bytes()
    assert CpuBackend(workers=1, max_data_bytes=1 << 20).max_data_bytes == 1 << 20


# ------------------------------------------------------------------ loop ticks
@pytest.fixture(scope="module")
def loops_program(tmp_path_factory):
    backend = CpuBackend(seed=7, workers=2)
    workdir = tmp_path_factory.mktemp("loops")
    compiled = compile_program((FIXTURES / "loops.cu").read_text(), workdir, timeout=300, backend=backend)
    assert compiled.ok, compiled.detail

    def run(order: str, what: str):
        return run_compiled(compiled, workdir, timeout=60, order=order, backend=backend, args=[what],
                            run_name=f"{order.replace(':', '-')}-{what}")

    return run


def test_threads_of_a_block_take_turns_inside_loops(loops_program):
    import re

    from cuset.execute.cpu.toolchain import INCLUDE_DIR

    core = (INCLUDE_DIR / "cuset_rt" / "core.h").read_text()
    LOOP_TICKS = int(re.search(r"constexpr unsigned kLoopTicks = (\d+);", core).group(1))
    r = loops_program("forward", "interleave")
    assert r.ok, r.run.stderr
    kv = parse_kv(r.run.stdout)
    # Thread 0 runs until its loop condition has ticked LOOP_TICKS times, then
    # thread 1 gets its turn: not after thread 0's 200 iterations.
    assert kv == {"first_other": str(LOOP_TICKS - 1), "counts": "200,200,200,200"}


def test_spin_on_a_flag_set_by_another_thread_of_the_block_runs(loops_program):
    for order in ("forward", "parallel:1"):
        r = loops_program(order, "spin")
        assert r.ok and parse_kv(r.run.stdout) == {"done": "4"}, (order, r.run.stderr)


def test_loop_ticks_keep_results_exact_and_forward_reproducible(loops_program):
    runs = [loops_program(order, "colsum") for order in ("forward", "forward", "parallel:2")]
    assert all(r.ok for r in runs), [r.run.stderr for r in runs]
    assert parse_kv(runs[0].run.stdout)["exact"] == "1"
    assert runs[0].run.stdout == runs[1].run.stdout == runs[2].run.stdout
