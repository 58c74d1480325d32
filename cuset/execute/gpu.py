"""GPU execution backend: nvcc builds the program, the pipeline runs it on one GPU.

Compat mode reproduces the official harness: `nvcc kernel.cu -o kernel` with no
flags and a 60 s limit. The default adds the flags from the config.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

from cuset.execute.interface import CompileOutcome, Invocation
from cuset.localpath import MissingPath
from cuset.execute.result import Status, StepResult, printable
from cuset.execute.sandbox import NVCC_MEMORY_BYTES, compile_policy, run_compiler

DEFAULT_FLAGS = ("-O2",)
COMPAT_COMPILE_TIMEOUT = 60.0

# CUDA runtime errors as programs usually print them (cudaGetErrorString text or enum names).
CUDA_ERROR_RE = re.compile(
    r"(cudaError\w+|an illegal memory access was encountered|unspecified launch failure|"
    r"out of memory|invalid configuration argument|too many resources requested for launch|"
    r"misaligned address|invalid device function|no kernel image is available)", re.IGNORECASE)


@lru_cache(maxsize=None)
def nvcc_version(nvcc: str = "nvcc") -> str:
    path = shutil.which(nvcc)
    if path is None:
        raise MissingPath(f"{nvcc} not found on PATH: install the CUDA toolkit or use --backend cpu")
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    # "Cuda compilation tools, release 13.0, V13.0.88" + "Build cuda_13.0.r13.0/compiler.36424714_0"
    lines = [line.strip() for line in out.stdout.splitlines() if "release" in line or line.startswith("Build")]
    return " ".join(lines) or out.stdout.strip() or "unknown"


@lru_cache(maxsize=None)
def gpu_name(device: str) -> str:
    """The host's name for GPU `device` (nvidia-smi), never the profiled program's word."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "unknown GPU (nvidia-smi not installed)"
    try:
        out = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader", "-i", device.split(",")[0]],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unknown GPU (nvidia-smi: {type(e).__name__})"
    name = out.stdout.strip().splitlines()[:1]
    return printable(name[0])[:100] if out.returncode == 0 and name else "unknown GPU (nvidia-smi failed)"


class GpuBackend:
    name = "gpu"
    run_orders = ("default",)

    def __init__(self, flags: tuple[str, ...] | list[str] | None = None, *, compat: bool = False,
                 device: int | str = 0, nvcc: str = "nvcc", max_data_bytes: int | None = None,
                 sandbox_mode: str = "auto"):
        self.compat = compat
        self.flags = () if compat else tuple(DEFAULT_FLAGS if flags is None else flags)
        self.device = str(device)
        self.nvcc = nvcc
        self.max_data_bytes = max_data_bytes
        self.sandbox_mode = sandbox_mode   # of the compile step (the source is untrusted)

    def fingerprint(self) -> str:
        return f"gpu|{nvcc_version(self.nvcc)}|{' '.join(self.flags)}"

    def compile(self, source: str, workdir: Path, timeout: float) -> CompileOutcome:
        if self.compat:
            timeout = COMPAT_COMPILE_TIMEOUT
        workdir = Path(workdir).resolve()  # the executable path must hold outside workdir too
        (workdir / "kernel.cu").write_text(source, encoding="utf-8")
        argv = [self.nvcc, *self.flags, "kernel.cu", "-o", "kernel"]
        policy = compile_policy(timeout, self.sandbox_mode, NVCC_MEMORY_BYTES)
        step = run_compiler(argv, build_dir=workdir, timeout=timeout, policy=policy)
        exe = workdir / "kernel"
        if step.returncode == 0 and not step.timed_out and exe.exists():
            return CompileOutcome(True, exe, step)
        if step.timed_out:
            return CompileOutcome(False, None, step, Status.TIMEOUT, f"nvcc took longer than {timeout:g} s")
        if step.limit == "memory_limit":
            return CompileOutcome(False, None, step, Status.COMPILE_ERROR,
                                  f"nvcc used more than {policy.memory_bytes >> 20} MiB of memory")
        return CompileOutcome(False, None, step, Status.COMPILE_ERROR, _first_error(step.stderr or step.stdout))

    def invocation(self, executable: Path, order: str) -> Invocation:
        return Invocation([str(executable)], {"CUDA_VISIBLE_DEVICES": self.device})

    def classify_failure(self, step: StepResult) -> tuple[Status, str] | None:
        m = CUDA_ERROR_RE.search(f"{step.stderr}\n{step.stdout}")
        if m:
            return Status.RUNTIME_ERROR, f"CUDA error: {m.group(0)}"
        return None


def _first_error(log: str) -> str:
    for line in log.splitlines():
        if "error" in line:
            return line.strip()[:300]
    return log.strip().splitlines()[0][:300] if log.strip() else "compiler failed without a message"
