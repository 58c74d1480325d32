"""Evaluate a whole generations file: parallel, cached, streamed, resumable.

    summary = evaluate_file("tasks.jsonl", "gens.jsonl", "out/results.jsonl", EvalConfig(backend="cpu"))

Results are appended to `results_path` as samples finish; a re-run skips every
(task_id, sample) already there. `summary.json` and `report.md` are written
next to the results file at the end, from all results in it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import time
from collections import Counter
from contextlib import closing, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

from cuset.errors import CusetError
from cuset.evaluate import devicemap
from cuset.evaluate.batch import Setup, run_jobs
from cuset.evaluate.config import EvalConfig, ExecutionConfig
from cuset.evaluate.judge import judge_of
from cuset.evaluate.kinds import eval_kind
from cuset.evaluate.metrics import Summary, summarize
from cuset.evaluate.perf.measure import measure
from cuset.evaluate.pipeline import evaluate_program
from cuset.evaluate.records import ResultWriter, SampleResult, load_results, save_results
from cuset.evaluate.report import write_report
from cuset.evaluate.workspace import Workspace
from cuset.cachedir import cache_root
from cuset.execute.compile_cache import CompileCache
from cuset.execute.result import ExecResult, Status, printable
from cuset.execute.sandbox import resolve_mode
from cuset.progress import progress_bar
from cuset.generate.extract import extract_answer
from cuset.tasks.reasoning import UNTERMINATED_DETAIL, split_reasoning
from cuset.generate.records import GenerationRecord, load_generations
from cuset.tasks import DEFAULT_KIND, AnyTask, load_tasks, task_id_order

log = logging.getLogger(__name__)


def code_for(rec: GenerationRecord, extractor: str, kind: str = "cudabench") -> str | None:
    """The program to evaluate: the record's own `code`, or re-extracted from the response's
    answer by the rule for the task's kind (a reasoning trace is never searched; an unclosed
    trace leaves no code)."""
    return rec.code if extractor == "record" else extract_answer(rec.response, extractor, kind)


def sample_result(task_id: int | str, task_name: str, family: str, rec: GenerationRecord, code: str | None,
                  r: ExecResult) -> SampleResult:
    compiled, ran_ok = compiled_and_ran(r)
    return SampleResult.from_exec(
        r, task_id=task_id, task_name=task_name, family=family, sample=rec.sample,
        compiled=compiled, ran_ok=ran_ok,
        n_tokens=rec.n_tokens, code_sha256=hashlib.sha256(code.encode()).hexdigest() if code else None,
        notes=devicemap.notes(s for s in r.steps if s.name.startswith(("gen[", "compare["))),
        reasoning_tokens=rec.reasoning_tokens,
    )


# Verdicts decided before a KernelBench candidate's run could finish its trials for want of a build.
# (`unsupported`: an extension the CPU build refuses, a GPU-only package: nothing it asked for was built)
_KB_NOT_COMPILED = (Status.NO_CODE, Status.COMPILE_ERROR, Status.UNSUPPORTED, Status.SKIPPED, Status.INFRA_ERROR)


def compiled_and_ran(r: ExecResult) -> tuple[bool, bool]:
    """(compiled, ran_ok) of one result. CUDABench: the last compile step succeeded, and
    every run[...] step exited 0. KernelBench (`r.kernel`, or a verdict reached without a
    run): every extension the candidate asked for was built (an answer that builds none
    compiles trivially), and its harness run finished every trial (its outputs then decide)."""
    if r.kernel is not None or any(s.name.startswith("kernelbench") for s in r.steps):
        k = r.kernel
        compiled = r.status not in _KB_NOT_COMPILED and (k is None or k.all_built)
        return compiled, k is not None and k.ran
    compiles = [s for s in r.steps if s.name == "compile"]
    runs = [s for s in r.steps if s.name.startswith("run[")]
    return (bool(compiles) and compiles[-1].returncode == 0 and not compiles[-1].timed_out,
            bool(runs) and all(s.returncode == 0 and not s.timed_out for s in runs))


EVALUATOR_FAILURE = "the evaluator failed on this sample"


def evaluator_failure(error: Exception, backend: str) -> ExecResult:
    """The verdict of a sample whose evaluation raised (a bug of ours that this sample's code
    reached): a failure that stays in every denominator, as a candidate's own failure would,
    never a skip or an infrastructure error, so no program can leave Pass@k by provoking one.
    The traceback goes to the log; the detail names the exception for the report."""
    log.error("%s (%s)", EVALUATOR_FAILURE, type(error).__name__, exc_info=error)
    return ExecResult(Status.RUNTIME_ERROR, printable(f"{EVALUATOR_FAILURE}: {type(error).__name__}: {error}")[:500],
                      backend=backend)


# Evaluator failures beyond what the programs can explain: one program reaches a bug of ours, a
# few similar ones may, but past this many (and this share of the run) the machine changed under
# the run (once: its Python environment removed mid-evaluation, 163 of 384 samples), and the
# results are not scores.
MAX_EVALUATOR_FAILURES = 10
MAX_EVALUATOR_FAILURE_SHARE = 0.05


class EvaluatorBroken(CusetError, RuntimeError):
    """So many samples' evaluations raised that the run's results say nothing of the programs."""


def check_evaluator_failures(results: Sequence[SampleResult], results_path: Path) -> None:
    """Raise EvaluatorBroken when more than MAX_EVALUATOR_FAILURES samples, and more than
    MAX_EVALUATOR_FAILURE_SHARE of them, failed in the evaluator itself. Fewer stay failures
    of their samples (evaluator_failure), so a program cannot stop a run by provoking one."""
    failed = [r for r in results if r.evaluator_failed]
    if len(failed) <= max(MAX_EVALUATOR_FAILURES, MAX_EVALUATOR_FAILURE_SHARE * len(results)):
        return
    first = failed[0]
    raise EvaluatorBroken(
        f"{results_path}: the evaluator itself failed on {len(failed)} of {len(results)} samples (e.g. task "
        f"{first.task_id} sample {first.sample}: {first.detail[:200]}). That many points at the machine (an "
        "environment, a cache or a disk that changed during the run), not at the programs, so these results are "
        f"not scores. Fix the cause (the log has each traceback), delete {results_path} and run the same command "
        "again.")


class MissingTasks(CusetError, ValueError):
    """The generations cover only part of the tasks file (and allow_missing is off)."""


def missing_task_ids(task_ids, gens: Sequence[GenerationRecord], tasks, generations_path,
                     allow_missing: bool) -> list[int]:
    """Tasks of the tasks file without a single generation; refuses (`MissingTasks`)
    unless `allow_missing`, since Pass@k over a subset is not the benchmark's number."""
    have = {g.task_id for g in gens}
    missing = sorted(set(task_ids) - have, key=task_id_order)
    if missing and not allow_missing:
        shown = ", ".join(map(str, missing[:10])) + (", ..." if len(missing) > 10 else "")
        raise MissingTasks(f"{generations_path} has no samples for {len(missing)} of the {len(task_ids)} tasks in "
                           f"{_tasks_label(tasks)} (ids {shown}); Pass@k over a subset is not the benchmark's "
                           f"number: generate them, or pass allow_missing=true to count them as failed")
    return missing


