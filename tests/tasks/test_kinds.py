"""Task kinds as a registry: lookup by name, the tables of the layers above checked against it,
and a third benchmark format that loads, validates and renders through the registry alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from jsonl_tools import write_jsonl

from cuset.errors import CusetError
from cuset.generate.extract import (
    EXTRACTORS_BY_KIND, UnknownExtractor, extract_answer, extract_code, extract_modelnew, get_extractor,
)
from cuset.tasks import KernelBenchTask, RenderedPrompt, Task, TaskValidationError, load_tasks, render_prompt
from cuset.tasks import kinds
from cuset.tasks.kinds import KINDS, TaskKind, UnknownTaskKind, get_kind, known_kinds, per_kind


def test_the_built_in_kinds_and_their_records():
    assert list(KINDS) == ["cudabench", "kernelbench"]
    assert get_kind("cudabench").record is Task and get_kind("kernelbench").record is KernelBenchTask
    assert all(kind.record.kind == name for name, kind in KINDS.items())
    assert known_kinds() == "cudabench (the default) or kernelbench"


def test_an_unknown_kind_is_a_user_error_naming_the_known_ones():
    known = r"use cudabench \(the default\) or kernelbench"
    with pytest.raises(UnknownTaskKind, match=rf"^unknown task kind 'triton': {known}$"):
        get_kind("triton")
    with pytest.raises(CusetError, match="unknown task kind None"):
        get_kind(None)


def test_a_kind_whose_record_class_says_another_kind_is_refused():
    with pytest.raises(TypeError, match=r"task kind 'cuda': its record class Task has kind 'cudabench'"):
        TaskKind("cuda", Task, lambda r: [], lambda *a, **k: None, "mislabelled")


def test_per_kind_tables_must_cover_exactly_the_registered_kinds():
    assert list(per_kind({"kernelbench": 2, "cudabench": 1}, "numbers")) == ["cudabench", "kernelbench"]
    with pytest.raises(LookupError, match=r"the evaluators must cover every task kind .*: no entry for kernelbench$"):
        per_kind({"cudabench": 1}, "evaluators")
    with pytest.raises(LookupError, match=r"no entry for cudabench; entries for unregistered kinds triton$"):
        per_kind({"kernelbench": 1, "triton": 2}, "code extractors")


def test_the_extractors_cover_every_kind():
    assert set(EXTRACTORS_BY_KIND) == set(KINDS)
    assert get_extractor("default", "cudabench") is extract_code
    assert get_extractor("default", "kernelbench") is extract_modelnew
    with pytest.raises(UnknownTaskKind, match="unknown task kind 'triton'"):
        get_extractor("default", "triton")
    with pytest.raises(UnknownExtractor, match=r"unknown code extractor 'first': use one of default, compat"):
        get_extractor("first", "kernelbench")


def test_extract_answer_skips_the_reasoning_trace():
    program = "```cuda\n#include <cstdio>\n__global__ void k() {}\nint main() { return 0; }\n```"
    assert extract_answer(f"<think>```cuda\nint main() {{}}\n```</think>\n{program}", "default") == \
        "#include <cstdio>\n__global__ void k() {}\nint main() { return 0; }\n"
    assert extract_answer(f"<think>still thinking\n{program}", "default") is None   # unclosed trace: no code
    assert extract_answer(None, "compat", "kernelbench") is None


# ---- a third benchmark format, registered like the built-in ones ---------------------------

@dataclass(frozen=True)
class ToyTask:
    """A made-up format: one expression to compute."""

    id: str
    task_name: str
    expression: str
    kind: ClassVar[str] = "toy"

    @property
    def family_name(self) -> str:
        return self.task_name

    def to_json(self) -> dict:
        return {"kind": self.kind, "id": self.id, "task_name": self.task_name, "expression": self.expression}

    @classmethod
    def from_json(cls, record: dict) -> "ToyTask":
        return cls(record["id"], record["task_name"], record["expression"])


def validate_toy(record) -> list[tuple[str, str, str]]:
    return [(key, "missing", "missing_field") for key in ("id", "task_name", "expression") if key not in record]


def render_toy(task: ToyTask, level: int = 1, *, compat: bool = False, gpu: str | None = None) -> RenderedPrompt:
    return RenderedPrompt(system="Write a kernel.", user=f"Compute {task.expression} (level {level}, gpu {gpu}).")


@pytest.fixture
def toy_kind(monkeypatch):
    toy = TaskKind("toy", ToyTask, validate_toy, render_toy, "a made-up format for the test",
                   (("expression.txt", "expression"),))
    monkeypatch.setattr(kinds, "KINDS", {**KINDS, "toy": toy})
    return toy


def test_a_third_format_loads_validates_and_renders_through_the_registry(toy_kind, tmp_path):
    cuda = Task.from_json({"id": 1, "task_name": "t", "task_description": "d",
                           "inputs": [{"name": "x", "dtype": "float32", "shape": "(4,)"}],
                           "outputs": [{"name": "y", "dtype": "float32", "shape": "(4,)"}],
                           "gpu": "unknown", "bench.cu": "x", "gen.py": "x", "compare.py": "x",
                           "level1_prompt": "p1", "level2_prompt": "p2", "level3_prompt": "p3"})
    path = write_jsonl(tmp_path / "tasks.jsonl", [
        {"kind": "toy", "id": "t1", "task_name": "Square", "expression": "x * x"},
        cuda.to_json(),
        {"kind": "toy", "id": "t2", "task_name": "Cube"},
        {"kind": "triton", "id": "t3"},
    ])
    tasks, report = load_tasks(path, strict=False)
    assert tasks == [ToyTask("t1", "Square", "x * x"), cuda]
    assert dict(report.skipped) == {"missing_field": 1, "bad_kind": 1}
    assert [str(p) for p in report.problems] == [
        f"{path}:3: expression: missing",
        f"{path}:4: kind: unknown task kind 'triton': use cudabench (the default), kernelbench or toy",
    ]
    with pytest.raises(TaskValidationError, match="expression: missing"):
        load_tasks(path)
    assert render_prompt(tasks[0], 2, gpu="H100").user == "Compute x * x (level 2, gpu H100)."
    assert toy_kind.file(tasks[0], "expression.txt") == "x * x"
    assert get_kind("cudabench").file(cuda, "gen.py") == "x"
    with pytest.raises(KeyError, match="a toy task has no file 'gen.py': it has expression.txt"):
        toy_kind.file(tasks[0], "gen.py")
    assert render_prompt(cuda, 3).user.startswith("## Task Name\nt\n\n## Task Description\np3")
    # the layers above refuse to start without the new kind's entries
    with pytest.raises(LookupError, match="no entry for toy"):
        per_kind(EXTRACTORS_BY_KIND, "code extractors")
