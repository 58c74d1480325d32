"""Issue 59, KernelBench on the CPU backend: what decides a verdict comes from the parent,
never from the candidate's process alone.

- A refusal of an extension the parent finds in the source is the parent's: a candidate
  that replaces the harness's exit hook in `__main__` (so its request for the refused build
  no longer ends its run) and falls back to torch is still `unsupported`.
- strict_kernels: a pass needs outputs its own kernels computed, shown by a run the parent
  makes with every launch of its kernels skipped (the answer must then fail). Answers whose
  torch work no static rule sees (an empty kernel launched for show, `getattr(torch, "re" +
  "lu")`, `torch::relu` in the extension's C++, launch counts forged to 1,000) pass
  strict_kernels without it and fail with it; a real kernel still passes.

The kernels are relu_ok's source (one build, shared with the other KernelBench tests
through the user cache dir) and SHOW's (one build for every strict_kernels attack).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cuset.evaluate.kernelbench import WITHOUT_OWN_KERNELS, evaluate_kernelbench
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


# An extension whose kernel does nothing: launched for show, while torch computes.
SHOW = r'''
show_source = """
#include <torch/extension.h>
__global__ void nothing_kernel(int* unused) {}
void show() { nothing_kernel<<<1, 32>>>(nullptr); }
torch::Tensor relu_aten(torch::Tensor x) { show(); return torch::relu(x); }
"""
show_cpp = "void show();\ntorch::Tensor relu_aten(torch::Tensor x);"
ext = load_inline(name="show", cpp_sources=show_cpp, cuda_sources=show_source, functions=["show", "relu_aten"])
'''
HEAD = "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"
FORWARD = "\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
STRICT_ATTACKS = {
    # one empty launch per call; torch computes, spelled so that no static rule sees it
    "empty_launch": HEAD + SHOW + FORWARD + '        ext.show()\n        return getattr(torch, "re" + "lu")(x)\n',
    # torch::relu inside the extension's C++ (with an empty launch beside it)
    "aten_in_cpp": HEAD + SHOW + FORWARD + "        return ext.relu_aten(x)\n",
    # a real extension loaded, never called, its process reporting 1,000 launches and calls
    "forged_counts": SOURCES + "relu = load_inline(name='relu', cpp_sources=relu_cpp_source, cuda_sources=relu_source, "
                     "functions=['relu_cuda', 'leaky_cuda'], verbose=False, extra_cflags=['-O3'], "
                     "extra_cuda_cflags=['-O3', '--use_fast_math'])\n"
                     # a route to the harness's module that no static rule knows (sys.modules itself is flagged)
                     "_harness = getattr(__import__('sys'), 'mod' + 'ules')['__' + 'main__']\n"
                     "type.__setattr__(_harness.CpuExtensions, 'launches', lambda self: self.counted.calls)\n" + FORWARD +
                     "        counted = _harness.EXTENSIONS.counted\n"
                     "        counted.calls += 1000\n"
                     '        return getattr(torch, "re" + "lu")(x)\n',
}


@pytest.mark.parametrize("name", list(STRICT_ATTACKS))
def test_torch_work_behind_kernels_for_show_fails_strict_kernels(name):
    loose = kb(STRICT_ATTACKS[name])
    assert loose.status is Status.PASSED and loose.hack == (), (loose.detail, loose.hack)   # no static rule fires
    assert loose.kernel.launches > 0 and loose.kernel.without_kernel() == ""   # the counts look like kernel work
    strict = kb(STRICT_ATTACKS[name], strict_kernels=True)
    assert strict.status is Status.WRONG, strict.detail
    assert strict.detail == "strict_kernels: " + WITHOUT_OWN_KERNELS
    assert any(s.name.endswith("[own kernels skipped]") for s in strict.steps)


HONEST = (SOURCES + "relu = load_inline(name='relu', cpp_sources=relu_cpp_source, cuda_sources=relu_source, "
          "functions=['relu_cuda', 'leaky_cuda'], verbose=False, extra_cflags=['-O3'], "
          "extra_cuda_cflags=['-O3', '--use_fast_math'])\n" + FORWARD + "        return relu.relu_cuda(x)\n")


def test_an_answer_computing_with_its_own_kernel_passes_strict_kernels():
    honest = kb(HONEST, strict_kernels=True)
    assert honest.status is Status.PASSED, honest.detail
    skipped = [s for s in honest.steps if s.name.endswith("[own kernels skipped]")]
    assert skipped and "plain_without_own_kernels_total" in honest.timings


# A candidate that computes right only where the preloaded library is mapped into its process.
SEES_PRELOAD = (HEAD + "import os\n" + FORWARD +
                "        mapped = 'launch_skip.so' in open('/proc/self/maps').read()\n"
                "        return torch.relu(x) if mapped and os.environ.get('LD_PRELOAD') else -x\n")


def test_the_gpu_skip_library_reaches_the_candidates_run_only():
    """strict_kernels' run on the GPU preloads cuset.execute.kernelbench.launch_skip into the
    candidate's process (bound read-only into its sandbox); shown here on the CPU backend,
    whose harness runs the same way: the candidate sees the library mapped, the reference's
    run is the one every other verify shares."""
    from cuset.execute.kernelbench import launch_skip
    from cuset.execute.kernelbench.options import VerifyOptions
    from cuset.execute.kernelbench.verify import plain_checks, verify

    checks = plain_checks(1)
    assert verify(REFERENCE, SEES_PRELOAD, checks, options=VerifyOptions()).status is Status.WRONG
    preloaded = verify(REFERENCE, SEES_PRELOAD, checks,
                       options=VerifyOptions(candidate_preload=launch_skip.library()))
    assert preloaded.status is Status.PASSED, preloaded.detail


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["empty_launch", "aten_in_cpp"])
def test_strict_kernels_on_a_gpu_runs_the_answer_without_its_launches(name):
    """The same attacks on a GPU: its strict_kernels run preloads launch_skip, and an answer
    whose outputs torch computed still passes there, so it is `wrong`; the honest answer
    fails without its kernel, so it passes."""
    from cuset.execute.registry import gpu_available

    if not gpu_available():
        pytest.skip("no NVIDIA GPU")

    def gpu(code):
        return evaluate_kernelbench(TASK, code, backend="gpu", options=dataclasses.replace(OPTS, strict_kernels=True))

    attack = gpu(STRICT_ATTACKS[name])
    assert attack.status is Status.WRONG and attack.detail == "strict_kernels: " + WITHOUT_OWN_KERNELS, attack.detail
    honest = gpu(HONEST)
    assert honest.status is Status.PASSED, honest.detail
    assert any(s.name.endswith("[own kernels skipped]") for s in honest.steps)


def test_a_missing_preload_library_is_an_infra_error_not_the_answers_doing(tmp_path):
    """The parent checks the library it preloads before and after the candidate's run: a
    missing one would fail the sandbox's bind (read as the answer's crash, so a strict_kernels
    attack would keep its pass) or run the launches (an honest answer `wrong`)."""
    from cuset.execute.kernelbench.options import VerifyOptions
    from cuset.execute.kernelbench.verify import plain_checks, verify

    missing = tmp_path / "launch_skip.so"
    verdict = verify(REFERENCE, HONEST, plain_checks(1), options=VerifyOptions(candidate_preload=missing))
    assert verdict.status is Status.INFRA_ERROR and str(missing) in verdict.detail, verdict.detail


def test_strict_kernels_gives_no_verdict_when_its_run_without_kernels_failed(tmp_path, monkeypatch):
    """The GPU's path of strict_kernels with its library gone: the attack that passes plainly
    is neither passed (the run that would catch it failed) nor `wrong` (nothing showed it):
    infra_error, which the evaluation counts apart."""
    from cuset.evaluate import kernelbench as kb_eval
    from cuset.execute.kernelbench import launch_skip
    from cuset.execute.kernelbench.budget import BuildBudget

    monkeypatch.setattr(launch_skip, "library", lambda: tmp_path / "gone.so")
    attack = STRICT_ATTACKS["empty_launch"]
    sample = kb_eval.Sample(REFERENCE, attack, kb_eval.verify_options(OPTS, "cpu", TASK), None, tmp_path,
                            BuildBudget(OPTS.timeouts.compile, OPTS.build_rounds))
    plain = sample.verify(kb_eval.plain_checks(1))
    assert plain.status is Status.PASSED, plain.detail
    strict = kb_eval._without_own_kernels_check(sample, plain, "gpu")
    assert strict.status is Status.INFRA_ERROR, strict.detail
    assert strict.detail.startswith("strict_kernels: the run without its own kernels failed: the library to "
                                    "preload into the candidate's run is missing")
