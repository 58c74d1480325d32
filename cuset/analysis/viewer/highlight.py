"""A program as HTML: pygments' CUDA lexer for the syntax, `cuset.spans.detect` for the
CUDA-sensitive spans, one element per line (numbered, anchored, marked where a
diagnostic names it).

Every piece of the program's text goes through `html.escape`; the markup around it
is ours. The result is `Markup` so the (autoescaping) templates insert it as is.
"""

from __future__ import annotations

import html
from collections import Counter
from functools import lru_cache

from markupsafe import Markup
from pygments.formatters import HtmlFormatter
from pygments.lexers import CudaLexer
from pygments.token import STANDARD_TYPES

from cuset.spans import CUSET_KINDS, FINE_KINDS, Span, detect

# A character in several spans is shown as the most specific one (a fine kind over the
# kernel body it lies in), as `cuset inspect` does.
KIND_PRIORITY = FINE_KINDS + CUSET_KINDS
CODE_CSS_SCOPE = ".code"


@lru_cache(maxsize=1)
def _lexer() -> CudaLexer:
    return CudaLexer(stripnl=False, ensurenl=False)


def token_css() -> str:
    """The stylesheet of pygments' default style for the classes `highlight` writes."""
    return HtmlFormatter(style="default").get_style_defs(CODE_CSS_SCOPE)


@lru_cache(maxsize=1)
def _styled_classes() -> frozenset[str]:
    """Token classes the style gives a look to; the others are written without a class."""
    formatter = HtmlFormatter(style="default")
    return frozenset(c for c, (style, _, _) in formatter.class2style.items() if style and c != "w")


@lru_cache(maxsize=512)
def _css_class(ttype) -> str:
    while ttype not in STANDARD_TYPES:
        ttype = ttype.parent
    cls = STANDARD_TYPES[ttype]
    return cls if cls in _styled_classes() else ""


def _boundaries(spans: list[Span]) -> tuple[list[int], list[tuple[str, ...]]]:
    """Positions where the innermost span kind may change, and the active kinds from each."""
    events: dict[int, list[tuple[str, int]]] = {}
    for s in spans:
        events.setdefault(s.start, []).append((s.kind, 1))
        events.setdefault(s.end, []).append((s.kind, -1))
    points = sorted(events)
    active: Counter = Counter()
    states = []
    for p in points:
        for kind, delta in events[p]:
            active[kind] += delta
        states.append(tuple(k for k in KIND_PRIORITY if active[k] > 0))
    return points, states


def _runs(code: str, spans: list[Span]) -> list[tuple[int, int, str, str]]:
    """(start, end, token class, top span kind) of the maximal runs of `code` that share a
    class and a kind. Adjacent tokens of one class merge (most tokens have no class of
    their own: names, punctuation, whitespace), so the page has one element per run rather
    than per token, and the loops below run per run: this is the hot path of `cuset view`."""
    points, states = _boundaries(spans)
    n_points = len(points)
    k, kind = 0, ""                    # points[k]: the next boundary; kind: the top kind before it
    runs: list[tuple[int, int, str, str]] = []
    run_start, run_key, end = 0, None, 0
    for start, ttype, value in _lexer().get_tokens_unprocessed(code):
        cls = _css_class(ttype)
        pos, end = start, start + len(value)
        while pos < end:
            while k < n_points and points[k] <= pos:
                kinds = states[k]
                kind = kinds[0] if kinds else ""
                k += 1
            key = (cls, kind)
            if key != run_key:
                if run_key is not None:
                    runs.append((run_start, pos, *run_key))
                run_start, run_key = pos, key
            pos = points[k] if k < n_points and points[k] < end else end
    if run_key is not None:
        runs.append((run_start, end, *run_key))
    return runs


@lru_cache(maxsize=32)
def _analysed(code: str) -> tuple[tuple[Span, ...], tuple[tuple[int, int, str, str], ...]]:
    """`code`'s spans and runs. A run's samples often repeat a program (greedy or low-temperature
    decoding: 10% of the 2026-11-26 study's 960 programs are repeats) and the pages are written
    task by task, so a small cache spares lexing and span detection for each repeat."""
    spans = detect(code)
    return tuple(spans), tuple(_runs(code, spans))


def program_view(code: str, marks: dict[int, str] | None = None) -> tuple[Markup, tuple[Span, ...]]:
    """`highlight(code, marks=marks)` and the spans it marked, from the cache of recent programs."""
    spans, runs = _analysed(code)
    return _lines_html(code, runs, marks or {}, "L"), spans


def highlight(code: str, *, spans: list[Span] | None = None, marks: dict[int, str] | None = None,
              anchor: str = "L") -> Markup:
    """`code` as lines (`id="{anchor}{n}"`, numbered by the stylesheet), tokens classed for `token_css`, spans
    classed `sp sp-<kind>`, lines in `marks` classed `mark` with the message as a title."""
    if spans is None:
        spans = detect(code)
    return _lines_html(code, _runs(code, spans), marks or {}, anchor)


def _lines_html(code: str, code_runs, marks: dict[int, str], anchor: str) -> Markup:
    # lines[i]: runs of (span kind, [token html]) so that a span is one element per line
    lines: list[list[tuple[str, list[str]]]] = [[]]
    line = lines[0]
    for start, end, cls, kind in code_runs:
        # escaping leaves newlines alone, so the escaped run splits into the same lines
        for j, part in enumerate(html.escape(code[start:end], quote=False).split("\n")):
            if j:
                line = []
                lines.append(line)
            if not part:
                continue
            body = f'<span class="{cls}">{part}</span>' if cls else part
            if line and line[-1][0] == kind:
                line[-1][1].append(body)
            else:
                line.append((kind, [body]))
    if len(lines) > 1 and not lines[-1]:
        lines.pop()
    out = []
    for n, runs in enumerate(lines, 1):
        body = "".join(f'<span class="sp sp-{kind}">{"".join(parts)}</span>' if kind else "".join(parts)
                       for kind, parts in runs)
        note = marks.get(n)
        attrs = f' class="ln mark" title="{html.escape(note)}"' if note is not None else ' class="ln"'
        # the newline inside the line's (block) element: the text stays the program's, and no
        # newline between two blocks renders as an empty line
        out.append(f'<span id="{anchor}{n}"{attrs}>{body}\n</span>')
    return Markup(f'<pre class="code">{"".join(out)}</pre>')


def span_counts(spans: list[Span]) -> dict[str, int]:
    """Spans per kind, in the order kinds are listed."""
    counts = Counter(s.kind for s in spans)
    return {k: counts[k] for k in CUSET_KINDS + FINE_KINDS if counts[k]}
