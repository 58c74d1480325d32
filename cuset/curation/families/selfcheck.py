"""Self-consistency of tasks' gen.py and compare.py, without running the programs.

`self_check_many(tasks, workdir)` runs, in ONE child Python process (the numpy import
is paid once), for every task: gen.py for two input cases, then compare.py against the
reference itself (must print T) and against outputs a broken program would write:
zeros, a constant, one perturbed element, a truncated file, no file (each must print F).
It returns the problems found per task. The reference programs themselves are checked
by compiling them (nvcc) and running them through the evaluation pipeline
(`cuset.curation.validation.validate_references`); this module is the part that needs neither.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from cuset.tasks.schema import Task

# The child: for each job, run gen.py per case in its own directory (chdir is safe in a
# child of our own), then each compare scenario. Prints one JSON object per job.
_DRIVER = r'''
import contextlib, io, json, os, runpy, sys, traceback
import numpy as np


def run_script(path):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        runpy.run_path(path, run_name="__main__")
    return buf.getvalue()


def put(name, dtype, array):
    path = f"data/{name}.bin"
    if os.path.exists(path):
        os.remove(path)
    if array is not None:
        np.asarray(array, dtype=dtype).tofile(path)


def perturbed(ref, dt):
    out = ref.copy()
    k = out.size // 2
    if dt.kind == "f":
        out[k] = out[k] + 0.5 * (1.0 + abs(float(out[k])))
    else:
        out[k] = out[k] ^ 1 if dt.kind == "u" else out[k] + 1
    return out


def constant(ref, dt):
    if dt.kind == "f":
        return np.full_like(ref, ref.astype(np.float64).mean())
    vals, counts = np.unique(ref, return_counts=True)
    return np.full_like(ref, vals[np.argmax(counts)])


SCENARIOS = {
    "reference": lambda ref, dt: ref,
    "zeros": lambda ref, dt: np.zeros_like(ref),
    "constant": constant,
    "perturbed": perturbed,
    "truncated": lambda ref, dt: ref[: ref.size // 2],
    "missing": lambda ref, dt: None,
}

for job in json.load(sys.stdin):
    report = {"gen_errors": {}, "verdicts": {}}
    for case, directory in job["cases"]:
        os.chdir(directory)
        os.environ["CUSET_CASE"] = str(case)
        try:
            run_script("gen.py")
        except BaseException:
            report["gen_errors"][str(case)] = traceback.format_exc(limit=3)[-1500:]
    if not report["gen_errors"]:
        os.chdir(job["cases"][0][1])
        for label, make in SCENARIOS.items():
            try:
                for name, dtype in job["outputs"]:
                    ref = np.fromfile(f"data/{name}_ref.bin", dtype=dtype)
                    put(name, dtype, make(ref, np.dtype(dtype)))
                report["verdicts"][label] = run_script("compare.py").strip()
            except BaseException as e:  # a crash is also an answer, and never a T
                report["verdicts"][label] = f"crash: {type(e).__name__}: {e}"
    print(json.dumps(report), flush=True)
'''

EXPECTED = {"reference": "T", "zeros": "F", "constant": "F", "perturbed": "F", "truncated": "F", "missing": "F"}


def run_driver(jobs: list[dict], timeout: float) -> list[dict]:
    env = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", _DRIVER], input=json.dumps(jobs), capture_output=True, text=True,
                          timeout=timeout, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"self-check driver failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def _prepare(task: Task, workdir: Path, cases: tuple[int, ...]) -> dict:
    dirs = []
    for case in cases:
        d = (workdir / f"case{case}").resolve()
        d.mkdir(parents=True, exist_ok=True)
        (d / "gen.py").write_text(task.gen_py)
        (d / "compare.py").write_text(task.compare_py)
        dirs.append([case, str(d)])
    return {"cases": dirs, "outputs": [[t.name, t.dtype] for t in task.outputs]}


def file_problems(task: Task, workdir: Path) -> list[str]:
    """Every declared input and every reference output exists with the declared byte size."""
    problems = []
    for spec, suffix in [(t, "") for t in task.inputs] + [(t, "_ref") for t in task.outputs]:
        path = workdir / "data" / f"{spec.name}{suffix}.bin"
        if not path.exists():
            problems.append(f"gen.py did not write {path.name}")
        elif path.stat().st_size != spec.nbytes:
            problems.append(f"{path.name}: {path.stat().st_size} bytes, declared {spec.nbytes} ({spec.dtype} {spec.shape})")
    return problems


def _judge(task: Task, workdir: Path, report: dict, cases: tuple[int, ...]) -> list[str]:
    if report["gen_errors"]:
        return [f"gen.py failed for case {c}: {err}" for c, err in report["gen_errors"].items()]
    first, second = (workdir / f"case{c}" for c in cases[:2])
    problems = file_problems(task, first)
    if problems:
        return problems
    for spec in task.outputs:
        if not (first / "data" / f"{spec.name}_ref.bin").read_bytes().strip(b"\0"):
            problems.append(f"reference {spec.name} is all zeros: a program writing nothing useful would pass")
    for label, want in EXPECTED.items():
        if label == "constant" and all(t.numel == 1 for t in task.outputs):
            continue  # a one-value output is its own constant
        got = report["verdicts"].get(label)
        if got != want:
            problems.append(f"compare.py printed {got!r} for the {label} output, expected {want!r}")
    problems += file_problems(task, second)
    if all((first / "data" / f"{t.name}.bin").read_bytes() == (second / "data" / f"{t.name}.bin").read_bytes()
           for t in task.inputs):
        problems.append(f"cases {cases[0]} and {cases[1]} produce identical inputs: CUSET_CASE is ignored")
    return problems


def self_check_many(tasks: Sequence[Task], workdir: Path, *, cases: tuple[int, int] = (0, 1),
                    timeout: float = 600) -> list[list[str]]:
    """Problems of each task's gen.py/compare.py pair (an empty list means consistent)."""
    jobs = [_prepare(t, workdir / f"t{i}", cases) for i, t in enumerate(tasks)]
    reports = run_driver(jobs, timeout)
    if len(reports) != len(tasks):
        raise RuntimeError(f"self-check driver answered for {len(reports)} of {len(tasks)} tasks")
    return [_judge(t, workdir / f"t{i}", r, cases) for i, (t, r) in enumerate(zip(tasks, reports))]


