"""Pull the program out of a model's response.

Two rules:
- compat (`extract_code_compat`): exactly the official CUDABench harness: the
  first match of ```(?:cpp|c\\+\\+)?\\s*(.*?)``` (DOTALL). Its quirk is kept on
  purpose: after a ```cuda fence the word "cuda" is part of the code (the
  optional group only knows cpp/c++), which then fails to compile.
- default (`extract_code`): among all fenced blocks (found by
  `cuset.tasks.reply.fenced_blocks`: ``` or ~~~ fences, the language tag dropped, an
  unclosed last fence running to the end of the response), the one that
  holds `main` (preferring one that also holds a `__global__` kernel), else one
  with a `__global__` kernel, else the first block. A response with no fence
  at all that still looks like a whole program (#include and main) is taken
  as is.
Both return None when there is nothing (or only whitespace) to compile.

KernelBench answers are Python modules defining `class ModelNew`:
- compat (`extract_modelnew_compat`): KernelBench's own rule: the first ``` ... ```
  span of the stripped response, stripped, a leading "python" or "cpp" word dropped
  (whether or not it defines ModelNew; evaluation then reports what is missing).
- default (`extract_modelnew`): the last fenced block that defines `class ModelNew`
  (a response that drafts and then corrects keeps the correction), else the whole
  response when it is itself a Python module defining ModelNew; None otherwise.
`get_extractor(name, kind)` picks the rule for a task kind from `EXTRACTORS_BY_KIND`, a
table checked at import to cover every kind of cuset.tasks.kinds. Reasoning traces are
split off before any of these run (cuset.tasks.reasoning), for every kind:
`extract_answer` does both.
"""

from __future__ import annotations

import ast
import re

from cuset.errors import CusetError
from cuset.tasks.kinds import DEFAULT_KIND, get_kind, per_kind
from cuset.tasks.reasoning import split_reasoning
from cuset.tasks.reply import fenced_blocks

COMPAT_RE = re.compile(r"```(?:cpp|c\+\+)?\s*(.*?)```", re.DOTALL)
MAIN_RE = re.compile(r"\bint\s+main\s*\(|\bmain\s*\(\s*(?:void|int\b)?")
KERNEL_RE = re.compile(r"__global__")


def extract_code_compat(response: str) -> str | None:
    m = COMPAT_RE.search(response or "")
    if m is None or not m.group(1).strip():
        return None
    return m.group(1)


def fenced_bodies(response: str) -> list[str]:
    """Bodies of all fenced blocks in order (cuset.tasks.reply); an unclosed last fence runs to the end."""
    return [block.body(response) for block in fenced_blocks(response)]


def _score(block: str) -> int:
    return 2 * bool(MAIN_RE.search(block)) + bool(KERNEL_RE.search(block))


def extract_code(response: str) -> str | None:
    response = response or ""
    blocks = [b for b in fenced_bodies(response) if b.strip()]
    if blocks:
        best = max(range(len(blocks)), key=lambda i: (_score(blocks[i]), -i))
        return blocks[best]
    if "#include" in response and MAIN_RE.search(response):
        return response
    return None


MODELNEW_RE = re.compile(r"^[ \t]*class[ \t]+ModelNew\b", re.MULTILINE)
KB_COMPAT_RE = re.compile(r"```(.*?)```", re.DOTALL)
KB_COMPAT_TAGS = ("python", "cpp")  # the language words KernelBench's generation script strips


def extract_modelnew_compat(response: str) -> str | None:
    m = KB_COMPAT_RE.search((response or "").strip())
    if m is None:
        return None
    code = m.group(1).strip()
    for tag in KB_COMPAT_TAGS:
        if code.startswith(tag):
            code = code[len(tag):].strip()
    return code or None


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def extract_modelnew(response: str) -> str | None:
    response = response or ""
    blocks = [b for b in fenced_bodies(response) if MODELNEW_RE.search(b)]
    if blocks:
        return blocks[-1]
    if "```" not in response and MODELNEW_RE.search(response) and _parses(response):
        return response
    return None


EXTRACTORS = {"default": extract_code, "compat": extract_code_compat}
KERNELBENCH_EXTRACTORS = {"default": extract_modelnew, "compat": extract_modelnew_compat}
# task kind -> extraction rule name -> rule; every kind of cuset.tasks.kinds has its rules
EXTRACTORS_BY_KIND = per_kind({"cudabench": EXTRACTORS, "kernelbench": KERNELBENCH_EXTRACTORS}, "code extractors")


class UnknownExtractor(CusetError, ValueError):
    """An extraction rule name that is not registered for the task kind."""


def get_extractor(name: str, kind: str = DEFAULT_KIND):
    """The extraction rule `name` (default or compat) for tasks of `kind` (task.kind)."""
    table = EXTRACTORS_BY_KIND[get_kind(kind).name]
    if name not in table:
        raise UnknownExtractor(f"unknown code extractor {name!r}: use one of {', '.join(table)}")
    return table[name]


def extract_answer(response: str | None, rule: str, kind: str = DEFAULT_KIND) -> str | None:
    """The program in a model's `response` by extraction `rule` for tasks of `kind`: the
    reasoning trace is split off first and never searched; an unclosed trace leaves no code."""
    split = split_reasoning(response)
    return None if split.unterminated else get_extractor(rule, kind)(split.answer)
