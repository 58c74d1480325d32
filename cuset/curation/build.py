"""`cuset data build`: sources -> LLM task synthesis -> validation -> dedup and
decontamination -> training JSONL, manifest.json and summary.md.

Every stage writes what it did to the run directory as JSONL:
    1_sources.jsonl, 1_skipped.jsonl       candidates, and what was skipped and why
    2_synthesis.jsonl                      one record per candidate: task or rejection reason
    3_validation.jsonl                     one record per task: Status of its reference program
    4_dedup.jsonl, 4_decontamination.jsonl what was removed, and the item or eval task it matched
    train.jsonl, train_provenance.jsonl    the dataset (CUDABench format) and where each task came from
    5_reasoning.jsonl, train_reasoning.jsonl  (reasoning.enabled) every candidate answer per task,
                                           and the kept (prompt, trace, answer) chat records
    manifest.json, summary.md              counts per stage and reason
Stages 2, 3 and 5 (the expensive ones) resume per item; the LLM reply cache lives in
llm.cache_dir, so even a fresh run directory sends no request twice.
"""

from __future__ import annotations

import json
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from cuset import __version__
from cuset.config import to_dict
from cuset.curation.config import DataBuildConfig
from cuset.curation.decontam import Decontaminator, load_eval_sets
from cuset.curation.dedup import deduplicate
from cuset.curation.llm import ChatClient
from cuset.curation.llm_stage import synthesize_candidates
from cuset.curation.llm_task import PROMPT_VERSION
from cuset.progress import progress_bar
from cuset.curation.runstore import StageStore
from cuset.curation.sources import SourceScan, scan_sources
from cuset.curation.summary import write_summary
from cuset.curation.validation import (make_backend, passed, pipeline_evaluator, store_settings, task_key,
                                       validate_tasks)
from cuset.tasks import Task, save_tasks
from cuset.io import atomic_write_jsonl, atomic_write_text


@dataclass(frozen=True)
class BuildResult:
    run_dir: Path
    train_path: Path
    manifest: dict


def build_dataset(cfg: DataBuildConfig, *, evaluate=None, backend=None, transport=None) -> BuildResult:
    """Run (or resume) every stage. `evaluate`/`backend` default to cuset.evaluate and the
    configured backend; `transport` is an httpx transport for the LLM client (tests)."""
    run = Path(cfg.out_dir)
    run.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run / "config.json", json.dumps(to_dict(cfg), indent=2))
    eval_tasks = load_eval_sets(cfg.decontam.eval_sets)  # a bad path fails now, not after the LLM bill

    def bar(desc, total):
        return progress_bar(desc, total, enabled=cfg.progress)

    scan = _sources(cfg, run, bar)
    client = ChatClient(cfg.llm, cfg.llm_cache_dir, transport=transport)
    try:
        synth = _synthesis(cfg, run, bar, scan, client)
    finally:
        client.close()
    ok = [r for r in synth.records if r["status"] == "ok"]
    checked = _validation(cfg, run, bar, synth, ok, evaluate, backend)
    task_of = {r["key"]: Task.from_json(r["task"]) for r in ok}
    origin = {r["key"]: (r["origin"], r["source"]) for r in synth.records}
    good = [v["candidate"] for v in checked if passed(v)]
    kept, dup_removed = _dedup(cfg, run, good, task_of, origin)
    contaminated = _decontaminate(cfg, run, bar, kept, task_of, origin, eval_tasks)
    dropped = {r.key for r in contaminated}
    final = [k for k in kept if k not in dropped]

    train_path = run / "train.jsonl"
    save_tasks((_renumber(task_of[k], i) for i, k in enumerate(final)), train_path)
    atomic_write_jsonl(run / "train_provenance.jsonl",
                ({"id": i, "key": k, "origin": origin[k][0], "source": origin[k][1]} for i, k in enumerate(final)))
    reasoning = None
    if cfg.reasoning.enabled:
        answers = ChatClient(cfg.llm, cfg.llm_cache_dir, transport=transport)  # its own counters
        try:
            reasoning = _reasoning(cfg, run, bar, final, task_of, evaluate, backend, answers)
        finally:
            answers.close()
    manifest = _manifest(cfg, scan, synth, checked, good, dup_removed, kept, contaminated, eval_tasks, final, client,
                         reasoning)
    atomic_write_text(run / "manifest.json", json.dumps(manifest, indent=2))
    write_summary(run / "summary.md", manifest, run)
    return BuildResult(run, train_path, manifest)


