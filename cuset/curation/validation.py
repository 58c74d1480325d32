"""Validating reference programs: compile and run each task's own bench.cu on each of
its input cases through the evaluation pipeline (gen.py, compile, run, compare.py) and
record one `Validation` per task; a task is kept only if it passes them all.

Used by stage 3 of `cuset data build` (`validate_tasks`, over the stage-2 records,
resumable in `3_validation.jsonl`, optionally on Ray) and for any list of tasks, such as
the task families' (`validate_references`, resumable in a results file of your choice):

    results = validate_references(tasks, execution=ExecutionConfig(backend="cpu", workers=2), cases=(0, 1),
                                  results_path="runs/v/results.jsonl")

Either way the programs run as evaluation runs them: the backend built by the same
`ExecutionConfig.make_backend`, the same `EvalOptions` (timeouts, sandbox limits) and the
batch runner of cuset.evaluate.batch (local threads sharing one `pipeline_evaluator`: one
compile cache and one workspace; or Ray workers with one each). The results file is a run
store (cuset.curation.runstore):
one JSON line per task, `Validation.to_json()`,
    {"key", "task_id", "task_name", "family", "status", "detail", "seconds", "timings"}
(the data build adds the "candidate" and "origin" it came from), keyed by `task_key`,
the task's content without its id: an edited task is validated again and an unchanged
one never is, as long as the backend and the cases stay the same. status is a
`cuset.execute.result.Status` value.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from cuset.errors import CusetError
from cuset.curation.records import json_key
from cuset.curation.runstore import StageStore
from cuset.evaluate.batch import Setup, run_jobs
from cuset.evaluate.config import ExecutionConfig
from cuset.evaluate.judge import judge_code_hash
from cuset.execute.result import ExecResult, Status
from cuset.tasks import Task

# evaluate(task, code, *, backend, cases) -> ExecResult: cuset.evaluate.evaluate_program with
# this run's compile cache, workspace and options (see pipeline_evaluator)
Evaluate = Callable[..., ExecResult]


class ValidationUnavailable(CusetError, RuntimeError):
    """Validation cannot run here (no backend)."""


@dataclass(frozen=True)
class Validation:
    """The outcome of one task's reference program."""

    key: str                # task_key of the task
    task_id: int | str
    task_name: str
    family: str
    status: str             # a cuset.execute.result.Status value
    detail: str
    seconds: float
    timings: dict = field(default_factory=dict)  # seconds per pipeline step (gen, compile, run, compare, ...)

    @property
    def passed(self) -> bool:
        return self.status == Status.PASSED.value

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "Validation":
        """A record of a results file (extra fields such as the data build's origin are ignored;
        records of older runs lack task_id, family and timings)."""
        return cls(d["key"], d.get("task_id", ""), d.get("task_name", ""), d.get("family", ""), d["status"],
                   d.get("detail", ""), d.get("seconds", 0.0), dict(d.get("timings") or {}))


def task_key(task: Task | dict) -> str:
    """A task's identity for validation: a hash of its record without the id."""
    record = task.to_json() if isinstance(task, Task) else task
    return json_key({k: v for k, v in record.items() if k != "id"})


def _gen_sandbox():
    """gen.py and compare.py scripts in curated data were written by an LLM: they run sandboxed
    (no network, nothing writable but their own directory, CPU/file/process limits)."""
    from cuset.execute.sandbox import SandboxPolicy

    return SandboxPolicy(cpu_seconds=600, file_size_bytes=1 << 30, processes=64, memory_bytes=8 << 30)


