"""Typed outcomes of running one program: shared by the GPU and CPU backends,
the evaluation pipeline and data validation."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from enum import Enum

LOG_LIMIT = 4000  # characters of stdout/stderr kept per step


class Status(str, Enum):
    """Outcome of one sample, ordered roughly by pipeline stage."""

    NO_CODE = "no_code"              # nothing extractable from the model's response
    COMPILE_ERROR = "compile_error"  # nvcc (or the CPU backend's g++) rejected it
    RUNTIME_ERROR = "runtime_error"  # non-zero exit, crash, CUDA error, killed by a limit
    TIMEOUT = "timeout"              # wall-clock limit hit; the process group was killed
    WRONG = "wrong"                  # ran, but outputs missing, stale or rejected by compare.py
    RACE = "race"                    # CPU backend: outputs differ between thread orders
    WARP_SYNC = "warp_sync"          # CPU backend: relies on implicit warp-synchronous execution
    UNSUPPORTED = "unsupported"      # uses a feature the backend cannot run (named in `detail`)
    MEMORY_LIMIT = "memory_limit"    # the program's process tree exceeded its memory budget (cgroup)
    DISK_LIMIT = "disk_limit"        # the program filled its run dir's disk quota
    SKIPPED = "skipped"              # data exceed the backend's budget; left out of denominators
    INFRA_ERROR = "infra_error"      # the evaluation's own machinery failed (a Ray worker died, retries spent);
                                     # not the program's fault: left out of denominators and listed
    PASSED = "passed"

    @property
    def compiled(self) -> bool:
        """Did the program get past compilation? (No for statuses decided before it.)"""
        return self not in (Status.NO_CODE, Status.COMPILE_ERROR, Status.SKIPPED, Status.INFRA_ERROR)


def truncate_log(text: str | bytes | None, limit: int = LOG_LIMIT) -> str:
    """Keep the head and tail of a long log: errors are usually at one end."""
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... [{len(text) - limit} characters cut] ...\n{text[-half:]}"


# Control characters other than newline and tab (C0, DEL, C1): a detail quoting a
# program's text must not drive the terminal or the Markdown report that shows it.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def printable(text: str) -> str:
    """Untrusted text made safe to store and show: control characters other than newline
    and tab written as `\\xNN`, lone surrogates (not encodable as UTF-8) as U+FFFD."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return _SURROGATE.sub("\ufffd", text)


@dataclass(frozen=True)
class StepResult:
    """One subprocess step (gen, compile, run, compare)."""

    name: str
    returncode: int | None
    seconds: float
    timed_out: bool = False
    stdout: str = ""
    stderr: str = ""
    limit: str = ""                  # a resource limit the step hit: "memory_limit" or "disk_limit"
    diagnostics: str | None = None   # the CPU runtime's own channel (None: not used, read stderr)
    # user + system CPU seconds of the step's process and every descendant it waited for
    # (wait4); None where unknown (a step that never started, records written before)
    cpu_seconds: float | None = None


WITHOUT_KERNEL = {   # why a KernelBench pass ran none of its own kernels (KernelEvidence.without_kernel)
    "no_kernel_called": "no kernel of its own launched in the checked calls (a pure-torch answer, or one whose "
                        "kernels are never reached at these inputs)",
    "build_failed": "an extension it asked for failed to build and it went on without it (torch's fallback)",
}


@dataclass(frozen=True)
class KernelEvidence:
    """What a KernelBench candidate did with its own kernels (cuset.execute.kernelbench.verify).
    `built` and `failed` are the parent's own facts (it built every extension); `launches`
    and `calls` are counted in the candidate's process and believed only when an extension
    it loaded was built."""

    built: int = 0                     # extensions built that its run loaded
    failed: tuple[str, ...] = ()       # load_inline names it asked for whose build failed
    launches: int | None = None        # launches of its own kernels in the checked calls (CPU runtime; None on GPU)
    calls: int = 0                     # calls of its extensions' functions in the checked calls
    ran: bool = False                  # its run finished every trial (KernelBench's "ran without error")

    @property
    def kernel_ran(self) -> bool:
        """Its own kernels ran in the checked calls: launches where counted, else extension calls."""
        return (self.launches if self.launches is not None else self.calls) > 0

    @property
    def all_built(self) -> bool:
        return not self.failed

    def without_kernel(self) -> str:
        """"" when its own kernels ran; else the WITHOUT_KERNEL category."""
        if self.kernel_ran:
            return ""
        return "build_failed" if self.failed else "no_kernel_called"

    def to_json(self) -> dict:
        return {"built": self.built, "failed": list(self.failed), "launches": self.launches, "calls": self.calls,
                "ran": self.ran}

    @classmethod
    def from_json(cls, d: dict | None) -> "KernelEvidence | None":
        if d is None:
            return None
        return cls(int(d.get("built", 0)), tuple(d.get("failed", ())), d.get("launches"), int(d.get("calls", 0)),
                   bool(d.get("ran", False)))


@dataclass(frozen=True)
class ExecResult:
    """The outcome of evaluating one program on one task (or one input case)."""

    status: Status
    detail: str = ""                       # human-readable reason, e.g. "missing output y"
    steps: tuple[StepResult, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
    backend: str = ""                      # "gpu" | "cpu"
    # Robust verification (EvalOptions.robust): the verdict over the extra checks
    # (more input cases, the strict every-element check, other shapes/values, backward).
    # None when robust verification was off; `status` above is always the plain verdict.
    robust_status: Status | None = None
    robust_detail: str = ""
    robust_check: str = ""                 # which robust check decided a failure, e.g. "strict", "cases"
    # KernelBench answers: the static reward-hack rules that fired, "rule:line" (cuset.evaluate.kernelbench_hacks)
    hack: tuple[str, ...] = ()
    # `perf=true`: the timing of a passing program (cuset.evaluate.perf.records); None when not timed
    perf: dict | None = None
    kernel: KernelEvidence | None = None   # KernelBench: the candidate's own kernels (None for CUDABench programs)
    # A `wrong` (or `race`) verdict's outputs against the reference, element by element: counts and the
    # first differing elements, bounded (cuset.evaluate.strict.mismatch_record); None when none was made.
    mismatch: dict | None = None

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED

    @property
    def robust_passed(self) -> bool | None:
        """Passed the plain AND the robust checks; None when robust verification was off."""
        if self.robust_status is None:
            return None
        return self.passed and self.robust_status is Status.PASSED

    def to_json(self) -> dict:
        d = asdict(self)
        d["status"] = self.status.value
        d["robust_status"] = self.robust_status.value if self.robust_status is not None else None
        d["kernel"] = self.kernel.to_json() if self.kernel is not None else None
        return d

    @classmethod
    def from_json(cls, d: dict) -> "ExecResult":
        return cls(
            status=Status(d["status"]), detail=d.get("detail", ""),
            steps=tuple(StepResult(**s) for s in d.get("steps", ())),
            timings=dict(d.get("timings", {})), backend=d.get("backend", ""),
            robust_status=Status(d["robust_status"]) if d.get("robust_status") else None,
            robust_detail=d.get("robust_detail", ""), robust_check=d.get("robust_check", ""),
            hack=tuple(d.get("hack") or ()), perf=d.get("perf"),
            kernel=KernelEvidence.from_json(d.get("kernel")),
            mismatch=d.get("mismatch") if isinstance(d.get("mismatch"), dict) else None,
        )

    def dumps(self) -> str:
        return json.dumps(self.to_json())
