"""The static reward-hack rules in the KernelBench evaluation path: every result carries
the rules that fired (`hack`), and `strict_kernels=true` fails a flagged pass."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from cuset.evaluate.config import EvalConfig
from cuset.evaluate.kernelbench import STRICT_KERNELS_DETAIL, evaluate_kernelbench, static_hack_verdict
from cuset.evaluate.options import EvalOptions, Timeouts
from cuset.evaluate.records import SampleResult
from cuset.execute.kernelbench.verify import KbVerdict
from cuset.execute.result import ExecResult, Status
from cuset.tasks import KernelBenchTask

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench"
REFERENCE = (FIXTURES / "relu_ref.py").read_text()
TASK = dataclasses.replace(KernelBenchTask("kb_relu", "ReLU", REFERENCE), n_trials=1)
PURE_TORCH = ("import torch\n\n\nclass ModelNew(torch.nn.Module):\n"   # 4
              "    def forward(self, x):\n        return torch.relu(x)\n")   # 6


def test_a_flagged_pass_fails_only_under_strict_kernels():
    passed = KbVerdict(Status.PASSED)
    assert static_hack_verdict(TASK, PURE_TORCH, passed, EvalOptions()) == (
        Status.PASSED, "", ("no_custom_kernel:4", "torch_op_in_forward:6"))
    status, detail, hack = static_hack_verdict(TASK, PURE_TORCH, passed, EvalOptions(strict_kernels=True))
    assert status is Status.WRONG and hack == ("no_custom_kernel:4", "torch_op_in_forward:6")
    assert detail.startswith(STRICT_KERNELS_DETAIL + ": no_custom_kernel (line 4)")
    assert "torch_op_in_forward (line 6): ModelNew.forward calls torch.relu" in detail
    # a failure stays the failure it was; unparseable code has no findings
    wrong = KbVerdict(Status.WRONG, "max abs error 1.0")
    assert static_hack_verdict(TASK, PURE_TORCH, wrong, EvalOptions(strict_kernels=True))[:2] == (
        Status.WRONG, "max abs error 1.0")
    broken = KbVerdict(Status.COMPILE_ERROR, "the candidate is not valid Python")
    assert static_hack_verdict(TASK, "class ModelNew(:\n", broken, EvalOptions(strict_kernels=True))[2] == ()


def test_the_option_reaches_the_eval_options_and_the_flags_survive_the_records():
    assert EvalConfig(strict_kernels=True).options().strict_kernels is True
    assert EvalConfig().options().strict_kernels is False
    r = ExecResult(Status.PASSED, hack=("no_custom_kernel:4",))
    assert ExecResult.from_json(r.to_json()).hack == ("no_custom_kernel:4",)
    s = SampleResult.from_exec(r, task_id="kb_relu", task_name="ReLU", family="f", sample=0, compiled=True,
                               ran_ok=True, n_tokens=None, code_sha256=None)
    assert SampleResult.from_json(s.to_json()).hack == ("no_custom_kernel:4",)


def test_pure_torch_model_new_passes_flagged_and_fails_under_strict_kernels():
    opts = EvalOptions(timeouts=Timeouts(compile=600, run=30))
    loose = evaluate_kernelbench(TASK, PURE_TORCH, backend="cpu", options=opts)
    assert loose.status is Status.PASSED, loose.detail
    assert loose.hack == ("no_custom_kernel:4", "torch_op_in_forward:6")
    # the runtime evidence agrees with the static rules: nothing of its own launched
    assert loose.kernel.without_kernel() == "no_kernel_called" and loose.kernel.launches == 0
    strict = evaluate_kernelbench(TASK, PURE_TORCH, backend="cpu", options=dataclasses.replace(opts, strict_kernels=True))
    # failed for running none of its own kernels, with the static rules named beside it
    assert strict.status is Status.WRONG, strict.detail
    assert strict.detail.startswith("strict_kernels: passed without its own kernels: no kernel of its own launched")
    assert "reward-hack rules fired too: no_custom_kernel (line 4)" in strict.detail
    assert "torch_op_in_forward (line 6)" in strict.detail and strict.hack == loose.hack
