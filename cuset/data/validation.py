"""Stage 3: compile and run every candidate task's reference program on each of its
input cases through the evaluation pipeline; keep only those passing them all.

One record per task in `3_validation.jsonl`:
    {"key", "candidate", "task_name", "status", "detail", "seconds"}
where status is a `cuset.execute.result.Status` value. Records are keyed by the
task's content, so an edited task is validated again and an unchanged one never is.
"""

from __future__ import annotations

import contextlib
import functools
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Callable, Iterator

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


def task_key(task_json: dict) -> str:
    return json_key({k: v for k, v in task_json.items() if k != "id"})


def _gen_sandbox():
    """gen.py scripts in curated data were written by an LLM: they run sandboxed
    (no network, nothing writable but their own directory, CPU/file/process limits)."""
    from cuset.execute.sandbox import SandboxPolicy

    return SandboxPolicy(cpu_seconds=600, file_size_bytes=1 << 30, processes=64, memory_bytes=8 << 30)


@contextmanager
def pipeline_evaluator(cfg: ValidationConfig, backend) -> Iterator[Evaluate]:
    """`cuset.evaluate.evaluate_program` with one compile cache and one workspace shared by
    every validation (identical sources compile once; gen.py runs once per task and case)."""
    try:
        from cuset.evaluate import Timeouts, Workspace, evaluate_program
        from cuset.execute.compile_cache import CompileCache
    except ImportError as e:
        raise ValidationUnavailable(
            f"validation needs the evaluation pipeline (cuset.evaluate.evaluate_program), which cannot be imported: {e}"
        ) from None
    timeouts = Timeouts(gen=cfg.gen_timeout_s, compile=cfg.compile_timeout_s, run=cfg.run_timeout_s,
                        compare=cfg.compare_timeout_s)
    with CompileCache(backend, workers=cfg.n_workers, timeout=timeouts.compile) as cache, \
            Workspace(gen_timeout=timeouts.gen, gen_sandbox=_gen_sandbox()) as workspace:
        yield functools.partial(evaluate_program, cache=cache, workspace=workspace, timeouts=timeouts)


def make_backend(name: str):
    from cuset.execute.registry import get_backend

    try:
        return get_backend(name)
    except (ImportError, RuntimeError) as e:
        raise ValidationUnavailable(f"execution backend {name!r} is not available: {e}") from None


def validate_tasks(synth_records: list[dict], store: StageStore, *, evaluate: Evaluate | None, backend,
                   cases: tuple[int, ...], workers: int, advance=None,
                   ray: ValidationConfig | None = None) -> list[dict]:
    """Validate the `ok` records of stage 2; returns one validation record per such
    record, in order (two candidates that became the same task share one run).
    `ray`: the validation config of an executor=ray run (programs run on Ray workers,
    each with its own evaluation pipeline; `evaluate` is then unused)."""
    ok = [rec for rec in synth_records if rec["status"] == "ok"]
    jobs: dict[str, tuple[dict, dict]] = {}
    for rec in ok:
        key = task_key(rec["task"])
        if store.get(key) is None and key not in jobs:
            jobs[key] = (rec, rec["task"])
        elif advance is not None:
            advance()

    def work(item) -> None:
        key, (rec, task_json) = item
        try:
            store.put(_validate_one(key, rec, Task.from_json(task_json), evaluate, backend, cases))
        finally:
            if advance is not None:
                advance()

    if ray is not None:
        _validate_on_ray(list(jobs.items()), store, ray, backend, cases, advance)
    else:
        pool = ThreadPoolExecutor(max_workers=max(1, workers))
        try:
            list(pool.map(work, jobs.items()))
        finally:  # on Ctrl-C or an error: finish the programs running, start no new ones
            pool.shutdown(wait=True, cancel_futures=True)
    by_key = {r["key"]: r for r in store.finish(list(dict.fromkeys(task_key(r["task"]) for r in ok)))}
    return [{**by_key[task_key(rec["task"])], "candidate": rec["key"], "origin": rec.get("origin", "")} for rec in ok]


def _validate_one(key: str, rec: dict, task: Task, evaluate: Evaluate, backend, cases) -> dict:
    start = time.perf_counter()
    result = evaluate(task, task.bench_cu, backend=backend, cases=tuple(cases))
    if not isinstance(result, ExecResult):
        raise TypeError(f"evaluate returned {type(result).__name__}, expected ExecResult")
    return {"key": key, "candidate": rec["key"], "origin": rec.get("origin", ""), "task_name": task.task_name,
            "status": result.status.value, "detail": result.detail,
            "seconds": round(time.perf_counter() - start, 3)}


def validate_on_worker(cfg: ValidationConfig, backend_name: str, key: str, rec: dict, task_json: dict,
                       cases: tuple[int, ...]) -> dict:
    """One program's validation on a Ray worker, with a pipeline kept for the worker's life."""
    from cuset.execute.ray_tasks import worker_state

    backend = worker_state(f"backend|{backend_name}", lambda: contextlib.nullcontext(make_backend(backend_name)))
    evaluate = worker_state(f"validate|{backend_name}|{cfg!r}", lambda: pipeline_evaluator(cfg, backend))
    return _validate_one(key, rec, Task.from_json(task_json), evaluate, backend, cases)


def _validate_on_ray(jobs: list, store: StageStore, cfg: ValidationConfig, backend, cases, advance) -> None:
    from cuset.execute.ray_tasks import ray_map, ray_session

    def done(i: int, record: dict) -> None:
        store.put(record)
        if advance is not None:
            advance()

    def lost(i: int, err: BaseException) -> None:
        key, (rec, task_json) = jobs[i]
        done(i, {"key": key, "candidate": rec["key"], "origin": rec.get("origin", ""),
                 "task_name": task_json.get("task_name", ""), "status": Status.INFRA_ERROR.value,
                 "detail": f"the Ray worker validating it was lost {cfg.ray_max_retries + 1} time(s) "
                           f"({type(err).__name__})", "seconds": 0.0})

    resources = {"num_gpus": 1, "num_cpus": 1} if backend.name == "gpu" else {"num_cpus": 1}
    with ray_session(cfg.ray_address, cfg.n_workers):
        ray_map(validate_on_worker, [(key, rec, task_json, tuple(cases)) for key, (rec, task_json) in jobs],
                resources=resources, max_retries=cfg.ray_max_retries, shared=(cfg, backend.name),
                on_result=done, on_lost=lost)


def passed(record: dict) -> bool:
    return record["status"] == Status.PASSED.value
