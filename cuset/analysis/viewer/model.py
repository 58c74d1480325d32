"""The viewer's data, built from loaded runs: one row per sample, counts per run, family
and level, and per-task outcomes for the comparison. Pure: no files written.

A task "passed" in a run when at least one of its samples there passed; "A passed, B
failed" lists the tasks both runs evaluated that A passed and B did not.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Sequence

from cuset.analysis.viewer.sources import LoadedRun
from cuset.evaluate.records import SampleResult
from cuset.tasks.schema import task_id_order

DETAIL_CHARS = 200   # of a detail in the sample table (the sample page has all of it)
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def page_name(task_id: int | str, sample: int) -> str:
    """A file name for a sample page: the task id's safe characters, plus a hash when any
    had to be replaced (so two ids never share a page)."""
    text = str(task_id)
    safe = _UNSAFE.sub("_", text)[:60].lstrip(".") or "task"
    if safe != text:
        safe += "-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{safe}-s{sample}.html"


def sample_href(run_index: int, task_id: int | str, sample: int) -> str:
    """A sample page's path, relative to the site's root."""
    return f"s/{run_index}/{page_name(task_id, sample)}"


@dataclass(frozen=True)
class SampleRow:
    """One sample as the sample table shows and filters it."""

    run: int
    task_id: str
    task_name: str
    family: str
    level: int | None
    sample: int
    status: str
    compiled: bool
    robust_status: str | None
    robust_check: str
    n_tokens: int | None
    seconds: float | None
    detail: str
    href: str

    def to_json(self) -> dict[str, Any]:
        return {"r": self.run, "t": self.task_id, "n": self.task_name, "f": self.family, "l": self.level,
                "s": self.sample, "st": self.status, "c": self.compiled, "rs": self.robust_status,
                "rc": self.robust_check, "tok": self.n_tokens, "sec": self.seconds, "d": self.detail,
                "u": self.href}


@dataclass(frozen=True)
class Tally:
    n: int = 0
    passed: int = 0
    compiled: int = 0

    def add(self, record: SampleResult) -> "Tally":
        return Tally(self.n + 1, self.passed + record.passed, self.compiled + record.compiled)

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.n if self.n else None


@dataclass(frozen=True)
class TaskOutcome:
    """How one run did on one task: samples evaluated and passed, and their pages."""

    n: int
    passed: int
    hrefs: tuple[tuple[int, str, str], ...]   # (sample, status, href)

    @property
    def any_passed(self) -> bool:
        return self.passed > 0


@dataclass(frozen=True)
class ViewModel:
    runs: tuple[LoadedRun, ...]
    rows: tuple[SampleRow, ...]
    statuses: tuple[dict[str, int], ...]                 # per run
    families: dict[str, tuple[Tally, ...]]               # family -> per run
    levels: dict[str, tuple[Tally, ...]]                 # level ("?" unknown) -> per run
    tasks: dict[str, dict[str, Any]]                     # task id -> {"name", "family"}
    outcomes: dict[str, dict[int, TaskOutcome]]          # task id -> run -> outcome

    def row_of(self, run: int, record: SampleResult) -> SampleRow:
        """The table row of `record` of run `run`."""
        return self._rows_by_key()[(run, str(record.task_id), record.sample)]

    def _rows_by_key(self) -> dict[tuple[int, str, int], SampleRow]:
        cached = self.__dict__.get("_by_key")
        if cached is None:
            cached = {(r.run, r.task_id, r.sample): r for r in self.rows}
            object.__setattr__(self, "_by_key", cached)   # a cache of derived data; the fields stay frozen
        return cached

    def passed_failed(self, a: int, b: int) -> list[str]:
        """Task ids both runs evaluated that run `a` passed and run `b` did not, in task order."""
        return [t for t, per_run in self.outcomes.items()
                if a in per_run and b in per_run and per_run[a].any_passed and not per_run[b].any_passed]

    def pairs(self) -> dict[str, list[str]]:
        """`passed_failed` for every ordered pair of runs, keyed "a|b"."""
        n = len(self.runs)
        return {f"{a}|{b}": self.passed_failed(a, b) for a in range(n) for b in range(n) if a != b}


def _seconds(record: SampleResult) -> float | None:
    total = record.timings.get("total")
    return round(total, 3) if isinstance(total, (int, float)) else None


def build_model(runs: Sequence[LoadedRun], levels: Sequence[dict[tuple[str, int], int]] = ()) -> ViewModel:
    """`levels[i]`: (task id, sample) -> prompt level of run i (from its generations), if known."""
    rows: list[SampleRow] = []
    statuses = []
    families: dict[str, list[Tally]] = defaultdict(lambda: [Tally()] * len(runs))
    by_level: dict[str, list[Tally]] = defaultdict(lambda: [Tally()] * len(runs))
    tasks: dict[str, dict[str, Any]] = {}
    per_task: dict[str, dict[int, list[SampleResult]]] = defaultdict(lambda: defaultdict(list))
    order: dict[str, tuple] = {}
    for i, run in enumerate(runs):
        level_map = levels[i] if i < len(levels) else {}
        records = sorted(run.records, key=lambda r: (task_id_order(r.task_id), r.sample))
        statuses.append(dict(Counter(r.status.value for r in records).most_common()))
        for r in records:
            tid = str(r.task_id)
            level = level_map.get((tid, r.sample))
            rows.append(SampleRow(i, tid, r.task_name, r.family, level, r.sample, r.status.value, r.compiled,
                                  r.robust_status.value if r.robust_status is not None else None, r.robust_check,
                                  r.n_tokens, _seconds(r), r.detail[:DETAIL_CHARS], sample_href(i, r.task_id, r.sample)))
            families[r.family][i] = families[r.family][i].add(r)
            key = str(level) if level is not None else "?"
            by_level[key][i] = by_level[key][i].add(r)
            tasks.setdefault(tid, {"name": r.task_name, "family": r.family})
            order.setdefault(tid, task_id_order(r.task_id))
            per_task[tid][i].append(r)
    outcomes = {}
    for tid in sorted(per_task, key=order.__getitem__):
        outcomes[tid] = {i: TaskOutcome(len(rs), sum(r.passed for r in rs),
                                        tuple((r.sample, r.status.value, sample_href(i, r.task_id, r.sample))
                                              for r in sorted(rs, key=lambda r: r.sample)))
                         for i, rs in sorted(per_task[tid].items())}
    return ViewModel(tuple(runs), tuple(rows), tuple(statuses),
                     {f: tuple(t) for f, t in sorted(families.items())},
                     {lv: tuple(t) for lv, t in sorted(by_level.items())}, tasks, outcomes)
