"""Scores of methods over tasks and training runs: intervals and paired comparisons.

    d = paired_difference(a, b)   # a, b: [runs, tasks] per-task scores (e.g. function@1), same task order
    d.delta, d.low, d.high, d.p_value, d.significant
    m = mean_interval(x)          # one method: its mean over runs and tasks with an interval
    c = contrast([("A0", a0, 1), ("B0", b0, -1), ("A1", a1, -1), ("B1", b1, 1)])   # a 2x2's interaction

The design behind every study here: each training run (seed) of a method answers the same
tasks, so runs and tasks are *crossed*, and runs are *nested* in methods. The score of run s
of method m on task t is modelled as

    y[m, s, t] = mu_m + a_t + b_mt + r_ms + e_mst

with random task effects (a_t, and the task-by-method interaction b_mt), random run effects
r_ms (variance sr2_m, per method) and residuals e_mst (run-by-task interaction and sampling
noise, variance se2_m). A run answers all tasks, so its effect does not average out over
tasks: Var(mean of method m) carries sr2_m / S_m however many tasks there are. Comparing B
with A on the same tasks cancels a_t ("paired") and leaves

    Var(delta) = Var_t(d_t) / T  +  sr2_A / S_A  +  sr2_B / S_B,   d_t = mean_s y[B,s,t] - mean_s y[A,s,t]

(the first term already holds the interaction and residual parts). The components are
method-of-moments (two-way ANOVA) estimates within each method: the run mean square
MS_run = T var_s(run means) estimates T sr2 + se2, the run-by-task residual mean square
MS_e estimates se2, so sr2 = max(0, MS_run - MS_e) / T. The interval is Student's t with
Satterthwaite's degrees of freedom for that sum of mean squares, and the p-value is the
same t-test of "no difference" (so p < alpha exactly when the interval excludes 0).

Why not a bootstrap: with the 2-4 runs a study can afford, resampling runs underestimates
their variance by (S-1)/S and its percentile interval can never be wider than the runs
themselves; the t quantile with few degrees of freedom is what widens an interval that
rests on two runs. `tests/analysis/test_paired.py` checks false-positive rate and coverage
on simulated studies with a known run effect.

With one run on a side its run variance cannot be estimated: the other side's estimate
stands in (equal run variance assumed) when it has one, else the interval covers task
sampling only; `run_variance` says which. An interval is not reported where it is
degenerate (no variation at all, e.g. every run fails every task): low/high are None.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np
from scipy import stats

P_FLOOR = 1e-4   # p-values below are printed as "p < 0.0001": the t tail that far out is not a fact about the data

# How the run-to-run variance entered an interval.
RUN_VARIANCE = {
    "estimated": "run-to-run variance estimated from each side's runs",
    "borrowed": "one side has a single run: the other side's run-to-run variance stands in for it",
    "not_estimated": "one run per side: run-to-run variance not estimated, the interval covers task sampling only",
}


@dataclass(frozen=True)
class _Components:
    estimate: float
    variance: float
    df: float
    run_variance: str


def _run_variance(y: np.ndarray) -> tuple[float, float]:
    """[runs >= 2, tasks] -> (sr2, its Satterthwaite df): the run-to-run variance of one method.

    Two-way layout without replication: MS_run = T var_s(run means) estimates T sr2 + se2 and the
    run-by-task residual mean square MS_e estimates se2, so sr2 = (MS_run - MS_e) / T, clipped at 0."""
    s, t = y.shape
    run_means, task_means, grand = y.mean(axis=1), y.mean(axis=0), y.mean()
    ms_run = t * float(np.var(run_means, ddof=1))
    resid = y - run_means[:, None] - task_means[None, :] + grand
    ms_e = float((resid ** 2).sum()) / ((s - 1) * (t - 1))
    if ms_run <= ms_e:
        return 0.0, float("inf")
    return (ms_run - ms_e) / t, (ms_run - ms_e) ** 2 / (ms_run ** 2 / (s - 1) + ms_e ** 2 / ((s - 1) * (t - 1)))


def _combine(groups: Sequence[tuple[np.ndarray, float]]) -> _Components:
    """sum_g sign_g * mean(y_g) with its variance and Satterthwaite df.

    groups: ([runs, tasks] scores, sign); every group has the same task columns."""
    n_tasks = groups[0][0].shape[1]
    per_task = sum(sign * y.mean(axis=0) for y, sign in groups)
    terms = [(float(np.var(per_task, ddof=1)) / n_tasks, n_tasks - 1)]   # (variance term, its df)
    runs = [y.shape[0] for y, _ in groups]
    estimated = [_run_variance(y) for y, _ in groups if y.shape[0] >= 2]
    if len(estimated) == len(groups):
        kind = "estimated"
        terms += [(sr2 / s, df) for (sr2, df), s in zip(estimated, runs)]
    elif estimated:
        # equal run variance assumed: the estimated sides' mean stands in for the single-run sides;
        # one estimate then enters every side, so it is one term (correlated parts are not summed as independent)
        kind = "borrowed"
        sr2 = float(np.mean([v for v, _ in estimated]))
        terms.append((sr2 * sum(1 / s for s in runs), sum(df for _, df in estimated)))
    else:
        kind = "not_estimated"
    variance = sum(v for v, _ in terms)
    denom = sum(v ** 2 / df for v, df in terms if v > 0 and df > 0)
    df = variance ** 2 / denom if denom > 0 else float("inf")
    return _Components(float(per_task.mean()), variance, df, kind)


def _t_interval(c: _Components, confidence: float, bounds: tuple[float, float]):
    """(low, high, p) with low/high None where the variance is 0 (a degenerate interval)."""
    if c.variance <= 0:
        return None, None, (1.0 if c.estimate == 0 else None)
    se = float(np.sqrt(c.variance))
    q = float(stats.t.ppf(0.5 + confidence / 2, c.df))
    low, high = max(bounds[0], c.estimate - q * se), min(bounds[1], c.estimate + q * se)
    p = float(2 * stats.t.sf(abs(c.estimate) / se, c.df))
    return low, high, p


def _as_runs(x) -> np.ndarray:
    return np.atleast_2d(np.asarray(x, dtype=float))


def format_p(p: float | None) -> str:
    """`p = 0.012`, `p < 0.0001` (a bound, not a value), or `p: no test` where no test is possible."""
    if p is None:
        return "p: no test (no variation)"
    return f"p < {P_FLOOR:g}" if p < P_FLOOR else f"p = {p:.2g}" if p < 0.01 else f"p = {p:.3f}".rstrip("0").rstrip(".")


@dataclass(frozen=True)
class PairedDifference:
    metric: str
    n_tasks: int
    n_seeds: tuple[int, int]   # (A, B): training runs on each side
    mean_a: float
    mean_b: float
    delta: float               # mean_b - mean_a
    low: float | None          # None: no variation, no interval
    high: float | None
    p_value: float | None      # t-test of no difference; None where there is nothing to test against
    confidence: float
    df: float
    run_variance: str          # a key of RUN_VARIANCE
    p_holm: float | None = None  # set by `holm_adjust` when several comparisons share a report

    @property
    def significant(self) -> bool:
        """The interval excludes 0 (equivalently p < 1 - confidence), Holm-adjusted where set."""
        p = self.p_holm if self.p_holm is not None else self.p_value
        return p is not None and p < 1 - self.confidence

    def to_json(self) -> dict:
        return {**asdict(self), "significant": self.significant}

    def interval(self, scale: float = 100.0) -> str:
        if self.low is None:
            return "no interval: no variation over tasks and runs"
        return f"{round(100 * self.confidence)}% interval [{self.low * scale:+.1f}, {self.high * scale:+.1f}]"

    def sentence(self, name_a: str, name_b: str, scale: float = 100.0, unit: str = " points") -> str:
        level = 100 - round(100 * self.confidence)
        p = format_p(self.p_value) + (f", Holm-adjusted {format_p(self.p_holm)[2:]}" if self.p_holm is not None else "")
        verdict = ("no test possible: every task and run gives the same difference" if self.p_value is None
                   else f"significant at the {level}% level" if self.significant
                   else f"not significant at the {level}% level: the data cannot tell them apart")
        caveat = "" if self.run_variance == "estimated" else f"; {RUN_VARIANCE[self.run_variance]}"
        return (f"{self.metric}: {name_b} - {name_a} = {self.delta * scale:+.1f}{unit} ({self.interval(scale)}, {p}, "
                f"{self.n_tasks} tasks, {self.n_seeds[0]} vs {self.n_seeds[1]} run(s){caveat}): {verdict}")


def paired_difference(a, b, *, metric: str = "", confidence: float = 0.95) -> PairedDifference:
    """a: [runs_a, tasks], b: [runs_b, tasks] scores (1-D = one run); columns are the same tasks."""
    a, b = _as_runs(a), _as_runs(b)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"paired comparison needs the same tasks on both sides: {a.shape[1]} vs {b.shape[1]} tasks")
    if a.shape[1] < 2:
        raise ValueError(f"paired comparison needs at least 2 common tasks, got {a.shape[1]}")
    _check_confidence(confidence)
    c = _combine([(a, -1.0), (b, 1.0)])
    low, high, p = _t_interval(c, confidence, (-1.0, 1.0) if _unit(a, b) else (-np.inf, np.inf))
    return PairedDifference(metric, a.shape[1], (a.shape[0], b.shape[0]), float(a.mean()), float(b.mean()),
                            c.estimate, low, high, p, confidence, c.df, c.run_variance)


@dataclass(frozen=True)
class Contrast:
    """sum_g coefficient_g * mean(method g) over the same tasks, with its interval: e.g. a 2x2's
    interaction (B1 - A1) - (B0 - A0), whose coefficients are +1, -1, -1, +1. Each method's
    run variance enters as in a paired difference (which is the contrast -A + B)."""
    metric: str
    terms: tuple[tuple[str, float], ...]   # (method, coefficient)
    n_tasks: int
    n_seeds: tuple[int, ...]               # runs per method, in the terms' order
    estimate: float
    low: float | None                      # None: no variation, no interval
    high: float | None
    p_value: float | None                  # t-test of a zero contrast
    confidence: float
    df: float
    run_variance: str                      # a key of RUN_VARIANCE

    @property
    def significant(self) -> bool:
        return self.p_value is not None and self.p_value < 1 - self.confidence

    def to_json(self) -> dict:
        return {**asdict(self), "significant": self.significant}

    def sentence(self, label: str, scale: float = 100.0, unit: str = " points") -> str:
        level = 100 - round(100 * self.confidence)
        interval = ("no interval: no variation over tasks and runs" if self.low is None else
                    f"{round(100 * self.confidence)}% interval [{self.low * scale:+.1f}, {self.high * scale:+.1f}]")
        verdict = ("no test possible: every task and run gives the same value" if self.p_value is None
                   else f"significant at the {level}% level" if self.significant
                   else f"not significant at the {level}% level: the data cannot tell it from 0")
        caveat = "" if self.run_variance == "estimated" else f"; {RUN_VARIANCE[self.run_variance]}"
        runs = " / ".join(str(n) for n in self.n_seeds)
        return (f"{self.metric}: {label} = {self.estimate * scale:+.1f}{unit} ({interval}, {format_p(self.p_value)}, "
                f"{self.n_tasks} tasks, {runs} run(s){caveat}): {verdict}")


def contrast(groups: Sequence[tuple[str, object, float]], *, metric: str = "", confidence: float = 0.95) -> Contrast:
    """groups: (method, [runs, tasks] scores, coefficient); columns are the same tasks in every group.
    Scores in [0, 1] bound the interval by the coefficients' negative and positive sums."""
    named = [(name, _as_runs(y), float(c)) for name, y, c in groups]
    if len({y.shape[1] for _, y, _ in named}) != 1:
        raise ValueError("a contrast needs the same tasks in every group: "
                         + ", ".join(f"{n} {y.shape[1]}" for n, y, _ in named))
    if named[0][1].shape[1] < 2:
        raise ValueError(f"a contrast needs at least 2 common tasks, got {named[0][1].shape[1]}")
    _check_confidence(confidence)
    c = _combine([(y, coefficient) for _, y, coefficient in named])
    unit = _unit(*(y for _, y, _ in named))
    bounds = ((sum(min(0.0, k) for *_, k in named), sum(max(0.0, k) for *_, k in named)) if unit
              else (-np.inf, np.inf))
    low, high, p = _t_interval(c, confidence, bounds)
    return Contrast(metric, tuple((n, k) for n, _, k in named), named[0][1].shape[1],
                    tuple(y.shape[0] for _, y, _ in named), c.estimate, low, high, p, confidence, c.df, c.run_variance)


