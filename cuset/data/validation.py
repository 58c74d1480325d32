"""Validating reference programs: compile and run each task's own bench.cu on each of
its input cases through the evaluation pipeline (gen.py, compile, run, compare.py) and
record one `Validation` per task; a task is kept only if it passes them all.

Used by stage 3 of `cuset data build` (`validate_tasks`, over the stage-2 records,
resumable in `3_validation.jsonl`, optionally on Ray) and for any list of tasks, such as
the task families' (`validate_references`, resumable in a results file of your choice):

    results = validate_references(tasks, backend=get_backend("cpu"), cases=(0, 1), workers=2,
                                  results_path="runs/v/results.jsonl")

Either way one `pipeline_evaluator` (one compile cache and one workspace shared by every
program) runs the programs, and the results file is a run store (cuset.data.runstore):
one JSON line per task, `Validation.to_json()`,
    {"key", "task_id", "task_name", "family", "status", "detail", "seconds", "timings"}
(the data build adds the "candidate" and "origin" it came from), keyed by `task_key`,
the task's content without its id: an edited task is validated again and an unchanged
one never is, as long as the backend and the cases stay the same. status is a
`cuset.execute.result.Status` value.
"""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from cuset.errors import CusetError
from cuset.data.config import ValidationConfig
from cuset.data.records import json_key
from cuset.data.runstore import StageStore
from cuset.execute.result import ExecResult, Status
from cuset.tasks import Task

# evaluate(task, code, *, backend, cases) -> ExecResult: the signature of cuset.evaluate.evaluate_program
Evaluate = Callable[..., ExecResult]


class ValidationUnavailable(CusetError, RuntimeError):
    """Validation cannot run here (no evaluation pipeline, no backend)."""


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
    """gen.py scripts in curated data were written by an LLM: they run sandboxed
    (no network, nothing writable but their own directory, CPU/file/process limits)."""
    from cuset.execute.sandbox import SandboxPolicy

    return SandboxPolicy(cpu_seconds=600, file_size_bytes=1 << 30, processes=64, memory_bytes=8 << 30)


@contextmanager
def pipeline_evaluator(cfg: ValidationConfig, backend, *, cache_dir: str | Path | None = None,
                       sandbox_gen: bool = True) -> Iterator[Evaluate]:
    """`cuset.evaluate.evaluate_program` with one compile cache (in `cache_dir`, default the
    cuset cache) and one workspace shared by every validation (identical sources compile once;
    gen.py runs once per task and case). sandbox_gen=False runs gen.py unsandboxed: only for
    scripts of our own, such as the task families'."""
    try:
        from cuset.evaluate import EvalOptions, Timeouts, Workspace, evaluate_program
        from cuset.execute.compile_cache import CompileCache
    except ImportError as e:
        raise ValidationUnavailable(
            f"validation needs the evaluation pipeline (cuset.evaluate.evaluate_program), which cannot be imported: {e}"
        ) from None
    timeouts = Timeouts(gen=cfg.gen_timeout_s, compile=cfg.compile_timeout_s, run=cfg.run_timeout_s,
                        compare=cfg.compare_timeout_s)
    with CompileCache(backend, cache_dir, workers=cfg.n_workers, timeout=timeouts.compile) as cache, \
            Workspace(gen_timeout=timeouts.gen, gen_sandbox=_gen_sandbox() if sandbox_gen else None) as workspace:
        options = EvalOptions(timeouts=timeouts)

        def evaluate(task, code, *, backend, cases) -> ExecResult:
            return evaluate_program(task, code, backend=backend, cache=cache, workspace=workspace,
                                    options=replace(options, cases=tuple(cases)))
        yield evaluate


def make_backend(name: str):
    from cuset.execute.registry import get_backend

    try:
        return get_backend(name)
    except (ImportError, RuntimeError) as e:
        raise ValidationUnavailable(f"execution backend {name!r} is not available: {e}") from None


def store_settings(backend, cases: Iterable[int]) -> dict:
    """What a results file's records depend on: changing any of it validates every task again."""
    return {"backend": backend.name, "fingerprint": backend.fingerprint(), "cases": list(cases)}


