"""Replaceable tokens: per-sample variation in a reference program that its prompt does not determine.

CuSeT's confidence mask rests on the premise that a target token the model finds unlikely is
mostly replaceable (a name, a comment, a way of writing the same thing). The synthesised programs
have almost none: every token follows from the prompt. `vary_program` adds some, keeping the
program's behaviour:

- names: every `__global__` / `__device__` function gets a name drawn from a word list (each
  use renamed with it, whole words only; a name already in the program is never drawn);
- comments: after some statement and block-opening lines, a comment line drawn from a phrase
  list with a random revision number;
- formatting: the indentation unit (4 spaces as written, 2 spaces or a tab).

The variation is a pure function of (program, seed): `vary_task(task, seed)` seeds it with the
task's name and id, so a data set is the same for the same seed and differs between seeds.
"""

from __future__ import annotations

import random
import re
from dataclasses import replace

from cuset.tasks.schema import Task

NAME_WORDS = ("apply", "compute", "run", "eval", "step", "pass", "core", "main", "fused", "simple", "fast", "elem",
              "map", "body", "impl", "work", "tile", "block", "launch", "do")
COMMENT_PHRASES = ("one thread per element", "bounds check first", "see the notes in the design doc",
                   "kept simple on purpose", "tuned on an older card", "revisit when the sizes change",
                   "matches the reference implementation", "straightforward version", "no shared memory needed here",
                   "results are written once", "checked with the small case", "from the first draft")
INDENT_UNITS = ("    ", "  ", "\t")
COMMENT_RATE = 0.2

_FUNCTION = re.compile(r"__(?:global|device)__\s+(?:(?:__forceinline__|__noinline__|inline|static)\s+)*"
                       r"[A-Za-z_][\w:<>]*[\s*&]+([A-Za-z_]\w*)\s*\(")


# what the pattern can catch that is no function name (a functor's `operator()`)
_NOT_NAMES = frozenset({"operator", "if", "for", "while", "switch", "return", "sizeof"})


def function_names(code: str) -> list[str]:
    """Names of the program's `__global__` and `__device__` functions, in order of first definition."""
    return [n for n in dict.fromkeys(m.group(1) for m in _FUNCTION.finditer(code)) if n not in _NOT_NAMES]


def rename_functions(code: str, rng: random.Random) -> str:
    for old in function_names(code):
        while True:
            new = f"{rng.choice(NAME_WORDS)}_{rng.choice(NAME_WORDS)}_{rng.randrange(10, 100)}"
            if not re.search(rf"\b{new}\b", code):
                break
        code = re.sub(rf"\b{re.escape(old)}\b", new, code)
    return code


def reindent(code: str, unit: str) -> str:
    """Each leading run of 4 spaces becomes `unit` (what is left over stays spaces)."""
    out = []
    for line in code.split("\n"):
        body = line.lstrip(" ")
        n = len(line) - len(body)
        out.append(unit * (n // 4) + " " * (n % 4) + body)
    return "\n".join(out)


def add_comments(code: str, rng: random.Random, rate: float = COMMENT_RATE) -> str:
    """A comment line after some lines ending a statement or opening a block, indented like them;
    never inside a preprocessor directive (a line continued with a backslash, or a line starting
    with '#')."""
    lines = code.split("\n")
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        stripped = line.strip()
        continued = i > 0 and lines[i - 1].rstrip().endswith("\\")
        if (stripped.endswith((";", "{")) and not stripped.startswith("#") and not continued
                and rng.random() < rate):
            indent = line[:len(line) - len(line.lstrip())]
            out.append(f"{indent}// {rng.choice(COMMENT_PHRASES)} (rev {rng.randrange(100, 10000)})")
    return "\n".join(out)


def replaceable_ranges(code: str) -> list[tuple[int, int]]:
    """Character ranges [a, b) of `code` of the kinds `vary_program` draws, whatever drew them: every
    whole-word use of a `__global__` / `__device__` function's name, every whole-line `//` comment
    (from the slashes to the end of the line) and every line's leading indentation. Sorted, may
    touch but do not overlap."""
    ranges = []
    for name in function_names(code):
        ranges += [m.span() for m in re.finditer(rf"\b{re.escape(name)}\b", code)]
    at = 0
    for line in code.split("\n"):
        body = line.lstrip(" \t")
        indent = len(line) - len(body)
        if indent:
            ranges.append((at, at + indent))
        if body.startswith("//"):
            ranges.append((at + indent, at + len(line)))
        at += len(line) + 1
    return sorted(ranges)


def vary_program(code: str, rng: random.Random) -> str:
    """The program with its function names, comments and indentation drawn from `rng`."""
    code = rename_functions(code, rng)
    code = add_comments(code, rng)
    return reindent(code, rng.choice(INDENT_UNITS))


def vary_task(task: Task, seed: int) -> Task:
    """`task` with a varied reference program (prompts, inputs and checks unchanged)."""
    rng = random.Random(f"replaceable|{seed}|{task.task_name}|{task.id}")
    return replace(task, bench_cu=vary_program(task.bench_cu, rng))
