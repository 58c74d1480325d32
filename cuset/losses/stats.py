"""`TokenStats`: the per-target-token tensors every objective is a function of.

One entry per *target* token (label != -100, after the causal shift), flattened
over the batch in row-major order, so position j of every field describes the
same token.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch


@dataclass(frozen=True)
class TokenStats:
    logp: torch.Tensor  # [N] log p_theta(y_t | ...), differentiable
    segment: torch.Tensor  # [N] int64 sample id; windows and sample weights never cross ids
    cuda: torch.Tensor  # [N] float, 1.0 where the target token lies in a kernel body / launch config
    entropy_topk: torch.Tensor | None = None  # [N] entropy of softmax over the top-k logits (no grad)
    kl: torch.Tensor | None = None  # [N] KL(pi_ref || pi_theta) over the full vocab, grad through policy only
    # [N] per-token loss weight (e.g. data.reasoning_weight on reasoning-trace tokens), None = 1 everywhere;
    # it scales each token's coefficients, never the statistics that windows and filters read
    weight: torch.Tensor | None = None

    def __post_init__(self):
        n = self.logp.shape
        for name in ("segment", "cuda", "entropy_topk", "kl", "weight"):
            value = getattr(self, name)
            if value is not None and value.shape != n:
                raise ValueError(f"TokenStats.{name} has shape {tuple(value.shape)}, expected {tuple(n)} like logp")

    @property
    def n_tokens(self) -> int:
        return int(self.logp.numel())

    def detached(self) -> "TokenStats":
        """The same statistics with every gradient path cut (sg(.) in the paper)."""
        return replace(
            self,
            logp=self.logp.detach(),
            kl=None if self.kl is None else self.kl.detach(),
            entropy_topk=None if self.entropy_topk is None else self.entropy_topk.detach(),
        )

    def select(self, rows: slice | torch.Tensor) -> "TokenStats":
        """The statistics of a subset of tokens (used for one chunk of the LM head)."""
        pick = lambda t: None if t is None else t[rows]  # noqa: E731
        return TokenStats(pick(self.logp), pick(self.segment), pick(self.cuda), pick(self.entropy_topk), pick(self.kl),
                          pick(self.weight))
