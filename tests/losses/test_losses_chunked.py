"""Chunked LM head == full-logits autograd, for every objective, both front ends (fp32, rtol 1e-5)."""

import math

import pytest
import torch

from cuset.losses import LOSSES, LossConfig, chunked_token_stats, get_loss
from cuset.losses.compute import head_loss_sum
from cuset.losses.head import weighted_terms_fn
from cuset.losses.reference import full_logits_token_stats
from cuset.losses.segments import segment_runs
from cuset.losses.stats import TokenStats
from cuset.losses.tokens import select_targets

B, T, H, V = 3, 11, 16, 97


def assert_close(got, want, dtype=torch.float32):
    """rtol 1e-5 elementwise (1e-10 in fp64) plus an absolute slack of 1e-5 (1e-10) of the largest entry.

    Entries that are small differences of large terms (1 - p, sums over tokens of
    signed terms) carry the rounding of those terms: against the fp64 truth, the fp32
    full-logits path is off by up to ~1e-6 and the chunked one by up to ~3e-6 of the
    tensor's largest entry (different summation order), so an elementwise-only rtol
    would compare rounding noise. fp64 runs show the agreement is exact otherwise.
    """
    rtol = 1e-5 if dtype == torch.float32 else 1e-10
    torch.testing.assert_close(got.detach(), want.detach(), rtol=rtol,
                               atol=rtol * float(want.detach().abs().max().clamp_min(1e-30)))


