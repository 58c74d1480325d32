"""Reading a model's reply: where its fenced code blocks are, as character offsets.

The one reader of markdown fences for everything that looks for code in a reply: code
extraction (`cuset.generate.extract`), the span detector (`cuset.spans.text.code_segments`)
and so the CUDA mask of training (`cuset.train.data.response_spans`). Each of them keeps
its own policy on top (which block to compile, which blocks and gaps to parse); the
fences themselves are found here and nowhere else. The reasoning trace is split off
before this runs (`cuset.tasks.reasoning`).

The fence rules follow CommonMark, loosened where model answers need it:
- an opening fence is a line of 3 or more backticks or tildes and an optional info
  string; any indentation is accepted (CommonMark allows 3 spaces, but models indent
  fenced blocks inside list items);
- it is closed by the first later line of the same character, at least as many of them,
  and nothing else but blanks (so a ```` block can quote a ``` fence);
- a fence never closed runs to the end of the text (a reply cut by max_tokens still has
  its code);
- lines may end with CRLF: the carriage return is part of neither the info string nor
  the closing line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE_OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*?)[ \t]*\r?$", re.M)
_CLOSERS: dict[str, re.Pattern] = {}


def _closer(fence: str) -> re.Pattern:
    """The closing line of a block opened by `fence` (same character, at least as many)."""
    pattern = _CLOSERS.get(fence)
    if pattern is None:
        pattern = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*(?=\r?$)", re.M)
        _CLOSERS[fence] = pattern
    return pattern


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block of a reply: its body is ``text[start:end]``.

    `language` is the first word of the info string, lowercased, without a leading "." or
    "{" (```` ```{.cuda} ````), "" when there is none. `fence_start` is where the opening
    fence line begins and `fence_end` where the closing fence line ends (the end of the
    text when the block is never closed): the text outside [fence_start, fence_end) is
    prose, or code written without a fence.
    """

    start: int
    end: int
    language: str
    fence_start: int
    fence_end: int
    closed: bool

    def body(self, text: str) -> str:
        return text[self.start:self.end]


def _language(info: str) -> str:
    words = info.split()
    return words[0].lower().lstrip(".{") if words else ""


def fenced_blocks(text: str | None) -> list[CodeBlock]:
    """Every fenced block of `text`, in order (see the module docstring for the rules)."""
    text = text or ""
    blocks: list[CodeBlock] = []
    search_from = 0
    while True:
        opening = _FENCE_OPEN.search(text, search_from)
        if opening is None:
            return blocks
        # the body starts on the line after the fence (an opening fence ending the text has none)
        start = opening.end() + 1 if opening.end() < len(text) else opening.end()
        closing = _closer(opening.group("fence")).search(text, start)
        language = _language(opening.group("info"))
        if closing is None:
            blocks.append(CodeBlock(start, len(text), language, opening.start(), len(text), False))
            return blocks
        blocks.append(CodeBlock(start, max(start, closing.start()), language, opening.start(), closing.end(), True))
        search_from = closing.end()
