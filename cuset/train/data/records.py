"""Read training records (CUDABench tasks, chat messages, prompt/completion, alpaca).

Each JSONL line becomes an `Example` (prompt messages + response text) or a
`Problem` naming file:line, the field and the reason. Which fields a format needs
is decided here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from cuset.io import JsonlError, iter_jsonl
from cuset.tasks.io import Problem

FORMATS = ("auto", "cudabench", "messages", "prompt_completion", "alpaca")
REASONING_FIELDS = ("reasoning_content", "reasoning")  # where records (and servers) keep a trace
WRAPS = ("fenced", "raw")


@dataclass(frozen=True)
class Example:
    """One supervised pair: chat messages of the prompt and the assistant response.

    `code_range` is the (start, end) of the program inside `response` when the
    response wraps a single program (CUDABench); None means "find the fenced code
    blocks in the text" (see `cuset.train.data.cuda_spans`). `reasoning` is a
    reasoning model's trace, kept apart from `response` (the answer): it comes from
    the record's own field (`reasoning_content` / `reasoning`) or from a leading
    `<think>...</think>` block, and training renders it back with the chat template.
    """

    prompt: tuple[dict, ...]
    response: str
    source: str
    line: int
    code_range: tuple[int, int] | None = None
    reasoning: str | None = None


@dataclass(frozen=True)
class RecordOptions:
    """How records become prompts and responses (the data part of TrainConfig)."""

    format: str = "auto"
    prompt_level: int = 1
    compat: bool = False
    gpu: str | None = None
    response_wrap: str = "fenced"
    fence_lang: str = "cuda"
    system_prompt: str | None = None


class _Bad(Exception):
    def __init__(self, field: str, message: str, reason: str):
        self.field, self.message, self.reason = field, message, reason


def _check_text(value, field: str, *, required_nonempty: bool, empty_reason: str = "empty_field") -> str:
    if not isinstance(value, str):
        raise _Bad(field, f"must be a string, got {type(value).__name__}", "bad_type")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:  # JSON escapes can smuggle lone surrogates past the decoder
        raise _Bad(field, f"invalid UTF-8 (lone surrogate at character {e.start})", "invalid_utf8") from None
    if required_nonempty and not value.strip():
        raise _Bad(field, "is empty", empty_reason)
    return value


def _need(record: dict, key: str, fmt: str):
    if key not in record:
        raise _Bad(key, f"missing (the {fmt} format needs it)", "missing_field")
    return record[key]


def wrap_response(code: str, wrap: str, lang: str) -> tuple[str, tuple[int, int]]:
    """(response, (start, end) of the program in it): the program as a fenced block or raw."""
    if wrap == "raw":
        return code, (0, len(code))
    head = f"```{lang}\n"
    body = code.strip("\n")
    return head + body + "\n```", (len(head), len(head) + len(body))


def _with_system(messages: list[dict], system: str | None) -> list[dict]:
    if system and not any(m.get("role") == "system" for m in messages):
        return [{"role": "system", "content": system}] + messages
    return messages


def _cudabench(record: dict, opts: RecordOptions) -> tuple[list[dict], str, tuple[int, int]]:
    from cuset.tasks import Task, render_prompt, validate_record

    errs = validate_record(record)
    if errs:
        field, message, reason = errs[0]
        if field == "bench.cu" and reason == "empty_field":
            reason = "empty_response"
        raise _Bad(field, message, reason)
    for key in ("bench.cu", "task_description", f"level{opts.prompt_level}_prompt"):
        _check_text(record[key], key, required_nonempty=False)
    task = Task.from_json(record)
    messages = render_prompt(task, opts.prompt_level, compat=opts.compat, gpu=opts.gpu).messages()
    response, code_range = wrap_response(task.bench_cu, opts.response_wrap, opts.fence_lang)
    return messages, response, code_range


def _check_messages(messages, field: str) -> list[dict]:
    if not isinstance(messages, list) or not messages:
        raise _Bad(field, "must be a non-empty list of {role, content}", "bad_type")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise _Bad(f"{field}[{i}]", "must be an object with role and content", "missing_field")
        _check_text(m["content"], f"{field}[{i}].content", required_nonempty=False)
        out.append({"role": m["role"], "content": m["content"]})
    return out


def _trace_field(obj: dict, field: str) -> str | None:
    """The trace in `reasoning_content` or `reasoning` of `obj`, None when absent or empty."""
    for key in REASONING_FIELDS:
        if obj.get(key) is not None:
            value = _check_text(obj[key], f"{field}.{key}" if field else key, required_nonempty=False)
            return value if value.strip() else None
    return None


def _messages(record: dict, opts: RecordOptions) -> tuple[list[dict], str, None]:
    messages = _check_messages(_need(record, "messages", "messages"), "messages")
    last = messages[-1]
    if last["role"] != "assistant":
        raise _Bad(f"messages[{len(messages) - 1}].role", "the last message must be the assistant response", "missing_field")
    if len(messages) < 2:
        raise _Bad("messages", "needs at least one prompt message before the assistant response", "missing_field")
    _check_text(last["content"], f"messages[{len(messages) - 1}].content", required_nonempty=True, empty_reason="empty_response")
    return _with_system(messages[:-1], opts.system_prompt), last["content"], None


def _prompt_completion(record: dict, opts: RecordOptions) -> tuple[list[dict], str, None]:
    prompt = _need(record, "prompt", "prompt_completion")
    completion = _need(record, "completion", "prompt_completion")
    if isinstance(prompt, str):
        messages = [{"role": "user", "content": _check_text(prompt, "prompt", required_nonempty=True)}]
    else:
        messages = _check_messages(prompt, "prompt")
    if isinstance(completion, list):  # conversational form: one assistant message
        completion = _check_messages(completion, "completion")[-1]["content"]
        field = "completion[-1].content"
    else:
        field = "completion"
    response = _check_text(completion, field, required_nonempty=True, empty_reason="empty_response")
    return _with_system(messages, opts.system_prompt), response, None


def _alpaca(record: dict, opts: RecordOptions) -> tuple[list[dict], str, None]:
    instruction = _check_text(_need(record, "instruction", "alpaca"), "instruction", required_nonempty=True)
    extra = _check_text(record.get("input") or "", "input", required_nonempty=False)
    output = _check_text(_need(record, "output", "alpaca"), "output", required_nonempty=True, empty_reason="empty_response")
    user = instruction if not extra.strip() else f"{instruction}\n\n{extra}"
    system = record.get("system") or opts.system_prompt
    if system is not None:
        _check_text(system, "system", required_nonempty=False)
    return _with_system([{"role": "user", "content": user}], system), output, None


READERS = {"cudabench": _cudabench, "messages": _messages, "prompt_completion": _prompt_completion, "alpaca": _alpaca}


def detect_format(record: dict) -> str:
    """The format a record's keys identify, for `format: auto`."""
    if "bench.cu" in record:
        return "cudabench"
    if "messages" in record:
        return "messages"
    if "prompt" in record or "completion" in record:
        return "prompt_completion"
    if "instruction" in record or "output" in record:
        return "alpaca"
    raise _Bad("<record>", "no known format: expected bench.cu (cudabench), messages, prompt+completion, "
               "or instruction+output (alpaca); set data.format to be explicit", "missing_field")