def _tasks_label(tasks) -> str:
    return str(tasks) if isinstance(tasks, (str, os.PathLike)) else "the task list"


def compile_judge_of(backend) -> str:
    """Which compiler decides `compiled` for this backend (reported with every summary)."""
    if backend.name == "gpu" or getattr(backend, "compile_judge", "") == "nvcc":
        return "nvcc"
    return "g++ (the CPU backend's build)" if backend.name == "cpu" else f"the {backend.name} backend's compiler"


def load_task_index(tasks: str | os.PathLike | Sequence[AnyTask]) -> tuple[dict[int | str, AnyTask], dict[int | str, str]]:
    """Valid tasks by id, and why each invalid record was left out (by id where readable)."""
    if not isinstance(tasks, (str, os.PathLike)):
        return {t.id: t for t in tasks}, {}
    loaded, report = load_tasks(tasks, strict=False)
    invalid: dict[int, str] = {}
    if report.problems and Path(tasks).exists():
        lines = Path(tasks).read_text(encoding="utf-8", errors="replace").splitlines()
        for p in report.problems:
            try:
                tid = json.loads(lines[p.line - 1]).get("id")
            except (ValueError, IndexError, AttributeError):
                continue
            if isinstance(tid, int) and tid not in invalid:
                invalid[tid] = f"invalid task record ({p.source}:{p.line}: {p.field}: {p.message})"
    return {t.id: t for t in loaded}, invalid


