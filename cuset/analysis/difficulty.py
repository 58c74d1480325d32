"""Task difficulty from reasoning length (ConCuR): do tasks whose passing answers
reason longer pass less often?

ConCuR found that the average reasoning length of the *passing* answers to a task
measures how hard the task is. This module tabulates, per task and per family,
attempts, pass rate and mean reasoning tokens, and tests the claim with a Spearman
rank correlation between a task's mean passing reasoning length and its pass rate
(a negative rho supports it).

Inputs are `Attempt`s, built from a `cuset data build` reasoning manifest
(5_reasoning.jsonl) or from evaluation `SampleResult`s. Pure computation plus
JSON/markdown/PNG writers; no CLI imports.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Sequence

from cuset.analysis.mdsafe import inline
from cuset.errors import CusetError
from cuset.io import JsonlError, iter_jsonl, atomic_write_text

MIN_POINTS = 3             # fewer points carry no usable rank correlation
EXACT_MAX_N = 8            # up to 8! = 40,320 orderings the exact permutation p-value is cheap
ALPHA = 0.05
TOP_HARDEST = 10
MAX_FAMILY_COLOURS = 19    # more families share one grey "other" colour so the legend stays readable
REASONING_MANIFEST = "5_reasoning.jsonl"


class ReasoningManifestError(CusetError, ValueError):
    """A reasoning manifest line that cannot be read; the message names file:line and the problem."""


@dataclass(frozen=True)
class Attempt:
    """One answer to one task: did it pass, and how long was its reasoning trace."""

    task: str
    family: str
    reasoning_tokens: int | None  # None: the trace's length was not counted
    passed: bool


@dataclass(frozen=True)
class TaskRow:
    task: str
    family: str
    attempts: int
    passed: int
    pass_rate: float
    mean_passing_tokens: float | None  # None: no passing attempt with a counted trace
    mean_tokens: float | None          # over every attempt with a counted trace
    uncounted: int                     # attempts whose reasoning_tokens is None


@dataclass(frozen=True)
class FamilyRow:
    """Attempts of a family's tasks pooled: pass rate over attempts, not a mean of task rates."""

    family: str
    tasks: int
    attempts: int
    passed: int
    pass_rate: float
    mean_passing_tokens: float | None
    uncounted: int


@dataclass(frozen=True)
class Correlation:
    """Spearman rho between mean passing reasoning length and pass rate."""

    rho: float
    p_value: float
    n: int
    p_method: str  # how p was computed: exact permutation for small n, else scipy's t approximation

    @property
    def significant(self) -> bool:
        return self.p_value < ALPHA


@dataclass(frozen=True)
class DifficultyResult:
    tasks: tuple[TaskRow, ...]
    families: tuple[FamilyRow, ...]
    correlation: Correlation | None           # task level
    correlation_reason: str | None            # why `correlation` is None
    family_correlation: Correlation | None
    family_correlation_reason: str | None
    n_attempts: int
    uncounted: int

    def hardest(self, k: int = TOP_HARDEST) -> list[TaskRow]:
        """Lowest pass rate first; among equal rates, longer passing reasoning first (ConCuR's
        signal of difficulty), then tasks with no passing answer, then by name."""
        return sorted(self.tasks, key=lambda r: (r.pass_rate, r.mean_passing_tokens is None,
                                                 -(r.mean_passing_tokens or 0.0), r.task))[:k]

    def to_json(self) -> dict:
        return {
            "n_attempts": self.n_attempts, "uncounted": self.uncounted,
            "correlation": asdict(self.correlation) if self.correlation else None,
            "correlation_reason": self.correlation_reason,
            "family_correlation": asdict(self.family_correlation) if self.family_correlation else None,
            "family_correlation_reason": self.family_correlation_reason,
            "families": [asdict(f) for f in self.families],
            "tasks": [asdict(t) for t in self.tasks],
        }

    @classmethod
    def from_json(cls, d: dict) -> "DifficultyResult":
        corr = lambda c: Correlation(**c) if c else None
        return cls(tuple(TaskRow(**t) for t in d["tasks"]), tuple(FamilyRow(**f) for f in d["families"]),
                   corr(d["correlation"]), d["correlation_reason"], corr(d["family_correlation"]),
                   d["family_correlation_reason"], d["n_attempts"], d["uncounted"])


