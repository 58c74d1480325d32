"""Identities between the objectives (cuset.losses.objectives: each a_t, b_t, w_n), on random statistics."""

import pytest
import torch

from cuset.losses import LOSSES, LossConfig, TokenStats, get_loss


def random_stats(seed=0, n=40, with_extras=True):
    g = torch.Generator().manual_seed(seed)
    p = torch.rand(n, generator=g, dtype=torch.float64) * 0.98 + 0.01
    p[(p - 0.1).abs() < 1e-3] = 0.2  # no ties at the thresholds: CuSeT's > and ProFit's >= agree
    logp = p.log().requires_grad_()
    segment = torch.tensor([0] * 7 + [3] * 20 + [4] * 13)
    cuda = (torch.rand(n, generator=g) > 0.6).double()
    entropy = torch.rand(n, generator=g, dtype=torch.float64) * 3 if with_extras else None
    kl = (torch.rand(n, generator=g, dtype=torch.float64)).requires_grad_() if with_extras else None
    return TokenStats(logp, segment, cuda, entropy, kl)


def loss_and_grad(name, stats, **cfg):
    loss, _ = get_loss(name)(stats, LossConfig(name=name, **cfg))
    inputs = [stats.logp] + ([stats.kl] if stats.kl is not None else [])
    grads = torch.autograd.grad(loss, inputs, allow_unused=True)
    return loss, [torch.zeros_like(x) if gr is None else gr for x, gr in zip(inputs, grads)]


def assert_same(a, b):
    torch.testing.assert_close(a[0], b[0], rtol=1e-12, atol=0)
    for x, y in zip(a[1], b[1]):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=0)


@pytest.mark.parametrize("reduction", ["token", "sample_sum", "sample_mean"])
def test_cuset_with_every_switch_off_is_sft(reduction):
    s = random_stats()
    off = dict(conf_mask=False, cuda_mask=False, region_weight=False, reduction=reduction)
    assert_same(loss_and_grad("cuset", s, **off), loss_and_grad("sft", s, reduction=reduction))


def test_cuset_with_only_the_confidence_mask_is_profit():
    s = random_stats(1)
    only_conf = dict(conf_mask=True, cuda_mask=False, region_weight=False, tau=0.1)
    assert_same(loss_and_grad("cuset", s, **only_conf), loss_and_grad("profit", s, profit_threshold=0.1))


def test_dft_weight_is_p():
    s = random_stats(2)
    _, (g_logp, _) = loss_and_grad("dft", s)
    torch.testing.assert_close(g_logp, -s.logp.detach().exp(), rtol=1e-12, atol=0)


def test_eaft_weight_is_entropy_over_three():
    s = random_stats(3)
    _, (g_logp, _) = loss_and_grad("eaft", s, eaft_alpha=1.0)
    torch.testing.assert_close(g_logp, -s.entropy_topk / 3.0, rtol=1e-12, atol=0)


def test_asft_with_beta_zero_is_dft():
    s = random_stats(4)
    assert_same(loss_and_grad("asft", s, asft_beta=0.0), loss_and_grad("dft", s))


def test_asft_kl_gradient_is_beta():
    s = random_stats(5)
    _, (_, g_kl) = loss_and_grad("asft", s, asft_beta=0.05)
    torch.testing.assert_close(g_kl, torch.full_like(g_kl, 0.05), rtol=1e-12, atol=0)


def test_stop_gradient_coefficients():
    # every coefficient is detached: d loss / d logp_t is the coefficient itself, with no
    # d(coefficient)/d logp term (a differentiable p would add -p*logp*... terms)
    s = random_stats(6)
    loss, (g_logp, _) = loss_and_grad("cuset", s, window=5)
    per_token = g_logp * s.logp.detach()  # loss_sum is linear in logp
    torch.testing.assert_close(per_token.sum(), loss.detach(), rtol=1e-12, atol=0)


def test_cuset_region_weights_are_per_sample():
    s = random_stats(7)
    _, metrics = get_loss("cuset")(s, LossConfig(name="cuset", window=4))
    assert 0 <= metrics["w_min"] <= metrics["w_mean"] <= metrics["w_max"] <= 1
    assert metrics["w_min"] < metrics["w_max"]  # three samples, three different weights


@pytest.mark.parametrize("name", ["eaft", "asft"])
def test_missing_statistics_are_reported(name):
    s = random_stats(with_extras=False)
    with pytest.raises(ValueError, match="needs"):
        get_loss(name)(s, LossConfig(name=name))


def test_registry_and_config_errors():
    assert set(LOSSES) == {"sft", "dft", "eaft", "asft", "profit", "cuset"}
    with pytest.raises(ValueError, match="did you mean 'cuset'"):
        get_loss("cusett")
    with pytest.raises(ValueError, match="did you mean 'profit'"):
        LossConfig(name="proft")
    with pytest.raises(ValueError, match="tau=1.5"):
        LossConfig(tau=1.5)


def test_config_loads_with_overrides_and_lists_all_errors():
    from cuset.config import ConfigError, load_config

    cfg = load_config(LossConfig, None, ["name=dft", "reduction=sample_mean", "chunk_size=64"])
    assert (cfg.name, cfg.reduction, cfg.chunk_size) == ("dft", "sample_mean", 64)
    with pytest.raises(ConfigError) as err:
        load_config(LossConfig, None, ["reduction=tokens", "windw=3"])
    text = str(err.value)
    assert "did you mean 'token'" in text and "did you mean 'window'" in text
