"""The one result file of a bench run: what a script measured, and where, when and on what.

Every script in bench/ starts a record before it measures and writes it when it is done:

    from _record import start_record
    record = start_record()                 # notes the commit, the machine, the load, the command
    ...measure...
    record.write({"samples_per_s": 612.3, ...})   # -> bench/results/<script>.json

The file holds the git commit and whether the working tree had uncommitted changes
(the results folder itself is left out of that check, so an earlier run's fresh file
does not mark the next run dirty), the UTC date, the machine (CPU model, cores, memory,
GPUs, Python, torch and the compilers), the 1/5/15-minute load averages before and
after the run, the exact command line, the run's wall time and every number the
script prints. A re-run overwrites the file; `git log -p bench/results/` is the
history. A script whose modes measure different README rows names the mode
(`variant="ray"` -> `eval_throughput.ray.json`), so one mode does not overwrite another.

The load average matters: this project's numbers are taken on shared 2-core machines,
where other jobs inflate wall-clock times (ratios measured side by side in one run
are what to compare).
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from cuset import provenance

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "bench" / "results"
PACKAGES = ("torch", "transformers", "trl", "peft", "ray")  # versions recorded when installed


def _run(argv: list[str]) -> str | None:
    """stdout of a quick command, or None when it is missing or fails."""
    if not shutil.which(argv[0]):
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20, cwd=ROOT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def git_state() -> dict:
    """HEAD and the uncommitted changes (bench/results/ excluded) of the checkout the script runs from."""
    return provenance.git_state(ROOT, exclude=(str(RESULTS_DIR.relative_to(ROOT)),))


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine() -> dict:
    """What the numbers were measured on (read without importing torch)."""
    gpus = _run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"])
    gxx = _run(["g++", "--version"])
    nvcc = _run(["nvcc", "--version"])
    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gib": _memory_gib(),
        "gpus": [g.strip() for g in gpus.splitlines() if g.strip()] if gpus else [],
        "os": platform.platform(),
        "python": platform.python_version(),
        "packages": {p: _version(p) for p in PACKAGES},
        "compilers": {"g++": gxx.splitlines()[0].strip() if gxx else None,
                      "nvcc": next((ln.strip() for ln in nvcc.splitlines() if "release" in ln), None) if nvcc else None},
    }


load_average = provenance.load_average


@dataclass(frozen=True)
class BenchRecord:
    """A bench run in progress: everything known before measuring; `write` adds the numbers."""

    script: str
    command: str
    argv: list[str]
    date_utc: str
    git: dict
    machine: dict
    load_before: dict
    variant: str = ""
    _started: float = field(default_factory=time.perf_counter, repr=False)

    @property
    def path(self) -> Path:
        return RESULTS_DIR / f"{self.script}{'.' + self.variant if self.variant else ''}.json"

    def write(self, results: dict, path: Path | None = None) -> Path:
        """Write the result file (atomically) and say where; returns its path."""
        from cuset.io import atomic_write_json

        target = Path(path) if path else self.path
        doc = {"script": f"bench/{self.script}.py", "variant": self.variant or None, "command": self.command,
               "argv": self.argv, "date_utc": self.date_utc, **self.git, "machine": self.machine,
               "load_before": self.load_before, "load_after": load_average(),
               "wall_s": round(time.perf_counter() - self._started, 1), "results": results}
        atomic_write_json(target, doc, indent=1)
        print(f"results written to {os.path.relpath(target)} (commit {str(self.git.get('commit'))[:10]}"
              f"{', dirty tree' if self.git.get('dirty') else ''}; load {self.load_before['1min']} before, "
              f"{doc['load_after']['1min']} after)", flush=True)
        return target


def start_record(variant: str = "", argv: list[str] | None = None) -> BenchRecord:
    """Note the commit, machine, load and command line of the running bench script, before it measures."""
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0]).stem
    shown = os.path.relpath(Path(argv[0]).resolve(), ROOT) if argv[0].endswith(".py") else argv[0]
    return BenchRecord(
        script=script, variant=variant, command=shlex.join(["python", shown, *argv[1:]]), argv=argv[1:],
        date_utc=provenance.utc_now(),
        git=git_state(), machine=machine(), load_before=load_average())
