"""Text handling for the span detector: decoding, byte->char offsets, which parts of a reply are code."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from cuset.tasks.reply import fenced_blocks


def decode(code: str | bytes | bytearray | memoryview | None) -> str:
    """The text spans refer to: str as given, bytes decoded as UTF-8 with U+FFFD replacement."""
    if code is None:
        return ""
    if isinstance(code, str):
        return code
    return bytes(code).decode("utf-8", errors="replace")


def encode(text: str) -> bytes:
    """UTF-8 for the parser. Lone surrogates (possible in a Python str) are passed through
    as 3-byte sequences so that every character still maps to a run of bytes."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="surrogatepass")


class ByteToChar:
    """Maps UTF-8 byte offsets of an encoded str back to character offsets.

    Built once per text; the identity (no table at all) when the text is ASCII.
    """

    __slots__ = ("_table",)

    def __init__(self, text: str, data: bytes):
        if len(data) == len(text):  # ASCII: one byte per character
            self._table = None
            return
        raw = np.frombuffer(data, dtype=np.uint8)
        is_lead = (raw & 0xC0) != 0x80  # every character starts with a non-continuation byte
        # table[i] = number of characters starting before byte i (valid at char boundaries;
        # a byte offset inside a character maps to the character it is part of, rounding up).
        table = np.zeros(len(data) + 1, dtype=np.int64)
        np.cumsum(is_lead, out=table[1:])
        self._table = table

    def __call__(self, byte_offset: int) -> int:
        if self._table is None:
            return byte_offset
        return int(self._table[byte_offset])


@dataclass(frozen=True)
class Segment:
    """A piece of the text to parse as code: ``text[start:end]``."""

    start: int
    end: int


# Info strings of blocks that are never CUDA/C++ (compile commands, output, other languages).
_NOT_CODE_LANGS = frozenset({
    "bash", "sh", "shell", "console", "zsh", "text", "txt", "plaintext", "output", "log",
    "python", "py", "python3", "json", "yaml", "yml", "make", "makefile", "cmake", "markdown",
    "md", "diff", "ini", "toml", "xml", "html", "javascript", "js", "powershell", "bat",
})

# Strong signs that an unfenced stretch between fences is code rather than prose.
_CODE_LINE = re.compile(
    r"^[ \t]*(?:__global__|__device__|__host__|template[ \t]*<|#[ \t]*(?:include|define|pragma)\b"
    r"|(?:static[ \t]+)?(?:void|int)[ \t]+main[ \t]*\()",
    re.M,
)


def code_segments(text: str) -> list[Segment]:
    """The stretches of `text` to parse as CUDA/C++.

    No fence in the text: the whole text (bare code, possibly with prose around it; the
    parser's error recovery isolates the prose). With fences (found by
    `cuset.tasks.reply.fenced_blocks`): the body of every fenced block whose info string is
    empty or not a known non-C++ language (an unclosed fence runs to the end of the text,
    as in a truncated response), plus any stretch between blocks that has a line starting
    like code (``__global__``, ``#include``, ``int main(``...).
    """
    fences = fenced_blocks(text)
    if not fences:
        return [Segment(0, len(text))] if text else []
    blocks = [Segment(f.start, f.end) for f in fences if f.language not in _NOT_CODE_LANGS]
    edges = [0, *(edge for f in fences for edge in (f.fence_start, f.fence_end)), len(text)]
    gaps = [Segment(a, b) for a, b in zip(edges[::2], edges[1::2])]
    segments = blocks + [g for g in gaps if g.end > g.start and _CODE_LINE.search(text, g.start, g.end)]
    return sorted(segments, key=lambda s: s.start)
