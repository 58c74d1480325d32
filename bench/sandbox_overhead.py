"""Overhead of issue 37's sandbox changes, measured side by side in one process.

Compile step: the same compile under the host's read-only root (the sandbox before
issue 37) and under the minimal root (MINIMAL_ROOT plus the toolchain's paths, what
`compile_policy` uses now), interleaved, a fresh build dir each time (no compile
cache):

- `cpu`: the CPU backend's build of a CUDABench program (the adversarial fixture's
  reference: rewriter, g++ with the runtime's precompiled header, link);
- `kernelbench`: one KernelBench extension (tests/fixtures/kernelbench/relu_ok.py's
  load_inline: two translation units from the torch precompiled header, link);
- `nvcc`: the GPU backend's nvcc build of the same CUDABench program (where nvcc is
  installed; no GPU needed to compile).

- `setup`: the sandbox alone, `true` run as a compile step (bwrap's set-up of either root,
  the cgroup, the uid switch): the fixed cost the minimal root adds to every compiler command.

Run step: a KernelBench candidate's run dir as before (a plain directory) and now (its
own tmpfs disk quota, mounted before and unmounted after), each running a sandboxed
`python -c pass`: the quota's mount and unmount are the run step's added work.

Medians over --repeats; ratio = after / before (target <= 1.10). The load average is
recorded next to the numbers: the machine is shared, and other work distorts them.

    .venv/bin/python bench/sandbox_overhead.py [--repeats 5] [--only setup,cpu,kernelbench,nvcc,run] [--json out.json]
"""

from __future__ import annotations

# What this script measures (the sandbox and the steps it wraps): a record in bench/results is stale once a commit
# after its own touches one of these paths (docs/tools/perf_table.py).
MEASURES = ("cuset/execute",)

import argparse
import dataclasses
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cuset.execute import disk_quota, sandbox  # noqa: E402

CUDA_PROGRAM = (ROOT / "tests" / "fixtures" / "adversarial" / "reference.cu").read_text()


def _with_root(module: str, minimal: bool):
    """`module`'s compile_policy with the minimal root on or off."""
    original = sandbox.compile_policy
    return mock.patch(f"{module}.compile_policy",
                      lambda *a, **k: dataclasses.replace(original(*a, **k), minimal_root=minimal))


def _compile_once(kind: str, minimal: bool) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-compile-") as d:
        t0 = time.perf_counter()
        if kind == "setup":
            policy = dataclasses.replace(sandbox.compile_policy(60), minimal_root=minimal)
            step = sandbox.run_compiler(["true"], build_dir=Path(d), timeout=60, policy=policy)
            if step.returncode != 0:
                raise SystemExit(f"sandbox set-up failed (minimal_root={minimal}): {step.stderr[:300]}")
            return time.perf_counter() - t0
        if kind == "cpu":
            from cuset.execute.cpu import CpuBackend

            with _with_root("cuset.execute.cpu.backend", minimal):
                out = CpuBackend().compile(CUDA_PROGRAM, Path(d), 600)
        elif kind == "nvcc":
            from cuset.execute.gpu import GpuBackend

            with _with_root("cuset.execute.gpu", minimal):
                out = GpuBackend(["-O2"]).compile(CUDA_PROGRAM, Path(d), 600)
        else:
            from cuset.execute.kernelbench.build import ExtensionBuilder
            from cuset.execute.kernelbench.verify import extract_specs

            spec = extract_specs((ROOT / "tests" / "fixtures" / "kernelbench" / "relu_ok.py").read_text())[0]
            with _with_root("cuset.execute.kernelbench.build", minimal):
                out = ExtensionBuilder().compile(json.dumps(spec.to_json(), sort_keys=True), Path(d), 600)
        seconds = time.perf_counter() - t0
    if not out.ok:
        raise SystemExit(f"{kind} compile failed (minimal_root={minimal}): {out.detail}")
    return seconds


def _run_once(quota: bool) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-run-") as d:
        run = Path(d) / "run"
        run.mkdir()
        t0 = time.perf_counter()
        if quota:
            disk_quota.mount_tmpfs(run, 256 << 20)
        step = sandbox.run_sandboxed("run", [sys.executable, "-c", "pass"], run_dir=run, timeout=60,
                                     policy=sandbox.SandboxPolicy(program_memory_bytes=1 << 30))
        if quota:
            disk_quota.unmount(run)
        seconds = time.perf_counter() - t0
    if step.returncode != 0:
        raise SystemExit(f"sandboxed run failed: {step.stderr[:300]}")
    return seconds


def _commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--only", default="setup,cpu,kernelbench,nvcc,run")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    kinds = [k for k in args.only.split(",") if k]
    if "nvcc" in kinds and not shutil.which("nvcc"):
        print("nvcc not installed: skipped")
        kinds.remove("nvcc")
    if "run" in kinds and disk_quota.unavailable():
        print(f"no disk quota here ({disk_quota.unavailable()}): run step skipped")
        kinds.remove("run")
    load_before = os.getloadavg()
    rows = []
    for kind in kinds:
        before, after = [], []
        _compile_once(kind, True) if kind != "run" else _run_once(True)   # warm caches (PCH, page cache)
        for _ in range(args.repeats):   # interleaved: load drifts hit both sides alike
            if kind == "run":
                before.append(_run_once(False))
                after.append(_run_once(True))
            else:
                before.append(_compile_once(kind, False))
                after.append(_compile_once(kind, True))
        b, a = statistics.median(before), statistics.median(after)
        row = {"step": kind, "before_s": b, "after_s": a, "ratio": a / b, "before_all_s": before,
               "after_all_s": after, "load": os.getloadavg()}
        rows.append(row)
        label = "run (plain dir -> tmpfs quota)" if kind == "run" else f"compile {kind} (host root -> minimal root)"
        print(f"{label:48s} before {b:7.3f} s  after {a:7.3f} s  ratio {a / b:5.3f}  load {row['load'][0]:.2f}")
    result = {"bench": "sandbox_overhead", "commit": _commit(),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "cpus": os.cpu_count(), "repeats": args.repeats, "load_before": load_before,
              "load_after": os.getloadavg(), "rows": rows}
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