# ---- computation ----------------------------------------------------------------

def _mean(values: list[int]) -> float | None:
    return sum(values) / len(values) if values else None


def spearman(x: Sequence[float], y: Sequence[float]) -> Correlation:
    """Spearman rho (scipy.stats.spearmanr, average ranks for ties) with a two-sided p.

    scipy's p comes from a t approximation that says p = 0 for a perfect ranking of 4
    points; for n <= EXACT_MAX_N the p-value is exact instead, over all n! pairings."""
    import numpy as np
    from scipy.stats import permutation_test, rankdata, spearmanr

    n = len(x)
    rho = float(spearmanr(x, y).statistic)
    if n > EXACT_MAX_N:
        return Correlation(rho, float(spearmanr(x, y).pvalue), n, "t approximation (scipy.stats.spearmanr)")
    rx, ry = rankdata(x), rankdata(y)

    def pearson_of_ranks(a, b, axis=-1):  # Spearman rho = Pearson r of the (average) ranks
        a = a - a.mean(axis=axis, keepdims=True)
        b = b - b.mean(axis=axis, keepdims=True)
        return (a * b).sum(axis=axis) / np.sqrt((a * a).sum(axis=axis) * (b * b).sum(axis=axis))

    res = permutation_test((rx, ry), pearson_of_ranks, permutation_type="pairings", vectorized=True,
                           n_resamples=math.inf, alternative="two-sided")
    return Correlation(rho, float(min(1.0, res.pvalue)), n, f"exact permutation test (all {math.factorial(n):,} pairings)")


def _correlate(points: list[tuple[float, float]], what: str) -> tuple[Correlation | None, str | None]:
    """Correlation of (length, pass rate) points, or None and why (never NaN, never a warning)."""
    if len(points) < MIN_POINTS:
        return None, (f"only {len(points)} {what} have a passing answer with a counted reasoning trace; "
                      f"a rank correlation needs at least {MIN_POINTS}")
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    if len(set(ys)) == 1:
        return None, f"all {len(points)} {what} have the same pass rate ({ys[0]:.3g}); ranks are undefined"
    if len(set(xs)) == 1:
        return None, (f"all {len(points)} {what} have the same mean passing reasoning length ({xs[0]:g}); "
                      "ranks are undefined")
    return spearman(xs, ys), None


def difficulty_table(attempts: Iterable[Attempt]) -> DifficultyResult:
    """Per-task and per-family pass rates and reasoning lengths, and their rank correlation."""
    by_task: dict[str, list[Attempt]] = defaultdict(list)
    family_of: dict[str, str] = {}
    for a in attempts:
        if family_of.setdefault(a.task, a.family) != a.family:
            raise ReasoningManifestError(f"task {a.task!r} appears under two families, {family_of[a.task]!r} and {a.family!r}; "
                             "give each task one family")
        by_task[a.task].append(a)
    rows = []
    for task, items in by_task.items():
        passed = [a for a in items if a.passed]
        rows.append(TaskRow(
            task=task, family=family_of[task], attempts=len(items), passed=len(passed),
            pass_rate=len(passed) / len(items),
            mean_passing_tokens=_mean([a.reasoning_tokens for a in passed if a.reasoning_tokens is not None]),
            mean_tokens=_mean([a.reasoning_tokens for a in items if a.reasoning_tokens is not None]),
            uncounted=sum(a.reasoning_tokens is None for a in items)))
    rows.sort(key=lambda r: (r.family, r.task))
    fams = []
    for family in sorted(set(family_of.values())):
        items = [a for t, f in family_of.items() if f == family for a in by_task[t]]
        passed = [a for a in items if a.passed]
        fams.append(FamilyRow(
            family=family, tasks=sum(f == family for f in family_of.values()), attempts=len(items),
            passed=len(passed), pass_rate=len(passed) / len(items),
            mean_passing_tokens=_mean([a.reasoning_tokens for a in passed if a.reasoning_tokens is not None]),
            uncounted=sum(a.reasoning_tokens is None for a in items)))
    corr, reason = _correlate([(r.mean_passing_tokens, r.pass_rate) for r in rows
                               if r.mean_passing_tokens is not None], "tasks")
    if len(fams) < MIN_POINTS:
        fcorr, freason = None, f"only {len(fams)} famil{'y' if len(fams) == 1 else 'ies'}; a family-level correlation needs at least {MIN_POINTS}"
    else:
        fcorr, freason = _correlate([(f.mean_passing_tokens, f.pass_rate) for f in fams
                                     if f.mean_passing_tokens is not None], "families")
    return DifficultyResult(tuple(rows), tuple(fams), corr, reason, fcorr, freason,
                            n_attempts=sum(r.attempts for r in rows), uncounted=sum(r.uncounted for r in rows))


