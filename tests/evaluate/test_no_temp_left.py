"""Issue 59: no temporary directory survives the run that made it (every evaluation used to
leave an empty `cuset-py-*` dir: the CPU rewriter's fork server was never closed).

`cuset eval` runs in a fresh interpreter whose TMPDIR is a private empty dir, on samples that
pass, crash (SIGSEGV), time out and fail to compile; when it has exited, the dir is empty.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cuset.generate.records import GenerationRecord, save_generations
from cuset.tasks import Task, save_tasks
from sandbox_tools import needs_a_sandbox

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "adversarial"
TASK = Task.from_json(json.loads((FIXTURES / "task.json").read_text()))
CRASH = "int main() { volatile int* p = nullptr; *p = 1; return 0; }\n"
PROGRAMS = [TASK.bench_cu, CRASH, (FIXTURES / "infinite_loop.cu").read_text(), "int main() { return undefined; }\n"]


@needs_a_sandbox
def test_an_evaluation_leaves_nothing_in_the_temp_dir(tmp_path, cold_compile_cache):
    """A cold compile cache: the CPU rewriter runs (its fork server made the dirs left)."""
    tmp = tmp_path / "private-tmp"
    tmp.mkdir()
    save_tasks([TASK], tmp_path / "tasks.jsonl")
    save_generations(tmp_path / "gens.jsonl", [GenerationRecord(TASK.id, TASK.task_name, i, "m", 1, "", code, 10,
                                                                "stop", 0.1) for i, code in enumerate(PROGRAMS)])
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "cuset.cli.main", "eval", str(tmp_path / "tasks.jsonl"),
                           str(tmp_path / "gens.jsonl"), "--out", str(tmp_path / "out"), "--backend", "cpu",
                           "execution.workers=2", "progress=false", "execution.timeout_run=3",
                           "execution.timeout_compile=300"], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    statuses = sorted(json.loads(line)["status"] for line in (tmp_path / "out" / "results.jsonl").open())
    assert statuses == ["compile_error", "passed", "runtime_error", "timeout"], statuses
    assert sorted(p.name for p in tmp.iterdir()) == []