@dataclass(frozen=True)
class MeanInterval:
    """A score averaged over tasks and runs with its t interval (tasks and runs as random effects)."""
    mean: float
    low: float | None
    high: float | None
    n_tasks: int
    n_seeds: int
    confidence: float
    run_variance: str

    def cell(self, scale: float = 100.0) -> str:
        """`12.5 [4.2, 20.8]` (percent by default); `0.0 (no variation)` where no interval exists."""
        if self.low is None:
            return f"{self.mean * scale:.1f} (no variation)"
        return f"{self.mean * scale:.1f} [{self.low * scale:.1f}, {self.high * scale:.1f}]"


def mean_interval(x, *, confidence: float = 0.95) -> MeanInterval:
    """x: [runs, tasks] scores (1-D = one run): the mean and its interval over tasks and runs.
    Scores in [0, 1] (pass rates) get an interval clipped to [0, 1]."""
    x = _as_runs(x)
    if x.shape[1] < 2:
        raise ValueError(f"an interval needs at least 2 tasks, got {x.shape[1]}")
    _check_confidence(confidence)
    c = _combine([(x, 1.0)])
    low, high, _ = _t_interval(c, confidence, (0.0, 1.0) if _unit(x) else (-np.inf, np.inf))
    return MeanInterval(c.estimate, low, high, x.shape[1], x.shape[0], confidence, c.run_variance)


