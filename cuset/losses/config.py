"""`LossConfig`: which objective to train with and its hyper-parameters.

Defaults are the paper's (section 5.1) and the baselines' published settings
(each option's help names where its default comes from).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from cuset.config import option

REDUCTIONS = ("token", "sample_sum", "sample_mean", "micro_batch_mean")
HEADS = ("auto", "chunked", "fused")   # cuset.losses.fused.HEAD_CHOICES
# The objectives registered in cuset.losses.objectives.LOSSES (which checks at import that
# the two agree), each with the name tables and figures show: configs validate a name and
# reports label a run without importing torch. A new objective is added here and there.
OBJECTIVE_DISPLAY_NAMES = {"sft": "SFT", "dft": "DFT", "eaft": "EAFT", "asft": "ASFT", "profit": "ProFit",
                           "cuset": "CuSeT"}
LOSS_NAMES = tuple(OBJECTIVE_DISPLAY_NAMES)


def unknown_loss_message(name: str) -> str:
    close = difflib.get_close_matches(str(name), list(LOSS_NAMES), n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown loss {name!r}: {hint}known losses: {', '.join(LOSS_NAMES)}"


@dataclass(frozen=True)
class LossConfig:
    name: str = option("cuset", help=f"objective: {' | '.join(LOSS_NAMES)}")
    tau: float = option(0.1, help="CuSeT confidence-mask threshold: a target token is kept when sg(p) > tau")
    lam: float = option(1.0, help="CuSeT CUDA-mask scale lambda: tokens in kernel bodies / launch configs get +lambda")
    window: int = option(256, help="CuSeT sliding-window size l (in target tokens) for region confidence")
    reduction: str = option(
        "token", choices=REDUCTIONS,
        help="token: sum over the step's target tokens / supervised tokens in the optimizer step "
             "(num_items_in_batch, as TRL/LLaMA-Factory baselines); sample_sum: per-sample sums averaged "
             "over the step's samples (paper eq. 9 literally); sample_mean: per-sample means averaged over samples; "
             "micro_batch_mean: each micro-batch's token mean, averaged over the step's micro-batches (how "
             "LLaMA-Factory runs ASFT)")
    conf_mask: bool = option(True, help="CuSeT ablation: off => every target token passes the confidence mask")
    cuda_mask: bool = option(True, help="CuSeT ablation: off => lambda = 0 (no CUDA-span bonus)")
    region_weight: bool = option(True, help="CuSeT ablation: off => sample weight w_n = 1")
    weight_norm: bool = option(
        False, help="CuSeT control: divide w_n by the mean w_n of the optimizer step's samples (all micro-batches "
                    "and ranks), so the weights re-weight samples against each other at mean 1 per step; as the "
                    "mean w_n falls during training it otherwise scales the whole gradient down, which under AdamW "
                    "acts like an extra learning-rate decay")
    eaft_alpha: float = option(1.0, help="EAFT exponent alpha on the normalised top-k entropy (H/3.0)^alpha")
    eaft_topk: int = option(20, help="EAFT: entropy of the softmax renormalised over the top-k logits")
    asft_beta: float = option(0.1, help="ASFT weight beta of KL(pi_ref || pi_theta) (the official train.py default "
                                        "and LLaMA-Factory's asft_alpha; one example in the ASFT repository's README uses 0.05)")
    profit_threshold: float = option(0.1, help="ProFit: keep a target token when sg(p) >= threshold")
    chunk_size: int = option(
        512, help="target tokens per chunk of the LM head: it holds chunk_size x vocab fp32 values (x3 for ASFT) "
                  "instead of tokens x vocab; 512-2048 run within 3% of each other on CPU (bench/loss_memory.py)")
    head: str = option(
        "auto", choices=HEADS,
        help="LM head: auto = the fused head (Cut Cross-Entropy, the `fused` extra) on CUDA for the objectives it "
             "serves (all but EAFT and ASFT with beta > 0), else the chunked head; chunked = always the chunked "
             "head; fused = the fused head or an error saying why not (docs/training.md#losses)")

    def __post_init__(self):
        problems = []
        if not 0.0 <= self.tau <= 1.0:
            problems.append(f"tau={self.tau} must lie in [0, 1]")
        if self.lam < 0:
            problems.append(f"lam={self.lam} must be >= 0")
        if self.window < 1:
            problems.append(f"window={self.window} must be >= 1")
        if self.reduction not in REDUCTIONS:
            problems.append(f"reduction={self.reduction!r} must be one of {', '.join(REDUCTIONS)}")
        if self.eaft_topk < 1:
            problems.append(f"eaft_topk={self.eaft_topk} must be >= 1")
        if self.asft_beta < 0:
            problems.append(f"asft_beta={self.asft_beta} must be >= 0")
        if self.chunk_size < 1:
            problems.append(f"chunk_size={self.chunk_size} must be >= 1")
        if self.head not in HEADS:
            problems.append(f"head={self.head!r} must be one of {', '.join(HEADS)}")
        if self.name not in LOSS_NAMES:
            problems.append(unknown_loss_message(self.name))
        if problems:
            raise ValueError("; ".join(problems))
