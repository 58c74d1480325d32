"""The interface every execution backend implements (lookup by name: `cuset.execute.registry`).

A backend knows how to turn CUDA source into an executable and how to invoke it.
The evaluation pipeline owns everything else (compile cache, sandbox, inputs,
output checks, compare.py), so GPU and CPU runs share one code path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from cuset.execute.result import Status, StepResult


@dataclass(frozen=True)
class CompileOutcome:
    """Result of compiling one source. `executable` is set iff ok."""

    ok: bool
    executable: Path | None
    step: StepResult
    status: Status | None = None   # COMPILE_ERROR or UNSUPPORTED when not ok
    detail: str = ""
    # the compiler ran for this outcome (False: read from a cache); not part of what it is
    built: bool = field(default=False, compare=False)
    # sha256 of the executable as the compile cache stored it (None outside a cache)
    digest: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Invocation:
    """How to run a compiled program once: argv (relative to the run dir) plus env additions."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    # The variable through which the program's runtime takes a diagnostics fd that the
    # program cannot forge (the pipeline opens it and fills StepResult.diagnostics).
    diagnostics_env: str | None = None
    # A fresh secret the runtime echoes on that channel (the CPU runtime's order proof):
    # a line without it was not written by the runtime.
    secret: str = ""


@runtime_checkable
class Backend(Protocol):
    name: str                      # "gpu" or "cpu"
    run_orders: tuple[str, ...]    # thread orders each program runs under; ("default",) on a GPU
    max_data_bytes: int | None     # tasks whose declared I/O exceed this are `skipped`

    def fingerprint(self) -> str:
        """Compiler version + flags + runtime version: part of the compile-cache key."""

    def compile(self, source: str, workdir: Path, timeout: float) -> CompileOutcome:
        """Compile `source` inside `workdir` (a fresh private directory)."""

    def invocation(self, executable: Path, order: str) -> Invocation:
        """How to run `executable` under thread order `order` (one of run_orders)."""

    def classify_failure(self, step: StepResult) -> tuple[Status, str] | None:
        """Map a failed run to a backend-specific status (e.g. CPU `unsupported`,
        `warp_sync`, a CUDA error), or None for the pipeline's generic handling.
        (Optional next to it: `wrong_output_note() -> str`, appended to `wrong` verdicts,
        e.g. the CPU backend's poisoned device memory; `orders_to_skip(step, invocation)
        -> (orders, why)`, after a successful run of the first order: the later orders that
        cannot change the outputs, e.g. the CPU backend's order proof.)"""
