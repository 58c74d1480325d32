"""Stage 4b: remove training tasks that overlap an evaluation task.

For a training task T and an evaluation task E, the overlap is the share of T's
n-grams that also occur in E, computed separately for the prompts (word
n-grams of the three prompt levels, lower-cased) and for the code (token
n-grams of bench.cu without comments or layout). T is removed when either share
reaches the threshold for some E. N-grams found in many evaluation tasks (shared
boilerplate such as file-reading helpers or "Compute the ... kernel on GPU using
CUDA") are ignored, so common scaffolding alone never removes a task.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass

from cuset.curation.cudatext import code_tokens
from cuset.curation.dedup import Removal
from cuset.localpath import MissingPath
from cuset.tasks import Task

MIN_BOILERPLATE_TASKS = 5


def prompt_words(task: Task) -> list[str]:
    text = "\n".join(task.prompt(level) for level in (1, 2, 3))
    return re.findall(r"\w+", text.lower())


def ngrams(tokens: list[str], n: int) -> set[tuple[str, ...]]:
    if len(tokens) < n:
        return {tuple(tokens)} if tokens else set()
    return {tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}


@dataclass(frozen=True)
class EvalRef:
    set_name: str
    id: int
    task_name: str

    def __str__(self) -> str:
        return f"{self.set_name}#id={self.id} {self.task_name}"


class _Index:
    """n-gram -> evaluation tasks holding it, without boilerplate n-grams."""

    def __init__(self, docs: list[set], boilerplate_share: float):
        postings: dict[tuple, list[int]] = defaultdict(list)
        for i, grams in enumerate(docs):
            for g in grams:
                postings[g].append(i)
        limit = max(MIN_BOILERPLATE_TASKS, math.ceil(boilerplate_share * len(docs)))
        self.ignored = {g for g, ids in postings.items() if len(ids) > limit}
        self.postings = {g: ids for g, ids in postings.items() if g not in self.ignored}

    def best(self, grams: set) -> tuple[int | None, float]:
        """(evaluation task with the largest overlap, that overlap as a share of `grams`)."""
        grams = grams - self.ignored
        if not grams:
            return None, 0.0
        hits: Counter = Counter()
        for g in grams:
            hits.update(self.postings.get(g, ()))
        if not hits:
            return None, 0.0
        idx, count = min(hits.items(), key=lambda kv: (-kv[1], kv[0]))
        return idx, count / len(grams)


class Decontaminator:
    def __init__(self, eval_tasks: list[tuple[str, Task]], *, prompt_ngram: int, code_ngram: int,
                 threshold: float, boilerplate_share: float):
        self.refs = [EvalRef(name, t.id, t.task_name) for name, t in eval_tasks]
        self.prompt_n, self.code_n, self.threshold = prompt_ngram, code_ngram, threshold
        self.prompts = _Index([ngrams(prompt_words(t), prompt_ngram) for _, t in eval_tasks], boilerplate_share)
        self.codes = _Index([ngrams(code_tokens(t.bench_cu), code_ngram) for _, t in eval_tasks], boilerplate_share)

    def check(self, key: str, task: Task) -> Removal | None:
        p_idx, p_share = self.prompts.best(ngrams(prompt_words(task), self.prompt_n))
        c_idx, c_share = self.codes.best(ngrams(code_tokens(task.bench_cu), self.code_n))
        by_prompt, by_code = p_share >= self.threshold, c_share >= self.threshold
        if not (by_prompt or by_code):
            return None
        reason = "prompt_and_code_overlap" if by_prompt and by_code else ("prompt_overlap" if by_prompt else "code_overlap")
        idx, share = (p_idx, p_share) if p_share >= c_share else (c_idx, c_share)
        detail = (f"{p_share:.0%} of its {self.prompt_n}-word prompt n-grams occur in {self.refs[p_idx] if p_idx is not None else '-'}; "
                  f"{c_share:.0%} of its {self.code_n}-token code n-grams occur in {self.refs[c_idx] if c_idx is not None else '-'}")
        return Removal(key, reason, str(self.refs[idx]), round(share, 4), detail)


def load_eval_sets(paths: list[str]) -> list[tuple[str, Task]]:
    """Every valid task of every evaluation set (lenient: bad records are not tasks)."""
    from cuset.tasks import load_tasks

    out: list[tuple[str, Task]] = []
    for path in paths:
        try:
            tasks, _ = load_tasks(path, strict=False)
        except FileNotFoundError as e:
            raise MissingPath(f"decontam.eval_sets: {e}") from None
        out.extend((path, t) for t in tasks)
    return out
