"""What a generation backend takes and returns (lookup by name: `cuset.generate.backends.registry`).

A backend turns chat requests into completions. Completions may come back in any
order; each carries the generated text, the number of generated tokens (the
model's tokenizer), a finish reason and seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Protocol, Sequence

from cuset.errors import CusetError


@dataclass(frozen=True)
class GenRequest:
    task_id: int
    sample: int
    messages: tuple[dict, ...]   # [{"role": "system", ...}, {"role": "user", ...}]


@dataclass(frozen=True)
class Completion:
    text: str
    n_tokens: int | None
    finish_reason: str | None
    seconds: float
    reasoning: str | None = None          # the server's separate trace (reasoning_content), if it sent one
    reasoning_tokens: int | None = None   # tokens of the trace, if counted


class Generator(Protocol):
    model_name: str

    def generate(self, requests: Sequence[GenRequest]) -> Iterator[tuple[GenRequest, Completion]]:
        ...


class GenerationError(CusetError, RuntimeError):
    """A failure that stops the run (bad credentials, unknown model, server gone)."""
