"""Issue 62: KernelBench extensions are built once, by the parent, through the compile cache:
a second sample with the same extension builds nothing, a changed flag builds again, a
poisoned entry is never loaded, a build the budget stopped is never kept. The GPU's builder
(torch's own build, torch_build.TorchExtensionBuilder) runs here on a C++-only extension (the
CPU torch has no CUDA to link); the CPU backend's builder is exercised through verify()."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cuset.execute.compile_cache import CompileCache
from cuset.execute.interface import CompileOutcome
from cuset.execute.kernelbench.budget import BuildBudget
from cuset.execute.kernelbench.build import ExtensionSpec
from cuset.execute.kernelbench.extension_cache import ExtensionChanged, place_extensions
from cuset.execute.kernelbench.torch_build import TorchExtensionBuilder, refusal, write_sources
from cuset.execute.kernelbench.verify import HARNESS, extract_specs
from cuset.execute.process import run_step
from cuset.execute.result import Status

ADD_SOURCE = "torch::Tensor add(torch::Tensor x) { return x + ADD; }"


def add_spec(add: int) -> ExtensionSpec:
    """A C++-only extension whose one function adds the macro ADD, set by a flag."""
    return ExtensionSpec.from_call("add_ext", ADD_SOURCE, functions=["add"], extra_cflags=[f"-DADD={add}"])


def harness_module():
    spec = importlib.util.spec_from_file_location("kb_harness_keys", HARNESS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------- keys
def test_the_parents_static_specs_have_the_keys_the_run_looks_up():
    """extract_specs (the parent, from the source's text) and harness.call_spec (the run, from
    the call it sees) make one key per call, flags included; strict (the GPU) leaves out the
    calls the run will build with torch itself."""
    source = textwrap.dedent('''
        from torch.utils.cpp_extension import load_inline
        CPP = "int f();"
        FLAGS = ["-O3", "-DX=1"]
        a = load_inline(name="a", cpp_sources=CPP, cuda_sources="__global__ void k() {}", functions=["f"],
                        extra_cuda_cflags=FLAGS, verbose=True)
        b = load_inline("b", CPP, None, None, ["f"], ["-O2"], extra_ldflags=["-lcublas"], with_cuda=False)
        c = load_inline("c", CPP, functions={"f": "doc"})
        d = load_inline("d", CPP, functions=["f"], use_pch=True)
        e = load_inline("e", CPP, functions=["f"], extra_include_paths=["inc"])
    ''')
    h = harness_module()
    signature = h.load_inline_signature()
    run = {"a": (("a",), {"cpp_sources": "int f();", "cuda_sources": "__global__ void k() {}", "functions": ["f"],
                          "extra_cuda_cflags": ["-O3", "-DX=1"], "verbose": True}),
           "b": (("b", "int f();", None, None, ["f"], ["-O2"]), {"extra_ldflags": ["-lcublas"], "with_cuda": False})}
    keys = {name: h.spec_key(h.call_spec(signature, *call, strict=True)) for name, call in run.items()}
    assert {s.name: s.key() for s in extract_specs(source, strict=True)} == keys
    assert [s.name for s in extract_specs(source)] == ["a", "b", "c", "d", "e"]   # the CPU builds them all
    (a, *_), (a2, *_) = extract_specs(source), extract_specs(source.replace('"-DX=1"', '"-DX=2"'))
    assert a.key() != a2.key() and a2.extra_cuda_cflags == ("-O3", "-DX=2")


def test_torch_builder_writes_the_sources_as_load_inline_does(tmp_path):
    """main.cpp and cuda.cu as torch's load_inline writes them (its headers, its bindings)."""
    spec = ExtensionSpec.from_call("m", "int f();", "__global__ void k() {}", ["f", "g"])
    write_sources(spec, tmp_path)
    assert (tmp_path / "main.cpp").read_text() == (
        "#include <torch/extension.h>\nint f();\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
        'm.def("f", torch::wrap_pybind_function(f), "f");\nm.def("g", torch::wrap_pybind_function(g), "g");\n}')
    assert (tmp_path / "cuda.cu").read_text() == ("#include <torch/types.h>\n#include <cuda.h>\n"
                                                 "#include <cuda_runtime.h>\n__global__ void k() {}")
    plain = ExtensionSpec.from_call("m", "int f();", functions=["f"], with_pytorch_error_handling=False)
    write_sources(plain, tmp_path)
    assert 'm.def("f", f, "f");' in (tmp_path / "main.cpp").read_text()


