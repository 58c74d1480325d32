"""Profile one passing CUDABench program with Nsight Compute, the official harness's way.

    perf = profile_cudabench(task, code, backend=gpu, cache=cache, workspace=ws, options=eval_opts,
                             perf=PerfOptions())
    perf["roofline"]["score"]

The official harness (`eval_eff_only`) runs every passing program once more under
`ncu --metrics <its list> --csv` and scores the CSV (cuset.execute.perf.ncu). Here:

1. the program's executable comes from the compile cache (it was just built to pass),
   its inputs from the workspace (gen.py's data of the first input case, as verified);
2. `ncu --metrics ... --csv --log-file ncu.csv <program>` runs in the program's
   sandbox (pipeline.run_wrapped: a fresh run dir with copies of the inputs, the
   program's limits, the GPU devices), with its own timeout (`profile_timeout`: ncu
   replays every kernel once per metric pass) and ncu's install dir bound read-only;
3. the run's outputs pass the same checks as any run (declared size, written by this
   run) and compare.py once more: a program that only passes unprofiled is `failed`;
4. ncu.csv is the program's neighbour (same uid, same dir: the program could have
   written it), so it is hostile input: read through untrusted_files (no links, a
   regular file of at most NCU_CSV_LIMIT bytes), parsed strictly, and the ratios
   checked (ncu.check_believable). Each failure is a named perf status of this
   sample (`unreadable`, `unbelievable`, `failed`, see cuset.evaluate.perf.records);
   none raises.

Without an `ncu` the caller records "ncu not installed: not measured" (no other timer
stands in for the official score: a CUDA-event time is not the roofline score).
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

from cuset.evaluate.cudabench import Evaluation, WrappedRun, compare_outputs, run_wrapped
from cuset.evaluate.options import EvalOptions
from cuset.evaluate.perf.options import PerfOptions
from cuset.evaluate.perf.records import (
    FAILED, NCU_NOT_INSTALLED, UNBELIEVABLE, UNREADABLE, cudabench_measured, not_measured, perf_problem,
)
from cuset.execute.gpu import gpu_name
from cuset.execute.perf.ncu import NCU_METRICS, NcuCsvError, check_believable, parse_ncu_csv, program_roofline
from cuset.execute.result import printable
from cuset.execute.untrusted_files import UnsafeOutput, read_bounded

NCU_FILE = "ncu.csv"
# ncu writes about 3 KB of CSV per profiled launch (14 metrics): 16 MiB is ~5,000 launches,
# far beyond a CUDABench program; more is refused, never read.
NCU_CSV_LIMIT = 16 << 20
NO_PERMISSION = re.compile(r"ERR_NVGPUCTRPERM[^\n]*")
KIND = "cudabench"


def ncu_path(name: str) -> Path | None:
    """The ncu executable (resolved through links, so its installation can be bound into
    the sandbox), or None when there is none."""
    found = shutil.which(name)
    return Path(found).resolve() if found else None


def ncu_argv(ncu: Path) -> tuple[str, ...]:
    """The wrapper in front of the program: the official harness's metric list, CSV, to a file."""
    return (str(ncu), "--metrics", ",".join(NCU_METRICS), "--csv", "--log-file", NCU_FILE)


def time_answer(task, code: str, *, backend, perf: PerfOptions, options: EvalOptions, cache=None,
                workspace=None) -> dict:
    """The kind's timer (cuset.evaluate.kinds): "ncu not installed" per sample where there is
    none, else `profile_cudabench`, which reuses the evaluation's backend, cache and workspace."""
    ncu = ncu_path(perf.ncu)
    if ncu is None:
        return not_measured(KIND, NCU_NOT_INSTALLED)
    if isinstance(backend, str) or cache is None or workspace is None:
        raise ValueError("profiling a CUDABench program needs the backend object, its compile cache and the "
                         "evaluation's workspace")
    return profile_cudabench(task, code, backend=backend, cache=cache, workspace=workspace, options=options,
                             perf=perf, ncu=ncu)


