"""A chunked LM head that scores target tokens without materialising [tokens, vocab] logits.

Target hidden states are processed `chunk_size` rows at a time into one reused
[chunk, vocab] float buffer (two more for the reference model under ASFT). Each
chunk yields, in the same pass over its logits:

    logp_t      log softmax(z_t)[y_t]
    entropy_t   entropy of softmax over the top-k logits (EAFT; no gradient)
    kl_t        KL(pi_ref || pi_theta) over the full vocabulary (ASFT)
    d/dh_t      the gradient with respect to the hidden state, g_t @ W with
                g_t = d(term_t)/d(z_t), a [vocab] row built in place in the buffer

so backward never recomputes the logits for the hidden states. Two front ends:

* `token_stats_fn` (behind `chunked_token_stats`): differentiable `logp` and `kl`
  with arbitrary per-token upstream gradients. It saves d logp/dh (and d kl/dh),
  one extra [tokens, hidden] tensor each; a trainable head's weight gradient is
  recomputed chunk by chunk in backward (it depends on the upstream gradients).
* `weighted_terms_fn` (behind `compute_loss`): the objective's local token
  coefficients (a_t, b_t) are evaluated inside the pass, so each chunk produces
  the gradient of term_t = -a_t logp_t + b_t kl_t in one matmul, and with a
  trainable head also accumulates d term/dW. Backward multiplies by the upstream
  gradient; the weight gradient needs that upstream gradient to be constant
  within each "weight group" (one per sample when the objective weighs samples,
  otherwise one for everything), which every objective in `objectives.py` obeys.
  The check is explicit: a violation raises instead of returning a wrong gradient.

Gradients equal the full-logits autograd ones up to float rounding (tests compare
in fp32 at rtol 1e-5).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import torch

from cuset.losses.stats import TokenStats

IGNORE_INDEX = -100


@dataclass(frozen=True)
class HeadInputs:
    """What the chunk loop needs besides the tensors autograd tracks."""

    targets: torch.Tensor  # [N] int64 target token ids
    chunk_size: int
    topk: int | None = None  # top-k entropy wanted (EAFT)


class _ChunkScorer:
    """Scores row ranges of the target tokens into reused float buffers."""

    def __init__(self, hidden, weight, bias, ref_hidden, ref_weight, ref_bias, spec: HeadInputs):
        self.h, self.w, self.b = hidden, weight, bias
        self.ref_h, self.ref_w, self.ref_b = ref_hidden, ref_weight, ref_bias
        self.y = spec.targets
        self.topk = spec.topk
        n, vocab = hidden.shape[0], weight.shape[0]
        self.rows = max(1, min(spec.chunk_size, n))
        # softmax arithmetic in fp32 (or fp64 when the model is fp64), like HF's upcast before the loss
        self.acc_dtype = torch.promote_types(hidden.dtype, torch.float32)
        new = lambda: torch.empty(self.rows, vocab, dtype=self.acc_dtype, device=hidden.device)  # noqa: E731
        self.logits_buf = new()  # policy logits; its softmax in place when there is no reference
        self.probs_buf = new() if ref_hidden is not None else None  # policy softmax (ASFT)
        self.ref_buf = new() if ref_hidden is not None else None  # reference logits, then softmax

    def logits(self, h, w, b, out):
        if h.dtype == out.dtype:
            torch.mm(h, w.t(), out=out)
        else:  # bf16/fp16 model: matmul in the model dtype, softmax in fp32
            out.copy_(torch.mm(h, w.t()))
        if b is not None:
            out.add_(b.to(out.dtype))
        return out

    def score(self, lo: int, hi: int) -> "ChunkScores":
        """Score target rows lo:hi; the returned probabilities live in reused buffers."""
        c = hi - lo
        y = self.y[lo:hi]
        z = self.logits(self.h[lo:hi], self.w, self.b, self.logits_buf[:c])
        z_y = z.gather(1, y[:, None]).squeeze(1)
        entropy = _topk_entropy(z, self.topk) if self.topk else None
        if self.ref_h is None:
            m = z.amax(1, keepdim=True)
            z.sub_(m).exp_()
            s = z.sum(1, keepdim=True)
            logp = z_y - (m + s.log()).squeeze(1)
            # P = z / s: the division is folded into grad_logits' per-row scaling (one pass less)
            return ChunkScores(logp, entropy, None, z, None, 1.0 / s.squeeze(1))
        return self._score_with_ref(lo, hi, z, z_y, entropy)

    def _score_with_ref(self, lo, hi, z, z_y, entropy) -> "ChunkScores":
        """KL(ref || policy) = sum_v pref_v (log pref_v - log p_v) from the logits of both models."""
        c = hi - lo
        zr = self.logits(self.ref_h[lo:hi], self.ref_w, self.ref_b, self.ref_buf[:c])
        probs = self.probs_buf[:c]
        m = z.amax(1, keepdim=True)
        torch.sub(z, m, out=probs).exp_()
        s = probs.sum(1, keepdim=True)
        probs.div_(s)
        lse = m + s.log()
        z.sub_(lse)  # z := log p
        zr.sub_(zr.amax(1, keepdim=True))  # zr := z_ref - max
        z.sub_(zr).neg_()  # z := (z_ref - max) - log p
        zr.exp_()
        s_ref = zr.sum(1, keepdim=True)
        zr.div_(s_ref)  # zr := p_ref
        kl = z.mul_(zr).sum(1) - s_ref.log().squeeze(1)
        return ChunkScores(z_y - lse.squeeze(1), entropy, kl, probs, zr)

    def grad_logits(self, sc: "ChunkScores", lo: int, hi: int, a: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        """d/dz of term = -a logp + b kl, i.e. a (P - e_y) + b (P - P_ref), built in place of P."""
        g = sc.probs
        y = self.y[lo:hi]
        a = a.to(g.dtype)
        if b is None:
            g.mul_((a if sc.probs_scale is None else a * sc.probs_scale)[:, None])
        else:  # a (P - e_y) - b (P_ref - P): take the small difference P_ref - P first
            diff = sc.ref_probs.sub_(g)
            g.mul_(a[:, None]).addcmul_(diff, b.to(g.dtype)[:, None], value=-1.0)
        g.scatter_add_(1, y[:, None], -a[:, None])
        return g


@dataclass
class ChunkScores:
    logp: torch.Tensor
    entropy: torch.Tensor | None
    kl: torch.Tensor | None
    probs: torch.Tensor  # [c, V] softmax of the policy, times 1/probs_scale (a buffer, reused by grad_logits)
    ref_probs: torch.Tensor | None  # [c, V] softmax of the reference
    probs_scale: torch.Tensor | None = None  # [c]: softmax = probs * probs_scale[:, None]; None: already normalised


def _topk_entropy(z: torch.Tensor, k: int) -> torch.Tensor:
    top = z.topk(min(k, z.shape[1]), dim=1, sorted=False).values
    logq = torch.log_softmax(top, dim=1)
    return -(logq.exp() * logq).sum(1)


def _chunks(n: int, size: int):
    for lo in range(0, n, size):
        yield lo, min(n, lo + size)


def _matmul(g: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.mm(g.to(w.dtype), w).to(g.dtype)


# --- front end 1: differentiable logp / kl ---------------------------------------------------------

class _TokenStatsFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, bias, ref_hidden, ref_weight, ref_bias, spec: HeadInputs):
        scorer = _ChunkScorer(hidden, weight, bias, ref_hidden, ref_weight, ref_bias, spec)
        n, with_kl = hidden.shape[0], ref_hidden is not None
        dt = scorer.acc_dtype
        logp = torch.empty(n, dtype=dt, device=hidden.device)
        kl = torch.empty(n, dtype=dt, device=hidden.device) if with_kl else None
        entropy = torch.empty(n, dtype=dt, device=hidden.device) if spec.topk else None
        need_h = ctx.needs_input_grad[0]  # False under no_grad / for frozen inputs: skip the gradient matmuls
        d_logp = torch.empty(n, hidden.shape[1], dtype=dt, device=hidden.device) if need_h else None
        d_kl = torch.empty(n, hidden.shape[1], dtype=dt, device=hidden.device) if need_h and with_kl else None
        for lo, hi in _chunks(n, spec.chunk_size):
            sc = scorer.score(lo, hi)
            logp[lo:hi] = sc.logp
            if entropy is not None:
                entropy[lo:hi] = sc.entropy
            if with_kl:
                kl[lo:hi] = sc.kl
            if not need_h:
                continue
            if with_kl:
                diff = sc.ref_probs.sub_(sc.probs).neg_()  # P - P_ref = d kl / dz (probs are normalised here)
                d_kl[lo:hi] = _matmul(diff, weight)
            ones = torch.ones(hi - lo, dtype=dt, device=hidden.device)
            d_logp[lo:hi] = _matmul(scorer.grad_logits(sc, lo, hi, -ones, None), weight)  # e_y - P
        ctx.spec = spec
        ctx.save_for_backward(hidden, weight, bias, ref_hidden, ref_weight, ref_bias, d_logp, d_kl)
        outs = (logp, kl if with_kl else logp.new_zeros(0), entropy if entropy is not None else logp.new_zeros(0))
        ctx.mark_non_differentiable(outs[2])
        return outs

    @staticmethod
    def backward(ctx, g_logp, g_kl, _g_entropy):
        hidden, weight, bias, ref_hidden, ref_weight, ref_bias, d_logp, d_kl = ctx.saved_tensors
        with_kl = ref_hidden is not None
        g_logp = _zeros_if_none(g_logp, hidden)
        g_kl = _zeros_if_none(g_kl, hidden) if with_kl else None
        grad_h = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            gh = g_logp[:, None] * d_logp
            if with_kl:
                gh = gh + g_kl[:, None] * d_kl
            grad_h = gh.to(hidden.dtype)
        need_w, need_b = ctx.needs_input_grad[1], bias is not None and ctx.needs_input_grad[2]
        if need_w or need_b:
            # the weight gradient depends on the upstream per-token gradients: recompute the logits
            scorer = _ChunkScorer(hidden.detach(), weight.detach(), _detach(bias), _detach(ref_hidden),
                                  _detach(ref_weight), _detach(ref_bias), replace(ctx.spec, topk=None))
            grad_w, grad_b = _weight_grad(scorer, hidden, weight, bias,
                                          lambda lo, hi: (-g_logp[lo:hi], None if g_kl is None else g_kl[lo:hi]),
                                          need_w, need_b)
        return grad_h, grad_w, grad_b, None, None, None, None


def _zeros_if_none(g, like):
    dtype = torch.promote_types(like.dtype, torch.float32)
    return torch.zeros(like.shape[0], dtype=dtype, device=like.device) if g is None else g.to(dtype)


def _detach(t):
    return None if t is None else t.detach()


def _weight_grad(scorer: _ChunkScorer, hidden, weight, bias, coefs, need_w: bool, need_b: bool):
    """sum over chunks of G^T h (and G summed over rows for the bias), G = d loss/dz rebuilt per chunk."""
    dev, dt = weight.device, scorer.acc_dtype
    grad_w = torch.zeros(weight.shape, dtype=dt, device=dev) if need_w else None
    grad_b = torch.zeros(weight.shape[0], dtype=dt, device=dev) if need_b else None
    h = hidden.detach()
    for lo, hi in _chunks(h.shape[0], scorer.rows):
        sc = scorer.score(lo, hi)
        a, b = coefs(lo, hi)
        g = scorer.grad_logits(sc, lo, hi, a, b)
        if grad_w is not None:
            grad_w.addmm_(g.t(), h[lo:hi].to(g.dtype))
        if grad_b is not None:
            grad_b += g.sum(0)
    return (None if grad_w is None else grad_w.to(weight.dtype),
            None if grad_b is None else grad_b.to(bias.dtype))


def token_stats_fn(hidden, weight, bias, targets, *, topk=None, ref_hidden=None, ref_weight=None,
                   ref_bias=None, chunk_size=512):
    """(logp [N], kl [N] or None, entropy [N] or None) for target hidden states [N, H]."""
    if ref_hidden is not None and ref_weight is None:
        ref_weight, ref_bias = weight.detach(), _detach(bias)
    spec = HeadInputs(targets, chunk_size, topk)
    logp, kl, entropy = _TokenStatsFn.apply(hidden, weight, bias, _detach(ref_hidden), _detach(ref_weight),
                                            _detach(ref_bias), spec)
    return logp, (kl if ref_hidden is not None else None), (entropy if topk else None)


# --- front end 2: objective-weighted terms ---------------------------------------------------------

@dataclass(frozen=True)
class TermInputs:
    head: HeadInputs
    coefs: Callable[[TokenStats], tuple]  # detached chunk stats -> (a [c], b [c] or None)
    segment: torch.Tensor  # [N] sample ids (handed to coefs)
    cuda: torch.Tensor  # [N] CUDA-span flags (handed to coefs)
    weight_groups: torch.Tensor | None  # [N] group ids with equal upstream grads; None: recompute in backward
    token_weight: torch.Tensor | None = None  # [N] per-token loss weights (handed to coefs), None = all 1


class _WeightedTermsFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, bias, ref_hidden, ref_weight, ref_bias, spec: TermInputs):
        scorer = _ChunkScorer(hidden, weight, bias, ref_hidden, ref_weight, ref_bias, spec.head)
        n, dt, dev = hidden.shape[0], scorer.acc_dtype, hidden.device
        logp = torch.empty(n, dtype=dt, device=dev)
        terms = torch.empty(n, dtype=dt, device=dev)
        kl = torch.empty(n, dtype=dt, device=dev) if ref_hidden is not None else None
        entropy = torch.empty(n, dtype=dt, device=dev) if spec.head.topk else None
        coef_a = torch.empty(n, dtype=dt, device=dev)
        coef_b = torch.zeros(n, dtype=dt, device=dev)
        need_h = ctx.needs_input_grad[0]  # False under no_grad (evaluation): skip the gradient matmul
        d_terms = torch.empty(n, hidden.shape[1], dtype=dt, device=dev) if need_h else None
        need_w, need_b = ctx.needs_input_grad[1], bias is not None and ctx.needs_input_grad[2]
        fuse_w = spec.weight_groups is not None and (need_w or need_b)
        acc = _GroupAccumulators(spec.weight_groups, weight if need_w else None, bias if need_b else None,
                                 dt) if fuse_w else None
        for lo, hi in _chunks(n, spec.head.chunk_size):
            sc = scorer.score(lo, hi)
            chunk = TokenStats(sc.logp, spec.segment[lo:hi], spec.cuda[lo:hi], sc.entropy, sc.kl,
                               None if spec.token_weight is None else spec.token_weight[lo:hi])
            a, b = spec.coefs(chunk)
            logp[lo:hi] = sc.logp
            coef_a[lo:hi] = a
            terms[lo:hi] = -a * sc.logp
            if b is not None:
                coef_b[lo:hi] = b
                terms[lo:hi] += b * sc.kl
            if kl is not None:
                kl[lo:hi] = sc.kl
            if entropy is not None:
                entropy[lo:hi] = sc.entropy
            if not (need_h or acc is not None):
                continue
            g = scorer.grad_logits(sc, lo, hi, a, b if ref_hidden is not None else None)
            if need_h:
                d_terms[lo:hi] = _matmul(g, weight)
            if acc is not None:
                acc.add(g, hidden[lo:hi], lo, hi)
        ctx.spec, ctx.acc, ctx.fused_w = spec, acc, fuse_w
        ctx.save_for_backward(hidden, weight, bias, ref_hidden, ref_weight, ref_bias, d_terms, coef_a, coef_b)
        aux = (logp, kl if kl is not None else logp.new_zeros(0), entropy if entropy is not None else logp.new_zeros(0))
        ctx.mark_non_differentiable(*aux)
        return (terms, *aux)

    @staticmethod
    def backward(ctx, g_terms, *_aux):
        hidden, weight, bias, ref_hidden, ref_weight, ref_bias, d_terms, coef_a, coef_b = ctx.saved_tensors
        g = _zeros_if_none(g_terms, hidden)
        grad_h = (g[:, None] * d_terms).to(hidden.dtype) if ctx.needs_input_grad[0] else None
        grad_w = grad_b = None
        need_w, need_b = ctx.needs_input_grad[1], bias is not None and ctx.needs_input_grad[2]
        if need_w or need_b:
            if ctx.fused_w:
                if ctx.acc is None:
                    raise RuntimeError("weighted_terms_fn's weight gradient was summed during forward and is handed "
                                       "out once: backward through it a second time (retain_graph) is not supported")
                grad_w, grad_b = ctx.acc.combine(g)
                ctx.acc = None
            else:
                spec = ctx.spec
                scorer = _ChunkScorer(hidden.detach(), weight.detach(), _detach(bias), _detach(ref_hidden),
                                      _detach(ref_weight), _detach(ref_bias), replace(spec.head, topk=None))
                with_kl = ref_hidden is not None
                grad_w, grad_b = _weight_grad(
                    scorer, hidden, weight, bias,
                    lambda lo, hi: (g[lo:hi] * coef_a[lo:hi], g[lo:hi] * coef_b[lo:hi] if with_kl else None),
                    need_w, need_b)
        return grad_h, grad_w, grad_b, None, None, None, None


class _GroupAccumulators:
    """d(sum of terms in group k)/dW (and /db) for each weight group, summed during the forward pass."""

    def __init__(self, groups: torch.Tensor, weight, bias, dtype):
        self.groups = groups
        self.ids = torch.unique(groups).tolist()
        self.weight_dtype = None if weight is None else weight.dtype
        self.bias_dtype = None if bias is None else bias.dtype
        zeros = lambda t: torch.zeros(t.shape, dtype=dtype, device=t.device)  # noqa: E731
        self.w = {k: zeros(weight) for k in self.ids} if weight is not None else None
        self.b = {k: zeros(bias) for k in self.ids} if bias is not None else None

    def add(self, g: torch.Tensor, h: torch.Tensor, lo: int, hi: int):
        grp = self.groups[lo:hi]
        h = h.detach().to(g.dtype)
        for k in torch.unique(grp).tolist():
            if bool((grp == k).all()):
                gk, hk = g, h
            else:
                rows = torch.nonzero(grp == k).flatten()
                gk, hk = g[rows], h[rows]
            if self.w is not None:
                self.w[k].addmm_(gk.t(), hk)
            if self.b is not None:
                self.b[k] += gk.sum(0)

    def combine(self, upstream: torch.Tensor):
        """sum_k u_k * acc_k where u_k is the (single) upstream gradient of group k's terms."""
        grad_w = grad_b = None
        for k in self.ids:
            u = upstream[self.groups == k]
            if not bool((u == u[0]).all()):
                raise RuntimeError(
                    "weighted_terms_fn with a trainable LM head needs the same upstream gradient for every token "
                    "of a weight group (the loss must be sum_k s_k * sum of group k's terms). Use "
                    "chunked_token_stats for arbitrary per-token weights, or pass weight_groups=None.")
            if self.w is not None:
                part = self.w.pop(k).mul_(u[0])  # the accumulator becomes the gradient: no extra [V, H] copy
                grad_w = part if grad_w is None else grad_w.add_(part)
            if self.b is not None:
                part = self.b.pop(k).mul_(u[0])
                grad_b = part if grad_b is None else grad_b.add_(part)
        return (None if grad_w is None else grad_w.to(self.weight_dtype),
                None if grad_b is None else grad_b.to(self.bias_dtype))


def weighted_terms_fn(hidden, weight, bias, targets, *, coefs, segment, cuda, weight_groups=None, topk=None,
                      ref_hidden=None, ref_weight=None, ref_bias=None, chunk_size=512, token_weight=None):
    """Per-token loss terms -a_t logp_t + b_t kl_t (differentiable) and detached (logp, kl, entropy).

    `coefs(chunk_stats) -> (a, b)` must be elementwise over tokens (each token's
    coefficients from its own statistics only).
    """
    if ref_hidden is not None and ref_weight is None:
        ref_weight, ref_bias = weight.detach(), _detach(bias)
    spec = TermInputs(HeadInputs(targets, chunk_size, topk), coefs, segment, cuda, weight_groups, token_weight)
    terms, logp, kl, entropy = _WeightedTermsFn.apply(hidden, weight, bias, _detach(ref_hidden),
                                                      _detach(ref_weight), _detach(ref_bias), spec)
    return terms, logp, (kl if ref_hidden is not None else None), (entropy if topk else None)
