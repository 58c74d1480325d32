"""Load, validate and save task files: JSONL of records, or a directory of KernelBench references.

A JSONL record's `kind` field picks its schema from the registry of task kinds
(cuset.tasks.kinds): absent or "cudabench" is a CUDABench record (cuset.tasks.schema),
"kernelbench" a KernelBench one (cuset.tasks.kernelbench); one file may mix kinds. A
directory is read as KernelBench's layout (see `load_kernelbench_dir`).

Strict mode (the default) collects every problem in the file and raises one
`TaskValidationError` listing them all as `file:line: field: message`. Lenient
mode skips bad records and counts them by reason in the returned `LoadReport`.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from cuset.errors import CusetError
from cuset.io import JsonlError, atomic_write_jsonl, iter_jsonl
from cuset.localpath import MissingPath, require_existing
from cuset.tasks.kernelbench import (
    KIND as KERNELBENCH, KernelBenchTask, check_reference, validate_kernelbench_record,
)
from cuset.tasks.kinds import TaskKind, find_kind, known_kinds, record_kind
from cuset.tasks.schema import Task

AnyTask = Task | KernelBenchTask
METADATA_FILE = "metadata.jsonl"  # optional per-task fields of a KernelBench directory


@dataclass(frozen=True)
class Problem:
    """One validation error, located precisely enough to fix by hand."""

    source: str
    line: int
    field: str
    message: str
    reason: str  # short machine-readable category, used for counting

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.field}: {self.message}"


class TaskValidationError(CusetError, ValueError):
    def __init__(self, problems: list[Problem]):
        self.problems = problems
        head = f"{len(problems)} problem(s) in task file:\n"
        super().__init__(head + "\n".join(f"  {p}" for p in problems))


@dataclass
class LoadReport:
    source: str
    loaded: int = 0
    skipped: Counter = field(default_factory=Counter)
    problems: list[Problem] = field(default_factory=list)

    @property
    def total_skipped(self) -> int:
        return sum(self.skipped.values())


def _iter_hf(name: str, split: str) -> Iterator[tuple[int, object]]:
    try:
        import datasets
    except ImportError as e:  # pragma: no cover - datasets is a core dependency
        raise RuntimeError("loading a Hugging Face dataset needs `pip install datasets`") from e
    try:
        ds = datasets.load_dataset(name, split=split)
    except Exception as e:
        raise MissingPath(
            f"{name!r} is neither a local file nor a loadable Hugging Face dataset ({type(e).__name__}: {e}). "
            "Pass a path to a JSONL file, or check the dataset name and your network."
        ) from None
    for i, row in enumerate(ds, 1):
        yield i, dict(row)


def _from_kernelbench_columns(record):
    """A row of KernelBench's own dataset (columns code, name, level, problem_id; e.g. the
    Hugging Face release or a JSONL export of it) as a kernelbench record; other rows as they are."""
    if not (isinstance(record, dict) and "kind" not in record and "bench.cu" not in record
            and isinstance(record.get("code"), str) and isinstance(record.get("name"), str)):
        return record
    stem = record["name"].strip().removesuffix(".py")
    level = record.get("level")
    # problem numbers restart at 1 in every level: the level keeps ids unique across them
    tid = f"L{level}_{stem}" if isinstance(level, int) and not isinstance(level, bool) else stem
    return {"kind": KERNELBENCH, "id": tid, "task_name": _default_task_name(stem), "reference_src": record["code"]}


def _validate_any(record) -> tuple[list[tuple[str, str, str]], TaskKind | None]:
    """Problems of a record of any registered kind, and its kind (None when unknown)."""
    name = record_kind(record)
    kind = find_kind(name)
    if kind is None:
        return [("kind", f"unknown task kind {name!r}: use {known_kinds()}", "bad_kind")], None
    return kind.validate(record), kind


def load_tasks(source: str | os.PathLike, *, strict: bool = True,
               split: str = "train") -> tuple[list[AnyTask], LoadReport]:
    """Load tasks from a JSONL path, a directory of KernelBench `.py` references, or a Hugging Face dataset name.

    strict=True raises TaskValidationError listing every problem; strict=False
    skips bad records, counting them by reason in the report.
    """
    src = str(source)
    path = Path(src)
    if path.is_dir():
        return load_kernelbench_dir(path, strict=strict)
    require_existing(src, "tasks", "a JSONL file of task records or a directory of KernelBench .py references")
    rows: Iterable = iter_jsonl(path, errors="yield") if path.exists() else _iter_hf(src, split)
    report = LoadReport(source=src)
    tasks: list[AnyTask] = []
    first_line_of_id: dict[int | str, int] = {}
    for lineno, record in rows:
        kind = None
        if isinstance(record, JsonlError):  # bad JSON or UTF-8: reported with the other problems
            errs = [("<line>", record.detail, "bad_json")]
        else:
            record = _from_kernelbench_columns(record)
            errs, kind = _validate_any(record)
        if not errs:
            tid = record["id"]
            if tid in first_line_of_id:
                errs = [("id", f"duplicate id {tid} (first seen on line {first_line_of_id[tid]})", "duplicate_id")]
            else:
                first_line_of_id[tid] = lineno
        if errs:
            _reject(report, [Problem(src, lineno, f, m, r) for f, m, r in errs])
            continue
        tasks.append(kind.parse(record))
        report.loaded += 1
    if strict and report.problems:
        raise TaskValidationError(report.problems)
    return tasks, report


def _reject(report: LoadReport, problems: list[Problem]) -> None:
    report.problems.extend(problems)
    report.skipped[problems[0].reason] += 1


def _default_task_name(stem: str) -> str:
    # KernelBench names files "<number>_<Name>.py": the name is the part after the number
    head, _, rest = stem.partition("_")
    return rest if head.isdigit() and rest else stem


def _read_metadata(path: Path, report: LoadReport) -> dict[str, tuple[int, dict]]:
    """stem -> (line, fields) from a directory's metadata.jsonl; bad lines are reported."""
    meta: dict[str, tuple[int, dict]] = {}
    src = str(path)  # unknown fields are reported by validate_kernelbench_record, at this line
    for lineno, record in iter_jsonl(path, errors="yield"):
        if isinstance(record, JsonlError):
            _reject(report, [Problem(src, lineno, "<line>", record.detail, "bad_json")])
            continue
        if not isinstance(record, dict) or not isinstance(record.get("id"), str):
            _reject(report, [Problem(src, lineno, "id", "each line must be an object whose \"id\" is the stem of a "
                                     ".py file in the directory", "missing_field")])
            continue
        stem = record["id"]
        if stem in meta:
            _reject(report, [Problem(src, lineno, "id", f"duplicate id {stem!r} (first seen on line {meta[stem][0]})",
                                     "duplicate_id")])
            continue
        meta[stem] = (lineno, record)
    return meta


