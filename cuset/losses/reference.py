"""The plain full-logits path: [tokens, vocab] logits and ordinary autograd.

The yardstick the chunked head is tested and benchmarked against (exactness in
`tests/losses`, memory/time in `bench/loss_memory.py`); not used in training.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from cuset.losses.stats import TokenStats
from cuset.losses.tokens import select_targets


def full_logits_token_stats(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                            labels: torch.Tensor, *, need_entropy_topk: int | None = None,
                            ref_hidden: torch.Tensor | None = None, ref_weight: torch.Tensor | None = None,
                            ref_bias: torch.Tensor | None = None, segment_ids: torch.Tensor | None = None,
                            cuda_mask: torch.Tensor | None = None, loss_weight: torch.Tensor | None = None) -> TokenStats:
    """Same contract as `chunked_token_stats`, computed with full logits of the target rows."""
    targets = select_targets(labels, vocab_size=weight.shape[0], segment_ids=segment_ids, cuda_mask=cuda_mask,
                             loss_weight=loss_weight)
    h = hidden[targets.mask]
    logits = F.linear(h, weight, bias).to(torch.promote_types(h.dtype, torch.float32))
    logprobs = torch.log_softmax(logits, dim=-1)
    logp = logprobs.gather(1, targets.ids[:, None]).squeeze(1)
    entropy = None
    if need_entropy_topk:
        with torch.no_grad():
            top = logits.topk(need_entropy_topk, dim=-1).values
            q = torch.log_softmax(top, dim=-1)
            entropy = -(q.exp() * q).sum(-1)
    kl = None
    if ref_hidden is not None:
        with torch.no_grad():
            rw = weight if ref_weight is None else ref_weight
            rb = bias if ref_weight is None else ref_bias
            ref_logprobs = torch.log_softmax(F.linear(ref_hidden[targets.mask], rw, rb).to(logits.dtype), dim=-1)
        kl = (ref_logprobs.exp() * (ref_logprobs - logprobs)).sum(-1)
    return TokenStats(logp, targets.segment, targets.cuda, entropy, kl, targets.weight)
