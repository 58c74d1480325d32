"""Text from records (model names, labels, task names, statuses, paths) made inert in the
Markdown `cuset report` writes and in the HTML a viewer renders from it.

A generation record or a results file is written by whoever made the run: a model name like
`<img src=x onerror=...>` or `[click](http://...)` must come out as the characters it is,
never as markup. `inline` keeps one line (a table cell stays one cell), writes HTML's
`&`, `<` and `>` as entities and backslash-escapes the punctuation Markdown builds
emphasis, code, links, images, tables and strikethrough from.
"""

from __future__ import annotations

import html
import re

# CommonMark lets a backslash escape any ASCII punctuation; these open markup inside a line (emphasis,
# code, link and image brackets, table cells, strikethrough); `(`, `!` and `#` do nothing there without them
_MARKUP = re.compile(r"([\\`*_\[\]|~])")


def inline(value) -> str:
    """`value` as text that renders as itself in a line or table cell of Markdown (and its HTML)."""
    text = " ".join(str(value).split())
    return _MARKUP.sub(r"\\\1", html.escape(text, quote=False))


def code(value) -> str:
    """`value` (a path, a file name) as a Markdown code span it cannot leave: one line, fenced
    by more backticks than it holds in a row (its HTML is shown, never parsed), `|` escaped
    for table cells (GFM splits cells before it sees code spans)."""
    text = " ".join(str(value).split()).replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"
