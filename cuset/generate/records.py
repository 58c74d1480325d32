"""The generation record: one line of a generations JSONL per (task, sample).

Fields are a contract with evaluation, data curation and analysis; keep the
names stable. `code` is None when nothing could be extracted from `response`.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Iterable, Iterator

from cuset.io import JsonlAppender, atomic_write_jsonl, iter_jsonl
from cuset.errors import CusetError
from cuset.tasks.schema import valid_task_id


class GenerationRecordError(CusetError, ValueError):
    """A generations line whose fields are missing or malformed (path:line in the message)."""


# What answers produced outside cuset (another harness's outputs, a public release) may
# leave out: generation facts cuset cannot know for them.
IMPORTED_DEFAULTS = {"level": None, "n_tokens": None, "finish_reason": None, "seconds": 0.0}


@dataclass(frozen=True)
class GenerationRecord:
    task_id: int | str           # CUDABench: integer; KernelBench: the task name
    task_name: str
    sample: int                 # 0-based sample index within the task
    model: str
    level: int | None           # prompt level 1, 2 or 3 (None: an imported answer, not prompted by cuset)
    response: str               # raw model output
    code: str | None            # extracted program, None if none was found
    n_tokens: int | None        # generated tokens, counted with the model's tokenizer
    finish_reason: str | None   # "stop", "length", ... as the backend reports it
    seconds: float              # wall time spent generating this sample (batch time shared out)
    reasoning: str | None = None        # a reasoning model's trace, apart from the answer (cuset.tasks.reasoning)
    reasoning_tokens: int | None = None  # its tokens (part of n_tokens), where the backend could count them

    @property
    def key(self) -> tuple[int, int]:
        return (self.task_id, self.sample)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict, where: str = "record") -> "GenerationRecord":
        names = [f.name for f in fields(cls)]
        optional = ("reasoning", "reasoning_tokens")  # later additions: older files lack them
        missing = [n for n in names if n not in d and n not in optional and n not in IMPORTED_DEFAULTS]
        if missing:
            raise GenerationRecordError(f"{where}: missing field(s) {', '.join(missing)} "
                             f"(a generations line needs {', '.join(names)})")
        if not valid_task_id(d["task_id"]) or not isinstance(d["sample"], int) or isinstance(d["sample"], bool):
            raise GenerationRecordError(f"{where}: task_id must be an integer (CUDABench) or a non-empty string "
                             f"(KernelBench) and sample an integer, got {d['task_id']!r} and {d['sample']!r}")
        return cls(**{**IMPORTED_DEFAULTS, **{n: d[n] for n in names if n in d}})


def iter_generations(path: str | os.PathLike) -> Iterator[GenerationRecord]:
    """Records of a generations JSONL, with file:line in every error.

    A last line cut off mid-write (an interrupted run) is ignored (cuset.io's JSONL
    policy), so a resumed run regenerates that sample instead of failing.
    """
    path = Path(path)
    for lineno, d in iter_jsonl(path):
        yield GenerationRecord.from_json(d, f"{path}:{lineno}")


def load_generations(path: str | os.PathLike) -> list[GenerationRecord]:
    return list(iter_generations(path))


def append_generations(path: str | os.PathLike, records: Iterable[GenerationRecord]) -> None:
    """Append records (one flushed line each) so an interrupted run loses at most one line."""
    with JsonlAppender(path) as out:
        for rec in records:
            out.append(rec.to_json())


def save_generations(path: str | os.PathLike, records: Iterable[GenerationRecord]) -> None:
    """Write a whole file atomically."""
    atomic_write_jsonl(path, (rec.to_json() for rec in records))
