"""The KernelBench timing runs end to end on the CPU: the real harness script
(cuset/execute/perf/kb_timing_harness.py), sandboxed, reference and answer in their own runs,
the parent's re-check on the timed inputs and its claims checks, with `device="cpu"` and the
host clock in place of CUDA events. On a GPU only the device and the timer differ; before
this, the harness ran nowhere but on a lent GPU, where a renamed function had broken every
answer's run (3ebf25c)."""

from pathlib import Path

import pytest

from cuset.evaluate.perf.kernelbench_runner import time_kernelbench
from cuset.evaluate.perf.options import PerfOptions
from cuset.tasks import load_tasks

BUNDLE = Path(__file__).resolve().parents[2] / "suites" / "kernelbench"
OPTIONS = PerfOptions(warmup=1, trials=5, compile_baseline=False, run_timeout=300)

HONEST = """import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""


@pytest.fixture(scope="module")
def relu():
    return {t.id: t for t in load_tasks(BUNDLE)[0]}["kb_relu"]


def timed(task, code, tmp_path, options=OPTIONS):
    return time_kernelbench(task, code, options=options, workdir=tmp_path, device="cpu")


def test_an_honest_answer_is_timed_against_the_reference(relu, tmp_path):
    perf = timed(relu, HONEST, tmp_path)
    assert perf["status"] == "measured", perf
    assert perf["candidate_ms"]["n"] == 5 and perf["eager_ms"]["n"] == 5
    assert perf["candidate_ms"]["min"] > 0
    assert perf["speedup_eager"] == pytest.approx(perf["eager_ms"]["mean"] / perf["candidate_ms"]["mean"])
    assert perf["device"] == "cpu" and perf["speedup_compile"] is None
    assert perf["inputs_alternate"] is True
    assert list(tmp_path.iterdir()) == []   # the run dirs are gone


def test_a_wrong_answer_fails_on_the_timed_inputs(relu, tmp_path):
    perf = timed(relu, HONEST.replace("torch.relu(x)", "torch.relu(x) + 0.5"), tmp_path)
    assert perf["status"] == "failed" and perf["reason"].startswith("on the timed inputs: wrong: output:"), perf


@pytest.mark.parametrize("key", ["x.data_ptr()", "id(x)"])
def test_an_answer_that_returns_an_earlier_result_for_the_same_tensor_fails(relu, tmp_path, key):
    """Every trial calls the forward on the same tensors, and the harness copies the other input
    set into them before each trial: a cache keyed on the tensor returns the warm-up's result."""
    memo = f"""import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.memo = {{}}
    def forward(self, x):
        if {key} not in self.memo:
            self.memo[{key}] = torch.relu(x)
        return self.memo[{key}]
"""
    perf = timed(relu, memo, tmp_path)
    assert perf["status"] == "failed" and perf["reason"].startswith("on the timed inputs: wrong"), perf


def test_an_answer_cannot_compute_its_outputs_ahead(relu, tmp_path):
    """When the answer is imported, its inputs and the config naming the seed are gone, and the
    seed is fresh per answer: one that looks for them at import finds nothing, and one that
    regenerates them from an assumed seed (42 was the default) computes the wrong outputs. With
    a seed the user fixes, such an answer passes; the static rule compute_at_import flags it."""
    peek = HONEST.replace("class ModelNew", """import os
left = sorted(os.listdir("."))
assert "config.json" not in left and not os.path.exists("inputs"), left

class ModelNew""")
    assert timed(relu, peek, tmp_path)["status"] == "measured"
    # both input sets regenerated at import from an assumed seed, the live one told by one element
    ahead = HONEST.replace("return torch.relu(x)", "return OUT[0] if x[0, 0] == FIRST[0] else OUT[1]") + """
import torch
INPUTS = []
for seed in (42, 43):
    torch.manual_seed(seed)
    INPUTS.append(torch.randn(16, 1024))
FIRST = [INPUTS[0][0, 0]]
OUT = [torch.relu(x) for x in INPUTS]
"""
    from cuset.evaluate.kernelbench_hacks import check_answer

    assert "compute_at_import" in {f.rule for f in check_answer(ahead)}
    guessed = timed(relu, ahead, tmp_path, PerfOptions(warmup=1, trials=5, compile_baseline=False, seed=42))
    assert guessed["status"] == "measured"   # what a fixed, known seed allows
    perf = timed(relu, ahead, tmp_path)
    assert perf["status"] == "failed" and perf["reason"].startswith("on the timed inputs: wrong"), perf
    seeds = {timed(relu, HONEST, tmp_path)["seed"] for _ in range(2)}
    assert len(seeds) == 2   # fresh per answer (2 draws from 2**31 collide with p < 1e-9)
    fixed = timed(relu, HONEST, tmp_path, PerfOptions(warmup=1, trials=5, compile_baseline=False, seed=7))
    assert fixed["seed"] == 7


