"""Every objective on a 3-token vocabulary, loss and gradients derived by hand.

The LM head is the identity (W = I, no bias) and each hidden state is the log of
a chosen probability row, so the logits are log-probabilities and softmax gives
the row back exactly. For a per-token loss  -a_t log p_t + b_t KL_t  the
gradient with respect to the logits is  a_t (P_t - e_y) + b_t (P_t - R_t)
(P: policy probabilities, R: reference probabilities); with W = I that is the
gradient w.r.t. the hidden state, and dL/dW = sum_t G_t^T h_t.
"""

import math

import pytest
import torch

from cuset.losses import LossConfig, chunked_token_stats, get_loss

# four target tokens of one sample; target ids and the policy's probability rows
TARGETS = [0, 0, 2, 0]
PROBS = [
    [0.50, 0.30, 0.20],  # p(y) = 0.50
    [0.05, 0.90, 0.05],  # p(y) = 0.05
    [0.20, 0.20, 0.60],  # p(y) = 0.60
    [0.08, 0.02, 0.90],  # p(y) = 0.08
]
P_Y = [0.50, 0.05, 0.60, 0.08]
CUDA = [0.0, 1.0, 1.0, 0.0]
REF_PROBS = [
    [0.40, 0.40, 0.20],
    [0.10, 0.80, 0.10],
    [0.20, 0.20, 0.60],  # identical to the policy: KL = 0
    [0.30, 0.30, 0.40],
]