# ---- loaders ----------------------------------------------------------------------

def _unique_names(named: list[tuple[str, str]]) -> dict[str, str]:
    """id -> task label: the name, or "name (id)" where one name covers several ids
    (two different tasks must not be pooled into one row)."""
    ids_of: dict[str, set[str]] = defaultdict(set)
    for ident, name in named:
        ids_of[name].add(ident)
    return {ident: name if len(ids_of[name]) == 1 else f"{name} ({ident})" for ident, name in named}


def attempts_from_reasoning_manifest(path: str | Path) -> tuple[list[Attempt], str]:
    """`<run>/5_reasoning.jsonl` (one record per task, one candidate per sampled answer)
    -> (one Attempt per candidate, the token unit the file states)."""
    path = Path(path)
    try:
        rows = list(iter_jsonl(path))
    except OSError as e:
        raise ReasoningManifestError(f"{path}: cannot read the reasoning manifest ({e})") from None
    except JsonlError as e:
        raise ReasoningManifestError(str(e)) from None
    records: list[tuple[str, str, str, list]] = []  # key, task_name, family, candidates
    units: dict[str, int] = {}
    for lineno, d in rows:
        where = f"{path}:{lineno}"
        if not isinstance(d, dict):
            raise ReasoningManifestError(f"{where}: expected a JSON object (one task per line), got {type(d).__name__}")
        for name in ("key", "task_name", "family", "token_unit"):
            if not isinstance(d.get(name), str) or not d[name]:
                raise ReasoningManifestError(f"{where}: field {name!r} must be a non-empty string, got {d.get(name)!r}; "
                                             f"is this a `cuset data build` {REASONING_MANIFEST}?")
        if units and d["token_unit"] not in units:
            first = next(iter(units))
            raise ReasoningManifestError(f"{where}: token_unit {d['token_unit']!r} differs from {first!r} "
                                         f"(line {units[first]}); lengths in different units cannot be compared")
        units.setdefault(d["token_unit"], lineno)
        cands = d.get("candidates")
        if not isinstance(cands, list):
            raise ReasoningManifestError(f"{where}: field 'candidates' must be a list, got {cands!r}")
        for i, c in enumerate(cands):
            if not isinstance(c, dict) or not isinstance(c.get("status"), str):
                raise ReasoningManifestError(f"{where}: candidates[{i}] needs a string 'status' "
                                             f"(passed, wrong, compile_error, ...), got {c!r}")
            tok = c.get("reasoning_tokens")
            if tok is not None and (isinstance(tok, bool) or not isinstance(tok, int) or tok < 0):
                raise ReasoningManifestError(f"{where}: candidates[{i}].reasoning_tokens must be a non-negative "
                                             f"integer or null, got {tok!r}")
        records.append((d["key"], d["task_name"], d["family"], cands))
    label = _unique_names([(key, name) for key, name, _, _ in records])
    attempts = [Attempt(label[key], family, c.get("reasoning_tokens"), c["status"] == "passed")
                for key, _, family, cands in records for c in cands]
    return attempts, next(iter(units), "tokens")


def attempts_from_samples(samples: Iterable) -> list[Attempt]:
    """Evaluation SampleResults -> Attempts. INFRA_ERROR samples are left out: the
    evaluation's machinery failed, so they say nothing about the task (as in pass@k)."""
    from cuset.execute.result import Status

    kept = [s for s in samples if s.status is not Status.INFRA_ERROR]
    label = _unique_names([(str(s.task_id), s.task_name or str(s.task_id)) for s in kept])
    return [Attempt(label[str(s.task_id)], s.family or "", s.reasoning_tokens, s.status is Status.PASSED) for s in kept]


# ---- writers ------------------------------------------------------------------------

