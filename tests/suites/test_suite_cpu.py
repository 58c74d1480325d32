"""Bundled reference programs pass their own check on the CPU backend (small sizes), on
input case 0 and under every thread order of the backend, with compilation judged as
`cuset eval` judges it by default: by nvcc wherever it is installed, through curation's
validation path. That wiring is the same for every program, so it runs on a spread of
ten (every sixth of the file). Every reference under every order, cases 0-2 and every
output element: tests/evaluate/test_robust.py; every reference through nvcc:
tests/curation/test_families.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cuset.curation.families.suite import suite_tasks
from cuset.curation.validation import validate_references
from cuset.evaluate.config import ExecutionConfig
from cuset.execute.nvcc_checked import NvccCheckedBackend
from cuset.tasks.io import load_tasks

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU backend needs g++")
def test_small_suite_references_pass_on_the_cpu_backend_judged_by_nvcc(run_compile_cache):
    backend = ExecutionConfig(backend="cpu").make_backend()   # compile_judge=auto: nvcc when installed
    assert isinstance(backend, NvccCheckedBackend) == (shutil.which("nvcc") is not None)
    cpu, _ = load_tasks(ROOT / "suites" / "cuset-bench-cpu.jsonl", strict=True)
    assert cpu == [t for t in suite_tasks() if t.id in {c.id for c in cpu}]
    assert len(cpu) >= 40
    spread = cpu[::6]
    assert len({t.family for t in spread}) == len(spread) == 10
    results = validate_references(spread, backend=backend, cases=(0,), execution=ExecutionConfig(workers=2),
                                  cache_dir=run_compile_cache)
    assert len(results) == len(spread)
    failures = {r.task_name: f"{r.status}: {r.detail[:300]}" for r in results if not r.passed}
    assert failures == {}
