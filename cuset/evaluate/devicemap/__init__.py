"""CUDA device requests of a task's own Python scripts mapped to the CPU.

Many CUDABench gen.py/compare.py scripts build their data with torch on a CUDA device
(`torch.device("cuda")`, `.cuda()`, `device="cuda:0"`). On a machine where no GPU
answers they would fail and the task would be `skipped`, although the same data can
be computed on the CPU. Putting this directory on the script's PYTHONPATH makes
Python run its `sitecustomize.py` at start-up (the fork server in `pyrunner` does the
same for its forks): once torch is imported and reports no CUDA device, every device
argument naming CUDA is replaced by the CPU (factory functions, `.cuda()`, `.to()`,
modules, `torch.Generator`; `torch.cuda.synchronize()` does nothing), and the first
replacement prints `MARKER` to stderr so the sample's record can say the mapping was
applied: random data then come from the CPU's generators, not the GPU's, so they
differ from the data the task has on a GPU machine (inputs and references alike).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from cuset.execute.result import StepResult

DIRECTORY = Path(__file__).resolve().parent
MARKER = "[cuset] CUDA device requests mapped to the CPU"   # keep in sync with sitecustomize.py


def env() -> dict[str, str]:
    """Environment additions that turn the mapping on for a Python script."""
    return {"PYTHONPATH": str(DIRECTORY)}


def notes(steps: Iterable[StepResult]) -> tuple[str, ...]:
    """One note per script step whose CUDA device requests were mapped to the CPU."""
    return tuple(f"{s.name}: CUDA device requests mapped to the CPU (no GPU answered)"
                 for s in steps if MARKER in s.stderr)
