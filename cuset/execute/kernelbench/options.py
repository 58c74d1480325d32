"""How to verify a KernelBench candidate: the one options record `verify` takes.

cuset.evaluate builds one per sample from its `EvalOptions` and the task's tolerances
(cuset.evaluate.kernelbench.verify_options); a check that varies a setting (the random
thread order, the run with the candidate's kernels skipped) takes
`dataclasses.replace(options, ...)`. The record lives here, not in cuset.evaluate:
cuset.execute sits below it and never imports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cuset.execute.kernelbench.budget import DEFAULT_ROUNDS
from cuset.execute.kernelbench.reference_store import ReferenceStore
from cuset.execute.sandbox import SandboxPolicy

BACKENDS = ("cpu", "gpu")
EVAL_MODES = ("train", "eval")      # both models as built (KernelBench), or both after .eval()


@dataclass(frozen=True)
class VerifyOptions:
    """Everything about verifying one candidate that is not its source, the reference's
    source or the checks (see `verify` for what each limit does)."""

    backend: str = "cpu"                        # "cpu" (the CPU backend's build) or "gpu" (nvcc)
    atol: float = 1e-2                          # the task's tolerances of the comparison
    rtol: float = 1e-2
    compile_timeout: float = 120.0              # the default build budget's seconds
    step_timeout: float = 60.0                  # each step of the harness (import, construction, trials)
    import_timeout: float | None = None         # None: compile_timeout + 60 on the GPU, else 60 s
    sandbox: SandboxPolicy = SandboxPolicy()
    program_memory_bytes: int | None = 8 << 30  # each run's process tree (cgroup, where available)
    run_disk_bytes: int | None = None           # None: RUN_DISK_SLACK + twice the reference's outputs
    build_budget_seconds: float | None = None   # None: compile_timeout (when verify makes the budget)
    build_rounds: int = DEFAULT_ROUNDS
    extra_env: dict[str, str] = field(default_factory=dict)       # the reference's and the candidate's runs
    candidate_env: dict[str, str] = field(default_factory=dict)   # the candidate's runs only
    # a library preloaded (LD_PRELOAD, bound read-only) into the candidate's runs only: on the GPU,
    # strict_kernels' run without the candidate's own launches (launch_skip.library())
    candidate_preload: Path | None = None
    eval_mode: str = "train"
    # where the reference's values are kept for every process of the machine (None: memory only)
    reference_store: ReferenceStore | None = ReferenceStore()

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ValueError(f"VerifyOptions.backend={self.backend!r}: KernelBench verification runs on "
                             f"{' or '.join(map(repr, BACKENDS))}")
        if self.eval_mode not in EVAL_MODES:
            raise ValueError(f"VerifyOptions.eval_mode={self.eval_mode!r}: use one of {EVAL_MODES}")

    def env(self, role: str) -> dict[str, str]:
        """The variables a run of `role` ("reference" or "candidate") gets beyond the harness's own."""
        return {**self.extra_env, **self.candidate_env} if role == "candidate" else dict(self.extra_env)