def _sources(cfg, run: Path, bar) -> SourceScan:
    with bar("1/5 sources", None) as advance:
        scan = scan_sources(cfg.sources, cfg.max_file_bytes, progress=advance)
    atomic_write_jsonl(run / "1_sources.jsonl", (c.to_json() for c in scan.candidates))
    atomic_write_jsonl(run / "1_skipped.jsonl", (s.to_json() for s in scan.skips))
    return scan


def _synthesis(cfg, run: Path, bar, scan: SourceScan, client: ChatClient):
    llm = cfg.llm
    store = StageStore(run, "2_synthesis", {
        "prompt": PROMPT_VERSION, "model": llm.model, "temperature": llm.temperature, "max_tokens": llm.max_tokens,
        "json_mode": llm.json_mode, "max_program_chars": llm.max_program_chars})
    with bar("2/5 task synthesis", len(scan.candidates)) as advance:
        return synthesize_candidates(scan.candidates, store, client, concurrency=llm.concurrency,
                                     max_program_chars=llm.max_program_chars, advance=advance)


def _validation(cfg, run: Path, bar, synth, ok: list[dict], evaluate, backend) -> list[dict]:
    if not ok:
        atomic_write_jsonl(run / "3_validation.jsonl", [])
        return []
    execution = cfg.validation.execution
    backend = backend or make_backend(execution, order_proofs=False)   # stage 2's programs are a model's
    store = StageStore(run, "3_validation", store_settings(backend, cfg.validation.cases))
    on_ray = execution.executor == "ray"
    with ExitStack() as stack:
        if evaluate is None and not on_ray and any(store.get(task_key(r["task"])) is None for r in ok):
            evaluate = stack.enter_context(pipeline_evaluator(execution, backend, trusted_programs=False))
        with bar(f"3/5 validation ({backend.name}{', ray' if on_ray else ''})", len(ok)) as advance:
            return validate_tasks(synth.records, store, evaluate=evaluate, backend=backend,
                                  cases=tuple(cfg.validation.cases), execution=execution, advance=advance)


def _dedup(cfg, run: Path, good: list[str], task_of: dict, origin: dict):
    kept, removed = deduplicate([(k, task_of[k].bench_cu) for k in good], near_threshold=cfg.dedup.near_threshold,
                                num_perm=cfg.dedup.num_perm, shingle_tokens=cfg.dedup.shingle_tokens)
    atomic_write_jsonl(run / "4_dedup.jsonl", ({**r.to_json(), "origin": origin[r.key][0], "matched_origin": origin[r.matched][0]}
                                        for r in removed))
    return kept, removed


def _decontaminate(cfg, run: Path, bar, kept: list[str], task_of: dict, origin: dict, eval_tasks) -> list:
    hits = []
    if eval_tasks and kept:
        d = cfg.decontam
        deco = Decontaminator(eval_tasks, prompt_ngram=d.prompt_ngram, code_ngram=d.code_ngram,
                              threshold=d.threshold, boilerplate_share=d.boilerplate_share)
        with bar("4/5 decontamination", len(kept)) as advance:
            for k in kept:
                hit = deco.check(k, task_of[k])
                if hit is not None:
                    hits.append(hit)
                advance()
    atomic_write_jsonl(run / "4_decontamination.jsonl", ({**r.to_json(), "origin": origin[r.key][0]} for r in hits))
    return hits


