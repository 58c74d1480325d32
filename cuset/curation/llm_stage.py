"""Stage 2: turn raw programs and pairs into tasks with the LLM; pass ready tasks through.

One record per candidate in `2_synthesis.jsonl`:
    {"key", "origin", "status": "ok"|"rejected", "reason", "detail", "task", "request_key", "cached"}
reason is "given" (a CUDABench task from the source), "synthesized", or why it was
rejected. Candidates not attempted because the LLM budget ran out get no record:
the next build (with a larger budget) picks them up.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from cuset.curation.llm import ChatClient, LLMFatalError, LLMReplyError, ask_concurrently
from cuset.curation.llm_task import ReplyRejected, build_messages, reply_to_task
from cuset.curation.records import Candidate
from cuset.curation.runstore import StageStore


@dataclass
class SynthesisOutcome:
    records: list[dict]
    deferred: Counter = field(default_factory=Counter)  # reason -> candidates not attempted


def task_id_for(key: str) -> int:
    """A stable int id for an intermediate task (final ids are renumbered at output)."""
    return int(key[:8], 16)


def synthesize_candidates(cands: list[Candidate], store: StageStore, client: ChatClient | None,
                          *, concurrency: int, max_program_chars: int, advance=None) -> SynthesisOutcome:
    outcome = SynthesisOutcome(records=[])
    todo: list[Candidate] = []
    for cand in cands:
        if store.get(cand.key) is not None:
            _tick(advance)
        elif cand.kind == "task":
            store.put(_record(cand, "ok", "given", task=cand.task))
            _tick(advance)
        elif len(cand.code) > max_program_chars:
            store.put(_record(cand, "rejected", "too_long_for_llm",
                              f"{len(cand.code)} characters > llm.max_program_chars={max_program_chars}"))
            _tick(advance)
        else:
            todo.append(cand)
    if todo:
        if client is None:
            raise LLMFatalError(f"{len(todo)} raw program(s) need an LLM to become tasks, but none is configured")
        ask_concurrently(todo, lambda cand: store.put(_ask_one(cand, client)), concurrency=concurrency,
                         deferred=outcome.deferred, advance=advance)
    outcome.records = store.finish([c.key for c in cands])
    return outcome


def _ask_one(cand: Candidate, client: ChatClient) -> dict:
    try:
        reply = client.complete(build_messages(cand))
    except LLMReplyError as e:
        return _record(cand, "rejected", e.reason, str(e))
    meta = {"request_key": reply.request_key, "cached": reply.cached}
    try:
        task = reply_to_task(reply.content, cand, task_id_for(cand.key))
    except ReplyRejected as e:
        detail = e.detail
        if reply.finish_reason == "length":
            detail += " (the reply was cut at llm.max_tokens)"
        return _record(cand, "rejected", e.reason, detail, **meta)
    return _record(cand, "ok", "synthesized", task=task.to_json(), **meta)


def _record(cand: Candidate, status: str, reason: str, detail: str = "", *, task=None, request_key=None, cached=None) -> dict:
    return {"key": cand.key, "origin": cand.origin, "source": cand.source, "kind": cand.kind, "status": status,
            "reason": reason, "detail": detail, "task": task, "request_key": request_key, "cached": cached}


def _tick(advance) -> None:
    if advance is not None:
        advance()