def self_check(task: Task, workdir: Path, *, cases: tuple[int, int] = (0, 1)) -> list[str]:
    return self_check_many([task], workdir, cases=cases)[0]


def compare_verdicts(task: Task, workdir: Path) -> dict[str, str]:
    """What compare.py prints for each scenario, given references already in workdir/data."""
    (workdir / "compare.py").write_text(task.compare_py)
    (workdir / "gen.py").write_text("")  # nothing to generate: the references are in place
    job = {"cases": [[0, str(workdir.resolve())]], "outputs": [[t.name, t.dtype] for t in task.outputs]}
    return run_driver([job], timeout=120)[0]["verdicts"]


def run_gen(task: Task, workdir: Path, case: int = 0, timeout: float = 300) -> None:
    """Run gen.py alone in `workdir` for one case, as its own process (the way the pipeline does)."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "gen.py").write_text(task.gen_py)
    env = {"CUSET_CASE": str(case), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "gen.py"], cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"gen.py of task {task.id} ({task.task_name}) failed:\n{proc.stderr[-2000:]}")


def combined_source(sources: list[str]) -> str:
    """Several reference programs as one translation unit, each in its own namespace, so one
    nvcc call checks them all (about ten times faster than one call each). The includes and
    the shared I/O helpers appear once; `main` becomes `task<i>::main`, which C++ allows."""
    includes: list[str] = []
    helpers, bodies = "", []
    for i, source in enumerate(sources):
        marker = source.index("void write_binary")
        end = source.index("\n}\n", marker) + 3
        head, body = source[:end], source[end:]
        includes += [ln for ln in head.splitlines() if ln.startswith("#include") and ln not in includes]
        helpers = helpers or head[head.index("#define CUDA_CHECK"):]
        bodies.append(f"namespace task{i} {{\n{body.strip()}\n}}  // namespace task{i}\n")
    return "\n".join(includes) + "\n\n" + helpers + "\n" + "\n".join(bodies)
