"""`cuset tasks check`: every task's own reference through the evaluation, then its
checker against corrupted outputs; resumable, in parallel.

    result = check_tasks("suites/cuset-bench-cpu.jsonl", "runs/check", EvalConfig(backend="cpu", robust=True))
    [c for c in result.checks if c.defects]

Two phases, each resumed on its own:

1. references: one generation per task whose code is the task's reference (bench.cu;
   for KernelBench the reference module with `ModelNew = Model`), evaluated by
   `evaluate_file` itself (the runner, its workers, its executor, its resumable
   results file) into <out>/references/;
2. checkers: for each task whose reference passed, the corruptions of
   cuset.evaluate.taskcheck.checkers on the evaluation's own machinery (one
   `EvalContext`, `workers` tasks at a time), one line per task appended to
   <out>/checkers.jsonl as it finishes.

A task is known by its content (`task_key`): a re-run skips the tasks already checked
and checks again a task whose record changed. The settings a verdict depends on
(backend, compile judge, cases, robust) are kept in <out>/check_state.json; a re-run
with other settings is refused rather than mixing verdicts, and the checker records of an
older corruption battery (`BATTERY_VERSION`) are tried again. At the end
<out>/task_check.json (every task, `TaskCheck.to_json`) and <out>/task_check.md are
written from all records.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from cuset.errors import CusetError
from cuset.evaluate.config import EvalConfig
from cuset.evaluate.records import load_results, save_results
from cuset.evaluate.batch import run_jobs
from cuset.evaluate.runner import EvalContext, compile_judge_of, context_setup, evaluate_file
from cuset.evaluate.taskcheck.checkers import BATTERY_VERSION, allclose_strength, compare_py_strength
from cuset.evaluate.taskcheck.record import CHECK_NAME, TaskCheck
from cuset.evaluate.taskcheck.report import render_markdown
from cuset.execute.result import Status
from cuset.generate.records import GenerationRecord
from cuset.io import JsonlAppender, atomic_write_json, atomic_write_jsonl, atomic_write_text, read_jsonl
from cuset.progress import progress_bar
from cuset.tasks import AnyTask, load_tasks, task_id_order
from cuset.tasks.kinds import per_kind

KB_ALIAS = "\n\n# cuset tasks check: the reference itself is the candidate\nModelNew = Model\n"
STATE_NAME = "check_state.json"
CHECKERS_NAME = "checkers.jsonl"


class TaskCheckError(CusetError, ValueError):
    """A check that cannot run as asked (an empty tasks file, an output dir of other settings)."""


@dataclass(frozen=True)
class CheckResult:
    checks: tuple[TaskCheck, ...]   # one per task, in the tasks file's order
    json_path: Path
    markdown_path: Path
    checked_now: int                # tasks whose checker was tried by this call
    resumed: int                    # tasks whose checker record came from an earlier run
    seconds: float


def task_key(task: AnyTask) -> str:
    """A task's identity for the check: a hash of its record without the id."""
    record = {k: v for k, v in task.to_json().items() if k != "id"}
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:16]


def _cudabench_checker(task, ctx: EvalContext):
    return compare_py_strength(task, ctx)


def _kernelbench_checker(task, ctx: EvalContext):
    return allclose_strength(task, ctx.backend.name, ctx.options, workdir=ctx.cfg.workdir or None)


# Per task kind: (the task's own solution as an answer of its kind, its checker's strength)
SELF_CHECK = per_kind({
    "cudabench": (lambda task: task.bench_cu, _cudabench_checker),
    "kernelbench": (lambda task: task.reference_src + KB_ALIAS, _kernelbench_checker),
}, "task checks")


def reference_code(task: AnyTask) -> str:
    """The task's own solution as a candidate of its kind."""
    return SELF_CHECK[task.kind][0](task)


def check_tasks(tasks_path: str | os.PathLike, out_dir: str | os.PathLike, config: EvalConfig | None = None, *,
                backend=None) -> CheckResult:
    """Check every task of `tasks_path` (see the module doc); `config` as `cuset eval`'s
    (robust=true where the evaluation supports it is the caller's choice)."""
    t0 = time.perf_counter()
    # the task's own references: the CPU runtime's order proofs may skip thread orders
    cfg = dataclasses.replace(config or EvalConfig(), extract="record", allow_missing=False, trusted_programs=True)
    tasks, _ = load_tasks(tasks_path, strict=True)   # a bad record: TaskValidationError naming file:line
    if not tasks:
        raise TaskCheckError(f"{tasks_path}: no tasks to check")
    out = Path(out_dir)
    backend = backend or cfg.make_backend()
    keys = {t.id: task_key(t) for t in tasks}
    refs_dir = out / "references"
    _reconcile(out, refs_dir / "results.jsonl", _settings(cfg, backend), keys)

    # 1. every reference through evaluate_file (its results file resumes it)
    gens = [GenerationRecord(t.id, t.task_name, 0, "reference", 1, "", reference_code(t), None, None, 0.0)
            for t in tasks]
    atomic_write_jsonl(refs_dir / "generations.jsonl", (g.to_json() for g in gens))
    evaluate_file(tasks, refs_dir / "generations.jsonl", refs_dir / "results.jsonl", cfg, backend=backend)
    verdicts = {r.task_id: r for r in load_results(refs_dir / "results.jsonl")}

    # 2. checker strength of each task whose reference passed (checkers.jsonl resumes it)
    # a checker not measured (e.g. the reference's run timed out this time) is tried again
    recorded = (TaskCheck.from_json(d, f"{out / CHECKERS_NAME}") for d in read_jsonl(out / CHECKERS_NAME))
    done = {c.task_id: c for c in recorded if c.key == keys.get(c.task_id) and c.checker_measured}
    todo = [t for t in tasks if verdicts[t.id].status is Status.PASSED and t.id not in done]
    earlier = sum(t.id in done for t in tasks)
    if todo:
        done.update(_check_checkers(todo, verdicts, keys, cfg, backend, out / CHECKERS_NAME))
    checks = tuple(done.get(t.id) or _record(t, keys[t.id], verdicts[t.id]) for t in tasks)

    doc = {"tool": "cuset tasks check", "tasks_file": str(tasks_path), "settings": _settings(cfg, backend),
           "counts": counts(checks), "tasks": [c.to_json() for c in checks]}
    json_path, md_path = out / CHECK_NAME, out / "task_check.md"
    atomic_write_json(json_path, doc, indent=1)
    atomic_write_text(md_path, render_markdown(doc, checks))
    return CheckResult(checks, json_path, md_path, len(todo), earlier, time.perf_counter() - t0)


