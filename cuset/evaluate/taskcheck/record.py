"""The outcome of `cuset tasks check` for one task, and the check file reports read.

One `TaskCheck` per task: its reference solution's verdict through the evaluation
(plain and robust) and, when the reference passed, what its checker made of the
corrupted outputs (`CorruptionResult`, see cuset.evaluate.taskcheck.corrupt). A task's
`defects` are derived from them:

- reference_fails: the benchmark's own answer does not pass the plain evaluation;
- reference_fails_robust: it passes the plain evaluation but not robust verification
  (robust Pass@k of the task cannot be reached);
- checker_cannot_fail: the task's checker accepted at least one corrupted output, so a
  program wrong in that way passes it.

The check file (`task_check.json`) holds every task's record; `load_check` reads it for
reports that exclude or flag the defective tasks.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cuset.errors import CusetError

DEFECTS: dict[str, str] = {
    "reference_fails": "the task's own reference solution fails the evaluation",
    "reference_fails_robust": "the reference passes the plain evaluation but fails robust verification",
    "checker_cannot_fail": "the task's checker accepts corrupted outputs",
}
PASSED = "passed"                          # cuset.execute.result.Status values
NOT_JUDGED = ("skipped", "infra_error")    # the evaluation did not judge the reference: no verdict on the task


class TaskCheckFileError(CusetError, ValueError):
    """A task check file that cannot be read (the message names it and the fix)."""


@dataclass(frozen=True)
class CorruptionResult:
    output: str                    # the corrupted output ("*" for one that replaces all outputs)
    corruption: str                # a name of cuset.evaluate.taskcheck.corrupt.CORRUPTIONS (or constant_answer)
    accepted: bool                 # the task's checker accepted the corrupted output
    strict_caught: bool | None     # cuset's strict element check rejected it; None: it could not check this output
    detail: str = ""               # the checker's or the strict check's words

    @property
    def label(self) -> str:
        return f"{self.output}:{self.corruption}"


@dataclass(frozen=True)
class TaskCheck:
    task_id: int | str
    task_name: str
    kind: str                      # cudabench | kernelbench
    key: str                       # hash of the task's content: an edited task is checked again
    reference_status: str          # Status value of the reference's plain verdict
    reference_detail: str = ""
    robust_status: str | None = None   # of its robust verdict; None: robust verification was off
    robust_detail: str = ""
    checker: str = ""              # what judged the corrupted outputs
    checker_note: str = ""         # why the checker was not measured, or what limits the measurement
    corruptions: tuple[CorruptionResult, ...] = field(default_factory=tuple)

    @property
    def accepted(self) -> tuple[CorruptionResult, ...]:
        return tuple(c for c in self.corruptions if c.accepted)

    @property
    def defects(self) -> tuple[str, ...]:
        found = []
        if self.reference_status not in (PASSED, *NOT_JUDGED):
            found.append("reference_fails")
        elif self.reference_status == PASSED and self.robust_status not in (None, PASSED):
            found.append("reference_fails_robust")
        if self.accepted:
            found.append("checker_cannot_fail")
        return tuple(found)

    @property
    def strict_stronger(self) -> bool | None:
        """Does cuset's strict check reject every corruption the task's checker accepted?
        None when the checker accepted none, or the strict check could not check one."""
        caught = [c.strict_caught for c in self.accepted]
        if not caught or None in caught:
            return None
        return all(caught)

    @property
    def checker_measured(self) -> bool:
        """Were corrupted outputs judged? (No where the reference failed, or its outputs could
        not be had again: `checker_note` says why.)"""
        return bool(self.corruptions)

    @property
    def verdict(self) -> str:
        if self.reference_status in NOT_JUDGED:
            return f"not checked ({self.reference_status})"
        found = ", ".join(d.replace("_", " ") for d in self.defects)
        if found:
            return found
        return "ok" if self.checker_measured else "checker not measured"

    def why(self) -> str:
        """One line: what is wrong with the task (empty when nothing is)."""
        parts = []
        if "reference_fails" in self.defects:
            parts.append(f"reference {self.reference_status}: {self.reference_detail}")
        if "reference_fails_robust" in self.defects:
            parts.append(f"reference robust {self.robust_status}: {self.robust_detail}")
        if self.accepted:
            text = f"{self.checker} accepts {', '.join(c.label for c in self.accepted)}"
            strict = self.strict_stronger
            if self.kind == "kernelbench":
                pass   # the checker is cuset's own element check: there is no stricter one to compare with
            elif strict is True:
                text += " (cuset's strict check, robust=true, rejects them all: the task's checker is weaker)"
            elif strict is None:
                text += " (cuset's strict check could not check every one of them)"
            else:
                text += " (cuset's strict check also accepts some of them)"
            parts.append(text)
        return "; ".join(parts)

    def to_json(self) -> dict:
        d = asdict(self)
        d["corruptions"] = [asdict(c) for c in self.corruptions]
        d["defects"] = list(self.defects)
        d["verdict"] = self.verdict
        d["strict_stronger"] = self.strict_stronger
        return d

    @classmethod
    def from_json(cls, d: dict, where: str = "record") -> "TaskCheck":
        try:
            corruptions = tuple(CorruptionResult(**c) for c in d.get("corruptions") or ())
            fields = {k: d[k] for k in ("task_id", "task_name", "kind", "key", "reference_status")}
            rest = {k: d[k] for k in ("reference_detail", "robust_status", "robust_detail", "checker",
                                      "checker_note") if k in d}
        except (KeyError, TypeError) as e:
            raise TaskCheckFileError(f"{where}: not a task check record ({type(e).__name__}: {e}); "
                                     "write the file with `cuset tasks check`") from None
        return cls(**fields, **rest, corruptions=corruptions)


@dataclass(frozen=True)
class CheckFile:
    """A `cuset tasks check` result as reports read it."""

    path: str
    tasks_file: str
    checks: tuple[TaskCheck, ...]

    def defective(self) -> dict[str, TaskCheck]:
        """Tasks with at least one defect, by id as a string (the form summaries key tasks by)."""
        return {str(c.task_id): c for c in self.checks if c.defects}


def load_check(path: str | Path) -> CheckFile:
    """Read a `task_check.json` written by `cuset tasks check` (or the directory holding it)."""
    path = Path(path)
    if path.is_dir():
        path = path / CHECK_NAME
    if not path.exists():
        raise TaskCheckFileError(f"{path}: no such task check file (write one with "
                                 f"`cuset tasks check TASKS --out DIR`; "
                                 f"it is DIR/{CHECK_NAME})")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise TaskCheckFileError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
    except UnicodeDecodeError as e:
        raise TaskCheckFileError(f"{path}: not UTF-8 text (byte {e.start})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("tasks"), list):
        raise TaskCheckFileError(f"{path}: not a task check file (no list of tasks); write it with `cuset tasks check`")
    checks = tuple(TaskCheck.from_json(d, f"{path}: tasks[{i}]") if isinstance(d, dict) else
                   _not_a_record(path, i) for i, d in enumerate(doc["tasks"]))
    return CheckFile(str(path), str(doc.get("tasks_file", "")), checks)


def _not_a_record(path: Path, i: int):
    raise TaskCheckFileError(f"{path}: tasks[{i}] is not an object; write the file with `cuset tasks check`")


CHECK_NAME = "task_check.json"
