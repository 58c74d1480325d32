"""Paired comparison of two methods on the same tasks: a hierarchical bootstrap over tasks and seeds.

    diff = paired_bootstrap(a, b)   # a, b: [seeds, tasks] per-task scores (e.g. function@1), same task order
    diff.delta, diff.low, diff.high, diff.p_value, diff.significant

Each resample draws the tasks with replacement (task difficulty is the main source of
variance, and both methods are scored on the same tasks, hence "paired") and, for each
side, its seeds with replacement (training-seed variance); the statistic is the mean over
the drawn tasks of (mean of B's drawn seeds - mean of A's drawn seeds). With one seed per
side this is the ordinary paired bootstrap over tasks. The interval is the percentile
interval; the two-sided p-value is twice the smaller tail of the bootstrap distribution
on either side of 0 (bounded below by 1 / resamples).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class PairedDifference:
    metric: str
    n_tasks: int
    n_seeds: tuple[int, int]   # (A, B)
    mean_a: float
    mean_b: float
    delta: float               # mean_b - mean_a
    low: float
    high: float
    p_value: float
    confidence: float

    @property
    def significant(self) -> bool:
        """The interval excludes 0 (at the interval's confidence level)."""
        return self.low > 0 or self.high < 0

    def to_json(self) -> dict:
        return {**asdict(self), "significant": self.significant}

    def sentence(self, name_a: str, name_b: str, scale: float = 100.0, unit: str = " points") -> str:
        level = round(100 * self.confidence)
        verdict = (f"significant at the {100 - level}% level" if self.significant
                   else f"not significant at the {100 - level}% level: the data cannot tell them apart")
        return (f"{self.metric}: {name_b} - {name_a} = {self.delta * scale:+.1f}{unit} "
                f"({level}% interval [{self.low * scale:+.1f}, {self.high * scale:+.1f}], p = {self.p_value:.3g}, "
                f"{self.n_tasks} tasks, {self.n_seeds[0]} vs {self.n_seeds[1]} seed(s)): {verdict}")


def paired_bootstrap(a: np.ndarray, b: np.ndarray, *, metric: str = "", n_resamples: int = 10_000,
                     confidence: float = 0.95, seed: int = 0) -> PairedDifference:
    """a: [seeds_a, tasks], b: [seeds_b, tasks] scores (1-D = one seed); columns are the same tasks."""
    a, b = np.atleast_2d(np.asarray(a, dtype=float)), np.atleast_2d(np.asarray(b, dtype=float))
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"paired comparison needs the same tasks on both sides: {a.shape[1]} vs {b.shape[1]} tasks")
    n_tasks = a.shape[1]
    if n_tasks < 2:
        raise ValueError(f"paired comparison needs at least 2 common tasks, got {n_tasks}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    rng = np.random.default_rng(seed)
    stats = np.empty(n_resamples)
    for start in range(0, n_resamples, 1000):  # in blocks: [block, tasks] index arrays stay small
        m = min(1000, n_resamples - start)
        tasks = rng.integers(0, n_tasks, size=(m, n_tasks))
        mean_a = _seed_means(a, tasks, rng)   # a's seeds drawn first: the stream of earlier releases
        stats[start:start + m] = (_seed_means(b, tasks, rng) - mean_a).mean(axis=1)
    alpha = 1 - confidence
    low, high = np.quantile(stats, [alpha / 2, 1 - alpha / 2])
    tail = min(np.mean(stats <= 0), np.mean(stats >= 0))
    p = float(min(1.0, max(2 * tail, 1.0 / n_resamples)))
    if np.all(stats == 0):
        p = 1.0
    return PairedDifference(metric, n_tasks, (a.shape[0], b.shape[0]), float(a.mean()), float(b.mean()),
                            float(b.mean() - a.mean()), float(low), float(high), p, confidence)


def _seed_means(x: np.ndarray, tasks: np.ndarray, rng) -> np.ndarray:
    """[m, tasks]: per drawn task, the mean of x's seeds drawn with replacement."""
    seeds = rng.integers(0, x.shape[0], size=(*tasks.shape, x.shape[0]))
    return x[seeds, tasks[:, :, None]].mean(axis=2)


@dataclass(frozen=True)
class MeanInterval:
    """A score averaged over tasks (and seeds) with its bootstrap percentile interval."""
    mean: float
    low: float
    high: float
    n_tasks: int
    n_seeds: int
    confidence: float

    def cell(self, scale: float = 100.0) -> str:
        """`12.5 [4.2, 20.8]` (percent by default)."""
        return f"{self.mean * scale:.1f} [{self.low * scale:.1f}, {self.high * scale:.1f}]"


def bootstrap_mean(x: np.ndarray, *, n_resamples: int = 10_000, confidence: float = 0.95,
                   seed: int = 0) -> MeanInterval:
    """x: [seeds, tasks] scores (1-D = one seed): the mean and its interval, resampling tasks
    and, within each drawn task, seeds (the same scheme as `paired_bootstrap`)."""
    x = np.atleast_2d(np.asarray(x, dtype=float))
    if x.shape[1] < 1:
        raise ValueError("an interval needs at least one task")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    rng = np.random.default_rng(seed)
    stats = np.concatenate([
        _seed_means(x, rng.integers(0, x.shape[1], size=(min(1000, n_resamples - start), x.shape[1])), rng).mean(axis=1)
        for start in range(0, n_resamples, 1000)])
    alpha = 1 - confidence
    low, high = np.quantile(stats, [alpha / 2, 1 - alpha / 2])
    return MeanInterval(float(x.mean()), float(low), float(high), x.shape[1], x.shape[0], confidence)


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
