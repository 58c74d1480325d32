"""Run reference programs end to end through the evaluation pipeline (gen.py, compile,
run, compare.py on each input case) and record one typed result per task.

    results = validate_references(tasks, backend=get_backend("cpu"), cases=(0, 1), workers=2)

Results stream to `results_path` (JSONL) as tasks finish; a re-run skips the tasks
already recorded there (keyed by the task's content), so long validations resume.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

from cuset.io import JsonlAppender, iter_jsonl
from cuset.tasks.schema import Task


@dataclass(frozen=True)
class Validation:
    key: str          # sha256 of the task record without its id
    task_id: int
    task_name: str
    family: str
    status: str       # a cuset.execute.result.Status value
    detail: str
    seconds: float
    timings: dict  # seconds per pipeline step (gen, compile, run, compare, ...) as the pipeline reports them

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def task_key(task: Task) -> str:
    record = {k: v for k, v in task.to_json().items() if k != "id"}
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def load_validations(path: str | Path) -> list[Validation]:
    """The records of a results file (a line torn by an interrupted run is dropped, so that
    task is simply validated again; cuset.io's JSONL policy)."""
    path = Path(path)
    if not path.exists():
        return []
    out = []
    for lineno, d in iter_jsonl(path):
        try:
            out.append(Validation(**d))
        except TypeError as e:
            raise ValueError(f"{path}:{lineno}: not a validation record ({e})") from None
    return out


def validate_references(
    tasks: Sequence[Task],
    *,
    backend,
    cases: tuple[int, ...] = (0, 1),
    workers: int = 2,
    results_path: str | Path | None = None,
    cache_dir: str | Path | None = None,
    on_result: Callable[[Validation], None] | None = None,
) -> list[Validation]:
    """Validate each task's own bench.cu; returns results in the order of `tasks`."""
    from cuset.evaluate import Timeouts, Workspace, evaluate_program
    from cuset.execute.compile_cache import CompileCache

    done = {v.key: v for v in load_validations(results_path)} if results_path else {}
    keys = [task_key(t) for t in tasks]
    todo = [(k, t) for k, t in dict(zip(keys, tasks)).items() if k not in done]
    lock = threading.Lock()
    sink = JsonlAppender(results_path) if results_path else None
    timeouts = Timeouts()
    try:
        with CompileCache(backend, cache_dir, workers=workers, timeout=timeouts.compile) as cache, \
                Workspace(gen_timeout=timeouts.gen) as workspace:

            def one(key: str, task: Task) -> Validation:
                start = time.perf_counter()
                r = evaluate_program(task, task.bench_cu, backend=backend, cases=cases, cache=cache,
                                     workspace=workspace, timeouts=timeouts)
                return Validation(key, task.id, task.task_name, task.family_name, r.status.value, r.detail,
                                  round(time.perf_counter() - start, 3),
                                  {k: round(v, 3) for k, v in r.timings.items()})

            with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
                futures = [pool.submit(one, k, t) for k, t in todo]
                for fut in as_completed(futures):
                    v = fut.result()
                    with lock:
                        done[v.key] = v
                        if sink:
                            sink.append(asdict(v))
                    if on_result:
                        on_result(v)
    finally:
        if sink:
            sink.close()
    return [done[k] for k in keys]
