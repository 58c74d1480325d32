"""The fused head's Triton kernels (Cut Cross-Entropy, impl="cce") against the chunked head, on a GPU.

The CPU runs the same comparisons through the library's torch.compile path
(tests/losses/test_losses_fused.py); here the kernels that training uses on CUDA.
"""

import dataclasses
import importlib.util

import pytest
import torch

from cuset.losses import LossConfig, compute_loss
from cuset.losses import fused
from cuset.losses.head import token_stats_fn

pytestmark = pytest.mark.gpu

needs_cuda_and_cce = pytest.mark.skipif(
    not torch.cuda.is_available() or importlib.util.find_spec("cut_cross_entropy") is None,
    reason="needs a CUDA GPU and cut-cross-entropy (pip install -e '.[fused]')")


@pytest.fixture(autouse=True)
def ieee_fp32():
    """fp32 products in IEEE fp32 (no TF32) on both paths, so they agree to fp32 rounding."""
    before = torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32
    torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.set_float32_matmul_precision(before[0])
    torch.backends.cuda.matmul.allow_tf32 = before[1]


@needs_cuda_and_cce
@pytest.mark.parametrize("filter_eps,tol", [(None, 2e-5), ("auto", 2e-4)], ids=["exact", "filtered"])
def test_cce_kernels_equal_the_chunked_head(filter_eps, tol):
    torch.manual_seed(0)
    dev = torch.device("cuda")
    n, hidden, vocab = 700, 128, 5003   # not multiples of the kernels' blocks
    h = torch.randn(n, hidden, device=dev, requires_grad=True)
    w = (torch.randn(vocab, hidden, device=dev) / 4).requires_grad_()
    y = torch.randint(0, vocab, (n,), device=dev)
    upstream = torch.rand(n, device=dev) * (torch.rand(n, device=dev) > 0.3)   # masks and weights, some 0
    got = fused.token_logp(h, w, y, impl="cce", filter_eps=filter_eps)
    gh, gw = torch.autograd.grad((got * upstream).sum(), (h, w))
    want, _, _ = token_stats_fn(h, w, None, y, chunk_size=256)
    wh, ww = torch.autograd.grad((want * upstream).sum(), (h, w))
    torch.testing.assert_close(got, want, rtol=2e-5, atol=2e-5)
    torch.testing.assert_close(gh, wh, rtol=tol, atol=tol)
    torch.testing.assert_close(gw, ww, rtol=tol, atol=tol)


@needs_cuda_and_cce
@pytest.mark.parametrize("name", ["sft", "dft", "profit", "cuset"])
def test_compute_loss_fused_equals_chunked_on_cuda(name):
    import transformers

    torch.manual_seed(1)
    cfg = transformers.Qwen2Config(vocab_size=4099, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                                   tie_word_embeddings=False)
    model = transformers.Qwen2ForCausalLM(cfg).cuda()
    with torch.no_grad():
        model.lm_head.weight.mul_(30.0)
    ids = torch.randint(1, 4099, (4, 200), device="cuda")
    labels = ids.clone()
    labels[:, :20] = -100
    batch = {"input_ids": ids, "labels": labels, "attention_mask": torch.ones_like(ids),
             "cuda_mask": (torch.rand(4, 200, device="cuda") > 0.5).float()}
    loss_cfg = LossConfig(name=name, window=16, head="fused")
    params = [p for p in model.parameters() if p.requires_grad]
    results = []
    for c in (dataclasses.replace(loss_cfg, head="chunked"), loss_cfg):
        loss, metrics = compute_loss(model, batch, c)
        results.append((loss, torch.autograd.grad(loss, params)))
    (want, want_g), (got, got_g) = results
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    for g, w in zip(got_g, want_g):
        torch.testing.assert_close(g, w, rtol=1e-3, atol=1e-5)