def counts(checks) -> dict[str, int]:
    found = {"tasks": len(checks), "ok": sum(c.verdict == "ok" for c in checks),
             "not_checked": sum(c.verdict.startswith("not checked") for c in checks),
             "checker_not_measured": sum(c.verdict == "checker not measured" for c in checks)}
    for defect in ("reference_fails", "reference_fails_robust", "checker_cannot_fail"):
        found[defect] = sum(defect in c.defects for c in checks)
    return found


def _settings(cfg: EvalConfig, backend) -> dict:
    """What the verdicts depend on: a re-run must use the same."""
    return {"backend": backend.name, "compile_judge": compile_judge_of(backend), "cases": list(cfg.cases),
            "robust": cfg.robust, "robust_cases": cfg.robust_cases if cfg.robust else None, "compat": cfg.compat}


def _reconcile(out: Path, results_path: Path, settings: dict, keys: dict) -> None:
    """Refuse an output dir made with other settings; forget the verdicts of edited tasks
    (and the infrastructure failures, so they are tried again), and every checker record
    of an older corruption battery."""
    state_path = out / STATE_NAME
    state = json.loads(state_path.read_text(encoding="utf-8")) if state_path.exists() else {}
    if state and state.get("settings") != settings:
        raise TaskCheckError(f"{out} holds a check made with {state.get('settings')}; this one has {settings}. "
                             "Re-run with the same settings or pass another --out")
    old_keys = {_id(k): v for k, v in (state.get("task_keys") or {}).items()}
    stale = {tid for tid, key in keys.items() if tid in old_keys and old_keys[tid] != key}
    results = load_results(results_path)
    kept = [r for r in results if r.task_id not in stale and r.status is not Status.INFRA_ERROR]
    if len(kept) != len(results):
        save_results(results_path, kept)
    checkers = read_jsonl(out / CHECKERS_NAME)
    same_battery = state.get("battery") == BATTERY_VERSION
    fresh = [d for d in checkers if d.get("task_id") not in stale and same_battery]
    if len(fresh) != len(checkers):
        atomic_write_jsonl(out / CHECKERS_NAME, fresh)
    atomic_write_json(state_path, {"settings": settings, "battery": BATTERY_VERSION,
                                   "task_keys": {str(k): v for k, v in keys.items()}}, indent=1)


def _id(text: str) -> int | str:
    """A task id back from a JSON key (CUDABench ids are integers)."""
    return int(text) if text.lstrip("-").isdigit() else text


def _record(task: AnyTask, key: str, result, checker: tuple[str, str, tuple] = ("", "", ())) -> TaskCheck:
    name, note, corruptions = checker
    if result.status is not Status.PASSED and not note:
        note = "not measured: the reference did not pass"
    return TaskCheck(task.id, task.task_name, task.kind, key, result.status.value, result.detail,
                     result.robust_status.value if result.robust_status is not None else None,
                     result.robust_detail, name, note, corruptions)


def _check_checkers(todo: list[AnyTask], verdicts: dict, keys: dict, cfg: EvalConfig, backend,
                    path: Path) -> dict[int | str, TaskCheck]:
    """The corruption battery of each task in `todo` with the batch runner (`execution.workers`
    at a time, on this process's threads or Ray workers); each record appended to `path` as it finishes."""
    found: dict[int | str, TaskCheck] = {}
    ordered = sorted(todo, key=lambda t: task_id_order(t.id))

    def lost(i: int, err: BaseException) -> None:
        raise TaskCheckError(f"the Ray worker checking task {ordered[i].id} was lost "
                             f"{cfg.execution.ray_max_retries + 1} time(s) ({type(err).__name__}); run the check again")

    ctx = EvalContext(cfg, backend)
    try:
        with JsonlAppender(path) as log, progress_bar("checkers", len(todo), enabled=cfg.progress) as bar:
            def record(i: int, check: TaskCheck) -> None:   # on Ctrl-C: finished tasks are already saved
                log.append(check.to_json())
                found[check.task_id] = check
                bar.advance(status=f"weak {sum(bool(c.accepted) for c in found.values())}")

            run_jobs(_check_one, [(t, keys[t.id], verdicts[t.id]) for t in ordered], cfg.execution,
                     setup=context_setup(cfg), state=ctx, on_result=record, on_lost=lost)
    finally:
        ctx.close()
    return found


def _check_one(ctx: EvalContext, task: AnyTask, key: str, verdict) -> TaskCheck:
    return _record(task, key, verdict, SELF_CHECK[task.kind][1](task, ctx))
