"""Token-confidence statistics of the paper's section 3 (pure numpy/scipy).

Input: one `ScoredSample` per response, holding the teacher-forced confidence
p(y_t | x, y_<t) of each response token and the span kinds of that token. Output:
the two-sample KS test between CUDA-sensitive and CUDA-neutral tokens (Figure 1),
per-category statistics, and the low-confidence-window statistics of Figure 2
("low" = window mean below the corpus mean confidence of neutral tokens).
No model code here: `cuset.experiment.scoring` produces the samples.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from cuset.analysis.windows import Windows, true_runs, window_counts, window_means
from cuset.errors import CusetError


class ScoresError(CusetError, ValueError):
    """Token scores that cannot be read or analysed (a bad scores.jsonl line, no tokens of a group)."""


@dataclass(frozen=True, eq=False)
class ScoredSample:
    """Teacher-forced confidences of one response's tokens, with their span kinds."""

    sample_id: str
    confidences: np.ndarray                 # float, one per response token
    kinds: tuple[frozenset[str], ...]       # span kinds per token (empty = none)
    tokens: tuple[str, ...] = field(default=())  # token text, for figures (optional)

    def __post_init__(self):
        if len(self.kinds) != len(self.confidences):
            raise ValueError(f"sample {self.sample_id}: {len(self.confidences)} confidences but {len(self.kinds)} kind sets")
        if self.tokens and len(self.tokens) != len(self.confidences):
            raise ValueError(f"sample {self.sample_id}: {len(self.confidences)} confidences but {len(self.tokens)} tokens")

    def __len__(self) -> int:
        return len(self.kinds)

    def sensitive(self, sensitive_kinds: Iterable[str]) -> np.ndarray:
        """Boolean mask: token carries at least one of `sensitive_kinds`."""
        wanted = frozenset(sensitive_kinds)
        return np.fromiter((bool(k & wanted) for k in self.kinds), dtype=bool, count=len(self.kinds))


def split_by_sensitivity(samples: Sequence[ScoredSample], sensitive_kinds: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
    """All confidences of CUDA-sensitive tokens and of neutral tokens, pooled over samples."""
    kinds = frozenset(sensitive_kinds)
    sens, neut = [], []
    for s in samples:
        mask = s.sensitive(kinds)
        conf = np.asarray(s.confidences, dtype=np.float64)
        sens.append(conf[mask])
        neut.append(conf[~mask])
    cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0)
    return cat(sens), cat(neut)


@dataclass(frozen=True)
class KsResult:
    statistic: float
    pvalue: float
    n_sensitive: int
    n_neutral: int
    method: str = "scipy.stats.ks_2samp (two-sided)"


def ks_test(sensitive, neutral) -> KsResult:
    """Two-sample Kolmogorov-Smirnov test of the two confidence distributions."""
    from scipy.stats import ks_2samp

    a = np.asarray(sensitive, dtype=np.float64)
    b = np.asarray(neutral, dtype=np.float64)
    if a.size == 0 or b.size == 0:
        raise ScoresError(f"KS test needs tokens of both groups; got {a.size} CUDA-sensitive and {b.size} neutral")
    res = ks_2samp(a, b, alternative="two-sided")
    return KsResult(float(res.statistic), float(res.pvalue), int(a.size), int(b.size))


def ks_location(sensitive, neutral) -> tuple[float, float, float]:
    """(x, F_sensitive(x), F_neutral(x)) where the two empirical CDFs differ most.

    |F_sensitive(x) - F_neutral(x)| at that x is the KS statistic D; figures mark it.
    """
    a = np.sort(np.asarray(sensitive, dtype=np.float64))
    b = np.sort(np.asarray(neutral, dtype=np.float64))
    if a.size == 0 or b.size == 0:
        raise ValueError("KS location needs values in both groups")
    xs = np.concatenate([a, b])
    fa = np.searchsorted(a, xs, side="right") / a.size
    fb = np.searchsorted(b, xs, side="right") / b.size
    i = int(np.argmax(np.abs(fa - fb)))
    return float(xs[i]), float(fa[i]), float(fb[i])