class EvalContext:
    """One process's evaluation machinery: backend, workspace, compile cache, options.

    The local executor shares one between its threads; each Ray worker process builds
    its own from the same config (cuset.evaluate.batch) and keeps it for the samples it
    is given."""

    def __init__(self, cfg: EvalConfig, backend=None):
        self.cfg = cfg
        self.backend = backend or cfg.make_backend()
        # Absolute: the sandbox hides it by path, and programs run in their own directories.
        self.cache_root = Path(cfg.cache_dir).resolve() if cfg.cache_dir else cache_root()
        self.sandbox_mode = resolve_mode(cfg.execution.sandbox.mode)  # fail before any work if there is no sandbox
        self.workspace = Workspace(parent=cfg.workdir or None,
                                   data_root=self.cache_root / "data" if cfg.data_cache else None,
                                   keep=cfg.keep_workdirs, gen_timeout=cfg.timeouts().gen,
                                   python_preload=tuple(cfg.python_preload) if cfg.python_preload is not None else None,
                                   script_sandbox=_hiding(cfg.execution.script_sandbox(), self.cache_root))
        self.options = cfg.options(hide=(str(self.cache_root),))
        self.cache = CompileCache(self.backend, self.cache_root / "compile", workers=cfg.execution.n_workers,
                                  timeout=cfg.timeouts().compile,
                                  max_bytes=int(cfg.compile_cache_gb * (1 << 30)) if cfg.compile_cache_gb else None,
                                  max_entry_bytes=(int(cfg.compile_cache_entry_mb * (1 << 20))
                                                   if cfg.compile_cache_entry_mb else None))
        self.judge = judge_of(cfg, self.cache.fingerprint)  # stamped on every result (cuset.evaluate.judge)

    def evaluate(self, rec: GenerationRecord, task: AnyTask | None, missing_reason: str = "") -> SampleResult:
        if task is None:
            return SampleResult(rec.task_id, rec.task_name, rec.task_name, rec.sample, Status.SKIPPED,
                                missing_reason or f"task {rec.task_id} is not in the tasks file",
                                n_tokens=rec.n_tokens, backend=self.backend.name)
        code = code_for(rec, self.cfg.extractor, task.kind)
        failed_here = False
        try:
            r = evaluate_program(task, code, backend=self.backend, cache=self.cache, workspace=self.workspace,
                                 options=self.options)
        except Exception as e:  # noqa: BLE001 - the backstop: one sample never stops the run
            r, failed_here = evaluator_failure(e, self.backend.name), True
        if self.cfg.perf:
            r = dataclasses.replace(r, perf=measure(task, code, r, self.backend, self.cfg.perf_timing,
                                                    eval_options=self.options, cache=self.cache,
                                                    workspace=self.workspace))
        if r.status is Status.NO_CODE and split_reasoning(rec.response).unterminated:
            r = dataclasses.replace(r, detail=UNTERMINATED_DETAIL)  # counted under its own reason
        result = sample_result(task.id, task.task_name, task.family_name, rec, code, r)
        return dataclasses.replace(result, evaluator_failed=True) if failed_here else result

    def close(self) -> None:
        self.cache.close()
        self.workspace.close()


def _hiding(policy, *paths):
    """`policy` also hiding `paths` (None stays None: trusted scripts)."""
    if policy is None:
        return None
    return dataclasses.replace(policy, hide=tuple(dict.fromkeys((*policy.hide, *map(str, paths)))))


def evaluate_file(tasks: str | os.PathLike | Sequence[AnyTask], generations_path: str | os.PathLike,
                  results_path: str | os.PathLike, config: EvalConfig | None = None, *,
                  backend=None, on_result: Callable[[SampleResult], None] | None = None) -> Summary:
    """Evaluate every generation not yet judged in `results_path` by this evaluator (its judge:
    cuset.evaluate.judge); return the summary of all of them. A sample judged there by another
    judge (other code, backend or settings) is judged again and its old verdict dropped.

    `config.execution.executor` picks where samples run: `local` (threads of this process)
    or `ray` (tasks on a Ray cluster, see cuset.evaluate.batch); this process alone writes
    the results file either way, so a run resumes under either executor."""
    cfg = config or EvalConfig()
    results_path = Path(results_path)
    task_by_id, invalid = load_task_index(tasks)
    gens = load_generations(generations_path)
    missing = missing_task_ids(task_by_id, gens, tasks, generations_path, cfg.allow_missing)
    t0 = time.perf_counter()
    ctx = EvalContext(cfg, backend)  # also on Ray: the driver's summary names the backend and its cache
    judge = ctx.judge
    earlier = {r.key: r.judge for r in load_results(results_path)}
    todo = [g for g in gens if earlier.get(g.key) != judge]
    rejudged = sum(1 for g in todo if g.key in earlier)
    if rejudged:
        log.info("%s: %d sample(s) judged by another evaluator (code, backend or settings changed since): "
                 "judged again", results_path, rejudged)
    try:
        with ResultWriter(results_path) as writer, _progress(len(todo), cfg.progress) as advance:
            def record(result: SampleResult) -> None:
                result = replace(result, judge=judge)
                writer.write(result)
                advance(result)
                if on_result:
                    on_result(result)

            executor_meta = _run(ctx, todo, task_by_id, invalid, record)
    finally:
        ctx.close()
    backend, cache = ctx.backend, ctx.cache
    all_results = [r for r in load_results(results_path) if r.key in {g.key for g in gens}]
    if rejudged:  # the file keeps one line per sample: the old verdicts go
        save_results(results_path, load_results(results_path))
    meta = {
        "backend": backend.name, "compile_judge": compile_judge_of(backend), "fingerprint": cache.fingerprint,
        "judge": judge,
        **_kind_meta(backend, cfg, [task_by_id[t] for t in {g.task_id for g in gens} if t in task_by_id]),
        "compat": cfg.compat, "allow_missing": cfg.allow_missing, "missing_counted_as_failed": len(missing),
        "extract": cfg.extractor, "cases": list(cfg.cases), "robust": cfg.robust,
        "robust_cases": cfg.robust_cases if cfg.robust else None, "strict_kernels": cfg.strict_kernels,
        "perf": cfg.perf, "perf_suspect_speedup": cfg.perf_timing.suspect_speedup if cfg.perf else None,
        "sandbox": ctx.sandbox_mode, "workers": cfg.execution.n_workers,
        **executor_meta,
        "tasks": str(tasks) if isinstance(tasks, (str, os.PathLike)) else f"{len(task_by_id)} tasks",
        "tasks_in_file": len(task_by_id),
        "generations": str(generations_path), "evaluated_now": len(todo), "resumed": len(gens) - len(todo),
        "rejudged": rejudged,
        # on Ray each worker process keeps its own counts (the cache on disk is shared; its counts are not)
        "compile_cache": ({"hits": cache.hits, "misses": cache.misses} if cfg.execution.executor == "local"
                          else "counted in the Ray workers, not collected"),
        "seconds": time.perf_counter() - t0,
        "cuda_mapped_tasks": sorted({r.task_id for r in all_results if r.notes}, key=task_id_order),
        # samples whose evaluation raised (counted as failures, see evaluator_failure): each is a bug to report
        "evaluator_failures": sum(r.evaluator_failed for r in all_results),
        "no_code_reasons": dict(Counter("unterminated_reasoning" if r.detail == UNTERMINATED_DETAIL else "no_code"
                                        for r in all_results if r.status is Status.NO_CODE)),
    }
    summary = summarize(all_results, expected_task_ids=sorted(set(task_by_id) | {g.task_id for g in gens}, key=task_id_order),
                        missing_as_failed=cfg.allow_missing, meta=meta)
    write_report(summary, results_path.parent)
    check_evaluator_failures(all_results, results_path)   # after the report: the evidence stays readable
    return summary