@contextmanager
def pipeline_evaluator(execution: ExecutionConfig, backend, *, cache_dir: str | Path | None = None,
                       sandbox_gen: bool = True, trusted_programs: bool = False) -> Iterator[Evaluate]:
    """`cuset.evaluate.evaluate_program` under `execution`'s options (timeouts, sandbox limits),
    with one compile cache (in `cache_dir`, default the cuset cache) and one workspace shared by
    every validation (identical sources compile once; gen.py runs once per task and case).
    sandbox_gen=False runs gen.py and compare.py unsandboxed: only for scripts of our own, such as the
    task families'.
    trusted_programs: the programs are task references (validation), not model answers (the
    reasoning stage): only then does the CPU runtime's order proof skip thread orders."""
    from cuset.evaluate import Workspace, evaluate_program
    from cuset.execute.compile_cache import CompileCache

    options = execution.options((0,), trusted_programs=trusted_programs)
    with CompileCache(backend, cache_dir, workers=execution.n_workers, timeout=options.timeouts.compile) as cache, \
            Workspace(gen_timeout=options.timeouts.gen, script_sandbox=_gen_sandbox() if sandbox_gen else None) as workspace:
        def evaluate(task, code: str | None, *, backend, cases) -> ExecResult:
            return evaluate_program(task, code, backend=backend, cache=cache, workspace=workspace,
                                    options=replace(options, cases=tuple(cases)))

        yield evaluate


def make_backend(execution: ExecutionConfig, *, order_proofs: bool = True):
    """The backend `execution` names, built as evaluation builds it; without the CPU backend's
    order proofs for programs a model wrote (they would not be believed)."""
    try:
        return execution.make_backend(order_proofs=order_proofs)
    except (ImportError, RuntimeError, FileNotFoundError) as e:
        raise ValidationUnavailable(f"execution backend {execution.backend!r} is not available: {e}") from None


def store_settings(backend, cases: Iterable[int]) -> dict:
    """What a results file's records depend on: changing any of it validates every task again
    (the evaluation code that judges them too: cuset.evaluate.judge)."""
    return {"backend": backend.name, "fingerprint": backend.fingerprint(), "cases": list(cases),
            "evaluator": judge_code_hash()}


def validate_references(tasks: Sequence[Task], *, execution: ExecutionConfig | None = None, backend=None,
                        cases: tuple[int, ...] = (0, 1), results_path: str | Path | None = None,
                        cache_dir: str | Path | None = None, on_result: Callable[[Validation], None] | None = None,
                        sandbox_gen: bool = False) -> list[Validation]:
    """Validate each task's own bench.cu; returns one Validation per task, in the order of `tasks`.

    execution: backend, workers, executor, timeouts (default `ExecutionConfig()`); backend: an
    already built one (default `execution`'s). results_path (a .jsonl file): records stream
    there as tasks finish, and a re-run skips the tasks already recorded (its settings are kept
    in a state.json beside it). on_result is called with each task validated by this call, in
    this thread. gen.py runs unsandboxed unless sandbox_gen (the default suits the task
    families, whose scripts are ours)."""
    execution = execution or ExecutionConfig()
    backend = backend or make_backend(execution)
    store = _results_store(results_path, backend, cases)
    keys = [task_key(t) for t in tasks]
    todo = [(k, t.to_json(), tuple(cases)) for k, t in dict(zip(keys, tasks)).items() if store.get(k) is None]

    def record(i: int, v: Validation) -> None:
        store.put(v.to_json())
        if on_result is not None:
            on_result(v)

    try:
        if todo:
            _run(todo, execution, backend, record, cache_dir=cache_dir, sandbox_gen=sandbox_gen, trusted_programs=True)
    finally:
        store.close()
    return [Validation.from_json(store.get(k)) for k in keys]


def _results_store(results_path: str | Path | None, backend, cases) -> StageStore | _MemoryStore:
    if results_path is None:
        return _MemoryStore()
    path = Path(results_path)
    if path.suffix != ".jsonl":
        raise ValueError(f"results_path must name a .jsonl file, got {path}")
    return StageStore(path.parent, path.stem, store_settings(backend, cases))


class _MemoryStore:
    """A run store's get/put/close for a validation without a results file."""

    def __init__(self):
        self.records: dict[str, dict] = {}

    def get(self, key: str) -> dict | None:
        return self.records.get(key)

    def put(self, record: dict) -> None:
        self.records[record["key"]] = record

    def close(self) -> None:
        pass


