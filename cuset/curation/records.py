"""Records passed between the stages of `cuset data build`; all serialise to JSON lines."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

KINDS = ("code", "pair", "task")  # raw program, prompt/response pair, ready CUDABench task


def content_key(*parts: str) -> str:
    """Stable 16-hex key of some text: the identity of an item across stages and runs."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()[:16]


def json_key(obj) -> str:
    return content_key(json.dumps(obj, sort_keys=True, ensure_ascii=False))


@dataclass(frozen=True)
class Candidate:
    """One program (or task) found by stage 1."""

    key: str
    kind: str          # one of KINDS
    source: str        # the source's label
    origin: str        # file path, or file:line / dataset:row
    code: str          # the CUDA program
    prompt: str = ""   # the pair's prompt, when there is one
    task: dict | None = None  # the CUDABench record, for kind "task"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "Candidate":
        return cls(**d)


@dataclass(frozen=True)
class Skip:
    """Something stage 1 could not use, and why."""

    source: str
    origin: str
    reason: str
    detail: str = ""

    def to_json(self) -> dict:
        return asdict(self)