def parse_record(record, opts: RecordOptions, source: str, line: int) -> Example | Problem:
    """One decoded JSON record -> Example, or the first Problem found in it."""
    try:
        if not isinstance(record, dict):
            raise _Bad("<record>", f"must be a JSON object, got {type(record).__name__}", "bad_type")
        fmt = detect_format(record) if opts.format == "auto" else opts.format
        prompt, response, code_range = READERS[fmt](record, opts)
        reasoning = None
        if fmt != "cudabench":  # a CUDABench response is a program, never a trace
            response, reasoning = _split_trace(record, fmt, response)
    except _Bad as bad:
        return Problem(source, line, bad.field, bad.message, bad.reason)
    return Example(tuple(prompt), response, source, line, code_range, reasoning)


def _split_trace(record: dict, fmt: str, response: str) -> tuple[str, str | None]:
    """(answer, trace): the trace from the record's field and/or a `<think>` block leading the response."""
    from cuset.tasks.reasoning import split_reasoning

    if fmt == "messages":  # the trace rides on the assistant message, as chat templates expect
        last = len(record["messages"]) - 1
        explicit = _trace_field(record["messages"][last], f"messages[{last}]")
        where = f"messages[{last}].content"
    else:
        explicit = _trace_field(record, "")
        where = {"prompt_completion": "completion", "alpaca": "output"}[fmt]
    split = split_reasoning(response, explicit)
    if split.unterminated:
        raise _Bad(where, "opens <think> and never closes it: a truncated trace has no answer to train on",
                   "unterminated_reasoning")
    if split.reasoning is None:
        return response, None
    if not split.answer.strip():
        raise _Bad(where, "holds a reasoning trace but no answer after it", "empty_response")
    return split.answer, split.reasoning


def read_examples(path: str | Path, opts: RecordOptions) -> Iterator[Example | Problem]:
    """Examples and problems of one JSONL file, in file order (blank lines skipped; a line
    that is not JSON or not UTF-8 is a problem, the torn last line of an interrupted write
    is dropped: cuset.io's JSONL policy)."""
    source = str(path)
    for line, record in iter_jsonl(path, errors="yield"):
        if isinstance(record, JsonlError):
            yield Problem(source, line, "<line>", record.detail, "invalid_utf8" if record.kind == "utf8" else "bad_json")
        else:
            yield parse_record(record, opts, source, line)
