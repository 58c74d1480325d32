"""Issue 59: a tasks file's own scripts (gen.py, compare.py) run in the sandbox, as the
references do, unless the user trusts them (`execution.sandbox.trust_task_scripts`).

A third-party task whose gen.py or compare.py tries to read a planted 0644 file, to write a
file outside its dir and (compare.py) to rewrite gen.py's reference in place gets none of it
under `cuset tasks check`: the script fails on its first refused attempt, and the check
reports the task, saying why (a failed gen.py leaves no data: "not checked (skipped)"; a
failed compare.py fails the reference: `reference_fails`). With the scripts trusted, the same
task does all three (the control: what every check did before). An honest task still checks
fine in the sandbox.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from cuset.evaluate.config import EvalConfig, ExecutionConfig, SandboxConfig
from cuset.evaluate.taskcheck import check_tasks
from cuset.evaluate.workspace import data_key
from cuset.tasks import Task, save_tasks
from sandbox_tools import needs_a_sandbox

pytestmark = [needs_a_sandbox,
              pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU backend compiles with g++")]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "adversarial" / "task.json"
SECRET = "CUSET-PLANTED-TASK-SCRIPT-5e1a"

# Each attempt in turn; the first one refused ends the script with the reason (a script that
# swallowed the errors would pass: the test must see each attempt was made and refused).
ATTACK = '''
import os
def _attacks():
    yield "read", lambda: open({planted!r}).read()
    yield "write", lambda: open({outside!r}, "w").write("escaped")
    if os.path.exists("data/y_ref.bin"):   # compare.py: gen.py's reference, rewritten in place
        yield "poison", lambda: open("data/y_ref.bin", "r+b").write(b"\\0" * 16)
for _what, _attempt in _attacks():
    try:
        _got = _attempt()
    except OSError as _e:
        raise SystemExit(f"refused: {{_what}}: {{type(_e).__name__}}")
    print(f"{{_what}}: {{str(_got)[:60]}}")
'''


def _task(tmp_path: Path, script: str | None) -> Task:
    record = json.loads(FIXTURE.read_text())
    if script is not None:
        attack = ATTACK.format(planted=str(tmp_path / "planted.txt"), outside=str(tmp_path / f"{script}-escaped.txt"))
        record[script] = attack + record[script]
    return Task.from_json(record)


def _check(tmp_path: Path, task: Task, trusted: bool, name: str):
    planted = tmp_path / "planted.txt"
    planted.write_text(SECRET)
    os.chmod(planted, 0o644)
    save_tasks([task], tmp_path / f"{name}.jsonl")
    cfg = EvalConfig(ExecutionConfig(backend="cpu", compile_judge="backend", workers=1,
                                     sandbox=SandboxConfig(trust_task_scripts=trusted)),
                     progress=False, workdir=str(tmp_path / "work"), cache_dir=str(tmp_path / "cache"))
    result = check_tasks(tmp_path / f"{name}.jsonl", tmp_path / f"out-{name}", cfg)
    (check,) = result.checks
    report = result.json_path.read_text() + result.markdown_path.read_text()
    return check, report


def _reference(tmp_path: Path, task: Task) -> bytes:
    return (tmp_path / "cache" / "data" / data_key(task, 0) / "data" / "y_ref.bin").read_bytes()


@pytest.mark.parametrize("script", ["gen.py", "compare.py"])
def test_a_hostile_task_script_gets_nothing_and_the_check_says_why(tmp_path, script):
    task = _task(tmp_path, script)
    check, report = _check(tmp_path, task, trusted=False, name="sandboxed")
    assert not (tmp_path / f"{script}-escaped.txt").exists()
    assert SECRET not in report
    assert f"{script} failed (exit 1): refused: read: FileNotFoundError" in check.reference_detail, check
    if script == "gen.py":   # no data: the task cannot be judged, and the check says so
        assert check.reference_status == "skipped" and check.verdict == "not checked (skipped)", check
    else:
        assert check.reference_status == "wrong" and "reference_fails" in check.defects, check
    if script == "compare.py":   # the data cache's reference is as gen.py wrote it
        honest = json.loads(FIXTURE.read_text())
        expected = _reference_of(honest)
        assert _reference(tmp_path, task) == expected


def _reference_of(record: dict) -> bytes:
    """What the fixture's gen.py writes to y_ref.bin, computed here (2x + 1 of its seed-7 data)."""
    import numpy as np

    x = np.random.default_rng(7).standard_normal(1024).astype(np.float32)
    return (2.0 * x + 1.0).astype(np.float32).tobytes()


def test_trusted_task_scripts_do_what_they_like(tmp_path):
    """The control: trust_task_scripts=true runs compare.py as the evaluating user, which
    reads the planted file, writes outside its dir and poisons the data cache's reference."""
    task = _task(tmp_path, "compare.py")
    check, _ = _check(tmp_path, task, trusted=True, name="trusted")
    assert (tmp_path / "compare.py-escaped.txt").read_text() == "escaped"
    assert _reference(tmp_path, task)[:16] == b"\0" * 16


def test_an_honest_task_checks_fine_in_the_sandbox(tmp_path):
    check, _ = _check(tmp_path, _task(tmp_path, None), trusted=False, name="honest")
    assert check.reference_status == "passed" and not check.defects, check
    assert check.checker_measured and check.corruptions, check
