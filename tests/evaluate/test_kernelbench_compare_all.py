"""The KernelBench comparison checks all of what the reference computed: every parameter
gradient whatever names the candidate reports for its parameters, and both parts of complex
outputs. Pure-torch answers (no extension build), through evaluate_program on the CPU backend."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from cuset.evaluate.options import EvalOptions
from cuset.evaluate.pipeline import evaluate_program
from cuset.execute.kernelbench.compare import _paired_params, compare
from cuset.execute.result import Status
from cuset.tasks import load_tasks

BUNDLE = Path(__file__).resolve().parents[2] / "suites" / "kernelbench"
ROBUST = EvalOptions(robust=True, robust_cases=1)


def test_parameters_pair_by_name_then_in_order_and_none_is_skipped():
    ref = {"linear.weight": 0, "linear.bias": 1}
    assert _paired_params(ref, {"linear.weight": 0, "linear.bias": 1}) == {"linear.weight": "linear.weight",
                                                                          "linear.bias": "linear.bias"}
    assert _paired_params(ref, {"fc.weight": 0, "fc.bias": 1}) == {"linear.weight": "fc.weight", "linear.bias": "fc.bias"}
    assert _paired_params(ref, {"linear.bias": 1, "w": 0}) == {"linear.weight": "w", "linear.bias": "linear.bias"}
    assert _paired_params(ref, {}) == {"linear.weight": None, "linear.bias": None}
    assert _paired_params(ref, {"fc.weight": 0}) == {"linear.weight": "fc.weight", "linear.bias": None}


def test_complex_outputs_are_compared_on_both_parts():
    y = torch.fft.fft(torch.randn(4, 8, generator=torch.Generator().manual_seed(0)))
    assert compare([y], [y.clone()], 1e-5, 1e-5, "output") is None
    detail, err = compare([y], [y.conj().resolve_conj()], 1e-5, 1e-5, "output")
    assert "elements differ" in detail and err > 0.1
    detail, _ = compare([y], [torch.complex(y.real, torch.zeros_like(y.real))], 1e-5, 1e-5, "output")
    assert "elements differ" in detail


LINEAR_GRADS = '''import torch
import torch.nn as nn

class _Lin(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        return x @ w.t() + b

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w, WEIGHT_GRAD, g.sum(0)

class ModelNew(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.NAME = nn.Linear(i, o)
    HIDE
    def forward(self, x):
        return _Lin.apply(x, self.NAME.weight, self.NAME.bias)
'''
HIDE = "def named_parameters(self, *a, **k):   # the harness asks the model itself\n        return iter(())\n"


@pytest.fixture(scope="module")
def linear_backward():
    task = {t.id: t for t in load_tasks(BUNDLE)[0]}["kb_linear"]
    return dataclasses.replace(task, backward=True, shape_variants=(), value_variants=())


@pytest.mark.parametrize("name,weight_grad,hide,robust", [
    ("fc", "g.t() @ x", "", Status.PASSED),                        # renamed, right: compared in order, passes
    ("fc", "torch.full_like(w, 123.0)", "", Status.WRONG),         # renamed to dodge the check
    ("linear", "torch.full_like(w, 123.0)", HIDE, Status.WRONG),   # reports no parameters at all
], ids=["renamed_right", "renamed_wrong", "hidden_wrong"])
def test_every_reference_parameter_gradient_is_checked(tmp_path, linear_backward, name, weight_grad, hide, robust):
    code = LINEAR_GRADS.replace("NAME", name).replace("WEIGHT_GRAD", weight_grad).replace("HIDE", hide)
    r = evaluate_program(linear_backward, code, backend="cpu", options=ROBUST, workdir=tmp_path)
    assert r.status is Status.PASSED, r.detail              # the forward is right in every case
    assert r.robust_status is robust, r.robust_detail
    if robust is Status.WRONG:
        assert r.robust_check == "backward" and "parameter" in r.robust_detail


FFT_REFERENCE = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.fft.fft(x)

def get_inputs():
    return [torch.randn(16, 256)]

def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("answer,status", [
    ("torch.fft.fft(x)", Status.PASSED),
    ("torch.fft.fft(x).conj().resolve_conj()", Status.WRONG),   # the imaginary part negated
], ids=["right", "conjugate"])
def test_a_complex_output_s_imaginary_part_is_judged(tmp_path, answer, status):
    base = {t.id: t for t in load_tasks(BUNDLE)[0]}["kb_relu"]
    task = dataclasses.replace(base, id="kb_fft", task_name="FFT", reference_src=FFT_REFERENCE, backward=False,
                               shape_variants=(), value_variants=())
    code = f"import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" \
           f"        return {answer}\n"
    r = evaluate_program(task, code, backend="cpu", options=EvalOptions(), workdir=tmp_path)
    assert r.status is status, r.detail
