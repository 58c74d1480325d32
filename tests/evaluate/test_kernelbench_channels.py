"""Issue 59, KernelBench on the CPU backend: what decides a verdict comes from the parent,
never from the candidate's process alone.

- A refusal of an extension the parent finds in the source is the parent's: a candidate
  that replaces the harness's exit hook in `__main__` (so its request for the refused build
  no longer ends its run) and falls back to torch is still `unsupported`.

Every kernel is relu_ok's source (one build, shared with the other KernelBench tests
through the user cache dir).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cuset.evaluate.kernelbench import evaluate_kernelbench
from cuset.evaluate.options import EvalOptions, Timeouts
from cuset.execute.result import Status
from cuset.tasks import KernelBenchTask
from sandbox_tools import needs_a_sandbox

pytestmark = needs_a_sandbox

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench"
REFERENCE = (FIXTURES / "relu_ref.py").read_text()
TASK = dataclasses.replace(KernelBenchTask("kb_relu", "ReLU", REFERENCE), n_trials=1)
SOURCES = (FIXTURES / "relu_ok.py").read_text().split("relu = load_inline(")[0]
OPTS = EvalOptions(timeouts=Timeouts(compile=600, run=60))

# pybind11 bindings in the C++ source: refused by the CPU build (found statically: constants)
REFUSED_LOAD = ('load_inline(name="relu_pybind", cpp_sources=relu_cpp_source + "\\nPYBIND11_MODULE('
                'TORCH_EXTENSION_NAME, m) { m.def(\\"relu_cuda\\", &relu_cuda); }", cuda_sources=relu_source)')
EXIT_HOOK = "import __main__\n__main__._EXIT = lambda code: None   # the request no longer ends the run\n"


def with_fallback(load: str, setup: str = "") -> str:
    return (SOURCES + setup + f"try:\n    ext = {load}\nexcept Exception:\n    ext = None\n\n\n"
            "class ModelNew(nn.Module):\n    def forward(self, x):\n"
            "        return torch.relu(x) if ext is None else ext.relu_cuda(x)\n")


def kb(code: str, **options):
    return evaluate_kernelbench(TASK, code, backend="cpu", options=dataclasses.replace(OPTS, **options))


def test_a_refusal_survives_a_patched_exit_hook():
    control = kb(with_fallback(REFUSED_LOAD))
    assert control.status is Status.UNSUPPORTED, control.detail
    patched = kb(with_fallback(REFUSED_LOAD, EXIT_HOOK))
    assert patched.status is Status.UNSUPPORTED, patched.detail
    assert "pybind11 bindings are not provided by the CPU backend" in patched.detail