def validate_references(tasks: Sequence[Task], *, backend, cases: tuple[int, ...] = (0, 1), workers: int = 2,
                        results_path: str | Path | None = None, cache_dir: str | Path | None = None,
                        on_result: Callable[[Validation], None] | None = None,
                        sandbox_gen: bool = False) -> list[Validation]:
    """Validate each task's own bench.cu; returns one Validation per task, in the order of `tasks`.

    results_path (a .jsonl file): records stream there as tasks finish, and a re-run skips
    the tasks already recorded (its settings are kept in a state.json beside it). on_result
    is called with each task validated by this call, one call at a time. gen.py runs unsandboxed unless
    sandbox_gen (the default suits the task families, whose scripts are ours)."""
    store = _results_store(results_path, backend, cases)
    keys = [task_key(t) for t in tasks]
    todo = [(k, t) for k, t in dict(zip(keys, tasks)).items() if store.get(k) is None]

    lock = threading.Lock()  # on_result is called from the pool's threads, one at a time

    def record(v: Validation) -> None:
        with lock:
            store.put(v.to_json())
            if on_result is not None:
                on_result(v)

    try:
        if todo:
            cfg = ValidationConfig(cases=list(cases), workers=max(1, workers))
            with pipeline_evaluator(cfg, backend, cache_dir=cache_dir, sandbox_gen=sandbox_gen) as evaluate:
                _run_local(todo, evaluate, backend, tuple(cases), workers, record)
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
                   cases: tuple[int, ...], workers: int, advance=None,
                   ray: ValidationConfig | None = None) -> list[dict]:
    """Stage 3 of the data build: validate the `ok` records of stage 2; returns one
    validation record per such record, in order (two candidates that became the same
    task share one run). `ray`: the validation config of an executor=ray run (programs
    run on Ray workers, each with its own evaluation pipeline; `evaluate` is then unused)."""
    ok = [rec for rec in synth_records if rec["status"] == "ok"]
    jobs: dict[str, tuple[dict, dict]] = {}
    for rec in ok:
        key = task_key(rec["task"])
        if store.get(key) is None and key not in jobs:
            jobs[key] = (rec, rec["task"])
        elif advance is not None:
            advance()

    def record(key: str, v: Validation) -> None:
        rec = jobs[key][0]
        store.put({**v.to_json(), "candidate": rec["key"], "origin": rec.get("origin", "")})
        if advance is not None:
            advance()

    if ray is not None:
        _validate_on_ray(list(jobs.items()), ray, backend, cases, record)
    else:
        _run_local([(key, Task.from_json(task_json)) for key, (_, task_json) in jobs.items()], evaluate, backend,
                   cases, workers, lambda v: record(v.key, v), on_error=advance)
    by_key = {r["key"]: r for r in store.finish(list(dict.fromkeys(task_key(r["task"]) for r in ok)))}
    return [{**by_key[task_key(rec["task"])], "candidate": rec["key"], "origin": rec.get("origin", "")} for rec in ok]


def _run_local(jobs: list[tuple[str, Task]], evaluate: Evaluate, backend, cases: tuple[int, ...], workers: int,
               on_result: Callable[[Validation], None], on_error: Callable[[], Any] | None = None) -> None:
    """Validate the jobs on a thread pool, calling on_result (under no lock: it must be
    thread-safe) as each finishes; on_error is called for a job whose validation raised."""

    def work(job: tuple[str, Task]) -> None:
        key, task = job
        try:
            v = _validate_one(key, task, evaluate, backend, cases)
        except BaseException:
            if on_error is not None:
                on_error()
            raise
        on_result(v)

    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    try:
        list(pool.map(work, jobs))
    finally:  # on Ctrl-C or an error: finish the programs running, start no new ones
        pool.shutdown(wait=True, cancel_futures=True)


def _validate_one(key: str, task: Task, evaluate: Evaluate, backend, cases) -> Validation:
    start = time.perf_counter()
    result = evaluate(task, task.bench_cu, backend=backend, cases=tuple(cases))
    if not isinstance(result, ExecResult):
        raise TypeError(f"evaluate returned {type(result).__name__}, expected ExecResult")
    return Validation(key, task.id, task.task_name, task.family_name, result.status.value, result.detail,
                      round(time.perf_counter() - start, 3), {k: round(v, 3) for k, v in result.timings.items()})


def validate_on_worker(cfg: ValidationConfig, backend_name: str, key: str, task_json: dict,
                       cases: tuple[int, ...]) -> Validation:
    """One program's validation on a Ray worker, with a pipeline kept for the worker's life."""
    from cuset.execute.ray_tasks import worker_state

    backend = worker_state(f"backend|{backend_name}", lambda: contextlib.nullcontext(make_backend(backend_name)))
    evaluate = worker_state(f"validate|{backend_name}|{cfg!r}", lambda: pipeline_evaluator(cfg, backend))
    return _validate_one(key, Task.from_json(task_json), evaluate, backend, cases)


def _validate_on_ray(jobs: list, cfg: ValidationConfig, backend, cases, record: Callable[[str, Validation], None]) -> None:
    from cuset.execute.ray_tasks import ray_map, ray_session

    def lost(i: int, err: BaseException) -> None:
        key, (rec, task_json) = jobs[i]
        record(key, Validation(key, task_json.get("id", ""), task_json.get("task_name", ""),
                               task_json.get("family") or task_json.get("task_name", ""), Status.INFRA_ERROR.value,
                               f"the Ray worker validating it was lost {cfg.ray_max_retries + 1} time(s) "
                               f"({type(err).__name__})", 0.0))

    resources = {"num_gpus": 1, "num_cpus": 1} if backend.name == "gpu" else {"num_cpus": 1}
    with ray_session(cfg.ray_address, cfg.n_workers):
        ray_map(validate_on_worker, [(key, task_json, tuple(cases)) for key, (rec, task_json) in jobs],
                resources=resources, max_retries=cfg.ray_max_retries, shared=(cfg, backend.name),
                on_result=lambda i, v: record(jobs[i][0], v), on_lost=lost)


def passed(record: dict) -> bool:
    return record["status"] == Status.PASSED.value