def run(name, chunk_size=3, ref=False, **cfg_changes):
    """(loss_sum, d/dhidden [4, 3], d/dW [3, 3]) through the chunked head."""
    cfg = LossConfig(name=name, chunk_size=chunk_size, **cfg_changes)
    hidden = torch.tensor(PROBS, dtype=torch.float64).log()[None].requires_grad_()
    weight = torch.eye(3, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([TARGETS])
    ref_hidden = torch.tensor(REF_PROBS, dtype=torch.float64).log()[None] if ref else None
    stats = chunked_token_stats(hidden, weight, None, labels, chunk_size=chunk_size,
                                need_entropy_topk=cfg.eaft_topk if name == "eaft" else None,
                                ref_hidden=ref_hidden, cuda_mask=torch.tensor([CUDA]))
    loss_sum, metrics = get_loss(name)(stats, cfg)
    g_hidden, g_weight = torch.autograd.grad(loss_sum, (hidden, weight))
    return loss_sum.item(), g_hidden[0], g_weight, metrics


def expected_grads(a, b=None):
    """G_t = a_t (P_t - e_y) + b_t (P_t - R_t); dW = sum_t G_t^T log(P_t)."""
    p = torch.tensor(PROBS, dtype=torch.float64)
    onehot = torch.nn.functional.one_hot(torch.tensor(TARGETS), 3).double()
    g = torch.tensor(a, dtype=torch.float64)[:, None] * (p - onehot)
    if b is not None:
        g = g + torch.tensor(b, dtype=torch.float64)[:, None] * (p - torch.tensor(REF_PROBS, dtype=torch.float64))
    return g, g.t() @ p.log()


def check(result, loss, a, b=None):
    got_loss, g_hidden, g_weight, _ = result
    want_h, want_w = expected_grads(a, b)
    assert got_loss == pytest.approx(loss, rel=1e-12)
    torch.testing.assert_close(g_hidden, want_h, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(g_weight, want_w, rtol=1e-10, atol=1e-12)


def test_sft():
    loss = -(math.log(0.5) + math.log(0.05) + math.log(0.6) + math.log(0.08))
    assert loss == pytest.approx(6.7254, abs=1e-4)
    check(run("sft"), loss, a=[1, 1, 1, 1])


def test_dft_weights_each_token_by_its_probability():
    loss = -(0.5 * math.log(0.5) + 0.05 * math.log(0.05) + 0.6 * math.log(0.6) + 0.08 * math.log(0.08))
    assert loss == pytest.approx(1.0049, abs=1e-4)
    check(run("dft"), loss, a=[0.5, 0.05, 0.6, 0.08])


def test_profit_drops_tokens_below_threshold():
    # p = 0.05 and 0.08 fall below 0.1 and contribute nothing (they still count in compute_loss's denominator)
    loss = -(math.log(0.5) + math.log(0.6))
    check(run("profit"), loss, a=[1, 0, 1, 0])
    _, _, _, metrics = run("profit")
    assert metrics["conf_kept_frac"].item() == pytest.approx(0.5)
    assert metrics["dropped_frac"].item() == pytest.approx(0.5)
    assert run("sft")[3]["dropped_frac"].item() == 0.0


def test_profit_threshold_is_inclusive():
    # threshold exactly at a token's probability keeps it (>=), unlike CuSeT's strict tau
    check(run("profit", profit_threshold=0.6), -math.log(0.6), a=[0, 0, 1, 0])


def test_eaft_uses_top_k_renormalised_entropy_over_three():
    # top-2 logits of each row, renormalised: [.5,.3]/.8, [.9,.05]/.95, [.6,.2]/.8, [.9,.08]/.98
    def h(*q):
        s = sum(q)
        return -sum(x / s * math.log(x / s) for x in q)

    ent = [h(0.5, 0.3), h(0.9, 0.05), h(0.6, 0.2), h(0.9, 0.08)]
    assert ent[0] == pytest.approx(0.66156, abs=1e-5)
    a = [e / 3.0 for e in ent]
    loss = -sum(w * math.log(p) for w, p in zip(a, P_Y))
    check(run("eaft", eaft_topk=2), loss, a=a)


def test_eaft_alpha_is_an_exponent():
    ent = -(0.625 * math.log(0.625) + 0.375 * math.log(0.375))  # row 1, top-2
    got = run("eaft", eaft_topk=2, eaft_alpha=2.0)
    a0 = (ent / 3.0) ** 2
    assert got[1][0].tolist() == pytest.approx([a0 * (0.5 - 1), a0 * 0.3, a0 * 0.2], rel=1e-10)


def test_asft_adds_forward_kl_to_the_reference():
    def kl(r, p):
        return sum(ri * math.log(ri / pi) for ri, pi in zip(r, p))

    kls = [kl(r, p) for r, p in zip(REF_PROBS, PROBS)]
    assert kls[2] == 0.0
    assert kls[0] == pytest.approx(0.4 * math.log(0.4 / 0.5) + 0.4 * math.log(0.4 / 0.3), rel=1e-12)
    beta = 0.1  # the default: the official ASFT code's
    loss = -sum(p * math.log(p) for p in P_Y) + beta * sum(kls)
    check(run("asft", ref=True), loss, a=P_Y, b=[beta] * 4)


def test_cuset_hybrid_mask_and_region_weight():
    # confidence mask (p > 0.1): [1, 0, 1, 0]; CUDA mask (lambda = 1): [0, 1, 1, 0]
    # hybrid M = [1, 1, 2, 0]: a confident CUDA token gets 1 + lambda, an unconfident neutral one 0.
    # window l = 4 over T = 4 targets, [max(1, t-2), min(4, t+1)]:
    c1 = (0.5 + 0.05) / 2  # t=1: j in 1..2
    c2 = (0.5 + 0.05 + 0.6) / 3  # t=2: 1..3
    c3 = (0.5 + 0.05 + 0.6 + 0.08) / 4  # t=3: 1..4
    c4 = (0.05 + 0.6 + 0.08) / 3  # t=4: 2..4
    w = 1 - min(c1, c2, c3, c4)
    assert w == pytest.approx(1 - 0.243333, abs=1e-6)
    m = [1, 1, 2, 0]
    loss = -w * sum(mi * math.log(p) for mi, p in zip(m, P_Y))
    result = run("cuset", window=4)
    check(result, loss, a=[w * mi for mi in m])
    metrics = result[3]
    assert metrics["w_mean"].item() == pytest.approx(w)
    assert metrics["conf_kept_frac"].item() == pytest.approx(0.5)
    assert metrics["dropped_frac"].item() == pytest.approx(0.25)  # M = 0 on the 4th token only
    assert metrics["cuda_frac"].item() == pytest.approx(0.5)


def test_cuset_lambda_is_literal():
    # lambda = 2.5: M = [1, 2.5, 3.5, 0]; window 8 > T = 4, so C_t = mean(c) for every t
    w = 1 - (0.5 + 0.05 + 0.6 + 0.08) / 4
    m = [1, 2.5, 3.5, 0]
    loss = -w * sum(mi * math.log(p) for mi, p in zip(m, P_Y))
    check(run("cuset", lam=2.5, window=8), loss, a=[w * mi for mi in m])


@pytest.mark.parametrize("switches, m, weighted", [
    ({"conf_mask": False}, [1 + 0, 1 + 1, 1 + 1, 1 + 0], True),
    ({"cuda_mask": False}, [1, 0, 1, 0], True),
    ({"region_weight": False}, [1, 1, 2, 0], False),
])
def test_cuset_ablation_switches(switches, m, weighted):
    w = 1 - (0.5 + 0.05 + 0.6 + 0.08) / 4 if weighted else 1.0  # window 8 > T: whole-response mean
    loss = -w * sum(mi * math.log(p) for mi, p in zip(m, P_Y))
    check(run("cuset", window=8, **switches), loss, a=[w * mi for mi in m])


@pytest.mark.parametrize("reduction, factor", [("token", 1.0), ("sample_sum", 1.0), ("sample_mean", 1 / 4)])
def test_reductions_scale_per_sample(reduction, factor):
    # the objective's loss_sum: sample_mean divides each sample's sum by its T_n = 4 targets
    loss = -factor * sum(math.log(p) for p in P_Y)
    check(run("sft", reduction=reduction), loss, a=[factor] * 4)


def test_cuset_weight_norm_divides_w_by_the_step_mean():
    """cuset:wnorm: two samples (tokens 1-2 and 3-4), window 8 > T_n = 2 so C_t is each sample's mean
    confidence: w_A = 1 - (0.5 + 0.05) / 2 = 0.725, w_B = 1 - (0.6 + 0.08) / 2 = 0.66. Normalised
    to their mean 0.6925 they are 1.0469314 and 0.9530686; with a step mean of 0.5 handed in (other
    micro-batches of the step) 1.45 and 1.32. The hybrid mask is M = [1, 1, 2, 0] as above."""
    cfg = LossConfig(name="cuset", window=8, weight_norm=True)
    hidden = torch.tensor(PROBS, dtype=torch.float64).log()[None].requires_grad_()
    weight = torch.eye(3, dtype=torch.float64)
    stats = chunked_token_stats(hidden, weight, None, torch.tensor([TARGETS]), cuda_mask=torch.tensor([CUDA]),
                                segment_ids=torch.tensor([[0, 0, 1, 1]]))
    obj = get_loss("cuset")
    term_a = -(math.log(0.5) + math.log(0.05))   # M = 1, 1
    term_b = -(2 * math.log(0.6))                # M = 2, 0
    assert 0.725 / 0.6925 == pytest.approx(1.0469314, abs=1e-7)
    own, metrics = obj(stats, cfg)
    assert own.item() == pytest.approx(0.725 / 0.6925 * term_a + 0.66 / 0.6925 * term_b, rel=1e-12)
    assert metrics["w_mean"].item() == pytest.approx(0.6925)  # the log keeps the raw weights
    plain = stats.detached()
    terms = -obj.coefs(plain, cfg)[0] * stats.logp
    step, _ = obj.reduce(terms, plain, cfg, weight_mean=0.5)
    assert step.item() == pytest.approx(1.45 * term_a + 1.32 * term_b, rel=1e-12)
    raw, _ = obj(stats, LossConfig(name="cuset", window=8))
    assert raw.item() == pytest.approx(0.725 * term_a + 0.66 * term_b, rel=1e-12)
    # without a sample weight there is nothing to renormalise: wnorm changes nothing
    off, _ = obj(stats, LossConfig(name="cuset", window=8, weight_norm=True, region_weight=False))
    assert off.item() == pytest.approx(term_a + term_b, rel=1e-12)
