"""Every reference program of the bundled benchmark suite (suites/*.jsonl,
smallest size of each family) passes on the CPU backend, through the real
evaluation pipeline (gen.py, sandboxed runs, output checks and compare.py), with
block loops and barrier regions and on the fibers, each in forward and random order,
and the two paths agree bit for bit. (The backend's default orders, parallel
included, on every reference: tests/evaluate/test_robust.py; a separate plain pass
over the same programs would prove nothing these two do not.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from cpu_helpers import needs_gxx
from cuset.execute.result import Status

SUITES = sorted((Path(__file__).resolve().parents[3] / "suites").glob("*.jsonl"))

pytestmark = [needs_gxx, pytest.mark.slow,
              pytest.mark.skipif(not SUITES, reason="no bundled suite in suites/*.jsonl")]


def smallest_per_family(path: Path):
    from cuset.tasks import load_tasks

    tasks, _ = load_tasks(path)
    chosen = {}
    for task in tasks:
        family = task.family or task.task_name
        if family not in chosen or task.data_bytes < chosen[family].data_bytes:
            chosen[family] = task
    return list(chosen.values())


def suite_programs():
    """(label, task): the smallest size of each family of every bundled suite file, each
    distinct record once. cuset-bench-cpu.jsonl is exactly the smallest sizes of
    cuset-bench.jsonl (tests/suites/test_suite.py), and running the same record a
    second time proves nothing the first run did not."""
    seen, programs = set(), []
    for path in SUITES:
        for task in smallest_per_family(path):
            if task not in seen:
                seen.add(task)
                programs.append((f"{path.name}#{task.id} {task.task_name}", task))
    return programs


class _PathsBackend:
    """The CPU backend with four orders: `forward` and `random:7` (block loops and
    barrier regions where a kernel has them) and `fibers:forward`, `fibers:random:7`
    (the same executable, every kernel on the fibers). The pipeline compares the
    orders' outputs byte for byte and reports `race` when they differ, so a pass
    means the two paths agree bit for bit in both orders."""

    def __new__(cls, seed: int = 7):
        from cuset.execute.cpu import CpuBackend

        class PathsBackend(CpuBackend):
            def invocation(self, executable, order):
                if order.startswith("fibers:"):
                    inv = super().invocation(executable, order[len("fibers:"):])
                    inv.env["CUSET_CPU_BLOCK_LOOP"] = "0"
                    return inv
                return super().invocation(executable, order)

        backend = PathsBackend(seed=seed, workers=1)
        backend.run_orders = ("forward", "fibers:forward", "random:7", "fibers:random:7")
        return backend


def test_every_reference_program_agrees_bit_for_bit_on_both_paths(tmp_path, run_compile_cache, run_gen_data):
    from cuset.evaluate import evaluate_program
    from cuset.evaluate.workspace import Workspace
    from cuset.execute.compile_cache import CompileCache

    backend = _PathsBackend()   # compiles as the CPU backend does: the programs other tests compiled are hits
    cache = CompileCache(backend, root=run_compile_cache, timeout=180)
    ws = Workspace(parent=tmp_path / "ws", data_root=run_gen_data, gen_timeout=300)
    failures, loops, regions, programs = [], 0, 0, suite_programs()
    try:
        for _, task in programs:
            cache.submit(task.bench_cu)
        for label, task in programs:
            result = evaluate_program(task, task.bench_cu, backend=backend, cache=cache, workspace=ws)
            compile_log = " ".join(s.stdout for s in result.steps if s.name == "compile")
            loops += compile_log.count(": block loop")
            regions += compile_log.count(": block loop with barrier regions")
            if "did not compile" in compile_log:   # a variant g++ refused: the program fell back to the fibers
                failures.append(f"{label}: {compile_log}")
            if result.status is not Status.PASSED:
                failures.append(f"{label}: {result.status.value}: {result.detail}")
    finally:
        cache.close()
        ws.close()
    assert len(programs) >= 40
    assert not failures, "\n".join(failures)
    assert loops > 0  # some references really ran as block loops
    assert regions > 0  # and some kernels with barriers as barrier regions