def make_inputs(seed=0, bias=True, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    hidden = (torch.randn(B, T, H, generator=g, dtype=dtype) * 1.0).requires_grad_()
    weight = (torch.randn(V, H, generator=g, dtype=dtype) * 0.4).requires_grad_()
    b = (torch.randn(V, generator=g, dtype=dtype) * 0.5).requires_grad_() if bias else None
    labels = torch.randint(0, V, (B, T), generator=g)
    labels[0, :3] = -100  # prompt
    labels[1, 5] = -100  # separator between two packed samples
    labels[2, :] = -100  # a row with no targets at all ...
    labels[2, 4:7] = torch.randint(0, V, (3,), generator=g)  # ... except three
    # make some targets likely (not near-certain: 1 - p would lose digits in fp32) so both sides of tau = 0.1 occur
    with torch.no_grad():
        for b_, t in (labels != -100).nonzero().tolist()[::2]:
            weight[labels[b_, t]] += hidden[b_, t] * 0.22
    segment = torch.zeros(B, T, dtype=torch.long)
    segment[1, 6:] = 1  # row 1 packs two samples
    cuda = (torch.rand(B, T, generator=g) > 0.5).float()
    ref_hidden = hidden.detach() + 0.3 * torch.randn(B, T, H, generator=g, dtype=dtype)
    return hidden, weight, b, labels, segment, cuda, ref_hidden


def stats_kwargs(name, cfg, segment, cuda, ref_hidden):
    return dict(need_entropy_topk=cfg.eaft_topk if name == "eaft" else None,
                ref_hidden=ref_hidden if name == "asft" else None, segment_ids=segment, cuda_mask=cuda)


def reference(name, cfg, inputs):
    hidden, weight, bias, labels, segment, cuda, ref_hidden = inputs
    stats = full_logits_token_stats(hidden, weight, bias, labels, **stats_kwargs(name, cfg, segment, cuda, ref_hidden))
    loss, _ = get_loss(name)(stats, cfg)
    return loss, torch.autograd.grad(loss, (hidden, weight, bias))


CASES = [LossConfig(name=n, eaft_topk=20) for n in LOSSES] + [
    LossConfig(name="cuset", window=3, reduction="sample_mean"),
    LossConfig(name="cuset", window=4, reduction="sample_sum", tau=0.05, lam=0.5),
    LossConfig(name="asft", asft_beta=0.3, reduction="sample_mean"),
]


def case_id(cfg):
    return f"{cfg.name}-{cfg.reduction}"


@pytest.mark.parametrize("cfg", CASES, ids=case_id)
@pytest.mark.parametrize("chunk, dtype", [(1, torch.float32), (4, torch.float32), (64, torch.float32),
                                          (4, torch.float64)])
def test_token_stats_front_end_matches_full_logits(cfg, chunk, dtype):
    inputs = make_inputs(dtype=dtype)
    hidden, weight, bias, labels, segment, cuda, ref_hidden = inputs
    want_loss, want_grads = reference(cfg.name, cfg, inputs)
    stats = chunked_token_stats(hidden, weight, bias, labels, chunk_size=chunk,
                                **stats_kwargs(cfg.name, cfg, segment, cuda, ref_hidden))
    loss, _ = get_loss(cfg.name)(stats, cfg)
    grads = torch.autograd.grad(loss, (hidden, weight, bias))
    assert_close(loss, want_loss, dtype)
    for got, want in zip(grads, want_grads):
        assert_close(got, want, dtype)


def fused(cfg, inputs, chunk, per_sample_groups):
    hidden, weight, bias, labels, segment, cuda, ref_hidden = inputs
    obj = get_loss(cfg.name)
    tg = select_targets(labels, vocab_size=V, segment_ids=segment, cuda_mask=cuda)
    groups = segment_runs(tg.segment).index if per_sample_groups else None
    if per_sample_groups == "one":
        groups = torch.zeros_like(tg.segment)
    terms, logp, kl, entropy = weighted_terms_fn(
        hidden[tg.mask], weight, bias, tg.ids, coefs=lambda c: obj.coefs(c, cfg), segment=tg.segment, cuda=tg.cuda,
        weight_groups=groups, topk=cfg.eaft_topk if obj.needs_entropy else None,
        ref_hidden=ref_hidden[tg.mask] if obj.needs_kl(cfg) else None, chunk_size=chunk)
    loss, _ = obj.reduce(terms, TokenStats(logp, tg.segment, tg.cuda, entropy, kl), cfg)
    return loss, torch.autograd.grad(loss, (hidden, weight, bias))


@pytest.mark.parametrize("cfg", CASES, ids=case_id)
@pytest.mark.parametrize("chunk, groups, dtype", [(1, True, torch.float32), (4, True, torch.float32),
                                                  (5, None, torch.float32), (64, True, torch.float32),
                                                  (4, True, torch.float64), (5, None, torch.float64)])
def test_weighted_terms_front_end_matches_full_logits(cfg, chunk, groups, dtype):
    inputs = make_inputs(seed=1, dtype=dtype)
    want_loss, want_grads = reference(cfg.name, cfg, inputs)
    loss, grads = fused(cfg, inputs, chunk, groups)
    assert_close(loss, want_loss, dtype)
    for got, want in zip(grads, want_grads):
        assert_close(got, want, dtype)


def test_weighted_terms_refuses_unequal_upstream_within_a_group():
    # one weight group for everything, but CuSeT weighs the 4 samples differently
    cfg = LossConfig(name="cuset", window=3)
    with pytest.raises(RuntimeError, match="same upstream gradient"):
        fused(cfg, make_inputs(seed=2), 4, "one")


def test_frozen_head_without_bias():
    inputs = make_inputs(seed=3, bias=False)
    hidden, weight, _, labels, segment, cuda, _ = inputs
    cfg = LossConfig(name="cuset", window=3)
    frozen = weight.detach()
    ref = full_logits_token_stats(hidden, frozen, None, labels, segment_ids=segment, cuda_mask=cuda)
    want = torch.autograd.grad(get_loss("cuset")(ref, cfg)[0], hidden)[0]
    got_stats = chunked_token_stats(hidden, frozen, None, labels, chunk_size=4, segment_ids=segment, cuda_mask=cuda)
    got = torch.autograd.grad(get_loss("cuset")(got_stats, cfg)[0], hidden)[0]
    assert_close(got, want)


def test_only_target_rows_are_scored():
    # a NaN hidden state at a non-target position must not reach any statistic or gradient
    hidden, weight, bias, labels, segment, cuda, _ = make_inputs(seed=4)
    poisoned = hidden.detach().clone()
    poisoned[0, 0] = float("nan")  # labels[0, 0] == -100
    poisoned.requires_grad_()
    stats = chunked_token_stats(poisoned, weight, bias, labels, chunk_size=4)
    loss = -stats.logp.sum()
    g = torch.autograd.grad(loss, poisoned)[0]
    assert torch.isfinite(loss)
    assert stats.n_tokens == int((labels != -100).sum())
    assert g[0, 0].abs().sum() == 0 and torch.isfinite(g).all()


def test_eaft_entropy_is_top20_not_full_vocabulary():
    # 21 equally likely tokens and 4 negligible ones: top-20 entropy is ln 20, full entropy ln 21
    logits = torch.full((25,), -40.0)
    logits[:21] = 0.0
    hidden = logits[None, None].clone().requires_grad_()
    stats = chunked_token_stats(hidden, torch.eye(25), None, torch.tensor([[3]]), need_entropy_topk=20)
    assert stats.entropy_topk.item() == pytest.approx(math.log(20), rel=1e-6)
    loss, _ = get_loss("eaft")(stats, LossConfig(name="eaft"))
    assert loss.item() == pytest.approx(math.log(20) / 3.0 * math.log(21), rel=1e-5)
    g = torch.autograd.grad(loss, stats.logp)[0]
    assert g.item() == pytest.approx(-math.log(20) / 3.0, rel=1e-6)


def test_asft_kl_matches_full_logits_and_has_no_reference_gradient():
    hidden, weight, bias, labels, _, _, ref_hidden = make_inputs(seed=5)
    ref_hidden = ref_hidden.clone().requires_grad_()
    stats = chunked_token_stats(hidden, weight, bias, labels, ref_hidden=ref_hidden, chunk_size=4)
    mask = labels != -100
    logq = torch.log_softmax(torch.nn.functional.linear(hidden[mask], weight, bias), -1)
    logr = torch.log_softmax(torch.nn.functional.linear(ref_hidden[mask], weight, bias), -1).detach()
    want = torch.nn.functional.kl_div(logq, logr, log_target=True, reduction="none").sum(-1)  # KL(ref || policy)
    assert_close(stats.kl, want)
    g_pol, g_ref = torch.autograd.grad(stats.kl.sum(), (hidden, ref_hidden), allow_unused=True)
    want_g = torch.autograd.grad(want.sum(), hidden)[0]
    assert_close(g_pol, want_g)
    assert g_ref is None


def test_separate_reference_head():
    hidden, weight, bias, labels, _, _, ref_hidden = make_inputs(seed=6)
    ref_w = weight.detach() * 0.5
    stats = chunked_token_stats(hidden, weight, bias, labels, ref_hidden=ref_hidden, ref_weight=ref_w, chunk_size=3)
    want = full_logits_token_stats(hidden, weight, bias, labels, ref_hidden=ref_hidden, ref_weight=ref_w)
    assert_close(stats.kl, want.kl)


def test_shape_errors_are_clear():
    hidden, weight, bias, labels, *_ = make_inputs()
    with pytest.raises(ValueError, match=r"must be \[B, T, H\]"):
        chunked_token_stats(hidden[0], weight, bias, labels)
    bad = labels.clone()
    bad[0, 5] = V
    with pytest.raises(ValueError, match="outside the vocabulary"):
        chunked_token_stats(hidden, weight, bias, bad)
    with pytest.raises(ValueError, match="cuda_mask has shape"):
        chunked_token_stats(hidden, weight, bias, labels, cuda_mask=torch.zeros(B, T + 1))



@pytest.mark.parametrize("groups", [True, None])
def test_only_some_inputs_trainable(groups):
    """Frozen weight with a trainable bias, and frozen hidden states with a trainable head."""
    cfg = LossConfig(name="cuset", window=3)
    inputs = make_inputs(seed=7)
    hidden, weight, bias, labels, segment, cuda, _ = inputs
    _, (g_h, g_w, g_b) = reference("cuset", cfg, inputs)
    obj = get_loss("cuset")
    tg = select_targets(labels, vocab_size=V, segment_ids=segment, cuda_mask=cuda)
    for h_in, w_in, wanted in ((hidden, weight.detach(), (g_h, g_b)), (hidden.detach(), weight, (g_w, g_b))):
        terms, logp, _, _ = weighted_terms_fn(
            h_in[tg.mask], w_in, bias, tg.ids, coefs=lambda c: obj.coefs(c, cfg), segment=tg.segment, cuda=tg.cuda,
            weight_groups=segment_runs(tg.segment).index if groups else None, chunk_size=4)
        loss, _ = obj.reduce(terms, TokenStats(logp, tg.segment, tg.cuda), cfg)
        trainable = [t for t in (h_in, w_in) if t.requires_grad] + [bias]
        for got, want in zip(torch.autograd.grad(loss, trainable), wanted):
            assert_close(got, want)


def test_no_grad_evaluation_gives_the_same_loss():
    inputs = make_inputs(seed=8)
    hidden, weight, bias, labels, segment, cuda, _ = inputs
    cfg = LossConfig(name="cuset", window=3, chunk_size=4)
    want, _ = reference("cuset", cfg, inputs)
    tg = select_targets(labels, vocab_size=V, segment_ids=segment, cuda_mask=cuda)
    with torch.no_grad():
        stats = chunked_token_stats(hidden, weight, bias, labels, chunk_size=4, segment_ids=segment, cuda_mask=cuda)
        generic, _ = get_loss("cuset")(stats, cfg)
        fused_loss, _, _ = head_loss_sum(cfg, hidden[tg.mask], weight, bias, tg)
    for got in (generic, fused_loss):
        assert not got.requires_grad
        assert_close(got, want)


def test_int32_labels_and_second_backward():
    inputs = make_inputs(seed=9)
    hidden, weight, bias, labels, segment, cuda, _ = inputs
    cfg = LossConfig(name="sft", chunk_size=4)
    want, _ = reference("sft", cfg, inputs)
    tg = select_targets(labels.int(), vocab_size=V)
    loss, _, _ = head_loss_sum(cfg, hidden[tg.mask], weight, bias, tg)
    assert_close(loss, want)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="second time"):
        loss.backward()
