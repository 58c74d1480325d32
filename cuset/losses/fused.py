"""The fused LM head: per-token log-probabilities from Cut Cross-Entropy, logits never stored.

Cut Cross-Entropy (Apple, `pip install cut-cross-entropy`, the `fused` extra) computes
`-log softmax(h W^T)[y]` per token in Triton kernels that keep each block of logits in
on-chip memory, forward and backward, with no Python loop over chunks. Its per-token
backward takes any upstream gradient, so every objective that is linear in logp_t with
stop-gradient coefficients is served by it exactly:

    logp_t = -linear_cross_entropy(h, W, y, reduction="none")
    loss_sum = sum_t s_n(t) * (-a_t logp_t),   a_t, s_n from sg(logp_t)

SFT, DFT, ProFit, CuSeT (masks, CUDA bonus, region weights) and ASFT with beta = 0 are
such objectives: their masks and weights are tensor operations on the detached logp.
EAFT (top-k entropy of the logits) and ASFT with beta > 0 (KL to the reference over the
whole vocabulary) need the distribution itself, which the library does not return: they
keep the chunked head (`cuset.losses.head`). So does a head with a bias (CCE 25.1 takes
none) and any head on a CPU under `loss.head=auto`.

`impl`: "cce" (the Triton kernels, CUDA) or "torch_compile" (the library's
torch.compile path: it materialises the logits; it is what runs on a CPU, where the
tests compare this module with the chunked head).
"""

from __future__ import annotations

import importlib.util

import torch

from cuset.losses.config import LossConfig

LIBRARY = "cut_cross_entropy"
INSTALL_HINT = "pip install -e '.[fused]' (cut-cross-entropy; on a CPU-only machine add --no-deps and install triton)"


def library_available() -> bool:
    """Whether Cut Cross-Entropy can be imported (checked without importing it: it imports triton)."""
    return importlib.util.find_spec(LIBRARY) is not None


def unserved_reason(cfg: LossConfig, *, needs_entropy: bool, needs_kl: bool, has_bias: bool) -> str | None:
    """Why the fused head cannot compute this objective (None: it can)."""
    if needs_entropy:
        return f"loss {cfg.name!r} needs the top-{cfg.eaft_topk} entropy of the logits, which the fused head does not return"
    if needs_kl:
        return f"loss {cfg.name!r} with asft_beta={cfg.asft_beta} needs KL(ref || policy) over the vocabulary"
    if has_bias:
        return "the LM head has a bias, which Cut Cross-Entropy 25.1 does not take"
    return None


def choose_impl(cfg: LossConfig, hidden: torch.Tensor, *, needs_entropy: bool, needs_kl: bool,
                has_bias: bool) -> str | None:
    """The fused implementation to use for this call, or None for the chunked head.

    loss.head=chunked: never fused. auto: fused on a CUDA device when the objective is
    served and the library imports, else chunked (silently: the chunked head is exact).
    fused: fused or an error saying why not ("torch_compile" off CUDA).
    """
    if cfg.head == "chunked":
        return None
    reason = unserved_reason(cfg, needs_entropy=needs_entropy, needs_kl=needs_kl, has_bias=has_bias)
    if cfg.head == "auto":
        return "cce" if hidden.is_cuda and reason is None and library_available() else None
    if reason is not None:
        raise ValueError(f"loss.head=fused: {reason}; use loss.head=auto (falls back to the chunked head) "
                         "or loss.head=chunked")
    if not library_available():
        raise ImportError(f"loss.head=fused needs Cut Cross-Entropy ({LIBRARY} does not import): {INSTALL_HINT}")
    return "cce" if hidden.is_cuda else "torch_compile"


def token_logp(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, *, impl: str = "cce",
               filter_eps: float | str | None = "auto") -> torch.Tensor:
    """[N] log p(y_t | h_t), differentiable w.r.t. hidden [N, H] and weight [V, H], in the
    chunked head's dtype (fp32, or fp64 for an fp64 model: the library itself computes in fp32).

    filter_eps (CCE only): gradient entries of the softmax below this are skipped; "auto" is
    the library's default, eps(dtype)/32 (below bf16's resolution of the result); None: none
    skipped, the exact gradient (the GPU test compares both with the chunked head).
    """
    if hidden.dtype != weight.dtype:  # the kernels take one dtype (autocast may hand fp32 states to a bf16 head)
        hidden = hidden.to(weight.dtype)
    nll = _linear_cross_entropy(hidden, weight, targets, reduction="none", impl=impl, filter_eps=filter_eps)
    return -nll.to(torch.promote_types(hidden.dtype, torch.float32))


def _linear_cross_entropy(*args, **kwargs) -> torch.Tensor:
    """The library's call, imported on first use (importing it imports triton)."""
    from cut_cross_entropy import linear_cross_entropy

    return linear_cross_entropy(*args, **kwargs)
