"""Issue 59, item 5: a candidate's run sees its own run dir, the runtime and the toolchain,
nothing of the evaluation's inputs or outputs.

`cuset eval` runs with its tasks file, generations file and `--out` dir in a directory of
the checkout (where users keep them, and which no mask used to cover), next to a planted
0644 file; a file in the temp dir is planted too. The generations hold a sample without
code first, so `results.jsonl` holds a record when the hostile sample runs. The hostile
sample opens each path and reports what it got in its own log: every open must fail, and
no planted content may reach its record.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cuset.cli.main import app
from cuset.evaluate.records import load_results
from cuset.generate.records import GenerationRecord, save_generations
from cuset.tasks import KernelBenchTask, Task, save_tasks
from sandbox_tools import EVERY_MODE

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
CUDA_TASK = Task.from_json(json.loads((FIXTURES / "adversarial" / "task.json").read_text()))
KB_REFERENCE = (FIXTURES / "kernelbench" / "relu_ref.py").read_text()
SECRET = "CUSET-PLANTED-0644-c41e"


@pytest.fixture
def planted(tmp_path):
    """A directory in the checkout for the eval's files, a 0644 file in it and one in the
    temp dir; removed afterwards."""
    place = ROOT / f".planted-{uuid.uuid4().hex[:12]}"
    place.mkdir()
    (place / "out").mkdir()
    loose = place / "notes.txt"
    in_tmp = tmp_path / "scratch.txt"
    for path in (loose, in_tmp):
        path.write_text(SECRET + "\n")
        os.chmod(path, 0o644)
    try:
        yield place, [place / "gens.jsonl", place / "out" / "results.jsonl", loose, in_tmp]
    finally:
        shutil.rmtree(place, ignore_errors=True)


def _eval(place: Path, mode: str, *extra: str):
    return CliRunner().invoke(app, ["eval", str(place / "tasks.jsonl"), str(place / "gens.jsonl"), "--out",
                                    str(place / "out"), "--backend", "cpu", "execution.workers=1", "progress=false",
                                    f"execution.sandbox.mode={mode}", "execution.timeout_compile=600",
                                    "execution.timeout_run=60", *extra])


def _generations(place: Path, task_id, name: str, code: str) -> None:
    """Sample 0 has no code (recorded at once, its response carrying the secret); sample 1 is `code`."""
    save_generations(place / "gens.jsonl", [
        GenerationRecord(task_id, name, 0, "m", 1, f"no code here, {SECRET}", "", 10, "stop", 0.1),
        GenerationRecord(task_id, name, 1, "m", 1, "", code, 10, "stop", 0.1)])


def _what_it_got(log: str, paths: list[Path]) -> None:
    assert SECRET not in log, log
    for path in paths:
        assert f"DENIED {path}" in log, (path, log)
    assert "GOT " not in log, log


def cuda_reader(paths: list[Path]) -> str:
    names = ", ".join(json.dumps(str(p)) for p in paths)
    return ("#include <cstdio>\n#include <cerrno>\n#include <cstring>\n"
            f"static const char* PATHS[] = {{{names}}};\n"
            "int main() {\n"
            "    for (const char* p : PATHS) {\n"
            "        FILE* f = fopen(p, \"r\");\n"
            "        if (!f) { printf(\"DENIED %s: %s\\n\", p, strerror(errno)); continue; }\n"
            "        char buf[256] = {0};\n"
            "        size_t n = fread(buf, 1, sizeof buf - 1, f);\n"
            "        printf(\"GOT %s: %zu bytes: %s\\n\", p, n, buf);\n"
            "        fclose(f);\n"
            "    }\n"
            "    return 1;\n"
            "}\n")


@pytest.mark.parametrize("mode", EVERY_MODE)
def test_a_cuda_program_reads_nothing_of_the_evaluation(planted, mode):
    """In both modes: the unshare fallback builds bubblewrap's world itself
    (cuset.execute.private_root)."""
    place, paths = planted
    save_tasks([CUDA_TASK], place / "tasks.jsonl")
    _generations(place, CUDA_TASK.id, CUDA_TASK.task_name, cuda_reader(paths))
    result = _eval(place, mode)
    assert result.exit_code == 0, result.output
    hostile = {r.sample: r for r in load_results(place / "out" / "results.jsonl")}[1]
    runs = [s for s in hostile.steps if s.name.startswith("run[")]
    assert runs, hostile
    _what_it_got("".join(s.stdout + s.stderr for s in runs) + hostile.detail, paths)


def kb_reader(paths: list[Path]) -> str:
    return ("got = []\n"
            f"for p in {[str(p) for p in paths]!r}:\n"
            "    try:\n"
            "        got.append('GOT ' + p + ': ' + open(p).read()[:200])\n"
            "    except OSError as e:\n"
            "        got.append('DENIED ' + p + ': ' + type(e).__name__)\n"
            "raise RuntimeError(' | '.join(got))\n"
            "class ModelNew:\n    pass\n")


@pytest.mark.parametrize("mode", EVERY_MODE)
def test_a_kernelbench_answer_reads_nothing_of_the_evaluation(planted, mode):
    place, paths = planted
    task = KernelBenchTask("kb_relu", "ReLU", KB_REFERENCE, n_trials=1)
    save_tasks([task], place / "tasks.jsonl")
    _generations(place, task.id, task.task_name, kb_reader(paths))
    result = _eval(place, mode)
    assert result.exit_code == 0, result.output
    hostile = {r.sample: r for r in load_results(place / "out" / "results.jsonl")}[1]
    assert hostile.status.value == "runtime_error", hostile.detail
    _what_it_got(hostile.detail + "".join(s.stdout + s.stderr for s in hostile.steps), paths)