def test_an_answer_that_computes_only_the_last_trial_fails(relu, tmp_path):
    """The call count of a run is guessable (warm-up + trials): every trial's outputs are held
    against the reference's by their sums, not only the last one's."""
    last_only = HONEST.replace("return torch.relu(x)", """self.calls = getattr(self, "calls", 0) + 1
        return torch.relu(x) if self.calls == 6 else torch.zeros_like(x)""")
    perf = timed(relu, last_only, tmp_path)
    assert perf["status"] == "failed" and perf["reason"].startswith("on the timed inputs: trial 0, output 0: its sums")


def test_trial_checksums_hold_every_trial_within_the_element_tolerance():
    from cuset.evaluate.perf.kernelbench_runner import trial_mismatch

    ref = [[[10.0, 30.0, 100]], [[-4.0, 20.0, 100]]]
    # the bound: atol * numel + rtol * sum |r| = 0.01 * 100 + 0.01 * 30 = 1.3 (trial 0), 1.2 (trial 1)
    assert trial_mismatch(ref, [[[11.29, 30.0, 100]], [[-5.19, 21.19, 100]]], 2, 0.01, 0.01) is None
    assert "trial 0, output 0" in trial_mismatch(ref, [[[11.31, 30.0, 100]], [[-4.0, 20.0, 100]]], 2, 0.01, 0.01)
    assert "trial 1, output 0" in trial_mismatch(ref, [[[10.0, 30.0, 100]], [[-4.0, 21.3, 100]]], 2, 0.01, 0.01)
    assert "no checksum of 100 elements" in trial_mismatch(ref, [[[10.0, 30.0, 99]], [[-4.0, 20.0, 100]]], 2, 0.01, 0.01)
    assert "each of its 2 trials" in trial_mismatch(ref, ref[:1], 2, 0.01, 0.01)
    assert "no checksum per trial" in trial_mismatch(None, ref, 2, 0.01, 0.01)
    # malformed records (both runs are sandboxed) are refused, never a crash
    for hostile in (["x", [[1.0, 2.0, 100]]], [[[1.0, "2", 100]], [[1.0, 2.0, 100]]], [[5], [[1.0, 2.0, 100]]],
                    [[[True, 2.0, 100]], [[1.0, 2.0, 100]]], [{"a": 1}, [[1.0, 2.0, 100]]]):
        assert "no checksum per trial" in trial_mismatch(hostile, ref, 2, 0.01, 0.01)
        assert "each of its 2 trials" in trial_mismatch(ref, hostile, 2, 0.01, 0.01)
    assert trial_mismatch([[[float("nan"), float("nan"), 100]]], [[[1.0, 2.0, 100]]], 1, 0.01, 0.01) is None
    assert "its sums" in trial_mismatch([[[1.0, 2.0, 100]]], [[[float("nan"), 2.0, 100]]], 1, 0.0, 0.0)


def test_an_answer_that_raises_fails_with_its_error(relu, tmp_path):
    perf = timed(relu, HONEST.replace("return torch.relu(x)", "raise ValueError('no kernel today')"), tmp_path)
    assert perf["status"] == "failed" and "no kernel today" in perf["reason"], perf