def _num(v: float | None, fmt: str = ".0f") -> str:
    return "n/a" if v is None else format(v, fmt)


def correlation_sentence(corr: Correlation | None, reason: str | None, unit: str, what: str = "tasks") -> str:
    """One plain sentence: rho, p, n, significance at 0.05 and the direction."""
    from cuset.analysis.plots import format_pvalue

    if corr is None:
        return f"No {what[:-1] if what.endswith('s') else what}-level rank correlation: {reason}."
    head = (f"Across {corr.n} {what}, Spearman rho between the mean reasoning length of passing answers ({unit}) "
            f"and the pass rate is {corr.rho:+.3f} (p = {format_pvalue(corr.p_value)}, n = {corr.n}, "
            f"{corr.p_method})")
    if corr.rho < 0:
        trend = f"{what} whose passing answers reason longer pass less often, as ConCuR's difficulty measure expects"
    elif corr.rho > 0:
        trend = f"{what} whose passing answers reason longer pass more often, the opposite of ConCuR's difficulty measure"
    else:
        trend = "there is no monotonic relation"
    if corr.significant:
        return f"{head}: significant at the 0.05 level; {trend}."
    return (f"{head}: not significant at the 0.05 level, so these data do not establish a relation"
            + (f" (in this sample, {trend})." if corr.rho else "."))


def difficulty_markdown(result: DifficultyResult, unit: str, *, title: str = "Task difficulty from reasoning length (ConCuR)",
                        level: int = 2, figure: str | None = None) -> str:
    h = "#" * level
    lines = [f"{h} {title}", "",
             f"{result.n_attempts} attempts at {len(result.tasks)} tasks in {len(result.families)} families; "
             f"reasoning lengths in {unit}"
             + (f"; {result.uncounted} attempts had no counted trace (in pass rates, not in lengths)" if result.uncounted else "")
             + ".", "",
             correlation_sentence(result.correlation, result.correlation_reason, unit), "",
             correlation_sentence(result.family_correlation, result.family_correlation_reason, unit, "families"), ""]
    if figure:
        lines += [f"![Reasoning length vs pass rate]({figure})", ""]
    lines += [f"{h}# Per family", "", "Attempts pooled over the family's tasks.", "",
              f"| family | tasks | attempts | passed | pass rate | mean reasoning of passing answers [{unit}] |",
              "|---|---:|---:|---:|---:|---:|"]
    for f in result.families:
        lines.append(f"| {inline(f.family)} | {f.tasks} | {f.attempts} | {f.passed} | {100 * f.pass_rate:.1f}% | {_num(f.mean_passing_tokens)} |")
    hardest = result.hardest()
    lines += ["", f"{h}# Hardest tasks by pass rate (top {len(hardest)})", "",
              f"| task | family | attempts | passed | pass rate | mean reasoning of passing answers [{unit}] | "
              f"mean reasoning of all answers [{unit}] |", "|---|---|---:|---:|---:|---:|---:|"]
    for t in hardest:
        lines.append(f"| {inline(t.task)} | {inline(t.family)} | {t.attempts} | {t.passed} | {100 * t.pass_rate:.1f}% | "
                     f"{_num(t.mean_passing_tokens)} | {_num(t.mean_tokens)} |")
    return "\n".join(lines) + "\n"


def rich_tables(result: DifficultyResult, unit: str) -> list:
    """The per-family table and the hardest tasks, for the terminal."""
    from rich.table import Table

    fam = Table(title=f"Difficulty by family ({len(result.families)} families, {len(result.tasks)} tasks)")
    for col in ("family", "tasks", "attempts", "passed", "pass rate", f"mean passing reasoning [{unit}]"):
        fam.add_column(col, justify="left" if col == "family" else "right")
    for f in result.families:
        fam.add_row(f.family, str(f.tasks), str(f.attempts), str(f.passed), f"{f.pass_rate:.1%}", _num(f.mean_passing_tokens))
    hard = Table(title=f"Hardest tasks by pass rate (top {min(TOP_HARDEST, len(result.tasks))})")
    for col in ("task", "family", "attempts", "passed", "pass rate", f"mean passing reasoning [{unit}]"):
        hard.add_column(col, justify="left" if col in ("task", "family") else "right")
    for t in result.hardest():
        hard.add_row(t.task, t.family, str(t.attempts), str(t.passed), f"{t.pass_rate:.1%}", _num(t.mean_passing_tokens))
    return [fam, hard]


