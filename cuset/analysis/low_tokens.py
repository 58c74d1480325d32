"""What the confidence mask would drop on a base: of the target tokens at p <= tau, the shares that
are CUDA-sensitive, neutral and replaceable (pure numpy).

The mask's premise is that a token the model finds unlikely is replaceable (a name, a comment, a
way of writing the same thing), so dropping it costs nothing. `low_token_shares` measures how far
that holds on a base's fine-tuning targets: a token is replaceable when one of its characters lies
in a range `cuset.curation.variation.replaceable_ranges` marks (function names, whole-line
comments, indentation), CUDA-sensitive when it carries one of the CUDA mask's span kinds.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def touches(token_ranges: Sequence[tuple[int, int]], ranges: Sequence[tuple[int, int]]) -> np.ndarray:
    """Per token [a, b): does one of its characters lie in one of `ranges` (each [start, end))?
    Empty tokens (a == b) never do."""
    tokens = np.asarray(token_ranges, dtype=np.int64).reshape(-1, 2)
    hit = np.zeros(len(tokens), dtype=bool)
    for start, end in ranges:
        if end > start:
            hit |= (tokens[:, 0] < end) & (tokens[:, 1] > start) & (tokens[:, 1] > tokens[:, 0])
    return hit


def _share(num: int, den: int) -> float | None:
    return num / den if den else None


def low_token_shares(confidences: np.ndarray, sensitive: np.ndarray, replaceable: np.ndarray, *, tau: float) -> dict:
    """Pooled over every scored target token: how many are at p <= tau, and of those the shares that
    are CUDA-sensitive, neutral (the rest) and replaceable (which may be either); also the share of
    replaceable tokens that are low."""
    p = np.asarray(confidences, dtype=np.float64)
    sensitive, replaceable = np.asarray(sensitive, dtype=bool), np.asarray(replaceable, dtype=bool)
    if not p.shape == sensitive.shape == replaceable.shape:
        raise ValueError(f"{p.size} confidences, {sensitive.size} sensitivity flags and {replaceable.size} "
                         "replaceability flags: one of each per token")
    low = p <= tau
    n_low = int(low.sum())
    return {"tau": tau, "n_tokens": int(p.size), "n_low": n_low, "share_low": _share(n_low, p.size),
            "n_replaceable": int(replaceable.sum()),
            "low_sensitive": _share(int((low & sensitive).sum()), n_low),
            "low_neutral": _share(int((low & ~sensitive).sum()), n_low),
            "low_replaceable": _share(int((low & replaceable).sum()), n_low),
            "replaceable_low": _share(int((low & replaceable).sum()), int(replaceable.sum()))}