def _kind_meta(backend, cfg: EvalConfig, tasks: list) -> dict:
    """What each task kind in the run adds to summary.json's meta (EvalKind.run_meta)."""
    kinds = {getattr(t, "kind", DEFAULT_KIND) for t in tasks}
    meta: dict = {}
    for kind in sorted(kinds):
        meta.update(eval_kind(kind).run_meta(backend, cfg, kinds))
    return meta


def _run(ctx: EvalContext, todo: list[GenerationRecord], task_by_id: dict[int | str, AnyTask],
         invalid: dict[int | str, str], record: Callable[[SampleResult], None]) -> dict:
    """Evaluate `todo` with the batch runner (ctx's threads, or Ray workers with their own
    contexts), calling `record` for each result as it arrives; returns the executor's meta."""
    cfg = ctx.cfg
    lost_keys = []

    def lost(i: int, err: BaseException) -> None:
        g = todo[i]
        task = task_by_id.get(g.task_id)
        lost_keys.append(g.key)
        record(SampleResult(g.task_id, g.task_name, task.family_name if task else g.task_name, g.sample,
                            Status.INFRA_ERROR, f"the Ray worker running it was lost {cfg.execution.ray_max_retries + 1} "
                            f"time(s) ({type(err).__name__})", n_tokens=g.n_tokens, backend=ctx.backend.name))

    meta = run_jobs(EvalContext.evaluate, [(g, task_by_id.get(g.task_id), invalid.get(g.task_id, "")) for g in todo],
                    cfg.execution, setup=context_setup(cfg), state=ctx,
                    on_result=lambda i, result: record(result), on_lost=lost)
    if meta["executor"] == "ray":
        meta = {"executor": "ray", "ray_address": meta["ray_address"],
                "ray_resources_per_sample": meta["ray_resources_per_job"], "infra_errors": len(lost_keys)}
    return meta


def context_setup(cfg: EvalConfig) -> Setup:
    """How a batch runner's process builds its EvalContext for `cfg` (cuset.evaluate.batch)."""
    return Setup(_eval_context, (cfg,))


def _eval_context(execution: ExecutionConfig, cfg: EvalConfig):
    """An EvalContext for `cfg` under the execution section of the process (a Ray worker's pins its threads)."""
    return closing(EvalContext(replace(cfg, execution=execution)))


@contextmanager
def _progress(total: int, enabled: bool):
    """The eval bar, showing the running pass count; yields record(result)."""
    passed = 0
    with progress_bar("eval", total, enabled=enabled) as bar:
        def advance(result: SampleResult) -> None:
            nonlocal passed
            passed += result.passed
            bar.advance(status=f"passed {passed}")
        yield advance
