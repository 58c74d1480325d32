"""The training objectives (CuSeT and its baselines), each a pure function of `TokenStats`.

Every objective here is linear in the target log-probabilities and the KL term
with stop-gradient coefficients:

    loss_sum = sum_t  s_n(t) * ( -a_t * logp_t + b_t * kl_t )

where a_t, b_t depend only on token t's own detached statistics (its confidence,
top-k entropy, CUDA flag) and s_n is one detached number per sample (CuSeT's
region weight w_n, times 1/T_n for `reduction=sample_mean`). Keeping the two
parts apart is what lets the chunked LM head fold a_t, b_t into its single pass
(`cuset.losses.head`) while s_n, which needs the whole sample, is applied after.

`loss_sum` is not yet divided by anything: `compute_loss` divides it by the
number of supervised tokens (or samples) in the whole optimizer step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from cuset.losses.config import LOSS_NAMES, LossConfig, unknown_loss_message
from cuset.losses.segments import Runs, segment_min, segment_runs, window_confidence
from cuset.losses.stats import TokenStats

# EAFT divides the top-20 entropy by 3.0 (about ln 20, its maximum) in its official code.
EAFT_ENTROPY_SCALE = 3.0

TokenCoefs = Callable[[TokenStats, LossConfig], tuple[torch.Tensor, "torch.Tensor | None"]]
SampleWeights = Callable[[TokenStats, Runs, LossConfig], torch.Tensor]


@dataclass(frozen=True)
class Objective:
    """One objective: local token coefficients (a, b), optional per-sample weights."""

    name: str
    summary: str
    token_coefs: TokenCoefs  # detached stats of any subset of tokens -> (a [n], b [n] or None)
    sample_weights: SampleWeights | None = None  # detached stats -> w [S], one per run
    needs_entropy: bool = False
    needs_kl: Callable[[LossConfig], bool] = lambda cfg: False
    # which tokens pass the objective's own confidence filter (logged as conf_kept_frac);
    # None: CuSeT's p > tau, logged for comparison only
    confidence_filter: Callable[[TokenStats, LossConfig], torch.Tensor] | None = None

    def __call__(self, stats: TokenStats, cfg: LossConfig) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """(loss_sum, metrics) with gradients flowing through `stats.logp` and `stats.kl`."""
        plain = stats.detached()
        a, b = self.coefs(plain, cfg)
        terms = -a * stats.logp
        if b is not None:
            terms = terms + b * stats.kl
        return self.reduce(terms, plain, cfg)

    def coefs(self, plain: TokenStats, cfg: LossConfig) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self.needs_entropy and plain.entropy_topk is None:
            raise ValueError(f"loss {self.name!r} needs top-{cfg.eaft_topk} entropies: "
                             "call chunked_token_stats(..., need_entropy_topk=k)")
        if self.needs_kl(cfg) and plain.kl is None:
            raise ValueError(f"loss {self.name!r} needs KL to the reference: pass ref_hidden to chunked_token_stats")
        a, b = self.token_coefs(plain, cfg)
        if plain.weight is not None:  # a per-token loss weight scales both coefficients alike
            w = plain.weight.to(a.dtype)
            a, b = a * w, (None if b is None else b * w)
        return a, b

    def reduce(self, terms: torch.Tensor, plain: TokenStats, cfg: LossConfig, *,
               weight_mean: torch.Tensor | float | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Sum per-token loss terms with the per-sample scales; `plain` are the detached stats.
        `weight_mean`: the mean w_n of the optimizer step (cfg.weight_norm; None: these samples' own)."""
        runs = segment_runs(plain.segment)
        scale = self.sample_scale(plain, runs, cfg, weight_mean=weight_mean)
        loss_sum = (scale[runs.index] * terms).sum() if terms.numel() else terms.sum()
        return loss_sum, self.metrics(plain, runs, cfg)

    def sample_scale(self, plain: TokenStats, runs: Runs, cfg: LossConfig, *,
                     weight_mean: torch.Tensor | float | None = None) -> torch.Tensor:
        """[S] detached factor of each sample: w_n (over the step's mean w_n with cfg.weight_norm),
        divided by T_n for reduction=sample_mean."""
        weights = self.weights(plain, runs, cfg)
        if cfg.weight_norm and self.sample_weights is not None and weights.numel():
            mean = weights.mean() if weight_mean is None else torch.as_tensor(weight_mean).to(weights)
            # mean 0: every w_n of the step is 0 (weights are >= 0), and stays 0
            weights = weights / mean if bool(mean > 0) else weights
        if cfg.reduction == "sample_mean":
            weights = weights / runs.length.to(weights.dtype)
        return weights

    def weights(self, plain: TokenStats, runs: Runs, cfg: LossConfig) -> torch.Tensor:
        if self.sample_weights is None:
            return torch.ones(runs.count, dtype=plain.logp.dtype, device=plain.logp.device)
        return self.sample_weights(plain, runs, cfg).detach()

    def metrics(self, plain: TokenStats, runs: Runs, cfg: LossConfig) -> dict[str, torch.Tensor]:
        p = plain.logp.exp()
        w = self.weights(plain, runs, cfg)
        a, _ = self.coefs(plain, cfg)
        out = {
            "conf_kept_frac": _mean(self.kept(plain, cfg)),
            "dropped_frac": _mean(a == 0),  # tokens the objective leaves out of the loss (coefficient 0)
            "cuda_frac": _mean(plain.cuda > 0),
            "w_mean": _mean(w), "w_min": _reduce(w, torch.amin), "w_max": _reduce(w, torch.amax),
            "p_mean": _mean(p),
        }
        if plain.entropy_topk is not None:
            out["entropy_topk_mean"] = _mean(plain.entropy_topk)
        if plain.kl is not None:
            out["kl_mean"] = _mean(plain.kl)
        return out

    def kept(self, plain: TokenStats, cfg: LossConfig) -> torch.Tensor:
        if self.confidence_filter is None:
            return _cuset_confident(plain, cfg)
        return self.confidence_filter(plain, cfg)


