"""The fused LM head (`cuset.losses.fused`) against the chunked head and hand-computed values.

Three ways through it on the CPU:
- `plain-torch`: the library's call replaced by per-token cross-entropy over full logits in
  plain torch (always runs): the objective's wiring around per-token values (coefficients,
  masks, region weights, reductions, gradients) equals the chunked head's;
- `cce`: Cut Cross-Entropy itself, its torch.compile implementation (the one that runs on a
  CPU), where the library and triton import (`pip install -e '.[fused]'`); skipped otherwise;
- hand-computed CuSeT values (masks 0 / 1 + lambda, the region weight, the gradient).
The Triton kernels (`impl="cce"`) run on a GPU only: tests/losses/test_losses_fused_gpu.py.
"""

import dataclasses
import importlib.util
import math

import pytest
import torch
import torch.nn.functional as F
import transformers

from cuset.losses import LOSSES, LossConfig, compute_loss
from cuset.losses import fused
from cuset.losses.compute import head_loss_sum
from cuset.losses.tokens import Targets, select_targets

HAVE_CCE = importlib.util.find_spec("cut_cross_entropy") is not None and importlib.util.find_spec("triton") is not None
VOCAB = 48
# every objective the fused head serves, and the ones it must leave to the chunked head
SERVED = [LossConfig(name=n, window=3, head="fused") for n in ("sft", "dft", "profit", "cuset")] + [
    LossConfig(name="asft", asft_beta=0.0, head="fused"),
    LossConfig(name="cuset", window=3, reduction="sample_mean", head="fused"),
    LossConfig(name="cuset", window=3, reduction="sample_sum", conf_mask=False, head="fused"),
]


def plain_torch_cross_entropy(e, c, targets, *, reduction, impl, filter_eps):
    """What linear_cross_entropy(reduction="none") computes, with full logits."""
    assert reduction == "none" and impl in ("cce", "torch_compile")
    return F.cross_entropy(e @ c.t(), targets, reduction="none")


@pytest.fixture(params=["plain-torch", "cce"])
def library(request, monkeypatch):
    if request.param == "plain-torch":
        monkeypatch.setattr(fused, "_linear_cross_entropy", plain_torch_cross_entropy)
        monkeypatch.setattr(fused, "library_available", lambda: True)
    elif not HAVE_CCE:
        pytest.skip("cut-cross-entropy (and triton) not installed: pip install -e '.[fused]'")
    return request.param


def tiny_model(dtype):
    torch.manual_seed(3)
    cfg = transformers.Qwen2Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                   tie_word_embeddings=False, attn_implementation="eager")
    model = transformers.Qwen2ForCausalLM(cfg).to(dtype)
    with torch.no_grad():  # confidences spread over (0, 1): masks and weights act
        model.lm_head.weight.mul_(20.0)
    return model


def batch_of(seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, VOCAB, (3, 10), generator=g)
    labels = ids.clone()
    labels[:, :3] = -100
    labels[2, 8:] = -100
    mask = torch.ones_like(ids)
    mask[2, 8:] = 0
    cuda = (torch.rand(3, 10, generator=g) > 0.5).float()
    return {"input_ids": ids, "attention_mask": mask, "labels": labels, "cuda_mask": cuda}


def loss_and_grads(model, batch, cfg):
    loss, metrics = compute_loss(model, batch, cfg)
    params = [p for p in model.parameters() if p.requires_grad]
    return loss, metrics, torch.autograd.grad(loss, params)


@pytest.mark.parametrize("cfg", SERVED, ids=lambda c: f"{c.name}-{c.reduction}-conf{c.conf_mask}")
def test_fused_head_equals_chunked_head_loss_and_gradients(library, cfg):
    # the library computes in fp32; the plain-torch stand-in keeps fp64 and so must agree to fp64 rounding
    dtype, tol = (torch.float64, dict(rtol=1e-9, atol=1e-11)) if library == "plain-torch" else \
        (torch.float32, dict(rtol=2e-5, atol=2e-6))
    model = tiny_model(dtype)
    batch = batch_of()
    got, got_metrics, got_grads = loss_and_grads(model, batch, cfg)
    want, want_metrics, want_grads = loss_and_grads(model, batch, dataclasses.replace(cfg, head="chunked"))
    torch.testing.assert_close(got, want, **tol)
    for g, w in zip(got_grads, want_grads):  # every parameter of the full fine-tune, the LM head's too
        torch.testing.assert_close(g, w, **tol)
    for key in ("nll", "conf_kept_frac", "dropped_frac", "w_mean", "w_min", "p_mean"):
        assert got_metrics[key] == pytest.approx(want_metrics[key], rel=1e-5, abs=1e-6), key


def test_fused_token_logp_equals_full_logits_with_per_token_upstream_gradients(library):
    torch.manual_seed(0)
    dtype = torch.float64 if library == "plain-torch" else torch.float32
    h = torch.randn(29, 16, dtype=dtype, requires_grad=True)
    w = (3 * torch.randn(VOCAB, 16, dtype=dtype)).requires_grad_()
    y = torch.randint(0, VOCAB, (29,))
    upstream = torch.randn(29, dtype=dtype)
    got = fused.token_logp(h, w, y, impl="torch_compile")
    gh, gw = torch.autograd.grad((got * upstream).sum(), (h, w))
    want = torch.log_softmax(h @ w.t(), -1).gather(1, y[:, None]).squeeze(1)
    wh, ww = torch.autograd.grad((want * upstream).sum(), (h, w))
    tol = dict(rtol=1e-9, atol=1e-11) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got, want, **tol)
    torch.testing.assert_close(gh, wh, **tol)
    torch.testing.assert_close(gw, ww, **tol)


