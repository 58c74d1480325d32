"""Per-step training metrics, summed over micro-batches and data-parallel ranks.

Each micro-batch reports the objective it backpropagated plus the statistics of
`cuset.losses.compute_loss` (plain NLL, confidence-kept fraction, CUDA-mask
fraction, sample weights). A logged step combines them the way the optimizer
step does: token statistics weighted by the micro-batch's target tokens, sample
weights by its samples, min/max over everything, counts summed over ranks.
"""

from __future__ import annotations

import math
import time

import torch

TOKEN_WEIGHTED = ("nll", "conf_kept_frac", "dropped_frac", "cuda_frac")
SUMS = ("objective", "targets", "samples", "input_tokens", "w_sum", *(f"{k}_sum" for k in TOKEN_WEIGHTED))


def _value(x) -> torch.Tensor:
    """A 0-d float64 tensor, left on its device so accumulating never waits on a GPU."""
    if torch.is_tensor(x):
        return x.detach().reshape(()).to(torch.float32 if x.device.type == "mps" else torch.float64)
    return torch.tensor(float(x), dtype=torch.float64)


class StepMetrics:
    """Accumulates micro-batch statistics between two log events."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.sums: dict[str, torch.Tensor] = {}
        self.w_min: torch.Tensor | None = None
        self.w_max: torch.Tensor | None = None
        self.steps = 0
        self.since = time.perf_counter()

    def new_step(self) -> None:
        """An optimizer step begins (its micro-batches follow)."""
        self.steps += 1

    def _add(self, key: str, value) -> None:
        v = _value(value)
        self.sums[key] = self.sums[key] + v.to(self.sums[key]) if key in self.sums else v

    def add(self, objective, metrics: dict, *, samples: int, input_tokens) -> None:
        """One micro-batch: the loss it backpropagated and compute_loss's metrics."""
        targets = _value(metrics["n_tokens"])
        self._add("objective", objective)
        self._add("targets", targets)
        self._add("samples", metrics.get("n_samples", samples))
        self._add("input_tokens", input_tokens)
        for key in TOKEN_WEIGHTED:
            value = _value(metrics[key])
            self._add(f"{key}_sum", value * targets.to(value))
        self._add("w_sum", _value(metrics["w_mean"]) * _value(metrics.get("n_samples", samples)).to(_value(metrics["w_mean"])))
        lo, hi = _value(metrics["w_min"]), _value(metrics["w_max"])
        self.w_min = lo if self.w_min is None else torch.minimum(self.w_min, lo.to(self.w_min))
        self.w_max = hi if self.w_max is None else torch.maximum(self.w_max, hi.to(self.w_max))

    def summary(self, *, world_size: int = 1, device=None) -> dict[str, float]:
        """Metrics of the steps since the last reset, reduced over ranks (collective when distributed)."""
        if not self.sums:
            return {}
        device = device or next(iter(self.sums.values())).device
        dtype = torch.float32 if device.type == "mps" else torch.float64
        sums = torch.stack([self.sums.get(k, torch.zeros(())).to(device, dtype) for k in SUMS])
        extremes = torch.stack([self.w_min, -self.w_max]).to(sums)
        if world_size > 1 and torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(sums, op=torch.distributed.ReduceOp.SUM)
            torch.distributed.all_reduce(extremes, op=torch.distributed.ReduceOp.MIN)
        s = dict(zip(SUMS, sums.tolist()))
        elapsed = max(time.perf_counter() - self.since, 1e-9)
        targets = s["targets"]
        out = {
            # Each rank's loss is already normalised by the global token count and scaled
            # by world_size for DDP's gradient mean, so the rank mean is the step objective.
            "objective": s["objective"] / world_size / max(self.steps, 1),
            **{k: (s[f"{k}_sum"] / targets if targets else math.nan) for k in TOKEN_WEIGHTED},
            "w_mean": s["w_sum"] / s["samples"] if s["samples"] else math.nan,
            "w_min": extremes[0].item(),
            "w_max": -extremes[1].item(),
            "target_tokens": targets,
            "tokens_per_s": s["input_tokens"] / elapsed,
        }
        self.reset()
        return out