def _mean(x: torch.Tensor) -> torch.Tensor:
    x = x.detach().float()
    return x.mean() if x.numel() else x.new_zeros(())


def _reduce(x: torch.Tensor, fn) -> torch.Tensor:
    x = x.detach().float()
    return fn(x) if x.numel() else x.new_zeros(())


# --- token coefficients: a_t multiplies -logp_t, b_t multiplies kl_t -----------------------------

def _sft(s: TokenStats, cfg: LossConfig):
    return torch.ones_like(s.logp), None


def _dft(s: TokenStats, cfg: LossConfig):
    return s.logp.exp(), None  # sg(p_t): the caller passes detached stats


def _eaft(s: TokenStats, cfg: LossConfig):
    return (s.entropy_topk / EAFT_ENTROPY_SCALE).pow(cfg.eaft_alpha), None


def _asft(s: TokenStats, cfg: LossConfig):
    if cfg.asft_beta == 0:
        return s.logp.exp(), None
    return s.logp.exp(), torch.full_like(s.logp, cfg.asft_beta)


def _profit_kept(s: TokenStats, cfg: LossConfig) -> torch.Tensor:
    return s.logp.exp() >= cfg.profit_threshold


def _profit(s: TokenStats, cfg: LossConfig):
    return _profit_kept(s, cfg).to(s.logp.dtype), None


def _cuset_confident(s: TokenStats, cfg: LossConfig) -> torch.Tensor:
    return s.logp.exp() > cfg.tau


def _cuset_kept(s: TokenStats, cfg: LossConfig) -> torch.Tensor:
    return _cuset_confident(s, cfg) if cfg.conf_mask else torch.ones_like(s.logp, dtype=torch.bool)


def _cuset(s: TokenStats, cfg: LossConfig):
    """Hybrid mask M_t = Mconf_t + Mcuda_t, literally: 0, 1, lambda or 1 + lambda."""
    conf = _cuset_kept(s, cfg).to(s.logp.dtype)
    lam = cfg.lam if cfg.cuda_mask else 0.0
    return conf + lam * (s.cuda > 0).to(s.logp.dtype), None


def _cuset_region_weights(s: TokenStats, runs: Runs, cfg: LossConfig) -> torch.Tensor:
    """w_n = sg(1 - min_t C_t), C_t the mean confidence over the window around t."""
    if not cfg.region_weight:
        return torch.ones(runs.count, dtype=s.logp.dtype, device=s.logp.device)
    c_window = window_confidence(s.logp.exp(), runs, cfg.window)
    return 1.0 - segment_min(c_window, runs)


LOSSES: dict[str, Objective] = {o.name: o for o in (
    Objective("sft", "-logp (plain negative log-likelihood)", _sft),
    Objective("dft", "-sg(p) * logp (Dynamic Fine-Tuning)", _dft),
    Objective("eaft", "-(H_top20 / 3.0)^alpha * logp (Entropy-Adaptive FT)", _eaft, needs_entropy=True),
    Objective("asft", "-sg(p) * logp + beta * KL(ref || policy) (Anchored SFT)", _asft,
              needs_kl=lambda cfg: cfg.asft_beta != 0),
    Objective("profit", "-1[sg(p) >= 0.1] * logp (ProFit; dropped tokens stay in the denominator)", _profit,
              confidence_filter=_profit_kept),
    Objective("cuset", "-w_n * (Mconf + Mcuda) * logp (CuSeT, paper eq. 9)", _cuset,
              sample_weights=_cuset_region_weights, confidence_filter=_cuset_kept),
)}


if tuple(LOSSES) != LOSS_NAMES:  # a new objective is named in cuset.losses.config.LOSS_NAMES too
    raise ImportError(f"cuset.losses: LOSSES {tuple(LOSSES)} and config.LOSS_NAMES {LOSS_NAMES} disagree")


def get_loss(name: str) -> Objective:
    """The objective registered under `name` (a callable (stats, cfg) -> (loss_sum, metrics))."""
    try:
        return LOSSES[name]
    except KeyError:
        raise ValueError(unknown_loss_message(name)) from None
