"""Plain-text facts about CUDA source: tokens without comments, a normal form for
exact deduplication, kernel names, and the code block inside a model response.

A regex lexer is enough here: deduplication and n-gram overlap need a stable
token stream, not a parse tree, and it must not choke on broken programs.
"""

from __future__ import annotations

import re

_LEXER = re.compile(
    r"""
      (?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))           # comments (an unterminated one runs to the end)
    | (?P<string>"(?:\\.|[^"\\\n])*"?|'(?:\\.|[^'\\\n])*'?)  # string and char literals, kept whole
    | (?P<number>\.?\d(?:[eEpP][+-]|[\w.])*)             # C preprocessing numbers: 1, 1.5f, 1e-5, 0x1F
    | (?P<word>[A-Za-z_]\w*)
    | (?P<punct>\S)
    """,
    re.S | re.X,
)



def code_tokens(source: str) -> list[str]:
    """Tokens of C/C++/CUDA source with comments and whitespace dropped."""
    return [m.group() for m in _LEXER.finditer(source) if m.lastgroup != "comment"]


def normalize_code(source: str) -> str:
    """One space between tokens, no comments: `a+b // x` and `a + b` normalise alike."""
    return " ".join(code_tokens(source))


def kernel_names(source: str) -> list[str]:
    """Names of the `__global__` functions defined or declared in `source`, in order, unique."""
    toks = code_tokens(source)
    names: list[str] = []
    for i, tok in enumerate(toks):
        if tok != "__global__":
            continue
        j = i + 1
        while j < len(toks):
            if toks[j] == "(" and toks[j - 1] == "__launch_bounds__":
                j = _skip_parens(toks, j)  # __launch_bounds__(256, 2) is not the name
                continue
            if toks[j] == "(":
                name = toks[j - 1]
                if re.fullmatch(r"[A-Za-z_]\w*", name) and name not in names:
                    names.append(name)
                break
            if toks[j] in (";", "{", "}"):
                break
            j += 1
    return names


def _skip_parens(toks: list[str], j: int) -> int:
    depth = 0
    while j < len(toks):
        depth += toks[j] == "("
        depth -= toks[j] == ")"
        j += 1
        if depth == 0:
            break
    return j


def has_main(source: str) -> bool:
    toks = code_tokens(source)
    return any(t == "main" and i + 1 < len(toks) and toks[i + 1] == "(" for i, t in enumerate(toks))
