"""`perf=true` options (EvalConfig.perf_timing)."""

from __future__ import annotations

from dataclasses import dataclass

from cuset.config import option

DEFAULT_WARMUP = 3      # as cuset.execute.perf.timing (a standalone file: not imported here)
DEFAULT_TRIALS = 100


@dataclass
class PerfOptions:
    warmup: int = option(DEFAULT_WARMUP, help="untimed forward calls before the trials")
    trials: int = option(DEFAULT_TRIALS, help="timed forward calls (CUDA events, L2 flushed before each)")
    compile_baseline: bool = option(True, help="also time torch.compile(Model) for a speedup over it")
    run_timeout: float = option(600.0, help="seconds for each timing run (the reference's, the answer's)")
    step_timeout: float = option(300.0, help="seconds for one step of a timing run (import, build, trials)")
    seed: int | None = option(None, help="seed of the timed inputs and of the models' parameters; unset: a fresh "
                                         "one per answer, recorded in its perf record (an answer that cannot "
                                         "know its inputs in advance cannot precompute its outputs)")
    suspect_speedup: float = option(2.0, help="speedups over eager above this are listed for review")
    ncu: str = option("ncu", help="CUDABench: the Nsight Compute CLI (a name on PATH or a path); a sample whose "
                                  "program passed is profiled with it (`ncu --metrics ... --csv`) for the official "
                                  "roofline score; where it is missing each record says 'ncu not installed'")
    profile_timeout: float = option(300.0, help="CUDABench: seconds for the program's run under ncu (it replays "
                                                "every kernel once per metric pass, so far slower than a plain run)")

    def __post_init__(self):
        if self.profile_timeout <= 0:
            raise ValueError(f"perf profile_timeout={self.profile_timeout}: need a positive number of seconds")
        if self.warmup < 0 or self.trials < 1:
            raise ValueError(f"perf warmup={self.warmup}, trials={self.trials}: need warmup >= 0 and trials >= 1")
