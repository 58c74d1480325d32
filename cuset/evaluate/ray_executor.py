"""`executor=ray`: each sample's pipeline runs as a Ray task; this process alone writes results.

    cuset eval TASKS GENS --out DIR executor=ray                    # an embedded local cluster
    ray start --head; cuset eval TASKS GENS --out DIR executor=ray ray_address=auto

Every Ray worker process builds the same `EvalContext` as the local executor (backend,
sandboxed workspace, content-addressed compile cache) from the driver's config and keeps it
for the samples it is given, so a sample runs exactly the code it runs locally and gets
the same result. The compile cache lives under `cache_dir`: on one node every worker shares
it; across nodes, point `cache_dir` at a shared directory for one compile per cluster
(otherwise one per node).

Resources per sample: one GPU (and a core) for the gpu backend; for the cpu backend as
many cores as the run's block threads (`backend_options.workers`, default 1). An embedded
cluster gets `workers` cores (default: all), so as many samples run at once as locally.

Faults: a sample whose worker process dies (killed, OOM, node lost) is retried
`ray_max_retries` times, then recorded as `infra_error` (listed, out of every
denominator). Results reach the file only from the driver, one line per sample, as
tasks finish: a sample is never recorded twice, and Ctrl-C cancels what is left and
leaves a file that either executor resumes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
from dataclasses import replace
from pathlib import Path
from typing import Callable

from cuset.evaluate.config import EvalConfig
from cuset.evaluate.records import SampleResult
from cuset.execute.result import Status
from cuset.generate.records import GenerationRecord
from cuset.tasks import Task

# Tests set it to a directory: each worker writes `<pid>.<task>.<sample>` before running a sample.
PID_DIR_ENV = "CUSET_RAY_PID_DIR"

def _context(cfg: EvalConfig):
    """This worker's EvalContext for `cfg`, built on its first sample and kept."""
    from cuset.evaluate.runner import EvalContext
    from cuset.execute.ray_tasks import worker_state

    key = "eval|" + hashlib.sha256(pickle.dumps(cfg)).hexdigest()
    return worker_state(key, lambda: contextlib.closing(EvalContext(cfg)))


def evaluate_on_worker(cfg: EvalConfig, rec: GenerationRecord, task: Task | None, missing_reason: str) -> SampleResult:
    """The body of one Ray task (module-level, so workers import it rather than unpickle a closure)."""
    pid_dir = os.environ.get(PID_DIR_ENV)
    if pid_dir:
        Path(pid_dir, f"{os.getpid()}.{rec.task_id}.{rec.sample}").touch()
    return _context(cfg).evaluate(rec, task, missing_reason)


def sample_resources(cfg: EvalConfig) -> tuple[EvalConfig, dict]:
    """The config workers use and the resources one sample asks for."""
    if cfg.backend_name() == "gpu":
        return cfg, {"num_gpus": 1, "num_cpus": 1}
    threads = int(cfg.backend_options.get("workers", 1))
    return replace(cfg, backend_options={**cfg.backend_options, "workers": threads}), {"num_cpus": threads}


def run_on_ray(todo: list[GenerationRecord], cfg: EvalConfig, task_by_id: dict[int, Task], invalid: dict[int, str],
               record: Callable[[SampleResult], None]) -> dict:
    """Evaluate `todo` on Ray, calling `record` for each result as it arrives; returns summary meta."""
    from cuset.execute.ray_tasks import ray_map, ray_session

    worker_cfg, resources = sample_resources(cfg)
    infra = []

    def lost(i: int, err: BaseException) -> None:
        g = todo[i]
        task = task_by_id.get(g.task_id)
        infra.append(g.key)
        record(SampleResult(g.task_id, g.task_name, task.family_name if task else g.task_name, g.sample,
                            Status.INFRA_ERROR, f"the Ray worker running it was lost {cfg.ray_max_retries + 1} "
                            f"time(s) ({type(err).__name__})", n_tokens=g.n_tokens, backend=cfg.backend_name()))

    with ray_session(cfg.ray_address, cfg.n_workers) as cluster:
        ray_map(evaluate_on_worker, [(g, task_by_id.get(g.task_id), invalid.get(g.task_id, "")) for g in todo],
                resources=resources, max_retries=cfg.ray_max_retries, shared=(worker_cfg,),
                on_result=lambda i, result: record(result), on_lost=lost)
    return {"executor": "ray", "ray_address": cluster, "ray_resources_per_sample": resources,
            "infra_errors": len(infra)}
