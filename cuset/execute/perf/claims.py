"""What a timing run may say about itself, and how the parent reads it.

The candidate's forward runs in the process that times it (CUDA events live in the
process that owns the CUDA context), so its timing record is the candidate's word,
read like its verdict (cuset.execute.kernelbench.claims): a JSON object of known
fields, every trial time a finite number, exactly the trials asked for, none shorter
than a kernel launch can take, and all of them together no longer than the parent's
own clock saw the run take. What fails a check is not believed: the sample keeps
its verdict and gets no time (`perf.status = "unbelievable"`), never a speedup.
"""

from __future__ import annotations

import math

MIN_TRIAL_MS = 1e-3   # 1 us: below one kernel launch's latency on any GPU


class UnbelievableTiming(ValueError):
    """A timing record the parent cannot take at its word (named in the message)."""


def checked_times(record, key: str, trials: int, wall_seconds: float) -> list[float]:
    """The `trials` times (ms) under `key` of a timing run's record, if believable."""
    if not isinstance(record, dict):
        raise UnbelievableTiming(f"the timing record is a JSON {type(record).__name__}, not an object")
    times = record.get(key)
    if not isinstance(times, list) or len(times) != trials:
        got = len(times) if isinstance(times, list) else type(times).__name__
        raise UnbelievableTiming(f"{key}: {got} trial times where {trials} were run")
    for i, t in enumerate(times):
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
            raise UnbelievableTiming(f"{key}[{i}] = {t!r} is not a finite number")
        if t < MIN_TRIAL_MS:
            raise UnbelievableTiming(f"{key}[{i}] = {t:g} ms is shorter than a kernel launch ({MIN_TRIAL_MS:g} ms)")
    total = sum(times) / 1e3
    if total > wall_seconds:
        raise UnbelievableTiming(f"{key}: the trials add up to {total:.3f} s, longer than the whole run took by "
                                 f"the parent's clock ({wall_seconds:.3f} s)")
    return [float(t) for t in times]