def holm_adjust(diffs: Sequence[PairedDifference]) -> list[PairedDifference]:
    """Holm's step-down adjustment over a family of comparisons (same order back)."""
    from dataclasses import replace

    tested = sorted((d.p_value, i) for i, d in enumerate(diffs) if d.p_value is not None)
    m, running, adjusted = len(tested), 0.0, {}
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return [replace(d, p_holm=adjusted.get(i)) for i, d in enumerate(diffs)]


def _unit(*xs: np.ndarray) -> bool:
    return all(x.size and x.min() >= 0 and x.max() <= 1 for x in xs)


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def compare_task_scores(runs_a: Sequence[dict[str, float | None]], runs_b: Sequence[dict[str, float | None]], *,
                        metric: str = "") -> PairedDifference | None:
    """B - A over the tasks every run of both scored ({task: score} per run); None below 2 such tasks."""
    tasks = common_tasks([*runs_a, *runs_b])
    if len(tasks) < 2:
        return None
    return paired_difference(task_matrix(runs_a, tasks), task_matrix(runs_b, tasks), metric=metric)


def contrast_of_task_scores(groups: Sequence[tuple[str, Sequence[dict[str, float | None]], float]], *,
                            metric: str = "") -> Contrast | None:
    """`contrast` over the tasks every run of every group scored ((method, [{task: score} per run],
    coefficient) per group); None below 2 such tasks."""
    tasks = common_tasks([run for _, runs, _ in groups for run in runs])
    if len(tasks) < 2:
        return None
    return contrast([(name, task_matrix(runs, tasks), k) for name, runs, k in groups], metric=metric)


def interval_of_task_scores(runs: Sequence[dict[str, float | None]]) -> MeanInterval | None:
    """One method's mean and interval over the tasks all its runs scored; None below 2 such tasks."""
    tasks = common_tasks(runs)
    return mean_interval(task_matrix(runs, tasks)) if len(tasks) >= 2 else None


def task_matrix(per_run_tasks: Sequence[dict[str, float | None]], task_ids: Sequence[str]) -> np.ndarray:
    """[runs, tasks] scores of the given tasks (each run must score every one of them)."""
    return np.array([[float(tasks[t]) for t in task_ids] for tasks in per_run_tasks])


def common_tasks(per_run_tasks: Sequence[dict[str, float | None]]) -> list[str]:
    """Task ids every run scored (a None score, e.g. pass@3 of a task with fewer samples, is not a score)."""
    ids = None
    for tasks in per_run_tasks:
        scored = {t for t, v in tasks.items() if v is not None}
        ids = scored if ids is None else ids & scored
    return sorted(ids or ())