@pytest.mark.parametrize("spec,why", [
    (ExtensionSpec.from_call("a b", "int f();", functions=["f"]), "must be a C++ identifier"),
    (ExtensionSpec.from_call("a", "int f();", functions=["f()"]), "not C++ identifiers"),
    (ExtensionSpec.from_call("a", "int f();", functions=["f"], extra_cflags=["-O2\nrule x"]), "control character"),
])
def test_torch_builder_refuses_what_would_rewrite_its_build_file(spec, why):
    assert why in refusal(spec)
    assert refusal(ExtensionSpec.from_call("a", "int f();", functions=["f"], extra_cflags=["-DX=\"1 2\""])) is None


# ---------------------------------------------------------------- poisoned entries (a real, fast compiler)
class SharedObjectBuilder:
    """A compile-cache backend building `int value(void)` into a shared object with cc: a
    real build (as fast as one gets) for the cache's bookkeeping."""

    name = "cc-shared"

    def __init__(self, log: Path):
        self.log = log

    def fingerprint(self) -> str:
        return "cc-shared-1"

    def compile(self, source: str, workdir: Path, timeout: float) -> CompileOutcome:
        spec = ExtensionSpec.from_json(json.loads(source))
        with open(self.log, "a") as f:
            f.write(spec.name + "\n")
        (workdir / "v.c").write_text(f"int value(void) {{ return {spec.cpp_sources[0]}; }}\n")
        step = run_step("compile", ["cc", "-shared", "-fPIC", "v.c", "-o", "v.so"], cwd=workdir, timeout=timeout)
        return CompileOutcome(step.returncode == 0, workdir / "v.so" if step.returncode == 0 else None, step,
                              None if step.returncode == 0 else Status.COMPILE_ERROR)


