"""Compile and run one CUDA program with the CPU backend, outside the
evaluation pipeline: for tests, benchmarks and quick checks of trusted code
(model-generated code goes through the sandboxed pipeline instead)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from cuset.execute.interface import CompileOutcome
from cuset.execute.process import clean_env, run_step
from cuset.execute.result import Status, StepResult


@dataclass(frozen=True)
class ProgramRun:
    compiled: CompileOutcome
    run: StepResult | None = None                          # None when compilation failed
    files: dict[str, bytes] = field(default_factory=dict)  # files the program wrote (relative paths)
    classified: tuple[Status, str] | None = None           # backend's reading of a failed run

    @property
    def ok(self) -> bool:
        return self.run is not None and self.run.returncode == 0 and not self.run.timed_out

    @property
    def status(self) -> Status | None:
        """Status from compile/run alone (output checks are the caller's business)."""
        if not self.compiled.ok:
            return self.compiled.status
        if self.run.timed_out:
            return Status.TIMEOUT
        if self.classified:
            return self.classified[0]
        return None if self.run.returncode == 0 else Status.RUNTIME_ERROR


def compile_program(source: str, workdir: str | Path, timeout: float = 120.0, backend=None) -> CompileOutcome:
    backend = backend or _default_backend()
    return backend.compile(source, Path(workdir) / "build", timeout)


def run_compiled(compiled: CompileOutcome, workdir: str | Path, inputs: dict[str, bytes] | None = None,
                 timeout: float = 60.0, order: str = "forward", backend=None, args: list[str] | None = None,
                 run_name: str | None = None) -> ProgramRun:
    """Run a compiled program in a fresh directory under workdir, with `inputs`
    (relative path -> bytes) written there first."""
    backend = backend or _default_backend()
    if not compiled.ok:
        return ProgramRun(compiled)
    rundir = Path(workdir) / (run_name or f"run-{order.replace(':', '-')}")
    rundir.mkdir(parents=True, exist_ok=True)
    for rel, data in (inputs or {}).items():
        path = rundir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    before = {p: p.stat().st_mtime_ns for p in rundir.rglob("*") if p.is_file()}
    inv = backend.invocation(compiled.executable, order)
    step = run_step("run", inv.argv + list(args or []), cwd=rundir, timeout=timeout, env=clean_env(inv.env))
    files = {}
    for p in sorted(rundir.rglob("*")):
        if p.is_file() and before.get(p) != p.stat().st_mtime_ns:
            files[os.path.relpath(p, rundir)] = p.read_bytes()
    failed = step.returncode != 0 or step.timed_out
    return ProgramRun(compiled, step, files, backend.classify_failure(step) if failed else None)


def run_program(source: str, workdir: str | Path, inputs: dict[str, bytes] | None = None, timeout: float = 60.0,
                order: str = "forward", backend=None, compile_timeout: float = 120.0) -> ProgramRun:
    backend = backend or _default_backend()
    compiled = compile_program(source, workdir, compile_timeout, backend)
    return run_compiled(compiled, workdir, inputs, timeout, order, backend)


_BACKEND = None


def _default_backend():
    global _BACKEND
    if _BACKEND is None:
        from cuset.execute.cpu.backend import CpuBackend
        _BACKEND = CpuBackend()
    return _BACKEND