# Two classes, W = I: the logits are h itself and p_t = sigmoid(h_y - h_other).
# Targets are class 0; p = 0.8, 0.05, 0.5 (h = (ln 4, 0), (-ln 19, 0), (0, 0)).
HAND_H = [[math.log(4.0), 0.0], [-math.log(19.0), 0.0], [0.0, 0.0]]


@pytest.mark.parametrize("head", ["chunked", "fused"])
def test_cuset_masks_and_region_weight_by_hand(library, head):
    h = torch.tensor(HAND_H, dtype=torch.float32, requires_grad=True)
    w = torch.eye(2)
    targets = Targets(mask=torch.ones(1, 3, dtype=torch.bool), ids=torch.zeros(3, dtype=torch.long),
                      segment=torch.zeros(3, dtype=torch.long), cuda=torch.tensor([1.0, 0.0, 1.0]))
    cfg = LossConfig(name="cuset", tau=0.1, lam=1.0, window=1, head=head)
    loss_sum, plain, metrics = head_loss_sum(cfg, h, w, None, targets)
    # Mconf = [1, 0, 1] (p > 0.1), Mcuda = [1, 0, 1]: a = [2, 0, 2]; window 1: C_t = p_t,
    # w = 1 - min(0.8, 0.05, 0.5) = 0.95; loss = 0.95 * (2 (-ln 0.8) + 2 (-ln 0.5)) = 1.74095...
    torch.testing.assert_close(plain.logp.exp(), torch.tensor([0.8, 0.05, 0.5]), rtol=1e-6, atol=1e-7)
    assert loss_sum.item() == pytest.approx(0.95 * 2 * (math.log(1.25) + math.log(2.0)), rel=1e-6)
    assert metrics["w_mean"].item() == pytest.approx(0.95, rel=1e-6)
    assert metrics["dropped_frac"].item() == pytest.approx(1 / 3)
    (grad,) = torch.autograd.grad(loss_sum, h)
    # d/dh of -w a log p_y = w a (p - e_y): token 1: 0.95*2*(-0.2, 0.2); token 2: 0; token 3: 0.95*2*(-0.5, 0.5)
    torch.testing.assert_close(grad, torch.tensor([[-0.38, 0.38], [0.0, 0.0], [-0.95, 0.95]]), rtol=1e-5, atol=1e-6)


def test_auto_keeps_the_chunked_head_on_the_cpu(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("the fused head was called on a CPU tensor under loss.head=auto")

    monkeypatch.setattr(fused, "_linear_cross_entropy", never)
    monkeypatch.setattr(fused, "library_available", lambda: True)
    loss, _ = compute_loss(tiny_model(torch.float64), batch_of(), LossConfig(name="cuset", window=3))
    assert torch.isfinite(loss)


@pytest.mark.parametrize("name,cfg_extra,bias,needle", [
    ("eaft", {}, False, "top-20 entropy"),
    ("asft", {"asft_beta": 0.1}, False, "KL(ref || policy)"),
    ("sft", {}, True, "has a bias"),
])
def test_fused_refuses_what_it_cannot_compute(monkeypatch, name, cfg_extra, bias, needle):
    monkeypatch.setattr(fused, "library_available", lambda: True)
    cfg = LossConfig(name=name, head="fused", **cfg_extra)
    obj = LOSSES[name]
    with pytest.raises(ValueError, match="loss.head=fused") as err:
        fused.choose_impl(cfg, torch.zeros(2, 4), needs_entropy=obj.needs_entropy, needs_kl=obj.needs_kl(cfg),
                          has_bias=bias)
    assert needle in str(err.value) and "loss.head=auto" in str(err.value)
    # auto: the same objective silently takes the exact chunked head
    auto = LossConfig(name=name, head="auto", **cfg_extra)
    assert fused.choose_impl(auto, torch.zeros(2, 4), needs_entropy=obj.needs_entropy, needs_kl=obj.needs_kl(auto),
                             has_bias=bias) is None


def test_fused_without_the_library_says_how_to_install(monkeypatch):
    monkeypatch.setattr(fused, "library_available", lambda: False)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[fused\]'"):
        fused.choose_impl(LossConfig(name="sft", head="fused"), torch.zeros(2, 4), needs_entropy=False,
                          needs_kl=False, has_bias=False)


def test_unknown_head_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="head='triton' must be one of auto, chunked, fused"):
        LossConfig(head="triton")


def test_select_targets_feeds_the_fused_head_in_row_major_order(monkeypatch):
    """The fused head sees the same [N] target ids as the chunked one (no shift of its own)."""
    seen = {}

    def record(e, c, targets, **kwargs):
        seen["targets"] = targets.clone()
        return plain_torch_cross_entropy(e, c, targets, **kwargs)

    monkeypatch.setattr(fused, "_linear_cross_entropy", record)
    monkeypatch.setattr(fused, "library_available", lambda: True)
    labels = torch.tensor([[-100, 5, 7], [2, -100, 9]])
    tg = select_targets(labels, vocab_size=VOCAB)
    head_loss_sum(LossConfig(name="sft", head="fused"), torch.randn(4, 8), torch.randn(VOCAB, 8), None, tg)
    assert seen["targets"].tolist() == [5, 7, 2, 9]
