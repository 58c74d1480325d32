"""The per-sample evaluation record: one line of a results JSONL.

Field names are a contract with analysis/report and data curation; keep them
stable. Results are appended as samples finish (`ResultWriter`) and read back
(`load_results`) under cuset.io's JSONL policy: the torn last line of an
interrupted run is dropped, so that sample is redone.
"""

from __future__ import annotations

import os
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Iterable

from cuset.io import JsonlAppender, atomic_write_jsonl, iter_jsonl
from cuset.errors import CusetError
from cuset.execute.result import ExecResult, Status, StepResult


class ResultRecordError(CusetError, ValueError):
    """A results line whose fields are missing or malformed (path:line in the message)."""


@dataclass(frozen=True)
class SampleResult:
    task_id: int | str
    task_name: str
    family: str
    sample: int
    status: Status
    detail: str = ""
    compiled: bool = False          # the compile judge accepted it: nvcc, or the backend's own compiler (see summary meta)
    ran_ok: bool = False            # the program ran (every order/case) with exit code 0
    passed: bool = False            # outputs accepted by compare.py in every case
    n_tokens: int | None = None
    timings: dict[str, float] = field(default_factory=dict)
    backend: str = ""
    code_sha256: str | None = None
    steps: tuple[StepResult, ...] = ()   # logs already truncated by run_step
    notes: tuple[str, ...] = ()          # e.g. gen.py's CUDA device requests were mapped to the CPU
    reasoning_tokens: int | None = None  # of n_tokens, the reasoning trace's (reasoning models)
    # Robust verification (ExecResult.robust_*); None/"" when it was off (and in older results files).
    robust_status: Status | None = None
    robust_detail: str = ""
    robust_check: str = ""          # strict | cases (failures), cases_unavailable (a pass without new cases)
    hack: tuple[str, ...] = ()      # KernelBench: reward-hack rules that fired, "rule:line"
    perf: dict | None = None        # perf=true: times and metrics of a passing program (cuset.evaluate.perf.records)
    # KernelBench (ExecResult.kernel); None/()/"" for CUDABench programs (and in older results files).
    kernel_launches: int | None = None      # the candidate's own kernel launches in the checked calls (CPU runtime)
    extension_calls: int | None = None      # calls of its extensions' functions in the checked calls
    extensions_built: int | None = None     # extensions built for it that its run loaded
    extensions_failed: tuple[str, ...] = ()  # load_inline calls it made whose build failed
    passed_without_kernel: str = ""         # a pass that ran none of its own kernels: why (WITHOUT_KERNEL)
    # `wrong`/`race`: the rejected outputs against the reference, bounded (ExecResult.mismatch); None otherwise.
    mismatch: dict | None = None
    # The evaluator itself raised on this sample (runner.evaluator_failure). Set by the runner on
    # that path alone, never read from anything the candidate wrote: its detail text is not
    # evidence (a KernelBench candidate writes its own detail and could spell the same words).
    evaluator_failed: bool = False
    # Who judged it (cuset.evaluate.judge): set by the runner as it writes the result; a results
    # file resumed by another judge judges this sample again. "" in files written before judges.
    judge: str = ""

    @property
    def key(self) -> tuple[int, int]:
        return (self.task_id, self.sample)

    @property
    def robust_passed(self) -> bool | None:
        """Passed the plain AND the robust checks; None when robust verification was off."""
        if self.robust_status is None:
            return None
        return self.passed and self.robust_status is Status.PASSED

    @property
    def has_code(self) -> bool:
        return self.status is not Status.NO_CODE

    @classmethod
    def from_exec(cls, exec_result: ExecResult, *, task_id: int, task_name: str, family: str, sample: int,
                  compiled: bool, ran_ok: bool, n_tokens: int | None, code_sha256: str | None,
                  notes: tuple[str, ...] = (), reasoning_tokens: int | None = None) -> "SampleResult":
        return cls(
            task_id=task_id, task_name=task_name, family=family, sample=sample,
            status=exec_result.status, detail=exec_result.detail, compiled=compiled, ran_ok=ran_ok,
            passed=exec_result.passed, n_tokens=n_tokens, timings=dict(exec_result.timings),
            backend=exec_result.backend, code_sha256=code_sha256, steps=tuple(exec_result.steps),
            notes=tuple(notes), reasoning_tokens=reasoning_tokens, robust_status=exec_result.robust_status,
            robust_detail=exec_result.robust_detail, robust_check=exec_result.robust_check,
            hack=tuple(exec_result.hack), perf=exec_result.perf, mismatch=exec_result.mismatch,
            **_kernel_fields(exec_result),
        )

    def to_json(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["status"] = self.status.value
        d["robust_status"] = self.robust_status.value if self.robust_status is not None else None
        d["steps"] = [_step_json(s) for s in self.steps]
        return d

    @classmethod
    def from_json(cls, d: dict, where: str = "result") -> "SampleResult":
        names = [f.name for f in fields(cls)]
        missing = [f.name for f in fields(cls) if f.name not in d
                   and f.default is MISSING and f.default_factory is MISSING]
        if missing:
            raise ResultRecordError(f"{where}: missing field(s) {', '.join(missing)}")
        try:
            status = Status(d["status"])
        except ValueError:
            raise ResultRecordError(f"{where}: unknown status {d['status']!r}; one of "
                             f"{', '.join(s.value for s in Status)}") from None
        kw = {n: d[n] for n in names if n in d}
        kw["status"] = status
        kw["robust_status"] = _status(d.get("robust_status"), where, "robust_status")
        kw["steps"] = tuple(StepResult(**s) for s in d.get("steps", ()))
        kw["timings"] = dict(d.get("timings") or {})
        kw["notes"] = tuple(d.get("notes") or ())
        kw["hack"] = tuple(d.get("hack") or ())
        kw["extensions_failed"] = tuple(d.get("extensions_failed") or ())
        kw["passed_without_kernel"] = d.get("passed_without_kernel") or ""
        kw["mismatch"] = d.get("mismatch") if isinstance(d.get("mismatch"), dict) else None
        kw["evaluator_failed"] = d.get("evaluator_failed") is True
        kw["judge"] = d.get("judge") if isinstance(d.get("judge"), str) else ""
        return cls(**kw)


def _kernel_fields(r: ExecResult) -> dict:
    k = r.kernel
    if k is None:
        return {}
    return {"kernel_launches": k.launches, "extension_calls": k.calls, "extensions_built": k.built,
            "extensions_failed": tuple(k.failed), "passed_without_kernel": k.without_kernel() if r.passed else ""}


def _status(value, where: str, name: str) -> Status | None:
    if value is None:
        return None
    try:
        return Status(value)
    except ValueError:
        raise ResultRecordError(f"{where}: unknown {name} {value!r}; one of {', '.join(s.value for s in Status)}") from None


def _step_json(step: StepResult) -> dict:
    return {f.name: getattr(step, f.name) for f in fields(step)}


def load_results(path: str | os.PathLike) -> list[SampleResult]:
    """All results of a JSONL file (later lines win for a repeated (task_id, sample))."""
    path = Path(path)
    if not path.exists():
        return []
    by_key: dict[tuple[int, int], SampleResult] = {}
    for lineno, d in iter_jsonl(path):
        r = SampleResult.from_json(d, f"{path}:{lineno}")
        by_key[r.key] = r
    return list(by_key.values())


class ResultWriter(JsonlAppender):
    """Appends one flushed line per result; safe to call from several threads."""

    def write(self, result: SampleResult) -> None:
        self.append(result.to_json())


def save_results(path: str | os.PathLike, results: Iterable[SampleResult]) -> None:
    atomic_write_jsonl(path, (r.to_json() for r in results))

