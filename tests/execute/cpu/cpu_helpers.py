"""Helpers for the CPU backend tests (importable thanks to conftest.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "cuda" / "cpu"

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the CPU backend needs it")


def parse_kv(stdout: str) -> dict[str, str]:
    """`key=value` words of a program's output."""
    out = {}
    for line in stdout.splitlines():
        for part in line.split(" "):
            if "=" in part:
                k, v = part.split("=", 1)
                out[k] = v
    return out


def path_runner(compiled, backend, workdir: Path):
    """run(args, order, loops) -> (process, out.bin's bytes, kernel paths): the compiled
    program in a fresh directory with block loops and regions (loops=True) or with every
    kernel on the fibers (CUSET_CPU_BLOCK_LOOP=0), each run once and cached."""
    import os
    import subprocess

    from cuset.execute.cpu.diagnostics import kernel_paths

    runs = {}

    def run(args: tuple[str, ...], order: str, loops: bool):
        key = (args, order, loops)
        if key not in runs:
            run_dir = workdir / "-".join((*args, order.replace(":", "-"), str(loops)))
            run_dir.mkdir(exist_ok=True)
            env = dict(backend.invocation(compiled.executable, order).env, CUSET_CPU_REPORT_PATHS="1",
                       PATH=os.environ.get("PATH", ""))
            if not loops:
                env["CUSET_CPU_BLOCK_LOOP"] = "0"
            p = subprocess.run([str(compiled.executable), *args], cwd=run_dir, env=env, capture_output=True,
                               text=True, timeout=120)
            out = (run_dir / "out.bin").read_bytes() if (run_dir / "out.bin").exists() else b""
            runs[key] = (p, out, kernel_paths(p.stderr))
        return runs[key]

    return run


def both_paths(run, args: tuple[str, ...], order: str):
    """The run on both paths, which must succeed with the same output: (output, paths with
    regions, the regions run's stderr)."""
    on, out_on, paths_on = run(args, order, True)
    off, out_off, _ = run(args, order, False)
    assert on.returncode == 0 and off.returncode == 0, on.stderr + off.stderr
    assert out_on == out_off, f"{args} {order}: regions and fibers disagree"
    return out_on, paths_on, on.stderr


def plan_kernels(src: str, regions: bool = True, ticking: frozenset[int] | None = None):
    """The planners' plans for `src` with the rewriter's ticking loops, as `rewrite` makes them
    (or the `ticking` given): the barrier planner's (`regions`) or the block loops' alone."""
    from cuset.execute.cpu import barrier_regions, block_loop
    from cuset.execute.cpu.rewriter import ticking_loops

    ticking = ticking_loops(src) if ticking is None else ticking
    if regions:
        return barrier_regions.plan_kernels(src, ticking=ticking)
    return block_loop.plan_kernels(src, ticking=ticking)
