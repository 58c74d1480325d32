"""Render one (prompt, response) pair with the model's chat template and tokenise it.

This is the single home of "which tokens are supervised": the prompt messages plus
an assistant turn holding `response` are rendered with the tokenizer's chat template;
every token that overlaps the response text, or the end-of-turn marker the template
puts after it, gets its id as label; every other token gets -100. The CUDA mask
marks supervised tokens that overlap a CUDA span (kernel body / launch
configuration) of the response, as `cuset.spans.align` decides.

A reasoning model's trace is rendered before the answer (in the template's own
`reasoning_content` field when the template reads one, else as an inline
`<think>` block) and supervised with it; the CUDA mask never covers it (spans
come from the answer only), and `reasoning_weight` scales or drops its tokens.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

from cuset.errors import CusetError
from cuset.tasks.reasoning import CLOSE, OPEN

IGNORE_INDEX = -100  # the label Hugging Face losses skip


class PromptTooLongError(CusetError, ValueError):
    """The prompt alone fills `max_length`: no response token would be left to supervise."""

    def __init__(self, n_prompt_tokens: int, max_length: int):
        self.n_prompt_tokens = n_prompt_tokens
        self.max_length = max_length
        super().__init__(
            f"prompt is {n_prompt_tokens} tokens but max_length is {max_length}: "
            "no response token fits; raise data.max_length or shorten the prompt")


class TemplateError(CusetError, ValueError):
    """The chat template did not render the response where it can be found."""


@dataclass(frozen=True)
class RenderedTurn:
    """A conversation rendered with the chat template, and where its parts are (character offsets)."""

    text: str
    response_start: int    # where `response` (the answer) would start: the origin of response offsets
    answer_start: int      # where the answer's first non-blank character is
    supervise_start: int   # supervision runs from here (the trace's start when there is one) ...
    supervise_end: int     # ... to the end of the assistant turn


def _assistant_turn(tokenizer, response: str, reasoning: str | None) -> dict:
    """The assistant message: a trace goes in the template's own field when the template reads
    one (Qwen3, DeepSeek-R1 templates: `reasoning_content`), else inline as a <think> block."""
    if reasoning is None:
        return {"role": "assistant", "content": response}
    if "reasoning_content" in str(tokenizer.chat_template):
        return {"role": "assistant", "content": response, "reasoning_content": reasoning}
    return {"role": "assistant", "content": f"{OPEN}\n{reasoning.strip()}\n{CLOSE}\n\n{response.lstrip()}"}


def render_conversation(tokenizer, messages_prompt: Sequence[dict], response: str, *,
                        chat_template_kwargs: dict | None = None, reasoning: str | None = None) -> RenderedTurn:
    """The rendered conversation, where the response (answer) is in it, and the supervised range.

    Supervision runs from the response as rendered (templates may strip it) to the
    end of the assistant turn (the template's end-of-turn marker, e.g. `<|im_end|>`),
    so the model learns to stop; whitespace the template adds after the turn is not
    supervised. With a `reasoning` trace it starts where the assistant's output starts
    (the `<think>` tag the template writes) or, when the template opens the block in the
    prompt, at the trace itself.
    """
    if getattr(tokenizer, "chat_template", None) is None:
        raise TemplateError(
            f"tokenizer {getattr(tokenizer, 'name_or_path', '?')!r} has no chat template: "
            "use an instruct/chat model or set one with tokenizer.chat_template")
    kwargs = dict(chat_template_kwargs or {})
    conversation = list(messages_prompt) + [_assistant_turn(tokenizer, response, reasoning)]
    text = tokenizer.apply_chat_template(conversation, tokenize=False, **kwargs)
    prompt_text = tokenizer.apply_chat_template(list(messages_prompt), tokenize=False,
                                                add_generation_prompt=True, **kwargs)
    core = response.strip()
    if not core:
        raise ValueError("response is empty")
    # Some templates strip the content (Qwen3 drops leading newlines); locate the
    # stripped text and map back to where `response` itself would start.
    # rfind: the assistant turn is the last thing rendered, a prompt could quote the code.
    found = text.rfind(core, len(os.path.commonprefix([prompt_text, text])))
    if found < 0:
        found = text.rfind(core)
    if found < 0:
        raise TemplateError("the chat template does not render the assistant response verbatim; "
                            "cannot tell which tokens to supervise")
    lead = response.index(core)
    supervise_end = max(len(text.rstrip()), found + len(core))
    start = found
    if reasoning is not None:
        trace = reasoning.strip()
        at = text.rfind(trace, 0, found) if trace else -1
        if at < 0:
            raise TemplateError("the chat template does not render the reasoning trace verbatim before the answer "
                                "(it may drop traces of the last turn; check chat_template_kwargs such as "
                                "enable_thinking)")
        start = len(prompt_text) if text.startswith(prompt_text) and len(prompt_text) <= at else at
    return RenderedTurn(text, found - lead, found, start, supervise_end)


def _cuda_flags(spans, offsets, response_start: int, response_end: int, n: int) -> list[int]:
    if not spans:
        return [0] * n
    from cuset.spans import align  # lazy: tree-sitter is only needed when spans are given
    return list(align(spans, offsets, response_start=response_start, response_end=response_end))


def tokenize_example(tokenizer, messages_prompt: Sequence[dict], response: str, *, max_length: int,
                     spans=None, chat_template_kwargs: dict | None = None, reasoning: str | None = None,
                     reasoning_weight: float = 1.0) -> dict[str, Any]:
    """Tokenise a prompt (chat messages) and its response for supervised training.

    `spans` are CUDA spans with offsets relative to `response` (None: no CUDA mask).
    Returns input_ids, labels (Hugging Face convention: unshifted, -100 = not
    supervised), cuda_mask (float per token, 1.0 on supervised CUDA-span tokens),
    attention_mask, offsets (character span of each token in `text`), text,
    response_start (character offset of the response in `text`), n_prompt_tokens and
    truncated. Every per-token column is truncated to `max_length` together.
    `reasoning` (a trace, see `render_conversation`) adds reasoning_mask (1 on the
    supervised tokens before the answer); `reasoning_weight` 0 removes those tokens from
    the labels, a weight in (0, 1) adds a loss_weight column (the weight on them, 1
    elsewhere) to every example, with or without a trace, so a dataset's columns agree.
    Raises PromptTooLongError when no supervised token fits in `max_length`.
    """
    if max_length < 2:
        raise ValueError(f"max_length must be at least 2, got {max_length}")
    if not 0.0 <= reasoning_weight <= 1.0:
        raise ValueError(f"reasoning_weight must be in [0, 1], got {reasoning_weight}")
    turn = render_conversation(tokenizer, messages_prompt, response, chat_template_kwargs=chat_template_kwargs,
                               reasoning=reasoning)
    text, response_start, supervise_start, supervise_end = (turn.text, turn.response_start, turn.supervise_start,
                                                            turn.supervise_end)
    # The template already holds the special tokens (BOS, turn markers).
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(enc["input_ids"])
    offsets = [tuple(o) for o in enc["offset_mapping"]]
    supervised = [end > supervise_start and start < supervise_end and end > start for start, end in offsets]
    if not any(supervised):
        raise TemplateError("no token of the rendered text overlaps the response")
    # a token straddling the trace's end and the answer belongs to the answer
    in_trace = [sup and reasoning is not None and end <= turn.answer_start for sup, (_, end) in zip(supervised, offsets)]
    if reasoning_weight == 0.0:
        supervised = [sup and not r for sup, r in zip(supervised, in_trace)]
        if not any(supervised):
            raise TemplateError("no token of the rendered answer is supervised")
    n_prompt = supervised.index(True)
    if n_prompt >= max_length:
        raise PromptTooLongError(n_prompt, max_length)
    flags = _cuda_flags(spans, offsets, response_start, response_start + len(response), len(ids))
    labels = [tok if sup else IGNORE_INDEX for tok, sup in zip(ids, supervised)]
    cuda_mask = [float(bool(f)) if sup else 0.0 for f, sup in zip(flags, supervised)]
    keep = min(len(ids), max_length)
    out = {
        "input_ids": ids[:keep],
        "labels": labels[:keep],
        "cuda_mask": cuda_mask[:keep],
        "reasoning_mask": [float(r) for r in in_trace[:keep]],
        "attention_mask": [1] * keep,
        "offsets": offsets[:keep],
        "text": text,
        "response_start": response_start,
        "n_prompt_tokens": n_prompt,
        "truncated": keep < len(ids),
    }
    if 0.0 < reasoning_weight < 1.0:
        out["loss_weight"] = [reasoning_weight if r else 1.0 for r in in_trace[:keep]]
    return out
