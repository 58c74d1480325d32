"""Which positions are target tokens, and their sample ids and CUDA flags.

Inputs here are already *aligned*: labels[b, t] is the token predicted from
hidden[b, t] (HF's unshifted labels are shifted by `compute.shift_batch`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from cuset.losses.head import IGNORE_INDEX, token_stats_fn
from cuset.losses.segments import segment_runs
from cuset.losses.stats import TokenStats


@dataclass(frozen=True)
class Targets:
    mask: torch.Tensor  # [B, T] bool, True at scored positions
    ids: torch.Tensor  # [N] target token ids, row-major order
    segment: torch.Tensor  # [N] int64 sample id, unique across rows
    cuda: torch.Tensor  # [N] float CUDA-span flag of the target token
    weight: torch.Tensor | None = None  # [N] float loss weight of the target token, None = all 1

    @property
    def n_tokens(self) -> int:
        return int(self.ids.numel())

    @property
    def n_samples(self) -> int:
        return segment_runs(self.segment).count


def select_targets(labels: torch.Tensor, *, vocab_size: int, segment_ids: torch.Tensor | None = None,
                   cuda_mask: torch.Tensor | None = None, loss_weight: torch.Tensor | None = None,
                   where: str = "labels") -> Targets:
    """Target positions (label != -100) with their sample ids and CUDA flags.

    `segment_ids` [B, T] number the samples packed in a row (any ints, equal
    within a sample); without them each row is one sample.
    """
    if labels.dim() != 2:
        raise ValueError(f"{where}: expected [batch, time] labels, got shape {tuple(labels.shape)}")
    mask = labels != IGNORE_INDEX
    ids = labels[mask].long()
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
        raise ValueError(f"{where}: label id {bad} is outside the vocabulary [0, {vocab_size}) "
                         f"(use {IGNORE_INDEX} for positions without a target)")
    rows = torch.arange(labels.shape[0], device=labels.device)[:, None].expand_as(labels)
    if segment_ids is None:
        segment = rows[mask]
    else:
        _check_shape(segment_ids, labels, "segment_ids", where)
        local = segment_ids.long()
        local = local - local.amin() if local.numel() else local
        segment = (rows * (int(local.max()) + 1 if local.numel() else 1) + local)[mask]
    if cuda_mask is None:
        cuda = torch.zeros(ids.shape, dtype=torch.float32, device=labels.device)
    else:
        _check_shape(cuda_mask, labels, "cuda_mask", where)
        cuda = cuda_mask[mask].float()
    weight = None
    if loss_weight is not None:
        _check_shape(loss_weight, labels, "loss_weight", where)
        weight = loss_weight[mask].float()
        if weight.numel() and bool((weight < 0).any()):
            raise ValueError(f"{where}: loss_weight must not be negative (min {float(weight.min())})")
    return Targets(mask, ids, segment, cuda, weight)


def _check_shape(t: torch.Tensor, labels: torch.Tensor, name: str, where: str):
    if t.shape != labels.shape:
        raise ValueError(f"{where}: {name} has shape {tuple(t.shape)} but labels have {tuple(labels.shape)}; "
                         f"every per-token column must be truncated/padded together with the labels")


def chunked_token_stats(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, labels: torch.Tensor,
                        *, need_entropy_topk: int | None = None, ref_hidden: torch.Tensor | None = None,
                        ref_weight: torch.Tensor | None = None, ref_bias: torch.Tensor | None = None,
                        chunk_size: int = 512, segment_ids: torch.Tensor | None = None,
                        cuda_mask: torch.Tensor | None = None, loss_weight: torch.Tensor | None = None) -> TokenStats:
    """TokenStats of the target tokens, scored chunk by chunk (never [tokens, vocab] at once).

    hidden [B, T, H] final hidden states, weight [V, H] (+ bias [V]) the LM head,
    labels [B, T] aligned so labels[t] is the target of hidden[t] (-100: none).
    `ref_hidden` [B, T, H] (no grad) adds KL(ref || policy) per target; the
    reference head defaults to `weight`/`bias`. `logp` and `kl` are
    differentiable w.r.t. hidden, weight and bias with exact gradients.
    """
    if hidden.dim() != 3 or hidden.shape[:2] != labels.shape:
        raise ValueError(f"hidden {tuple(hidden.shape)} and labels {tuple(labels.shape)} must be [B, T, H] and [B, T]")
    if ref_hidden is not None and ref_hidden.shape != hidden.shape:
        raise ValueError(f"ref_hidden {tuple(ref_hidden.shape)} must have the shape of hidden {tuple(hidden.shape)}")
    targets = select_targets(labels, vocab_size=weight.shape[0], segment_ids=segment_ids, cuda_mask=cuda_mask,
                             loss_weight=loss_weight)
    h = hidden[targets.mask]
    ref_h = None if ref_hidden is None else ref_hidden.detach()[targets.mask]
    logp, kl, entropy = token_stats_fn(h, weight, bias, targets.ids, topk=need_entropy_topk, ref_hidden=ref_h,
                                       ref_weight=ref_weight, ref_bias=ref_bias, chunk_size=chunk_size)
    return TokenStats(logp, targets.segment, targets.cuda, entropy, kl, targets.weight)
