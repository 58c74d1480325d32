"""How to evaluate: the one options object every evaluation entry takes (`EvalOptions`).

Callers that need a variation build one with `dataclasses.replace(options, cases=(0, 1))`;
`evaluate_program` takes nothing that overrides a field of it. The `cuset eval` config
builds one with `EvalConfig.options()`; curation's validation builds one too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cuset.execute.kernelbench.reference_store import ReferenceStore
from cuset.execute.sandbox import SandboxPolicy


@dataclass(frozen=True)
class Timeouts:
    """Wall-clock seconds per step (compat mode: compile and run at 60 s, as the harness)."""

    gen: float = 300.0
    compile: float = 120.0
    run: float = 60.0
    compare: float = 120.0


@dataclass(frozen=True)
class EvalOptions:
    """Everything about how to evaluate that is not the task, the code or the backend."""

    cases: tuple[int, ...] = (0,)
    timeouts: Timeouts = Timeouts()
    compat: bool = False
    max_data_bytes: int | None = None          # overrides backend.max_data_bytes when set
    sandbox: SandboxPolicy = SandboxPolicy()
    cpu_memory_bytes: int | None = 8 << 30     # RLIMIT_AS for programs on the CPU backend
    # Memory of a program's whole process tree (cgroup, where available) and the disk
    # quota of its run dir beyond the inputs (tmpfs, where mounting works); None: no limit.
    program_memory_bytes: int | None = 8 << 30
    run_disk_bytes: int | None = None          # None: 64 MiB + 2x the declared outputs
    extra_env: dict[str, str] = field(default_factory=dict)
    # KernelBench: both models as built ("train", KernelBench's protocol) or both after .eval()
    eval_mode: str = "train"
    # Robust verification: besides the plain verdict, check `robust_cases` input cases
    # and every element of every output (ExecResult.robust_*). Off in compat mode.
    robust: bool = False
    robust_cases: int = 3
    strict_kernels: bool = False
    # KernelBench: request rounds (candidate runs ending in a load_inline request) per sample
    build_rounds: int = 4
    # The programs are the tasks' own references or the project's own task programs, not
    # model answers. Only then may evidence that a program's own process reports save work:
    # the CPU runtime's order proof skipping the other thread orders. Anything that process
    # writes, a hostile program can write too (docs/sandbox.md, "Verdict channels").
    trusted_programs: bool = False
    # KernelBench: where each reference run's inputs and expected outputs are kept on disk
    # for every process of the machine (None: only in this process's memory)
    reference_store: ReferenceStore | None = ReferenceStore()
