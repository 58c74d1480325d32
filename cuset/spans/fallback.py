"""Recovery where the grammar gives up: kernels and launches the parse tree did not place.

Only runs on what the tree left uncovered: a ``__global__``/``__device__`` keyword that is
not part of a recovered function, lambda or declaration, and a ``<<<`` that is not part of
a recovered ``kernel_call_syntax``. Comments and string literals (from the tree) are
skipped; braces are matched with a small lexer that also skips them.
"""

from __future__ import annotations

import re

from cuset.spans import grammar

_KEYWORD = re.compile(r"\b(?:__global__|__device__)\b")
_CHEVRON = re.compile(r"<<<")
# Lexer for brace matching: comments, string and char literals are single tokens.
_LEXEME = re.compile(r"//[^\n]*|/\*.*?(?:\*/|\Z)|\"(?:\\.|[^\"\\\n])*\"?|'(?:\\.|[^'\\\n])*'?|[{};]|>>>", re.S)
# What may precede the keyword and still belong to the definition.
_PREFIX = re.compile(
    r"(?:template[ \t\r\n]*<[^;{}]{0,200}>[ \t\r\n]*)?"
    r"(?:(?:extern[ \t]*\"C\"|static|inline|__host__|__forceinline__|__noinline__)[ \t\r\n]+)*\Z"
)
_PREFIX_WINDOW = 240


class _Ranges:
    """A handful of (start, end) ranges, possibly nested, with a containment test."""

    def __init__(self, ranges):
        self.ranges = list(ranges)

    def contains(self, position: int) -> bool:
        return any(start <= position < end for start, end in self.ranges)

    def add(self, start: int, end: int) -> None:
        self.ranges.append((start, end))


def _opaque(root, to_char) -> _Ranges:
    found = grammar.cursor(grammar.OPAQUE_QUERY).captures(root).get("opaque", ())
    return _Ranges((to_char(n.start_byte), to_char(n.end_byte)) for n in found)


def _body_open(code: str, position: int) -> int | None:
    """Index of the `{` opening the definition that starts at `position`, or None when a
    `;` or `}` comes first (a prototype or a variable)."""
    for lexeme in _LEXEME.finditer(code, position):
        token = lexeme.group()
        if token == "{":
            return lexeme.start()
        if token in (";", "}"):
            return None
    return None


def _body_close(code: str, open_brace: int) -> int:
    """End (exclusive) of the brace block opened at `open_brace`; the end of the code when
    it never closes (a truncated response)."""
    depth = 0
    for lexeme in _LEXEME.finditer(code, open_brace):
        token = lexeme.group()
        if token == "{":
            depth += 1
        elif token == "}":
            depth -= 1
            if depth == 0:
                return lexeme.end()
    return len(code)


def _definition_start(code: str, keyword_start: int) -> int:
    window_start = max(0, keyword_start - _PREFIX_WINDOW)
    match = _PREFIX.search(code, window_start, keyword_start)
    return match.start() if match else keyword_start


_ARGUMENTS_FOLLOW = re.compile(r"[ \t\r\n]*(?:\(|\Z)")


def _launch_end(code: str, start: int) -> int | None:
    """End of the configuration `<<<...>>>` starting at `start`, or None when it is not a launch:
    a `;`/brace comes first, or no argument list follows (chevrons in prose, "we launch
    k<<<g, b>>> with one block per row", are not code). A configuration cut off by the end
    of the text (a truncated answer) still counts."""
    for lexeme in _LEXEME.finditer(code, start + 3):
        token = lexeme.group()
        if token == ">>>":
            return lexeme.end() if _ARGUMENTS_FOLLOW.match(code, lexeme.end()) else None
        if token in (";", "{", "}"):
            return None
    return len(code)  # truncated inside the configuration


_GLOBAL_KEYWORD = re.compile(r"\b__global__\b")


def recover(code: str, spans: set[tuple[str, int, int]], captures: dict, root, to_char, *,
            global_only: bool = False) -> set[tuple[str, int, int]]:
    """Extra spans (character offsets of `code`) for what the parse tree did not cover
    (`global_only`: kernels are `__global__` definitions only, the paper's span mode)."""
    keyword_re = _GLOBAL_KEYWORD if global_only else _KEYWORD
    keywords = [m.start() for m in keyword_re.finditer(code)] if ("__global__" in code or "__device__" in code) else []
    chevrons = [m.start() for m in _CHEVRON.finditer(code)] if "<<<" in code else []
    if not keywords and not chevrons:
        return set()
    recovered: set[tuple[str, int, int]] = set()
    placed = [(s, e) for k, s, e in spans if k == "kernel_body"]
    for name in ("device_variable", "prototype", "lambda"):
        # A declaration the parser had to patch (e.g. `__global__ void __cluster_dims__(2,1,1)`
        # read as a prototype missing its `;`) does not place the keyword.
        placed.extend((to_char(n.start_byte), to_char(n.end_byte)) for n in captures.get(name, ()) if not n.has_error)
    covered = _Ranges(placed)
    keywords = [k for k in keywords if not covered.contains(k)]
    launches = _Ranges((s, e) for k, s, e in spans if k == "launch_config")
    chevrons = [c for c in chevrons if not launches.contains(c)]
    if not keywords and not chevrons:
        return set()
    opaque = _opaque(root, to_char)
    for keyword in keywords:
        if opaque.contains(keyword) or covered.contains(keyword):
            continue
        open_brace = _body_open(code, keyword)
        if open_brace is None:
            continue
        start, end = _definition_start(code, keyword), _body_close(code, open_brace)
        recovered.add(("kernel_body", start, end))
        covered.add(start, end)
    for chevron in chevrons:
        if opaque.contains(chevron) or launches.contains(chevron):
            continue
        end = _launch_end(code, chevron)
        if end is not None:
            recovered.add(("launch_config", chevron, end))
            launches.add(chevron, end)
    return recovered