def validate_tasks(synth_records: list[dict], store: StageStore, *, evaluate: Evaluate | None, backend,
                   cases: tuple[int, ...], execution: ExecutionConfig, advance=None) -> list[dict]:
    """Stage 3 of the data build: validate the `ok` records of stage 2; returns one
    validation record per such record, in order (two candidates that became the same
    task share one run). `evaluate` runs the programs locally (executor=local); on Ray each
    worker builds its own pipeline from `execution`. The programs are a model's (stage 2 wrote
    them): the CPU runtime's order proofs are not believed, every thread order runs."""
    ok = [rec for rec in synth_records if rec["status"] == "ok"]
    jobs: dict[str, dict] = {}
    for rec in ok:
        key = task_key(rec["task"])
        if store.get(key) is None and key not in jobs:
            jobs[key] = rec
        elif advance is not None:
            advance()
    todo = [(key, rec["task"], tuple(cases)) for key, rec in jobs.items()]

    def record(i: int, v: Validation) -> None:
        rec = jobs[v.key]
        store.put({**v.to_json(), "candidate": rec["key"], "origin": rec.get("origin", "")})
        if advance is not None:
            advance()

    if todo:
        _run(todo, execution, backend, record, state=(evaluate, backend) if evaluate is not None else None,
             trusted_programs=False)
    by_key = {r["key"]: r for r in store.finish(list(dict.fromkeys(task_key(r["task"]) for r in ok)))}
    return [{**by_key[task_key(rec["task"])], "candidate": rec["key"], "origin": rec.get("origin", "")} for rec in ok]


def _run(todo: list[tuple[str, dict, tuple[int, ...]]], execution: ExecutionConfig, backend,
         record: Callable[[int, Validation], None], *, state=None, cache_dir=None, sandbox_gen: bool = True,
         trusted_programs: bool) -> None:
    """Validate (key, task record, cases) jobs with the batch runner; a job whose Ray worker was
    lost too often is recorded as infra_error (so not kept). trusted_programs: the programs are
    our own or a task's references (order proofs believed), not a model's."""
    def lost(i: int, err: BaseException) -> None:
        key, task_json, _ = todo[i]
        record(i, Validation(key, task_json.get("id", ""), task_json.get("task_name", ""),
                             task_json.get("family") or task_json.get("task_name", ""), Status.INFRA_ERROR.value,
                             f"the Ray worker validating it was lost {execution.ray_max_retries + 1} time(s) "
                             f"({type(err).__name__})", 0.0))

    # locally this process's backend (possibly one the caller built) serves every thread
    local = Setup(_local_pipeline, (backend, cache_dir, sandbox_gen, trusted_programs))
    remote = Setup(_worker_pipeline, (cache_dir, sandbox_gen, trusted_programs))
    run_jobs(_validate_job, todo, execution, setup=remote if execution.executor == "ray" else local,
             state=state, on_result=record, on_lost=lost)


@contextmanager
def _local_pipeline(execution: ExecutionConfig, backend, cache_dir, sandbox_gen: bool, trusted_programs: bool):
    with pipeline_evaluator(execution, backend, cache_dir=cache_dir, sandbox_gen=sandbox_gen,
                            trusted_programs=trusted_programs) as evaluate:
        yield evaluate, backend


@contextmanager
def _worker_pipeline(execution: ExecutionConfig, cache_dir, sandbox_gen: bool, trusted_programs: bool):
    """A Ray worker's backend and pipeline, built from the driver's execution section."""
    backend = make_backend(execution, order_proofs=trusted_programs)
    with pipeline_evaluator(execution, backend, cache_dir=cache_dir, sandbox_gen=sandbox_gen,
                            trusted_programs=trusted_programs) as evaluate:
        yield evaluate, backend


def _validate_job(state: tuple[Evaluate, object], key: str, task_json: dict, cases: tuple[int, ...]) -> Validation:
    evaluate, backend = state
    task = Task.from_json(task_json)
    start = time.perf_counter()
    result = evaluate(task, task.bench_cu, backend=backend, cases=cases)
    if not isinstance(result, ExecResult):
        raise TypeError(f"evaluate returned {type(result).__name__}, expected ExecResult")
    return Validation(key, task.id, task.task_name, task.family_name, result.status.value, result.detail,
                      round(time.perf_counter() - start, 3), {k: round(v, 3) for k, v in result.timings.items()})


def passed(record: dict) -> bool:
    return record["status"] == Status.PASSED.value
