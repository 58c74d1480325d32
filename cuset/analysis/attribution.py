"""Token-level attribution of failing samples: where a sampled program leaves every correct
program of its task, and what the base model and the CUDA mask made of the token it left.

Definitions (token ids of the program's fenced response, tokenized with the model's tokenizer
as training tokenizes a reference: `cuset.demo.attribute` builds the inputs):

- the *correct programs* of a task are its reference and every passing sample of it;
- a failing sample *leaves* them at position L = the longest common token prefix it has with
  any correct program: tokens [0, L) are some correct program's, token L is no correct
  program's continuation of that prefix (or the sample ends there);
- the correct program it *followed longest* is the one with that prefix (the first in the
  order given on ties: the reference first), and the *reference token* is that program's
  token at L;
- the *cause* of the divergence is where that reference token stood before fine-tuning: its
  teacher-forced probability under the base model at or below tau (`low`, the tokens CuSeT's
  confidence mask and ProFit leave out of the loss) or above (`high`), and inside or outside
  the CUDA-sensitive mask (`cuset.spans`, the kinds of `CUSET_KINDS`). A sample with no program,
  one identical to a correct program (a flaky verdict) or one that runs on past the end of the
  correct program it followed has no reference token and is counted apart.

Pure: no model here. The record of one sample is an `Attribution`; `cause_table` counts them
per run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Iterable, Sequence

import numpy as np

# The four causes of a divergence, in table order: (below tau?, inside the CUDA mask?)
CAUSES = ("low_outside", "low_inside", "high_outside", "high_inside")
CAUSE_LABELS = {"low_outside": "p <= tau, outside the CUDA mask", "low_inside": "p <= tau, inside the CUDA mask",
                "high_outside": "p > tau, outside the CUDA mask", "high_inside": "p > tau, inside the CUDA mask"}
# Failing samples with no reference token to attribute to.
UNATTRIBUTED = ("no_program", "same_as_correct", "past_end")
UNATTRIBUTED_LABELS = {"no_program": "no program extracted",
                       "same_as_correct": "identical to a correct program",
                       "past_end": "goes on past the end of the correct program it followed"}


@dataclass(frozen=True)
class Divergence:
    """Where a sample leaves every correct program: `position` = L, the longest common token
    prefix with any of them; `followed` = index of the first correct program with that prefix."""

    position: int
    followed: int


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    x, y = np.asarray(a[:n]), np.asarray(b[:n])
    differ = np.flatnonzero(x != y)
    return int(differ[0]) if differ.size else n


def first_divergence(sample: Sequence[int], correct: Sequence[Sequence[int]]) -> Divergence | None:
    """The first token where `sample` leaves every program of `correct` (see the module
    docstring); None when the sample is one of them token for token."""
    if not correct:
        raise ValueError("first_divergence needs at least one correct program (the task's reference)")
    best, followed = -1, -1
    for i, program in enumerate(correct):
        n = common_prefix(sample, program)
        if n == len(sample) == len(program):
            return None
        if n > best:
            best, followed = n, i
    return Divergence(best, followed)


@dataclass(frozen=True)
class CorrectProgram:
    """A correct program of a task as the attribution reads it: its response tokens, each one's
    probability under the base model (teacher-forced after the task's prompt) and whether it
    lies inside the CUDA mask."""

    source: str                     # "reference", or "<run> sample <k>"
    token_ids: tuple[int, ...]
    tokens: tuple[str, ...]         # token texts, for the record
    p_base: tuple[float, ...]
    in_mask: tuple[bool, ...]

    def __post_init__(self):
        n = len(self.token_ids)
        if not len(self.tokens) == len(self.p_base) == len(self.in_mask) == n:
            raise ValueError(f"correct program {self.source}: {n} token ids but {len(self.tokens)} texts, "
                             f"{len(self.p_base)} probabilities and {len(self.in_mask)} mask flags")


@dataclass(frozen=True)
class Attribution:
    """One failing sample's divergence and its cause (one line of attribution/<run>.jsonl)."""

    task_id: int | str
    sample: int
    status: str
    cause: str                      # one of CAUSES or UNATTRIBUTED
    position: int | None = None     # token index L in the response
    n_tokens: int | None = None     # response tokens of the sample
    followed: str | None = None     # the correct program followed longest
    reference_token: str | None = None
    sample_token: str | None = None  # None: the sample ends at L
    p_base: float | None = None
    in_mask: bool | None = None

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "Attribution":
        return cls(**d)


def cause_of(p_base: float, in_mask: bool, tau: float) -> str:
    """The cause cell of a reference token: below tau means p <= tau (the confidence mask's rule)."""
    return ("low" if p_base <= tau else "high") + ("_inside" if in_mask else "_outside")


def attribute(sample_ids: Sequence[int] | None, sample_tokens: Sequence[str], correct: Sequence[CorrectProgram], *,
              tau: float, task_id, sample: int, status: str) -> Attribution:
    """The attribution of one failing sample (`sample_ids` None: no program was extracted)."""
    base = dict(task_id=task_id, sample=sample, status=status)
    if sample_ids is None:
        return Attribution(cause="no_program", **base)
    div = first_divergence(sample_ids, [c.token_ids for c in correct])
    if div is None:
        return Attribution(cause="same_as_correct", n_tokens=len(sample_ids), **base)
    program = correct[div.followed]
    at = div.position
    sample_token = sample_tokens[at] if at < len(sample_tokens) else None
    where = dict(position=at, n_tokens=len(sample_ids), followed=program.source, sample_token=sample_token)
    if at >= len(program.token_ids):
        return Attribution(cause="past_end", **where, **base)
    p, inside = float(program.p_base[at]), bool(program.in_mask[at])
    return Attribution(cause=cause_of(p, inside, tau), reference_token=program.tokens[at], p_base=p, in_mask=inside,
                       **where, **base)


def cause_table(records: Iterable[Attribution]) -> dict:
    """Counts of every cause over one run's failing samples, and the share of each of the four
    causes among the attributed ones (None when none was)."""
    counts = Counter(r.cause for r in records)
    unknown = set(counts) - set(CAUSES) - set(UNATTRIBUTED)
    if unknown:
        raise ValueError(f"unknown attribution cause(s) {sorted(unknown)}; expected {CAUSES + UNATTRIBUTED}")
    attributed = sum(counts[c] for c in CAUSES)
    return {"n_failing": sum(counts.values()), "n_attributed": attributed,
            "counts": {c: counts[c] for c in CAUSES + UNATTRIBUTED},
            "shares": {c: (counts[c] / attributed if attributed else None) for c in CAUSES}}


def table_lines(tables: dict[str, dict], labels: dict[str, str] | None = None) -> list[str]:
    """A markdown table of `cause_table`s, one row per run."""
    labels = labels or {}
    share = lambda t, c: "n/a" if t["shares"][c] is None else f"{100 * t['shares'][c]:.1f}%"  # noqa: E731
    head = ["Run", "Failing", "Attributed"] + [CAUSE_LABELS[c] for c in CAUSES] + [UNATTRIBUTED_LABELS[c]
                                                                                    for c in UNATTRIBUTED]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for run, t in tables.items():
        cells = [labels.get(run, run), str(t["n_failing"]), str(t["n_attributed"])]
        cells += [f"{t['counts'][c]} ({share(t, c)})" for c in CAUSES] + [str(t["counts"][c]) for c in UNATTRIBUTED]
        lines.append("| " + " | ".join(cells) + " |")
    return lines
