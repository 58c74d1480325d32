"""The one batch runner: a job function over many jobs, on threads of this process
(`executor=local`) or as Ray tasks (`executor=ray`), for evaluation (cuset.evaluate.runner)
and curation (cuset.curation.validation) alike.

    meta = run_jobs(work, jobs, cfg.execution, setup=Setup(build, args), state=local_state,
                    on_result=lambda i, value: ..., on_lost=lambda i, error: ...)

`work(state, *jobs[i])` runs one job with the machinery its process shares (backend,
workspace, compile cache). Locally every thread shares `state`, or, when none is given, the
value of `setup.build(execution, *setup.args)` (a context manager) entered once for the run.
On Ray each worker process enters `setup.build(...)` once and keeps it for the jobs it is
given; `work` and `setup.build` must be module-level functions (workers import them).

`on_result(i, value)` is called in the caller's thread, one call at a time, as jobs
finish, under either executor: the caller alone writes results. The failure policy is the
same for both: an exception raised by `work` (or by `on_result`, e.g. Ctrl-C) cancels the
jobs not yet started, lets the running ones finish (locally) or cancels them (Ray), and
leaves the call. Only on Ray can a job's process die under it (killed, out of memory, node
lost): after `execution.ray_max_retries` retries `on_lost(i, error)` is called instead of
`on_result`.

Resources per job on Ray: one GPU and a core for the gpu backend; for the cpu backend
`program_threads` cores (default 1, pinned in the workers' config so each program runs
with the cores it reserved). An embedded cluster gets `workers` cores (default: all).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from cuset.evaluate.config import ExecutionConfig

# Tests set it to a directory: each Ray worker writes `<pid>.<job index>` before running a job.
PID_DIR_ENV = "CUSET_RAY_PID_DIR"


@dataclass(frozen=True)
class Setup:
    """How a process builds the state its jobs share: `build(execution, *args)`, a context
    manager; `build` is a module-level function and `args` pickle (Ray ships them)."""

    build: Callable[..., contextlib.AbstractContextManager]
    args: tuple = ()


def run_jobs(work: Callable[..., Any], jobs: Sequence[tuple], execution: ExecutionConfig, *, setup: Setup,
             on_result: Callable[[int, Any], None], on_lost: Callable[[int, BaseException], None],
             state: Any = None) -> dict:
    """Run `work(state, *job)` for every job under `execution.executor`; returns what the run
    was, for reports: {"executor": "local"} or the Ray cluster and the resources per job."""
    if execution.executor == "ray":
        return _run_on_ray(work, jobs, execution, setup, on_result, on_lost)
    with contextlib.ExitStack() as stack:
        if state is None:
            state = stack.enter_context(setup.build(execution, *setup.args))
        _run_local(work, jobs, state, execution.n_workers, on_result)
    return {"executor": "local"}


def _run_local(work, jobs: Sequence[tuple], state, workers: int, on_result) -> None:
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="job")
    try:
        futures = {pool.submit(work, state, *job): i for i, job in enumerate(jobs)}
        for fut in as_completed(futures):
            on_result(futures[fut], fut.result())
    finally:
        # On Ctrl-C or an error: drop the queued jobs, let the running ones finish; recorded ones stay.
        pool.shutdown(wait=True, cancel_futures=True)


def ray_execution(execution: ExecutionConfig) -> tuple[ExecutionConfig, dict]:
    """The execution config Ray workers use (program threads pinned) and one job's resources."""
    if execution.backend_name() == "gpu":
        return execution, {"num_gpus": 1, "num_cpus": 1}
    threads = execution.program_threads or 1
    return replace(execution, program_threads=threads), {"num_cpus": threads}


def _run_on_ray(work, jobs: Sequence[tuple], execution: ExecutionConfig, setup: Setup, on_result, on_lost) -> dict:
    from cuset.execute.ray_tasks import ray_map, ray_session

    worker_execution, resources = ray_execution(execution)
    with ray_session(execution.ray_address, execution.n_workers) as cluster:
        ray_map(_job_on_worker, [(i, job) for i, job in enumerate(jobs)], resources=resources,
                max_retries=execution.ray_max_retries, shared=(work, setup, worker_execution),
                on_result=on_result, on_lost=on_lost)
    return {"executor": "ray", "ray_address": cluster, "ray_resources_per_job": resources}


def _job_on_worker(work, setup: Setup, execution: ExecutionConfig, i: int, job: tuple):
    """The body of one Ray task: the worker's state for (setup, execution), built on its first job and kept."""
    from cuset.execute.ray_tasks import worker_state

    pid_dir = os.environ.get(PID_DIR_ENV)
    if pid_dir:
        Path(pid_dir, f"{os.getpid()}.{i}").touch()
    key = "jobs|" + hashlib.sha256(pickle.dumps((setup, execution))).hexdigest()
    state = worker_state(key, lambda: setup.build(execution, *setup.args))
    return work(state, *job)