def load_kernelbench_dir(directory: str | os.PathLike, *,
                         strict: bool = True) -> tuple[list[KernelBenchTask], LoadReport]:
    """KernelBench tasks from a directory: one reference per `<stem>.py` (sorted; subdirectories such
    as `solutions/` are not read), id = the stem, task_name = the stem without a leading `<number>_`.

    An optional `metadata.jsonl` in the directory sets the other fields: one object per line
    with "id" (the stem) and any of task_name, family, description, atol, rtol, n_trials,
    backward, shape_variants, value_variants. Reference problems are reported at
    `<stem>.py:<line>`, metadata problems at `metadata.jsonl:<line>`.
    """
    directory = Path(directory)
    report = LoadReport(source=str(directory))
    meta_path = directory / METADATA_FILE
    meta = _read_metadata(meta_path, report) if meta_path.exists() else {}
    files = sorted(p for p in directory.glob("*.py") if p.is_file())
    stems = {p.stem for p in files}
    for stem, (lineno, _) in meta.items():
        if stem not in stems:
            _reject(report, [Problem(str(meta_path), lineno, "id", f"no {stem}.py in {directory}: rename the "
                                     "entry to an existing reference or add the file", "unknown_id")])
    tasks: list[KernelBenchTask] = []
    for path in files:
        try:
            source = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            _reject(report, [Problem(str(path), 1, "<file>", f"invalid UTF-8 at byte {e.start}", "bad_json")])
            continue
        line, fields = meta.get(path.stem, (None, {}))
        record = {"kind": KERNELBENCH, "task_name": _default_task_name(path.stem), **fields,
                  "id": path.stem, "reference_src": source}
        problems = [Problem(str(path), p.line, "reference_src", p.message, p.reason) for p in check_reference(source)]
        problems += [Problem(str(meta_path), line or 1, f, m, r) for f, m, r in validate_kernelbench_record(record)
                     if f != "reference_src"]
        if problems:
            _reject(report, problems)
            continue
        tasks.append(KernelBenchTask.from_json(record))
        report.loaded += 1
    if strict and report.problems:
        raise TaskValidationError(report.problems)
    return tasks, report


def save_tasks(tasks: Iterable[AnyTask], path: str | os.PathLike) -> int:
    """Write tasks as JSONL atomically (temp file + rename). Returns the count."""
    return atomic_write_jsonl(path, (task.to_json() for task in tasks))
