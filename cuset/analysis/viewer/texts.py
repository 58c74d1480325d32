"""The texts a sample page shows beside its record: the model's response and the program
evaluated (from the run's generations file), the prompt (rendered from the tasks
file at the sample's level, as `cuset generate` renders it) and, for a demo's failing
sample, where it left the correct programs (its attribution record).

Both files are optional: a run without them still gets its pages, saying what is
missing. Bad lines are skipped and counted, never fatal: the results are what a page
is about.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuset.analysis.viewer.sources import RunSource
from cuset.errors import CusetError
from cuset.io import JsonlError, iter_jsonl


@dataclass(frozen=True)
class Generation:
    response: str
    code: str | None
    level: int | None
    model: str
    finish_reason: str | None
    reasoning: str | None = None


@dataclass(frozen=True)
class RunTexts:
    generations: dict[tuple[str, int], Generation] = field(default_factory=dict)
    tasks: dict[str, Any] = field(default_factory=dict)      # task id (str) -> Task / KernelBenchTask
    compat: bool = False
    notes: tuple[str, ...] = ()                               # what could not be read, for the run page
    attribution: dict[tuple[str, int], dict] = field(default_factory=dict)  # failing sample -> its Attribution

    def levels(self) -> dict[tuple[str, int], int]:
        return {k: g.level for k, g in self.generations.items() if g.level is not None}

    def prompt(self, task_id: str, level: int | None) -> str | None:
        """The user prompt the task renders to at `level`; None when the task is unknown."""
        task = self.tasks.get(task_id)
        if task is None:
            return None
        from cuset.tasks import render_prompt

        rendered = render_prompt(task, level or 1, compat=self.compat)
        return f"[system]\n{rendered.system}\n\n[user]\n{rendered.user}"


def _str_or_none(value) -> str | None:
    return value if isinstance(value, str) else None


def _load_generations(path: Path) -> tuple[dict[tuple[str, int], Generation], Counter]:
    out: dict[tuple[str, int], Generation] = {}
    bad: Counter = Counter()
    for _, d in iter_jsonl(path, errors="yield"):
        if isinstance(d, JsonlError):
            bad["bad_json"] += 1
            continue
        if not isinstance(d, dict) or "task_id" not in d or not isinstance(d.get("sample"), int):
            bad["bad_record"] += 1
            continue
        level = d.get("level")
        out[(str(d["task_id"]), d["sample"])] = Generation(
            response=d.get("response") if isinstance(d.get("response"), str) else "",
            code=_str_or_none(d.get("code")), level=level if isinstance(level, int) else None,
            model=str(d.get("model", "")), finish_reason=_str_or_none(d.get("finish_reason")),
            reasoning=_str_or_none(d.get("reasoning")))
    return out, bad


def load_texts(source: RunSource) -> RunTexts:
    notes = []
    generations: dict[tuple[str, int], Generation] = {}
    if source.generations is None:
        named = (source.summary.get("meta") or {}).get("generations")
        notes.append(f"no generations file found ({'summary.json names ' + repr(named) if named else 'none named'}, "
                     "none beside the results): responses and programs are not shown")
    else:
        generations, bad = _load_generations(source.generations)
        if bad:
            notes.append(f"{source.generations}: skipped " + ", ".join(f"{n} {r} line(s)" for r, n in bad.items()))
    tasks: dict[str, Any] = {}
    if source.tasks is None:
        notes.append("no tasks file found (summary.json's meta.tasks): prompts are not shown")
    else:
        from cuset.tasks.io import load_tasks

        try:
            loaded, report = load_tasks(source.tasks, strict=False)
        except (CusetError, OSError, ValueError) as e:   # the pages go on without prompts
            notes.append(f"{source.tasks}: cannot load the tasks ({e}): prompts are not shown")
        else:
            tasks = {str(t.id): t for t in loaded}
            if report.problems:
                notes.append(f"{source.tasks}: {len(report.problems)} task record(s) skipped")
    attribution: dict[tuple[str, int], dict] = {}
    if source.attribution is not None:
        attribution, bad = _load_attribution(source.attribution)
        if bad:
            notes.append(f"{source.attribution}: skipped {bad} line(s) that are not attribution records")
    meta = source.summary.get("meta") if isinstance(source.summary.get("meta"), dict) else {}
    return RunTexts(generations, tasks, bool(meta.get("compat")), tuple(notes), attribution)


def _load_attribution(path: Path) -> tuple[dict[tuple[str, int], dict], int]:
    """(task id, sample) -> the sample's attribution record with its cause in words; bad lines counted."""
    from cuset.analysis.attribution import CAUSE_LABELS, UNATTRIBUTED_LABELS, Attribution

    out, bad = {}, 0
    for _, d in iter_jsonl(path, errors="yield"):
        try:
            record = Attribution.from_json(d)
        except (TypeError, AttributeError):
            bad += 1
            continue
        out[(str(record.task_id), record.sample)] = {
            **record.to_json(), "cause_text": {**CAUSE_LABELS, **UNATTRIBUTED_LABELS}.get(record.cause, record.cause)}
    return out, bad
