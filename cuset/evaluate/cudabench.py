"""Evaluate one program on one CUDABench task (`evaluate_program` dispatches here for
task kind "cudabench", see cuset.evaluate.kinds).

Per input case (gen.py sees CUSET_CASE=<i>; 0 is the default input), each step
in its own subprocess with a timeout, its process group killed on expiry:

1. gen.py in a private dir (one BLAS thread), once per (task, case) per workspace;
2. compile through the content-addressed cache (once per source, whatever the case);
3. run in the sandbox, in a fresh dir holding only copies of the inputs, once per
   thread order of the backend (fresh dir each); a failed run is classified by the
   backend (e.g. `unsupported`, `warp_sync`) or as runtime_error/timeout; the later
   orders are skipped when the backend shows they cannot change the outputs (the CPU
   backend's order proof: every kernel launch of the first run proven
   order-independent), with an `orders[case=<i>]` step saying so; only for trusted
   programs (`EvalOptions.trusted_programs`: references, the project's own tasks), since
   the proof comes from the program's own process;
4. check that every declared output exists, has the declared size, was written by
   this run and is not a copy of an input (unless the reference output equals that
   input, as in identity tasks); then run compare.py on copies of the
   outputs next to the references. Outputs that differ between thread orders
   while a check fails give `race`.

The first case or order that fails decides the status; `passed` needs all to pass.
Tasks whose declared data exceed the budget are `skipped` (left out of metrics).

With `EvalOptions.robust` (never in compat mode), a program that passed is also checked
by robust verification (`ExecResult.robust_*`; `status` stays the plain verdict):

- the strict check (cuset.evaluate.strict): every element of every declared output
  against gen.py's reference, on every case already run and on the new ones;
- input cases 0..robust_cases-1: gen.py's constant seeds offset by the case number
  (cuset.evaluate.seeds; a gen.py reading CUSET_CASE is run as it is), compare.py and
  the strict check on each. Cases whose data the plain verdict already used are not
  run again; the compiled executable is reused.

`robust_check` names what failed: "strict" or "cases" (a new case failed compare.py,
crashed, raced, ...). A gen.py without constant seeds cannot give reproducible new
cases: then only the strict check runs and `robust_check` is "cases_unavailable" on a
robust pass (counted, not a failure). A program that failed the plain verdict gets it
as its robust verdict too, with the robust checks not run.

Each sample's steps, seconds per stage and mismatch evidence gather in one `SampleLog`;
what its steps only read (the task, the backend, the workspace, the options) travels as
one `Evaluation`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from cuset.execute import disk_quota
from cuset.evaluate.checks import checked_outputs, compare_verdict, file_digest, output_problem, outputs_digest
from cuset.evaluate.options import EvalOptions
from cuset.evaluate.seeds import offset_seeds
from cuset.evaluate.strict import StrictVerdict, mismatch_record, strict_check
from cuset.evaluate.workspace import PreparedData, Workspace
from cuset.execute.interface import Backend, CompileOutcome
from cuset.execute.compile_cache import CompileCache
from cuset.execute.result import ExecResult, Status, StepResult, truncate_log
from cuset.execute.sandbox import SandboxPolicy, run_sandboxed
from cuset.tasks import Task

DIAGNOSTICS_LIMIT = 64 << 10   # bytes read back from the runtime's diagnostics channel
NO_OUTPUTS_DETAIL = ("task declares no outputs, so nothing can be checked "
                     "(CUDABench task 82 has this defect); fix its `outputs` field")
ROBUST_NOT_RUN = "robust checks not run: the plain verification did not pass"
ROBUST_PREFIX = "robust:"   # step names of robust-only cases, so they never count as plain runs


@dataclass(frozen=True)
class Evaluation:
    """What every step of one sample's evaluation reads: the task (a robust case's own copy
    with rewritten seeds, where it has one), the backend, the workspace and the options."""

    task: Task
    backend: Backend
    ws: Workspace
    opts: EvalOptions


@dataclass(frozen=True)
class WrappedRun:
    """How `run_wrapped` runs a program: behind `wrapper` (e.g. a profiler: `ncu ... ./kernel`,
    which runs inside the same sandbox, under the same limits and `opts.timeouts.run`), with
    the `readonly` paths visible in the sandbox (the wrapper's installation) and a file-size
    limit of at least `min_file_bytes` (the wrapper's own output file); its step named `name`
    (default "run[case=<i>,order=<order>]"); with `keep_failed` the run dir also comes back
    with a failure (the wrapper's log may say why)."""

    wrapper: tuple[str, ...] = ()
    readonly: tuple[Path, ...] = ()
    name: str | None = None
    min_file_bytes: int = 0
    keep_failed: bool = False


class SampleLog:
    """What one sample's evaluation did so far: its steps in order, seconds per stage
    (summed over cases and orders), and the mismatch record of the outputs that decided a
    failure. Only the functions evaluating that one sample write to it."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.steps: list[StepResult] = []
        self.timings: dict[str, float] = {}
        self.mismatch: dict | None = None

    def add(self, step: StepResult) -> None:
        self.steps.append(step)

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        """Add the seconds the block takes to `stage` (also when it raises)."""
        t = time.perf_counter()
        try:
            yield
        finally:
            self.timings[stage] = self.timings.get(stage, 0.0) + time.perf_counter() - t

    def strict_failed(self, case: int, verdict: StrictVerdict) -> None:
        """Keep a failed strict check's mismatch record, tagged with its case."""
        if verdict.mismatch is not None:
            self.mismatch = {"case": case, **verdict.mismatch}

    def result(self, status: Status, detail: str, backend: str,
               robust: tuple[Status, str, str] | None = None) -> ExecResult:
        """The sample's ExecResult; `robust` is (robust status, detail, check) when robust verification applied."""
        self.timings["total"] = time.perf_counter() - self.started
        r_status, r_detail, r_check = robust or (None, "", "")
        return ExecResult(status, detail, tuple(self.steps), dict(self.timings), backend,
                          robust_status=r_status, robust_detail=r_detail, robust_check=r_check,
                          mismatch=self.mismatch)


def evaluate_cudabench(task: Task, code: str | None, *, backend: Backend, options: EvalOptions,
                       cache: CompileCache | None = None, workspace: Workspace | None = None,
                       workdir=None) -> ExecResult:
    """One program on one CUDABench task (the arguments are `evaluate_program`'s). Without a
    `workspace` a temporary one is made under `workdir` and removed after; without a `cache`
    one in the user cache dir is opened for this call."""
    own_ws = workspace is None
    ws = workspace or Workspace(parent=workdir, gen_timeout=options.timeouts.gen)
    own_cache = cache is None
    cache = cache or CompileCache(backend, timeout=options.timeouts.compile)
    try:
        return _evaluate(Evaluation(task, backend, ws, options), code, cache)
    finally:
        if own_cache:
            cache.close()
        if own_ws:
            ws.close()


def _evaluate(ev: Evaluation, code: str | None, cache: CompileCache) -> ExecResult:
    task, opts = ev.task, ev.opts
    log = SampleLog()
    robust = opts.robust and not opts.compat

    def done(status: Status, detail: str = "", verdict: tuple[Status, str, str] | None = None) -> ExecResult:
        if robust and verdict is None:
            verdict = (status, ROBUST_NOT_RUN, "")
        return log.result(status, detail, ev.backend.name, verdict)

    budget = opts.max_data_bytes if opts.max_data_bytes is not None else ev.backend.max_data_bytes
    if budget is not None and task.data_bytes > budget:
        return done(Status.SKIPPED, f"declared data {task.data_bytes / 1e6:.1f} MB exceed the "
                                    f"{ev.backend.name} backend budget of {budget / 1e6:.1f} MB")
    if not task.outputs:
        return done(Status.SKIPPED, NO_OUTPUTS_DETAIL)
    if code is None or not code.strip():  # after the task-level skips: they apply to every sample
        return done(Status.NO_CODE, "no code was extracted from the response")

    # Compile while gen.py runs: both are subprocesses. The entry stays pinned in the
    # cache (never evicted) until this sample is done with its executable.
    compile_future = cache.submit(code)
    try:
        return _compiled(ev, log, compile_future, done)
    finally:
        cache.release(code)


def _compiled(ev: Evaluation, log: "SampleLog", compile_future, done) -> ExecResult:
    """The rest of `_evaluate` once the compile was submitted: gen.py, then every case."""
    task, opts = ev.task, ev.opts
    robust = opts.robust and not opts.compat
    prepared: list[PreparedData] = []
    for case in opts.cases:
        with log.timed("gen"):
            p = ev.ws.prepare(task, case)
        log.add(p.step)
        if p.problem:
            compile_future.result()  # leave no compile running behind us
            return done(Status.SKIPPED, f"the task's own data are unusable (case {case}): {p.problem}")
        prepared.append(p)
    with log.timed("compile"):
        outcome: CompileOutcome = compile_future.result()
    log.add(outcome.step)
    if not outcome.ok:
        return done(outcome.status or Status.COMPILE_ERROR, outcome.detail or "compilation failed")

    strict: dict[int, StrictVerdict] | None = {} if robust else None
    for case, p in zip(opts.cases, prepared):
        verdict = _run_case(ev, log, case, p, outcome.executable, strict=strict)
        if verdict is not None:
            return done(*verdict)
    if not robust:
        return done(Status.PASSED)
    with log.timed("robust"):
        verdict = _robust(ev, log, outcome.executable, strict)
    return done(Status.PASSED, "", verdict)


def _robust(ev: Evaluation, log: SampleLog, executable: Path,
            strict: dict[int, StrictVerdict]) -> tuple[Status, str, str]:
    """Robust verdict of a program that passed the plain checks: (status, detail, check)."""
    task, opts = ev.task, ev.opts
    for case in opts.cases:
        if not strict[case].ok:
            log.strict_failed(case, strict[case])
            return Status.WRONG, f"case {case}: strict check: {strict[case].detail}", "strict"
    checked = list(opts.cases)
    unavailable: list[str] = []
    for case in range(opts.robust_cases):
        rw = offset_seeds(task.gen_py, case)
        if case in opts.cases and (case == 0 or rw.kind == "reads_case"):
            continue   # the plain verdict ran exactly these data
        if not rw.reproducible_cases:
            unavailable.append(rw.describe())
            break
        case_ev = ev if rw.source == task.gen_py else dataclasses.replace(
            ev, task=dataclasses.replace(task, gen_py=rw.source))
        with log.timed("gen"):
            p = ev.ws.prepare(case_ev.task, case)
        log.add(dataclasses.replace(p.step, name=ROBUST_PREFIX + p.step.name))
        how = f"case {case} ({rw.describe()})"
        if p.problem:  # the task's data, not the program: this case says nothing
            unavailable.append(f"{how}: unusable data: {p.problem}")
            continue
        found: dict[int, StrictVerdict] = {}
        verdict = _run_case(case_ev, log, case, p, executable, strict=found, prefix=ROBUST_PREFIX)
        if verdict is not None:
            return verdict[0], f"{verdict[1]} [{how}]", "cases"
        if not found[case].ok:
            log.strict_failed(case, found[case])
            return Status.WRONG, f"case {case}: strict check: {found[case].detail} [{how}]", "strict"
        strict[case] = found[case]
        checked.append(case)
    unchecked = sorted({u for v in strict.values() for u in v.unchecked})
    ran = sorted(set(checked))
    detail = (f"case{'s' if len(ran) > 1 else ''} {', '.join(map(str, ran))} passed compare.py and the strict check"
              + (f"; outputs not element-checked: {', '.join(unchecked)}" if unchecked else ""))
    if unavailable:
        detail += "; other cases unavailable: " + "; ".join(unavailable)
    # Not one new case could be made: the cases check did not apply (counted, not failed).
    new_cases = set(checked) - set(opts.cases)
    check = "cases_unavailable" if unavailable and not new_cases and opts.robust_cases > 1 else ""
    return Status.PASSED, detail, check


def _policy_for(task: Task, backend: Backend, ws: Workspace, opts: EvalOptions) -> SandboxPolicy:
    base = opts.sandbox
    # Largest file the program may write: its biggest declared output plus room
    # for a little logging; a program filling the disk dies with SIGXFSZ.
    fsize = max((s.nbytes for s in task.outputs), default=0) + (1 << 20)
    return SandboxPolicy(
        mode=base.mode,
        cpu_seconds=base.cpu_seconds if base.cpu_seconds is not None else math.ceil(opts.timeouts.run) + 5,
        file_size_bytes=fsize, processes=base.processes,
        memory_bytes=opts.cpu_memory_bytes if backend.name == "cpu" else None,
        open_files=base.open_files, gpu_devices=backend.name == "gpu",
        hide=tuple(dict.fromkeys((*base.hide, *ws.hidden_paths))),
        program_memory_bytes=opts.program_memory_bytes,
    )


def _run_program(name: str, inv, run_dir: Path, policy: SandboxPolicy, opts: EvalOptions,
                 env: dict[str, str], readonly: tuple[Path, ...] = ()) -> StepResult:
    """One sandboxed run; with the backend's diagnostics channel (an anonymous file
    whose fd only the runtime is told about) read back into the step."""
    if inv.diagnostics_env is None:
        return run_sandboxed(name, list(inv.argv), run_dir=run_dir, timeout=opts.timeouts.run, policy=policy, env=env,
                             readonly=readonly)
    with tempfile.TemporaryFile(dir=run_dir) as channel:   # within the run dir's disk quota
        fd = channel.fileno()
        step = run_sandboxed(name, list(inv.argv), run_dir=run_dir, timeout=opts.timeouts.run, policy=policy,
                             env={**env, inv.diagnostics_env: str(fd)}, pass_fds=(fd,), readonly=readonly)
        channel.seek(0)
        said = channel.read(DIAGNOSTICS_LIMIT)
    return dataclasses.replace(step, diagnostics=truncate_log(said))


def _disk_quota(task: Task, executable: Path, opts: EvalOptions) -> int:
    """Bytes a run may write into its dir (besides the inputs): the executable's copy,
    the declared outputs twice over (rewrites, temporaries) and 64 MiB of slack."""
    if opts.run_disk_bytes is not None:
        return opts.run_disk_bytes + executable.stat().st_size
    return executable.stat().st_size + 2 * sum(s.nbytes for s in task.outputs) + (64 << 20)


def _run_case(ev: Evaluation, log: SampleLog, case: int, prepared: PreparedData, executable: Path, *,
              strict: dict | None = None, prefix: str = "") -> tuple[Status, str] | None:
    """Run every thread order of one case and check; None if the case passed. With
    `strict` (a dict), a passing case's outputs also get the strict check, its verdict
    stored under the case. Outputs compare.py rejected are compared with the reference
    element by element, into the log's mismatch record."""
    task, backend, ws, opts = ev.task, ev.backend, ev.ws, ev.opts
    policy = _policy_for(task, backend, ws, opts)
    input_digests = {s.name: file_digest(prepared.input_path(s.name)) for s in task.inputs}
    runs: list[tuple[str, str, str | None, Path]] = []   # (order, digest, problem, run_dir)
    try:
        quota = _disk_quota(task, executable, opts)
        for order in backend.run_orders:
            run_dir = ws.new_run_dir(prepared, task, quota)
            local_exe = _place_executable(executable, run_dir)
            inv = backend.invocation(local_exe, order)
            started = time.time_ns()
            with log.timed("run"):
                step = _run_program(f"{prefix}run[case={case},order={order}]", inv, run_dir, policy, opts,
                                    {"CUSET_CASE": str(case), **opts.extra_env, **inv.env})
            log.add(step)
            failure = _limit_failure(step, run_dir, quota, opts) or _run_failure(step, backend, opts.timeouts.run)
            if failure is not None and failure[0] is Status.UNSUPPORTED and \
                    output_problem(task, run_dir, started, input_digests, prepared.data_dir / "data") is None:
                failure = _outputs_first(ev, log, case, prepared, run_dir, prefix, failure)
            if failure is not None:
                ws.discard(run_dir)
                return failure[0], f"case {case}, order {order}: {failure[1]}"
            runs.append((order, *checked_outputs(task, run_dir, started, input_digests, prepared.data_dir / "data"),
                         run_dir))
            first = order == backend.run_orders[0]
            skip, why = _orders_to_skip(backend, step, inv) if first and opts.trusted_programs else ((), "")
            if skip:   # the runtime proved the other orders cannot change the outputs (a trusted program)
                log.add(StepResult(f"{prefix}orders[case={case}]", 0, 0.0,
                                   stdout=f"orders skipped: {', '.join(skip)} - {why}"))
                break
        verdicts: dict[str, tuple[bool, str]] = {}
        for order, digest, problem, run_dir in runs:
            if problem is None and digest not in verdicts:
                verdicts[digest] = _judge(ev, log, case, prepared, run_dir, digest, prefix)
        failed = [(order, problem or verdicts[digest][1]) for order, digest, problem, _ in runs
                  if problem is not None or not verdicts[digest][0]]
        if not failed:
            if strict is not None:
                with log.timed("strict"):
                    strict[case] = _strict_case(task, prepared, runs)
            return None
        order, why = failed[0]
        rejected = next(r for r in runs if r[0] == order)
        if rejected[2] is None:   # outputs there, compare.py said no: show how they differ
            log.mismatch = _mismatch(task, rejected[3], prepared, case=case, order=order,
                                     verdict="robust" if prefix else "plain", check="compare.py")
        if len({digest for _, digest, _, _ in runs}) > 1:
            passing = [o for o, _, p, _ in runs if o not in {f[0] for f in failed}]
            return Status.RACE, (f"case {case}: outputs differ between thread orders {', '.join(o for o, *_ in runs)}; "
                                 f"order {order}: {why}" + (f" (passes under {', '.join(passing)})" if passing else ""))
        return Status.WRONG, f"case {case}: {why}" + _wrong_output_note(backend)
    finally:
        for *_, run_dir in runs:
            ws.discard(run_dir)


def _outputs_first(ev: Evaluation, log: SampleLog, case: int, prepared: PreparedData, run_dir: Path, prefix: str,
                   failure: tuple[Status, str]) -> tuple[Status, str]:
    """A run that failed as `unsupported`, reported from inside the program's process (the
    runtime's marker, which the program can write itself): the one failure that blames the
    backend, so the parent's own check decides first. Asked only when the run wrote every
    declared output (checks.output_problem; with none to check, the marker names the
    failure): outputs compare.py rejects make it `wrong`."""
    ok, why = _judge(ev, log, case, prepared, run_dir, outputs_digest(ev.task, run_dir), prefix)
    if ok:
        return failure
    return Status.WRONG, f"{why} (its run then reported from its own process: unsupported: {failure[1]})"


def _orders_to_skip(backend: Backend, step: StepResult, inv) -> tuple[tuple[str, ...], str]:
    """The backend's later orders that cannot change this successful run's outputs (none
    unless the backend can tell: the CPU backend's order proof). Asked only for trusted
    programs (`EvalOptions.trusted_programs`): the proof is written from inside the
    program's process, where a hostile program can write the same lines with the same token."""
    skip = getattr(backend, "orders_to_skip", None)
    return skip(step, inv) if skip is not None else ((), "")


def run_once(ev: Evaluation, case: int, prepared: PreparedData, executable: Path) -> tuple[Path | None, str]:
    """Run a compiled program once on one case (the backend's first thread order), as
    `_run_case` runs it, and keep its run dir: (run dir holding its outputs, "") or
    (None, why it failed). The caller discards the dir (`ws.discard`). For looking at a
    program's outputs (e.g. `cuset tasks check` corrupting a reference's); not a verdict."""
    run_dir, why, _ = run_wrapped(ev, case, prepared, executable)
    return run_dir, why


def run_wrapped(ev: Evaluation, case: int, prepared: PreparedData, executable: Path,
                how: WrappedRun = WrappedRun()) -> tuple[Path | None, str, StepResult]:
    """`run_once`, run as `how` says (a wrapper, see WrappedRun). Returns (run dir, "", step)
    or (None, why it failed, step); with `how.keep_failed` the run dir also comes back with
    a failure. The caller discards it."""
    task, backend, ws, opts = ev.task, ev.backend, ev.ws, ev.opts
    min_file_bytes, keep_failed = how.min_file_bytes, how.keep_failed
    policy = _policy_for(task, backend, ws, opts)
    if policy.file_size_bytes is not None and policy.file_size_bytes < min_file_bytes:
        policy = dataclasses.replace(policy, file_size_bytes=min_file_bytes)
    input_digests = {s.name: file_digest(prepared.input_path(s.name)) for s in task.inputs}
    quota = _disk_quota(task, executable, opts) + min_file_bytes
    order = backend.run_orders[0]
    run_dir = ws.new_run_dir(prepared, task, quota)
    inv = backend.invocation(_place_executable(executable, run_dir), order)
    if how.wrapper:
        inv = dataclasses.replace(inv, argv=[*how.wrapper, *inv.argv])
    started = time.time_ns()
    step = _run_program(how.name or f"run[case={case},order={order}]", inv, run_dir, policy, opts,
                        {"CUSET_CASE": str(case), **opts.extra_env, **inv.env}, how.readonly)
    failure = _limit_failure(step, run_dir, quota, opts) or _run_failure(step, backend, opts.timeouts.run)
    problem = (f"{failure[0].value}: {failure[1]}" if failure is not None else
               output_problem(task, run_dir, started, input_digests, prepared.data_dir / "data"))
    if problem is not None:
        if not keep_failed:
            ws.discard(run_dir)
        return run_dir if keep_failed else None, f"case {case}, order {order}: {problem}", step
    return run_dir, "", step


def _place_executable(executable: Path, run_dir: Path) -> Path:
    """A private copy in the run dir: the sandbox sees nothing of the cache, and a
    program that rewrites its own binary changes only this run."""
    import shutil

    target = run_dir / executable.name
    shutil.copy2(executable, target)
    return target


def _limit_failure(step: StepResult, run_dir: Path, quota: int, opts: EvalOptions) -> tuple[Status, str] | None:
    """The program's tree went over its memory budget (the kernel killed it), or it
    filled its run dir's quota (whatever it did after ENOSPC)."""
    if step.limit == "memory_limit":
        return Status.MEMORY_LIMIT, (f"the program's processes together used more than "
                                     f"{opts.program_memory_bytes / (1 << 20):.0f} MiB of memory; killed")
    if disk_quota.is_mounted(run_dir) and disk_quota.is_full(run_dir):
        return Status.DISK_LIMIT, f"the program filled its {quota / (1 << 20):.0f} MiB disk quota"
    return None


def _wrong_output_note(backend) -> str:
    """What the backend knows about why outputs may be wrong (optional `wrong_output_note()`)."""
    note = getattr(backend, "wrong_output_note", None)
    text = note() if note is not None else ""
    return f"; {text}" if text else ""


def _run_failure(step: StepResult, backend: Backend, timeout: float) -> tuple[Status, str] | None:
    if step.timed_out:
        return Status.TIMEOUT, f"still running after {timeout:g} s; killed"
    if step.returncode == 0:
        return None
    classified = backend.classify_failure(step)
    if classified is not None:
        return classified
    if step.returncode is None:
        return Status.RUNTIME_ERROR, step.stderr or "could not start"
    if step.returncode < 0:
        import signal

        try:
            name = signal.Signals(-step.returncode).name
        except ValueError:
            name = f"signal {-step.returncode}"
        hint = {"SIGXCPU": " (CPU time limit)", "SIGXFSZ": " (file size limit)", "SIGKILL": " (killed)"}.get(name, "")
        return Status.RUNTIME_ERROR, f"terminated by {name}{hint}"
    tail = (step.stderr or step.stdout).strip().splitlines()[-1:] or [""]
    return Status.RUNTIME_ERROR, f"exit code {step.returncode}" + (f": {tail[0][:300]}" if tail[0] else "")


def _mismatch(task: Task, run_dir: Path, prepared: PreparedData, **where) -> dict:
    """The mismatch record of rejected outputs (ExecResult.mismatch): where they came from
    (`where`: case, thread order, plain or robust verdict, the check that rejected them) and
    how they differ from the reference (strict.mismatch_record). Never changes a verdict."""
    head = dict(where)
    try:
        return {**head, **mismatch_record(task, run_dir, prepared.data_dir / "data")}
    except (OSError, ValueError) as e:   # a reference that cannot be read: said, not raised
        return {**head, "outputs": [], "not_compared": [f"not compared: {str(e)[:200]}"]}


def _strict_case(task: Task, prepared: PreparedData, runs: list) -> StrictVerdict:
    """The strict check on each distinct output of a case's runs (orders that agree are one);
    a failing one carries its mismatch record."""
    seen: set[str] = set()
    verdict = StrictVerdict(True)
    for order, digest, _, run_dir in runs:
        if digest in seen:
            continue
        seen.add(digest)
        verdict = strict_check(task, run_dir, prepared.data_dir / "data")
        if not verdict.ok:
            detail = verdict.detail if len(runs) == 1 else f"order {order}: {verdict.detail}"
            record = _mismatch(task, run_dir, prepared, order=order, verdict="robust", check="strict")
            return dataclasses.replace(verdict, detail=detail, mismatch=record)
    return verdict


def _judge(ev: Evaluation, log: SampleLog, case: int, prepared: PreparedData, run_dir: Path, digest: str,
           prefix: str = "") -> tuple[bool, str]:
    """compare.py's verdict on this run's outputs. compare.py is a function of its files, so
    byte-identical outputs on the same data (a repeated sample, or two orders that agree)
    are judged once per workspace; the program itself still runs for every sample."""
    task, ws, opts = ev.task, ev.ws, ev.opts
    name = f"{prefix}compare[case={case}]"
    key = (str(prepared.data_dir), hashlib.sha256(task.compare_py.encode()).hexdigest(), digest, opts.compat)
    cached = ws.verdicts.get(key)
    if cached is not None:
        ok, why, step = cached
        log.add(dataclasses.replace(step, name=name, seconds=0.0,
                                    stderr=step.stderr + "[verdict reused: identical outputs]"))
        return ok, why
    with log.timed("compare"):
        ok, why, step = compare_outputs(task, case, prepared, run_dir, ws, opts, name)
    log.add(step)
    if not step.timed_out and step.returncode is not None:  # load or infrastructure trouble: judge again next time
        ws.verdicts[key] = (ok, why, step)
    return ok, why


def compare_outputs(task: Task, case: int, prepared: PreparedData, run_dir: Path, ws: Workspace, opts: EvalOptions,
                    name: str = "compare") -> tuple[bool, str, StepResult]:
    """The task's compare.py on the outputs in run_dir/data, run as every evaluation runs it:
    in a fresh compare dir holding copies of the outputs next to gen.py's files.
    (accepted, why not, the compare step)."""
    outputs = {s.name: run_dir / "data" / f"{s.name}.bin" for s in task.outputs}
    cmp_dir = ws.new_compare_dir(prepared, outputs, task.compare_py)
    try:
        step = ws.run_script(name, cmp_dir, "compare.py", opts.timeouts.compare, {"CUSET_CASE": str(case)})
    finally:
        ws.discard(cmp_dir)
    return (*_compare_reading(step, opts), step)


def _compare_reading(step: StepResult, opts: EvalOptions) -> tuple[bool, str]:
    if step.timed_out:
        return False, f"compare.py did not finish in {opts.timeouts.compare:g} s"
    if step.returncode != 0:
        tail = (step.stderr or step.stdout).strip().splitlines()[-1:] or [""]
        return False, f"compare.py failed (exit {step.returncode}): {tail[0][:300]}"
    if compare_verdict(step.stdout, opts.compat):
        return True, ""
    said = step.stdout.strip()[:200] or "nothing"
    return False, f"compare.py rejected the outputs (printed {said!r})"