def profile_cudabench(task, code: str, *, backend, cache, workspace, options: EvalOptions, perf: PerfOptions,
                      ncu: Path) -> dict:
    """The perf record (cuset.evaluate.perf.records) of a passing CUDABench program."""
    outcome = cache.submit(code).result()
    try:
        return _profile(task, outcome, backend=backend, workspace=workspace, options=options, perf=perf, ncu=ncu)
    finally:
        cache.release(code)   # the entry was pinned while its executable could be copied


def _profile(task, outcome, *, backend, workspace, options: EvalOptions, perf: PerfOptions, ncu: Path) -> dict:
    if not outcome.ok:
        return perf_problem(FAILED, KIND, f"the program no longer compiles: {printable(outcome.detail)[:300]}")
    case = options.cases[0]
    prepared = workspace.prepare(task, case)
    if prepared.problem:
        return perf_problem(FAILED, KIND, f"the task's data are unusable (case {case}): {prepared.problem}")
    ev = Evaluation(task, backend, workspace, options)
    opts = dataclasses.replace(options, timeouts=dataclasses.replace(options.timeouts, run=perf.profile_timeout))
    profiled = WrappedRun(wrapper=ncu_argv(ncu), readonly=(ncu.parent,), name=f"profile[case={case}]",
                          min_file_bytes=NCU_CSV_LIMIT + (1 << 20), keep_failed=True)
    run_dir, why, step = run_wrapped(dataclasses.replace(ev, opts=opts), case, prepared, outcome.executable, profiled)
    try:
        return _judge_profile(ev, case, prepared, run_dir, why, step)
    finally:
        workspace.discard(run_dir)


def _judge_profile(ev: Evaluation, case: int, prepared, run_dir: Path, why: str, step) -> dict:
    """The perf record of the run under ncu (`why`: how it failed, if it did), its outputs
    checked by compare.py under the evaluation's own options."""
    task, backend = ev.task, ev.backend
    said = f"{step.stderr}\n{step.stdout}"
    try:
        raw = read_bounded(run_dir, NCU_FILE, NCU_CSV_LIMIT)
    except UnsafeOutput as e:
        raw, unsafe = None, f"{NCU_FILE}: {printable(str(e))[:300]}"
    else:
        unsafe = ""
    text = raw.decode("utf-8", errors="replace") if raw is not None else ""
    denied = NO_PERMISSION.search(said) or NO_PERMISSION.search(text)
    if denied:   # ncu's own refusal, in its log or on the terminal, whatever the program then did
        return perf_problem(FAILED, KIND, "ncu may not read the GPU's performance counters "
                                          f"({printable(denied.group(0))[:200]}): allow profiling for non-admin "
                                          "users (NVreg_RestrictProfilingToAdminUsers=0) or run as an admin")
    if why:
        return perf_problem(FAILED, KIND, f"the run under ncu failed: {printable(why)[:400]}")
    ok, why_not, _ = compare_outputs(task, case, prepared, run_dir, ev.ws, ev.opts, f"profile-compare[case={case}]")
    if not ok:
        return perf_problem(FAILED, KIND, f"on the profiled run, compare.py: {printable(why_not)[:400]}")
    if unsafe:
        return perf_problem(UNREADABLE, KIND, unsafe)
    if raw is None:
        tail = printable(said.strip().splitlines()[-1] if said.strip() else "")[:300]
        return perf_problem(UNREADABLE, KIND, f"ncu wrote no {NCU_FILE} (its last words: {tail!r})")
    try:
        rows = parse_ncu_csv(text, NCU_FILE)
        program = program_roofline(rows, NCU_FILE)
    except NcuCsvError as e:
        return perf_problem(UNREADABLE, KIND, printable(str(e))[:500])
    try:
        check_believable(program, NCU_FILE)
    except NcuCsvError as e:
        return perf_problem(UNBELIEVABLE, KIND, printable(str(e))[:500])
    return cudabench_measured(program.to_json(), device=gpu_name(str(getattr(backend, "device", "0"))),
                              launches=len({r.launch for r in rows}))
