"""Reasoning traces of reasoning models, kept apart from the answer the code is extracted from
(in generation and evaluation) and from the code the CUDA mask covers (in training).

A trace arrives in one of two ways:
- a separate field of the server's message (`reasoning_content` in vLLM / DeepSeek /
  SGLang, `reasoning` in some others), the answer alone in `content`;
- inline, as `<think> ... </think>` at the start of the text. Chat templates that open the
  block in the prompt (Qwen3, DeepSeek-R1) make the output start inside it: a `</think>`
  with no `<think>` before it closes a trace that began with the text.

A `<think>` that is never closed (the generation hit its token limit while reasoning)
leaves no answer: such a sample has no code, and is counted under its own reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OPEN, CLOSE = "<think>", "</think>"
_LEADING_OPEN = re.compile(r"\A\s*<think>")

UNTERMINATED_DETAIL = ("unterminated reasoning: the response opens <think> and never closes it (the generation "
                       "probably hit its token limit while reasoning); no answer to extract code from")


@dataclass(frozen=True)
class SplitResponse:
    reasoning: str | None   # the trace (without the tags), None when the response has none
    answer: str             # what code is extracted from
    unterminated: bool      # a trace opened and never closed: there is no answer


def split_reasoning(text: str, reasoning_field: str | None = None) -> SplitResponse:
    """The trace and the answer of a response; `reasoning_field` is the server's separate trace, if any."""
    text = text or ""
    if reasoning_field:
        # the server already separated them; a stray inline block in the answer is still a trace
        inline = split_reasoning(text)
        reasoning = reasoning_field if inline.reasoning is None else f"{reasoning_field}\n{inline.reasoning}"
        return SplitResponse(reasoning, inline.answer, inline.unterminated)
    opened = _LEADING_OPEN.match(text)
    close = text.find(CLOSE)
    if opened:
        if close < 0:
            return SplitResponse(text[opened.end():], "", True)
        return SplitResponse(text[opened.end():close], text[close + len(CLOSE):], False)
    if close >= 0 and OPEN not in text[:close]:
        return SplitResponse(text[:close], text[close + len(CLOSE):], False)  # opened by the chat template
    return SplitResponse(None, text, False)
