"""Issue 38: KernelBench answers as models write them, through `cuset eval` on the CPU backend.

Extensions asked for in `ModelNew.__init__` with sources the static scan cannot read
are built on demand and judged as a GPU would judge them, with or without a
`try/except` fallback around the call; a refusal the answer swallows is `unsupported`;
a pure-torch answer, a fallback after a failed build and a real kernel are told apart
in the record (`kernel_launches`, `extensions_built`, `passed_without_kernel`) and in
the report; the compile columns count extension builds and harness runs.

Every kernel below is relu_ok's source (one build, shared with the other KernelBench
tests through the user cache dir), a wrong variant of it, or a source that does not
compile.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from typer.testing import CliRunner

from cuset.cli.main import app
from cuset.evaluate.records import load_results
from cuset.generate.records import GenerationRecord, save_generations
from cuset.tasks import KernelBenchTask, save_tasks
from sandbox_tools import needs_bwrap

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench"
REFERENCE = (FIXTURES / "relu_ref.py").read_text()
# relu_ok's sources, without its module-level load_inline call
SOURCES = (FIXTURES / "relu_ok.py").read_text().split("relu = load_inline(")[0]
N_TRIALS = 2
# "".join(...): sources the static scan cannot evaluate, so nothing is built before the run:
# the call in __init__ is the first the evaluator hears of the extension.
LOAD = ('load_inline(name="{name}", cpp_sources=relu_cpp_source, cuda_sources="".join([{cuda}]), '
        'functions=["relu_cuda", "leaky_cuda"])')


def answer(init_load: str, fallback: bool, setup: str = "") -> str:
    """ModelNew loading its extension in __init__ (optionally inside try/except, falling
    back to torch.relu), one relu_cuda launch per forward."""
    if fallback:
        init = (f"        try:\n            self.ext = {init_load}\n"
                "        except Exception:\n            self.ext = None\n")
    else:
        init = f"        self.ext = {init_load}\n"
    return (SOURCES + setup + "\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            + init + "\n    def forward(self, x):\n"
            "        if self.ext is None:\n            return torch.relu(x)\n"
            "        return self.ext.relu_cuda(x)\n")


WRONG = 'relu_source.replace("x[i] : 0.f;", "x[i] : 0.25f;")'          # 0.25 where x <= 0
BROKEN = 'relu_source.replace("int i = blockIdx.x", "int i = no_such_name + blockIdx.x")'
CORRECT_LOAD = LOAD.format(name="relu", cuda="relu_source")
WRONG_LOAD = LOAD.format(name="relu_wrong", cuda=WRONG)
BROKEN_LOAD = LOAD.format(name="relu_broken", cuda=BROKEN)
PYBIND = ('load_inline(name="relu_pybind", cpp_sources=relu_cpp_source + "\\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) '
          '{ m.def(\\"relu_cuda\\", &relu_cuda); }", cuda_sources="".join([relu_source]))')
FILE_LOAD = 'torch.utils.cpp_extension.load(name="relu_files", sources=["relu.cu"])'
PURE_TORCH = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n" \
             "        return torch.clamp(x, min=0.0)\n"

# name -> (answer, status, passed_without_kernel, kernel_launches, extensions_built, compiled, ran_ok)
SAMPLES = {
    "correct_in_init": (answer(CORRECT_LOAD, False), "passed", "", N_TRIALS, 1, True, True),
    "correct_in_init_with_fallback": (answer(CORRECT_LOAD, True), "passed", "", N_TRIALS, 1, True, True),
    "wrong_in_init": (answer(WRONG_LOAD, False), "wrong", "", N_TRIALS, 1, True, True),
    # before issue 38 the harness's request was swallowed here and torch.relu passed
    "wrong_in_init_with_fallback": (answer(WRONG_LOAD, True), "wrong", "", N_TRIALS, 1, True, True),
    # pybind11 bindings: refused by the CPU build; the answer's except swallows nothing
    "swallowed_refusal": (answer(PYBIND, True), "unsupported", "", None, None, False, False),
    "swallowed_file_load": (answer(FILE_LOAD, True), "unsupported", "", 0, 0, False, False),
    "pure_torch": (PURE_TORCH, "passed", "no_kernel_called", 0, 0, True, True),
    "failed_build_with_fallback": (answer(BROKEN_LOAD, True), "passed", "build_failed", 0, 0, False, True),
    "failed_build": (answer(BROKEN_LOAD, False), "compile_error", "", 0, 0, False, False),
}


def _eval(files: Path, *extra: str):
    return CliRunner().invoke(app, ["eval", str(files / "tasks.jsonl"), str(files / "gens.jsonl"), "--out",
                                    str(files / "out"), "--backend", "cpu", "execution.workers=2", "progress=false",
                                    "execution.timeout_run=60", "execution.timeout_compile=600", f"workdir={files / 'work'}", *extra])


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    files = tmp_path_factory.mktemp("kb-kernels")
    save_tasks([KernelBenchTask("kb_relu", "ReLU", REFERENCE, n_trials=N_TRIALS)], files / "tasks.jsonl")
    names = list(SAMPLES)
    save_generations(files / "gens.jsonl", [
        GenerationRecord("kb_relu", "ReLU", i, "m", 1, "", SAMPLES[name][0], 10, "stop", 0.1)
        for i, name in enumerate(names)])
    result = _eval(files)
    assert result.exit_code == 0, result.output
    results = {names[r.sample]: r for r in load_results(files / "out" / "results.jsonl")}
    return files, results


@needs_bwrap
@pytest.mark.parametrize("name", list(SAMPLES))
def test_each_answer_is_judged_by_what_it_ran(evaluated, name):
    _, results = evaluated
    r = results[name]
    _, status, without, launches, built, compiled, ran_ok = SAMPLES[name]
    assert r.status.value == status, (name, r.detail)
    assert r.passed_without_kernel == without, (name, r.detail)
    if built is not None:
        assert (r.kernel_launches, r.extensions_built) == (launches, built), name
    else:   # refused by the parent before any run finished
        assert r.kernel_launches is None and r.extensions_built is None, name
    assert (r.compiled, r.ran_ok) == (compiled, ran_ok), name


@needs_bwrap
def test_refusals_and_failed_builds_are_named(evaluated):
    _, results = evaluated
    assert "pybind11 bindings are not provided by the CPU backend" in results["swallowed_refusal"].detail
    assert "a refusal decides the verdict" in results["swallowed_refusal"].detail
    assert "torch.utils.cpp_extension.load" in results["swallowed_file_load"].detail
    failed = results["failed_build"]
    assert failed.detail.startswith("load_inline('relu_broken'): cuda.cu:") and "no_such_name" in failed.detail
    assert "the candidate then failed" in failed.detail
    assert results["failed_build_with_fallback"].extensions_failed == ("load_inline('relu_broken')",)
    # the on-demand build: a run that asks, the build, the run that passes (then the random thread order)
    steps = [s.name for s in results["correct_in_init"].steps]
    assert steps[:3] == ["kernelbench[cpu]", "compile", "kernelbench[cpu]"], steps


@needs_bwrap
def test_report_tells_the_passes_apart_and_names_the_compiler(evaluated):
    files, _ = evaluated
    summary = json.loads((files / "out" / "summary.json").read_text())
    o = summary["overall"]
    assert (o["n_kernelbench"], o["n_passed_with_kernel"]) == (len(SAMPLES), 2)
    assert o["passed_without_kernel"] == {"no_kernel_called": 1, "build_failed": 1}
    assert summary["tasks"]["kb_relu"]["n_compiled"] == 5
    assert summary["meta"]["kernelbench_compile_judge"].startswith("g++")
    report = (files / "out" / "report.md").read_text()
    assert "KernelBench extensions compiled by g++ (the CPU backend's build of load_inline extensions" in report
    assert "compilation judged by nvcc" not in report
    # the counts are the candidate process's word: labelled so, and the outputs decided (issue 61)
    assert ("Passed: 4 sample(s). Their kernel launches are counted inside the candidate's process, which the "
            "candidate can rewrite: its own report, never evidence of a pass") in report
    assert "By that report 2 launched kernels of their own in the checked calls and 2 none" in report
    assert "strict_kernels=false: the outputs alone decided, and the counts nothing" in report
    assert "- no_kernel_called: 1 (no kernel of its own launched" in report
    assert "- build_failed: 1 (an extension it asked for failed to build" in report