@pytest.mark.parametrize("forge", [
    "import harness\n_write = harness.write_json\n"
    "harness.write_json = lambda path, rec: _write(path, {**rec, 'candidate_ms': [0.002] * 5} "
    "if 'candidate_ms' in rec else rec)\n",
    "import timing\ntiming.time_trials = lambda run, **kw: [run(), [0.002] * kw['trials']][1]\n",
    "import json\n_dump = json.dump\n"
    "json.dump = lambda rec, f, **kw: _dump({**rec, 'candidate_ms': [0.002] * 5} if 'candidate_ms' in rec else rec, f, **kw)\n",
], ids=["harness.write_json", "timing.time_trials", "json.dump"])
def test_an_answer_cannot_rewrite_its_own_times(relu, tmp_path, forge):
    """The answer runs in the harness's process: the functions that time it and write its
    record are bound before it is imported, so replacing them afterwards changes nothing."""
    from cuset.evaluate.kernelbench_hacks import check_answer

    assert "timing_patch" in {f.rule for f in check_answer(HONEST + forge)}   # and the static rule says so
    perf = timed(relu, HONEST + forge, tmp_path)
    assert perf["status"] == "measured", perf
    assert perf["candidate_ms"]["min"] > 0.002   # the real times, not the forged ones


def test_an_extension_answer_builds_through_the_harness_s_loader(relu, tmp_path):
    """load_inline goes through the harness's extension loader (GpuExtensions): the call found
    in the source is built by the parent, as torch builds it (here a C++-only extension g++
    builds), through the extension cache, and the run loads that build; timing the answer
    again builds nothing (issue 62)."""
    from cuset.execute.compile_cache import CompileCache
    from cuset.execute.kernelbench.torch_build import TorchExtensionBuilder

    ext = """import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="relu_cpu", cpp_sources='''
#include <torch/extension.h>
torch::Tensor relu(torch::Tensor x) { return x.clamp_min(0); }
''', functions=["relu"])

class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu(x)
"""
    options = PerfOptions(warmup=1, trials=3, compile_baseline=False, run_timeout=600)
    with CompileCache(TorchExtensionBuilder(), root=tmp_path / "cache", timeout=600) as cache:
        for k in range(2):
            (tmp_path / "runs").mkdir(exist_ok=True)
            perf = time_kernelbench(relu, ext, options=options, workdir=tmp_path / "runs", device="cpu", cache=cache)
            assert perf["status"] == "measured", perf
            assert perf["candidate_ms"]["n"] == 3
            assert (cache.misses, cache.hits) == (1, k)   # built once, by the parent


def kernelbench_task(tmp_path, get_inputs: str, forward: str = "x * scale"):
    """A one-task KernelBench suite in tmp_path whose get_inputs is `get_inputs`."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (tmp_path / "runs").mkdir()
    (suite / "kb_scale.py").write_text(f"""import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x, scale):
        return {forward}

def get_inputs():
{get_inputs}

def get_init_inputs():
    return []
""")
    return load_tasks(suite, strict=True)[0][0]


SCALE_ANSWER = """import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x, scale):
        return x * scale
"""


def test_inputs_alternate_when_a_second_seed_gives_the_same_structure(tmp_path):
    task = kernelbench_task(tmp_path, "    return [torch.randn(64, 32), 3]")
    perf = timed(task, SCALE_ANSWER, tmp_path / "runs")
    assert perf["status"] == "measured" and perf["inputs_alternate"] is True, perf


@pytest.mark.parametrize("get_inputs", [
    # the harness draws a fresh seed per run and seeds the second set with seed + 1: the parity of
    # the seed differs between the sets whatever it is, so the structure always changes (a random
    # draw would repeat the first set's shape once in so many runs and fail the test by chance)
    "    return [torch.randn(8 + torch.initial_seed() % 2, 32), 3]",    # another shape per seed
    "    return [torch.randn(64, 32), 1 + torch.initial_seed() % 2]",  # another int per seed
], ids=["shape", "int"])
def test_inputs_stay_put_when_a_second_seed_changes_their_structure(tmp_path, get_inputs):
    """Copying another set into the same tensors needs the same shapes and equal non-tensor values:
    otherwise every trial uses the first set, and the record says so."""
    task = kernelbench_task(tmp_path, get_inputs)
    perf = timed(task, SCALE_ANSWER, tmp_path / "runs")
    assert perf["status"] == "measured" and perf["inputs_alternate"] is False, perf