def describe(values, threshold: float | None = None) -> dict:
    """Summary statistics of a set of confidences (NaN-free JSON)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return {"n": 0}
    q = np.quantile(v, [0.1, 0.25, 0.5, 0.75, 0.9])
    out = {"n": int(v.size), "mean": float(v.mean()), "std": float(v.std()),
           "p10": float(q[0]), "p25": float(q[1]), "median": float(q[2]), "p75": float(q[3]), "p90": float(q[4])}
    if threshold is not None:
        out["share_below_threshold"] = float((v < threshold).mean())
    return out


def reference_fit(samples: Sequence[ScoredSample], *, threshold: float, sensitive_kinds: Iterable[str],
                  unreachable: float = 1e-3) -> dict:
    """How closely a model fits reference responses, teacher-forced: NLL per token; the
    share of tokens at p <= threshold (those CuSeT's confidence mask and ProFit drop from
    the loss), overall and among CUDA-sensitive and neutral tokens, and their median p;
    the share of responses holding a token below `unreachable` (one the model will almost
    never sample, so it will almost never write that response)."""
    kinds = frozenset(sensitive_kinds)
    samples = [s for s in samples if len(s)]
    if not samples:
        return {"n_samples": 0, "n_tokens": 0}
    conf = np.concatenate([np.asarray(s.confidences, dtype=np.float64) for s in samples])
    sens = np.concatenate([s.sensitive(kinds) for s in samples])
    low = conf <= threshold
    share = lambda mask: float(low[mask].mean()) if mask.any() else None
    return {"n_samples": len(samples), "n_tokens": int(conf.size), "threshold": threshold,
            "nll": float(-np.log(np.clip(conf, 1e-12, 1.0)).mean()),
            "share_low": float(low.mean()), "share_low_sensitive": share(sens), "share_low_neutral": share(~sens),
            "median_p_low": float(np.median(conf[low])) if low.any() else None,
            "unreachable": unreachable,
            "share_samples_unreachable": float(np.mean([float(np.min(s.confidences)) < unreachable
                                                        for s in samples]))}


def category_stats(samples: Sequence[ScoredSample], categories: Iterable[str], threshold: float | None = None) -> dict[str, dict]:
    """Per span kind: statistics of the confidences of tokens carrying that kind.

    Kinds overlap (a `thread_index` token is also inside a `kernel_body`), so the
    counts do not add up to the total.
    """
    out = {}
    for kind in categories:
        vals = [np.asarray(s.confidences, dtype=np.float64)[s.sensitive((kind,))] for s in samples]
        out[kind] = describe(np.concatenate(vals) if vals else np.zeros(0), threshold)
    return out


@dataclass(frozen=True, eq=False)
class SampleWindows:
    """Windows of one sample classified against the low-confidence threshold."""

    sample_id: str
    windows: Windows
    low: np.ndarray              # bool per window: mean < threshold
    sensitive_count: np.ndarray  # CUDA-sensitive tokens inside each window

    @property
    def n_low(self) -> int:
        return int(self.low.sum())

    @property
    def low_regions(self) -> list[tuple[int, int]]:
        """Runs of consecutive low windows, as (first, last+1) window indices."""
        return true_runs(self.low)


def sample_windows(sample: ScoredSample, threshold: float, window: int, mode: str, sensitive_kinds: Iterable[str]) -> SampleWindows:
    w = window_means(sample.confidences, window, mode)
    return SampleWindows(sample.sample_id, w, w.means < threshold, window_counts(sample.sensitive(sensitive_kinds), w))


def _share(num: int, den: int) -> float | None:
    return None if den == 0 else num / den


def low_window_stats(per_sample: Sequence[SampleWindows]) -> dict:
    """Corpus statistics of Figure 2's caption, plus base rates to read them against.

    - share_samples_with_low_window: samples with >= 1 low window / samples (paper: 74.47%).
    - share_low_windows_overlapping_sensitive: low windows holding >= 1 CUDA-sensitive
      token / low windows, pooled over the corpus (paper: 91.18%).
    - share_windows_overlapping_sensitive: the same for all windows, the base rate; the
      low-window share is only informative relative to it.
    - share_low_windows_majority_sensitive: low windows with > half their tokens sensitive.
    - *_regions: the same counted over runs of consecutive low windows (with stride 1,
      neighbouring windows are nearly identical; a region is one stretch of code).
    """
    n_samples = len(per_sample)
    n_with_low = sum(1 for s in per_sample if s.n_low > 0)
    n_windows = sum(len(s.windows) for s in per_sample)
    n_win_sens = sum(int((s.sensitive_count > 0).sum()) for s in per_sample)
    n_low = sum(s.n_low for s in per_sample)
    n_low_sens = sum(int((s.sensitive_count[s.low] > 0).sum()) for s in per_sample)
    n_low_major = 0
    n_regions = n_regions_sens = 0
    for s in per_sample:
        sizes = (s.windows.ends - s.windows.starts)[s.low]
        n_low_major += int((2 * s.sensitive_count[s.low] > sizes).sum())
        for a, b in s.low_regions:
            n_regions += 1
            n_regions_sens += int((s.sensitive_count[a:b] > 0).any())
    return {
        "n_samples": n_samples,
        "n_samples_with_low_window": n_with_low,
        "share_samples_with_low_window": _share(n_with_low, n_samples),
        "n_windows": n_windows,
        "n_low_windows": n_low,
        "n_low_windows_overlapping_sensitive": n_low_sens,
        "share_low_windows_overlapping_sensitive": _share(n_low_sens, n_low),
        "share_windows_overlapping_sensitive": _share(n_win_sens, n_windows),
        "share_low_windows_majority_sensitive": _share(n_low_major, n_low),
        "n_low_regions": n_regions,
        "n_low_regions_overlapping_sensitive": n_regions_sens,
        "share_low_regions_overlapping_sensitive": _share(n_regions_sens, n_regions),
    }


def reflected_kde(values, grid, *, max_points: int = 20000, seed: int = 0) -> np.ndarray:
    """Gaussian KDE of values in [0, 1], reflected at both bounds.

    Confidences pile up at 1.0; a plain KDE would leak density past the bound and
    dip right where the mass is. Reflection keeps the estimate a density on [0, 1].
    More than `max_points` values are subsampled (seeded) to keep it fast.
    """
    from scipy.stats import gaussian_kde

    v = np.clip(np.asarray(values, dtype=np.float64), 0.0, 1.0)
    g = np.asarray(grid, dtype=np.float64)
    if v.size < 2 or np.ptp(v) == 0:
        raise ValueError(f"density needs at least 2 distinct values, got {v.size} value(s)")
    if v.size > max_points:
        v = np.random.default_rng(seed).choice(v, size=max_points, replace=False)
    kde = gaussian_kde(v)
    bw = kde.factor * v.std(ddof=1)  # bandwidth of the unreflected estimate
    reflected = gaussian_kde(np.concatenate([v, -v, 2.0 - v]), bw_method=bw / np.concatenate([v, -v, 2.0 - v]).std(ddof=1))
    return 3.0 * reflected(g)