def _reasoning(cfg, run: Path, bar, final: list[str], task_of: dict, evaluate, backend, client: ChatClient) -> dict:
    from cuset.curation.reasoning_stage import curate_reasoning, stage_settings, stage_summary, training_records
    from cuset.curation.stats import hf_token_counter, lexer_token_counter

    rc = cfg.reasoning
    unit, count = hf_token_counter(rc.tokenizer) if rc.tokenizer else lexer_token_counter()
    backend = backend or make_backend(cfg.validation.execution, order_proofs=False)   # answers a model wrote
    cases = tuple(cfg.validation.cases)
    model = rc.model or cfg.llm.model
    store = StageStore(run, "5_reasoning", stage_settings(rc, model, backend.fingerprint(), cases, unit))
    tasks = [(task_key(task_of[k].to_json()), task_of[k]) for k in final] + _extra_reasoning_tasks(rc.tasks)
    with ExitStack() as stack:
        if evaluate is None and any(store.get(k) is None for k, _ in tasks):
            evaluate = stack.enter_context(pipeline_evaluator(cfg.validation.execution, backend))
        with bar(f"5/5 reasoning answers ({rc.n_candidates} per task, {backend.name})", len(tasks)) as advance:
            outcome = curate_reasoning(tasks, store, client, cfg=rc, model=model, evaluate=evaluate, backend=backend,
                                       cases=cases, count_tokens=count, token_unit=unit,
                                       concurrency=cfg.llm.concurrency, advance=advance)
    atomic_write_jsonl(store.path, outcome.records)  # with `kept` under the current select rule
    ids = {key: i for i, (key, _) in enumerate(tasks)}
    task_by_key = {key: t for key, t in tasks}
    atomic_write_jsonl(run / "train_reasoning.jsonl", training_records(outcome.records, task_by_key, ids, rc.prompt_level))
    return {**stage_summary(outcome.records, outcome.deferred, rc, unit), "llm": client.stats()}


def _extra_reasoning_tasks(paths: list[str]) -> list[tuple[str, object]]:
    """The tasks of `reasoning.tasks` (either kind), keyed like the built ones; a bad record
    is an error naming its file and line (these are the user's own task files)."""
    from cuset.tasks import load_tasks

    out = []
    for path in paths:
        if not Path(path).exists():
            raise ValueError(f"reasoning.tasks: {path} does not exist (a task JSONL file or a KernelBench directory)")
        tasks, _ = load_tasks(path)
        out += [(task_key(t.to_json()), t) for t in tasks]
    return out


def _renumber(task: Task, new_id: int) -> Task:
    return Task.from_json({**task.to_json(), "id": new_id})


def _manifest(cfg, scan, synth, checked, good, dup_removed, kept, contaminated, eval_tasks, final, client,
              reasoning: dict | None = None) -> dict:
    recs = synth.records
    by_kind = Counter(c.kind for c in scan.candidates)
    stages = {
        "sources": {"seen": len(scan.candidates) + len(scan.skips), "candidates": len(scan.candidates),
                    "by_kind": dict(sorted(by_kind.items())), "skipped": _sorted(scan.skipped_by_reason()),
                    "per_source": {k: dict(sorted(v.items())) for k, v in scan.per_source.items()}},
        "synthesis": {"in": len(scan.candidates),
                      "given": sum(r["reason"] == "given" for r in recs),
                      "synthesized": sum(r["reason"] == "synthesized" for r in recs),
                      "rejected": _sorted(Counter(r["reason"] for r in recs if r["status"] != "ok")),
                      "deferred": _sorted(synth.deferred),
                      "out": sum(r["status"] == "ok" for r in recs)},
        "validation": {"in": len(checked), "rejected": _sorted(Counter(v["status"] for v in checked if not passed(v))),
                       "out": len(good)},
        "dedup": {"in": len(good), "removed": _sorted(Counter(r.reason for r in dup_removed)), "out": len(kept)},
        "decontamination": {"in": len(kept), "eval_tasks": len(eval_tasks), "eval_sets": list(cfg.decontam.eval_sets),
                            "removed": _sorted(Counter(r.reason for r in contaminated)), "out": len(final)},
        "output": {"tasks": len(final), "path": "train.jsonl"},
    }
    if reasoning is not None:
        stages["reasoning"] = reasoning
    complete = not synth.deferred and not (reasoning or {}).get("deferred")
    return {"cuset_version": __version__, "complete": complete, "stages": stages,
            "llm": {"model": cfg.llm.model, **client.stats()}, "config": to_dict(cfg)}


def _sorted(counter: Counter) -> dict:
    return dict(sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))
