"""Stage 5 (ConCuR-style curation): reasoning traces and answers for the final tasks.

For each task the LLM (a reasoning model) is asked `n_candidates` times; each
answer's trace is split off (`cuset.tasks.reasoning`: a `reasoning_content` field or
a `<think>` block), its code extracted from the answer alone and validated through
the evaluation pipeline on the task's input cases. Among the passing answers
`select` keeps: concise (the shortest trace, ties by code length, then by index:
ConCuR found concise traces train more robust generation), first, or all.

One record per task in `5_reasoning.jsonl` (resumable, keyed by the task's content):
    {"key", "task_name", "family", "token_unit", "candidates": [{"index", "status", "detail",
     "reasoning_tokens", "answer_tokens", "code_chars", "finish_reason", "request_key", "cached",
     "reasoning", "answer"}], "n_passed", "kept": [index, ...]}
`status` is a `cuset.execute.result.Status` value, `no_code` (nothing to compile, or a
trace never closed: detail says which) or the LLM's reason (llm_empty_reply, ...).
Tasks not attempted because the LLM budget ran out get no record: a later build
with a larger budget continues; cached replies are never requested again.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from cuset.curation.config import ReasoningConfig
from cuset.curation.llm import ChatClient, LLMReplyError, ask_concurrently
from cuset.curation.runstore import StageStore
from cuset.execute.result import ExecResult, Status
from cuset.tasks import Task, render_prompt
from cuset.tasks.reasoning import UNTERMINATED_DETAIL, split_reasoning

PROMPT_VERSION = "cuset-reasoning-v1"  # part of the stage fingerprint: bump when the request changes
PASSED = Status.PASSED.value


@dataclass
class ReasoningOutcome:
    records: list[dict]                                      # one per task attempted, in task order
    deferred: Counter = field(default_factory=Counter)       # reason -> tasks not attempted


def stage_settings(cfg: ReasoningConfig, model: str, backend_fingerprint: str, cases: tuple[int, ...],
                   token_unit: str) -> dict:
    """What the stage's records depend on (`select` is not: it is applied when the output is written);
    the evaluation code judges the answers, so it is one of them (cuset.evaluate.judge)."""
    from cuset.evaluate.judge import judge_code_hash

    return {"prompt": PROMPT_VERSION, "model": model, "n_candidates": cfg.n_candidates,
            "temperature": cfg.temperature, "max_tokens": cfg.max_tokens, "seed": cfg.seed,
            "level": cfg.prompt_level, "backend": backend_fingerprint, "cases": list(cases), "token_unit": token_unit,
            "evaluator": judge_code_hash()}


def select_kept(candidates: list[dict], rule: str) -> list[int]:
    """Indices of the candidates `rule` keeps among those that passed."""
    ok = [c for c in candidates if c["status"] == PASSED]
    if not ok:
        return []
    if rule == "all":
        return [c["index"] for c in ok]
    if rule == "first":
        return [min(c["index"] for c in ok)]
    if rule == "concise":
        return [min(ok, key=lambda c: (c["reasoning_tokens"], c["code_chars"], c["index"]))["index"]]
    raise ValueError(f"reasoning.select: unknown rule {rule!r} (concise, first, all)")


def curate_reasoning(tasks: list[tuple[str, Task]], store: StageStore, client: ChatClient, *, cfg: ReasoningConfig,
                     model: str, evaluate: Callable[..., ExecResult], backend, cases: tuple[int, ...],
                     count_tokens: Callable[[str], int], token_unit: str, concurrency: int,
                     advance=None) -> ReasoningOutcome:
    """Ask, validate and record every task not yet in `store`; returns the records in task order."""
    outcome = ReasoningOutcome(records=[])
    todo = [(k, t) for k, t in tasks if store.get(k) is None]
    for _ in range(len(tasks) - len(todo)):
        _tick(advance)
    def ask(item: tuple[str, Task]) -> None:
        key, task = item
        cands = [_candidate(i, task, client, cfg, model, evaluate, backend, cases, count_tokens)
                 for i in range(cfg.n_candidates)]
        store.put({"key": key, "task_name": task.task_name, "family": task.family_name,
                   "token_unit": token_unit, "candidates": cands,
                   "n_passed": sum(c["status"] == PASSED for c in cands)})

    ask_concurrently(todo, ask, concurrency=concurrency, deferred=outcome.deferred, advance=advance)
    outcome.records = [{**r, "kept": select_kept(r["candidates"], cfg.select)}
                       for r in store.finish([k for k, _ in tasks])]
    return outcome


def _candidate(index: int, task: Task, client: ChatClient, cfg: ReasoningConfig, model: str, evaluate, backend,
               cases, count_tokens) -> dict:
    from cuset.generate.extract import get_extractor

    messages = render_prompt(task, cfg.prompt_level).messages()
    overrides = {"model": model, "temperature": cfg.temperature, "max_tokens": cfg.max_tokens, "seed": cfg.seed + index}
    out = {"index": index, "status": "", "detail": "", "reasoning_tokens": None, "answer_tokens": None,
           "code_chars": 0, "finish_reason": "", "request_key": None, "cached": None, "reasoning": None, "answer": None}
    try:
        reply = client.complete(messages, overrides)
    except LLMReplyError as e:
        return {**out, "status": e.reason, "detail": str(e)}
    split = split_reasoning(reply.content, reply.reasoning)
    out.update(finish_reason=reply.finish_reason, request_key=reply.request_key, cached=reply.cached,
               reasoning=split.reasoning, answer=split.answer,
               reasoning_tokens=count_tokens(split.reasoning) if split.reasoning else 0,
               answer_tokens=count_tokens(split.answer))
    if split.unterminated:
        return {**out, "status": Status.NO_CODE.value, "detail": UNTERMINATED_DETAIL}
    code = get_extractor("default", task.kind)(split.answer)  # a CUDA program, or a ModelNew module
    if code is None:
        return {**out, "status": Status.NO_CODE.value, "detail": "no code block in the answer"}
    start = time.perf_counter()
    result = evaluate(task, code, backend=backend, cases=tuple(cases))
    return {**out, "code_chars": len(code), "status": result.status.value, "detail": result.detail,
            "seconds": round(time.perf_counter() - start, 3)}


def training_records(records: list[dict], task_of: dict[str, Task], ids: dict[str, int], level: int) -> list[dict]:
    """Chat records of the kept answers: the task's prompt, then the assistant's answer with its
    trace in `reasoning_content` (what `cuset train` renders with the model's chat template)."""
    rows = []
    for rec in records:
        task = task_of[rec["key"]]
        by_index = {c["index"]: c for c in rec["candidates"]}
        for i in rec["kept"]:
            cand = by_index[i]
            # the tags' surrounding newlines are the template's business, not the trace's
            assistant = {"role": "assistant", "content": cand["answer"].strip()}
            if cand["reasoning"] and cand["reasoning"].strip():
                assistant["reasoning_content"] = cand["reasoning"].strip()
            rows.append({"messages": [*render_prompt(task, level).messages(), assistant], "task_id": ids[rec["key"]],
                         "task_name": task.task_name, "family": task.family_name, "candidate": i,
                         "reasoning_tokens": cand["reasoning_tokens"]})
    return rows


def stage_summary(records: list[dict], deferred: Counter, cfg: ReasoningConfig, token_unit: str) -> dict:
    """The manifest entry of stage 5."""
    cands = [c for r in records for c in r["candidates"]]
    passing = [c["reasoning_tokens"] for c in cands if c["status"] == PASSED]
    kept = [next(c for c in r["candidates"] if c["index"] == i)["reasoning_tokens"] for r in records for i in r["kept"]]
    return {"in": len(records) + sum(deferred.values()), "candidates": len(cands),
            "statuses": dict(sorted(Counter(c["status"] for c in cands).items(), key=lambda kv: (-kv[1], kv[0]))),
            "passed": len(passing), "tasks_with_a_pass": sum(bool(r["kept"]) for r in records),
            "no_passing_answer": sum(not r["kept"] for r in records), "deferred": dict(deferred),
            "out": len(kept), "select": cfg.select, "token_unit": token_unit,
            "mean_reasoning_tokens_passing": _mean(passing), "mean_reasoning_tokens_kept": _mean(kept),
            "path": "train_reasoning.jsonl"}


def _mean(xs: list[int]) -> float | None:
    return round(sum(xs) / len(xs), 1) if xs else None


def _tick(advance) -> None:
    if advance is not None:
        advance()