def builds(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def test_a_second_sample_reuses_the_build_and_a_poisoned_one_is_rebuilt(tmp_path):
    log = tmp_path / "log"
    spec = ExtensionSpec.from_call("seven", "7", functions=["value"])
    with CompileCache(SharedObjectBuilder(log), root=tmp_path / "cache") as cache:
        first, second = BuildBudget(60), BuildBudget(60)
        m1, m2 = {}, {}
        assert first.build(cache, [spec], m1, [], {}) is None and second.build(cache, [spec], m2, [], {}) is None
        assert (first.builds, second.builds) == (1, 0) and builds(log) == ["seven"]
        entry = m1[spec.key()]
        assert m2 == m1 and entry["sha256"] == hashlib.sha256(Path(entry["path"]).read_bytes()).hexdigest()
        placed = place_extensions(m1, tmp_path / "run1")
        so = placed[spec.key()]["so"]
        assert Path(so).read_bytes() == Path(entry["path"]).read_bytes() and not so.startswith(str(cache.root))
        Path(entry["path"]).write_bytes(b"\x7fELF not what was built")   # the entry's .so changed since
        with pytest.raises(ExtensionChanged, match="is not the one recorded"):
            place_extensions(m1, tmp_path / "run2")                    # a run never gets it
    with CompileCache(SharedObjectBuilder(log), root=tmp_path / "cache") as cache:
        third, m3 = BuildBudget(60), {}
        assert third.build(cache, [spec], m3, [], {}) is None
        assert third.builds == 1 and builds(log) == ["seven", "seven"]   # discarded, built again
        place_extensions(m3, tmp_path / "run3")


def test_a_file_planted_in_the_cache_dir_is_not_loaded(tmp_path):
    """A .so put into the entry's directory beside the build, or over it with a matching
    outcome.json digest removed: only the recorded build is copied, or nothing is."""
    log = tmp_path / "log"
    spec = ExtensionSpec.from_call("seven", "7", functions=["value"])
    with CompileCache(SharedObjectBuilder(log), root=tmp_path / "cache") as cache:
        manifest = {}
        BuildBudget(60).build(cache, [spec], manifest, [], {})
        entry_dir = Path(manifest[spec.key()]["path"]).parent
        (entry_dir / "planted.so").write_bytes(b"planted")
        placed = place_extensions(manifest, tmp_path / "run")
        assert [p.name for p in (tmp_path / "run").rglob("*.so")] == ["v.so"] and \
            Path(placed[spec.key()]["so"]).read_bytes() != b"planted"
        outcome = json.loads((entry_dir / "outcome.json").read_text())
        del outcome["sha256"]
        (entry_dir / "outcome.json").write_text(json.dumps(outcome))
        with pytest.raises(ExtensionChanged):   # a manifest entry without a digest is never placed
            place_extensions({spec.key(): {**manifest[spec.key()], "sha256": None}}, tmp_path / "run2")
    with CompileCache(SharedObjectBuilder(log), root=tmp_path / "cache") as cache:
        again = BuildBudget(60)
        again.build(cache, [spec], {}, [], {})
        assert again.builds == 1 and builds(log) == ["seven", "seven"]


class MeetingBuilder(SharedObjectBuilder):
    """Each build waits until `parties` builds are in flight at once (one at a time they never
    meet and the barrier breaks)."""

    def __init__(self, log: Path, parties: int):
        super().__init__(log)
        import threading

        self.barrier = threading.Barrier(parties, timeout=60)

    def compile(self, source: str, workdir: Path, timeout: float) -> CompileOutcome:
        self.barrier.wait()
        return super().compile(source, workdir, timeout)


def test_prebuild_builds_every_answers_extensions_side_by_side(tmp_path):
    """Three answers' extensions built at once before any verification; each answer's own
    verification then finds its build in the cache (no build charged to its budget)."""
    from cuset.execute.kernelbench.extension_cache import prebuild

    log = tmp_path / "log"
    answers = [[ExtensionSpec.from_call(f"v{k}", str(k), functions=["value"])] for k in range(3)]
    with CompileCache(MeetingBuilder(log, 3), root=tmp_path / "cache", workers=3) as cache:
        assert prebuild(cache, answers, 120, workers=3) == [None, None, None]
        assert sorted(builds(log)) == ["v0", "v1", "v2"]
        for specs in answers:
            budget = BuildBudget(120)
            assert budget.build(cache, specs, {}, [], {}) is None and budget.builds == 0


# ---------------------------------------------------------------- torch's own build (the GPU's builder)
@pytest.fixture(scope="module")
def torch_cache(tmp_path_factory):
    with CompileCache(TorchExtensionBuilder(), root=tmp_path_factory.mktemp("torch-ext") / "cache",
                      timeout=900) as cache:
        yield cache


@pytest.mark.slow
def test_torch_builds_are_shared_by_samples_and_a_changed_flag_builds_again(torch_cache, tmp_path):
    """Two samples with the same extension: one build. The same sources with another -D flag:
    another build, and the flag is in it (the modules add 1 and 2)."""
    samples = [BuildBudget(900) for _ in range(3)]
    manifests = [{}, {}, {}]
    for budget, manifest, spec in zip(samples, manifests, [add_spec(1), add_spec(1), add_spec(2)]):
        assert budget.build(torch_cache, [spec], manifest, [], {}) is None, manifest
    assert [b.builds for b in samples] == [1, 0, 1]
    assert manifests[0] == manifests[1] and manifests[0].keys() != manifests[2].keys()
    assert all(e["module"] == "add_ext" for m in manifests for e in m.values())
    results = []
    for k, manifest in enumerate((manifests[0], manifests[2])):
        placed = place_extensions(manifest, tmp_path / f"run{k}")
        (entry,) = placed.values()
        # loaded as the harness's GpuExtensions loads a parent's build, in a fresh interpreter
        probe = (f"import importlib.util, sys, torch\nspec = importlib.util.spec_from_file_location('h', {str(HARNESS)!r})\n"
                 f"h = importlib.util.module_from_spec(spec); spec.loader.exec_module(h)\n"
                 f"m = h.load_extension({entry['module']!r}, {entry['so']!r})\nprint(m.add(torch.zeros(2)).tolist())")
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        results.append(out.stdout.strip())
    assert results == ["[1.0, 1.0]", "[2.0, 2.0]"]


@pytest.mark.slow
def test_a_torch_build_the_budget_stopped_is_not_cached(torch_cache):
    spec = ExtensionSpec.from_call("stopped_ext", ADD_SOURCE, functions=["add"], extra_cflags=["-DADD=3"])
    budget, manifest, steps = BuildBudget(2.0), {}, []
    over = budget.build(torch_cache, [spec], manifest, steps, {})
    assert over is not None and "load_inline('stopped_ext') was stopped there" in over
    assert steps[-1].timed_out and budget.builds == 1
    assert not torch_cache.entry_dir(torch_cache.key(json.dumps(spec.to_json(), sort_keys=True))).exists()


# ---------------------------------------------------------------- verify(): the CPU backend here, the GPU's with one
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench"
REFERENCE = (FIXTURES / "relu_ref.py").read_text()
RELU_OK = (FIXTURES / "relu_ok.py").read_text()
# the same sources, one extra flag changed: another build
RELU_OTHER_FLAG = RELU_OK.replace('extra_cuda_cflags=["-O3", "--use_fast_math"]', 'extra_cuda_cflags=["-O2"]')


def three_samples(backend: str, cache: CompileCache) -> tuple[list, list[BuildBudget]]:
    """The same answer as two samples, then the answer with another flag: their verdicts and budgets."""
    from cuset.execute.kernelbench.options import VerifyOptions
    from cuset.execute.kernelbench.verify import plain_checks, verify

    assert RELU_OTHER_FLAG != RELU_OK
    budgets = [BuildBudget(600) for _ in range(3)]
    options = VerifyOptions(backend=backend, compile_timeout=600, step_timeout=120)
    verdicts = [verify(REFERENCE, code, plain_checks(2), options=options, cache=cache, build_budget=budget)
                for code, budget in zip((RELU_OK, RELU_OK, RELU_OTHER_FLAG), budgets)]
    return verdicts, budgets


@pytest.mark.slow
def test_cpu_samples_share_a_build_and_a_changed_flag_builds_again(tmp_path):
    """The CPU backend's builds go through the same cache: the second sample runs the first
    one's build (no build of its own), the answer with another flag gets a build of its own."""
    from cuset.execute.kernelbench.build import ExtensionBuilder

    with CompileCache(ExtensionBuilder(), root=tmp_path / "cache", timeout=600) as cache:
        verdicts, budgets = three_samples("cpu", cache)
    assert [v.status for v in verdicts] == [Status.PASSED] * 3, [v.detail for v in verdicts]
    assert [b.builds for b in budgets] == [1, 0, 1]
    assert all(v.kernel.built == 1 and v.kernel.launches > 0 for v in verdicts)


@pytest.mark.gpu
def test_gpu_samples_and_timing_share_one_build():
    """On a GPU: the answer's extension built once by the parent (torch's build, nvcc) for both
    samples and its timing run; another flag builds again. Each run loads the parent's build:
    its candidate step takes far less than the build did."""
    import tempfile

    from cuset.evaluate.perf.kernelbench_runner import time_kernelbench
    from cuset.evaluate.perf.options import PerfOptions
    from cuset.execute.registry import gpu_available
    from cuset.tasks import KernelBenchTask

    if not gpu_available():
        pytest.skip("no NVIDIA GPU")
    with tempfile.TemporaryDirectory() as root, \
            CompileCache(TorchExtensionBuilder(), root=Path(root) / "cache", timeout=600) as cache:
        verdicts, budgets = three_samples("gpu", cache)
        assert [v.status for v in verdicts] == [Status.PASSED] * 3, [v.detail + v.log for v in verdicts]
        assert [b.builds for b in budgets] == [1, 0, 1]
        build = next(s for s in verdicts[0].steps if s.name == "compile")
        run = next(s for s in verdicts[1].steps if s.name == "kernelbench[gpu]")
        assert build.seconds > 2 * run.seconds, (build.seconds, run.seconds)
        misses = cache.misses
        perf = time_kernelbench(KernelBenchTask("kb_relu", "ReLU", REFERENCE), RELU_OK,
                                options=PerfOptions(warmup=1, trials=5, compile_baseline=False), cache=cache)
        assert perf["status"] == "measured", perf
        assert cache.misses == misses