def plot_difficulty(result: DifficultyResult, path: str | Path, unit: str) -> Path:
    """Scatter: one point per task with a passing answer, x = mean reasoning tokens of its
    passing answers, y = pass rate, coloured by family; rho and p in the title."""
    from matplotlib import colormaps

    from cuset.analysis.plots import _figure, _save, format_pvalue

    shown = [t for t in result.tasks if t.mean_passing_tokens is not None]
    families = [f for f, _ in Counter(t.family for t in shown).most_common()]
    coloured = families if len(families) <= MAX_FAMILY_COLOURS + 1 else families[:MAX_FAMILY_COLOURS]
    palette = colormaps["tab10" if len(coloured) <= 10 else "tab20"].colors
    fig = _figure(8.5, 5.2)
    ax = fig.add_subplot()
    groups = [(f, [t for t in shown if t.family == f], palette[i % len(palette)]) for i, f in enumerate(coloured)]
    rest = [t for t in shown if t.family not in coloured]
    if rest:
        groups.append((f"{len(families) - len(coloured)} other families", rest, "0.6"))
    for label, ts, color in groups:
        ax.scatter([t.mean_passing_tokens for t in ts], [t.pass_rate for t in ts], s=36, color=color, alpha=0.8,
                   edgecolors="white", linewidths=0.5, label=f"{label} ({len(ts)})")
    xs = [t.mean_passing_tokens for t in shown]
    if xs and min(xs) > 0 and max(xs) / min(xs) > 20:  # lengths spanning orders of magnitude
        ax.set_xscale("log")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel(f"Mean reasoning length of the task's passing answers  [{unit}]")
    ax.set_ylabel("Pass rate  [passing / all attempts, 0-1]")
    c = result.correlation
    stat = (f"Spearman rho = {c.rho:+.3f}, p = {format_pvalue(c.p_value)}, n = {c.n} tasks" if c
            else f"no correlation: {result.correlation_reason}")
    ax.set_title(f"Task difficulty (ConCuR): reasoning length of passing answers vs pass rate\n{stat}", fontsize=10)
    missing = len(result.tasks) - len(shown)
    if missing:  # tasks never passed (or passed only without a counted trace) have no x to draw at
        ax.text(0.99, 0.01, f"{missing} task(s) without a passing answer with a counted trace are not drawn",
                transform=ax.transAxes, ha="right", va="bottom", fontsize=8, color="0.3")
    ax.grid(alpha=0.3)
    if groups:
        ax.legend(title="family (tasks drawn)", fontsize=7, title_fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, path)


def write_difficulty(result: DifficultyResult, unit: str, out_dir: str | Path, *, stem: str = "difficulty",
                     extra: dict | None = None) -> list[Path]:
    """<stem>.png, <stem>.json ({"unit", **to_json(), **extra}) and <stem>.md in out_dir."""
    out = Path(out_dir)
    png = plot_difficulty(result, out / f"{stem}.png", unit)
    js = out / f"{stem}.json"
    atomic_write_text(js, json.dumps({"unit": unit, **(extra or {}), **result.to_json()}, indent=1))
    md = out / f"{stem}.md"
    atomic_write_text(md, difficulty_markdown(result, unit, figure=png.name))
    return [png, js, md]


def find_reasoning_manifest(run_dir: Path | None) -> Path | None:
    """The reasoning manifest a `cuset data build` run wrote, if it ran that stage."""
    path = run_dir / REASONING_MANIFEST if run_dir is not None else None
    return path if path is not None and path.is_file() else None


def difficulty_stats(reasoning_path: Path, out_dir: Path):
    """`cuset data stats`' difficulty part: (DifficultyResult, token unit, written paths) for a
    reasoning manifest; paths are difficulty.png/.json/.md in out_dir, none when the manifest
    holds no candidates."""
    attempts, unit = attempts_from_reasoning_manifest(reasoning_path)
    result = difficulty_table(attempts)
    if not attempts:
        return result, unit, []
    return result, unit, write_difficulty(result, unit, out_dir, extra={"source": str(reasoning_path)})
