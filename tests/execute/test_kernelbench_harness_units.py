"""Issue 38: the harness's extension loaders, in this process (no sandbox, no build):
a request or a refusal ends the run with its record whatever `except` surrounds the call;
a failed build raises torch's own error; every extension returned counts its calls.
The GPU loader is driven here with stand-ins for torch's load_inline/load (the same code
runs on a GPU machine with the real ones)."""

from __future__ import annotations

import importlib.util
import json
import types

import pytest

from cuset.execute.kernelbench.verify import HARNESS


class Ended(BaseException):
    """Stands in for os._exit: the run ended here."""


@pytest.fixture
def harness(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("kb_harness_under_test", HARNESS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.CONFIG.update({"verdict_path": str(tmp_path / "verdict.json")})

    def exit_(code):
        raise Ended(code)

    monkeypatch.setattr(module, "_EXIT", exit_)
    return module, tmp_path / "verdict.json"


def test_an_unknown_extension_ends_the_run_with_its_request(harness):
    h, verdict = harness
    ext = h.CpuExtensions({})
    with pytest.raises(Ended):
        try:   # the candidate's usual fallback: it never runs
            ext.load_inline("relu", "int f();", "__global__ void k() {}", functions=["f"])
        except Exception:
            pytest.fail("the request reached the candidate's except")
    record = json.loads(verdict.read_text())
    assert record == {"status": "need_extensions", "detail": "",
                      "specs": [{"name": "relu", "cpp_sources": ["int f();"],
                                 "cuda_sources": ["__global__ void k() {}"], "functions": ["f"]}]}


def test_a_failed_build_raises_torchs_error_and_file_load_is_refused(harness):
    h, verdict = harness
    spec = h.call_spec("bad", "int f();", None, (), ["f"])
    ext = h.CpuExtensions({h.spec_key(spec): {"status": "compile_error", "detail": "load_inline('bad'): cuda.cu:1: "
                                                                                   "error", "log": ""}})
    with pytest.raises(RuntimeError, match=r"^Error building extension 'bad': load_inline\('bad'\): cuda.cu:1: error$"):
        ext.load_inline("bad", "int f();", functions=["f"])
    with pytest.raises(Ended):
        ext.load("files", ["relu.cu"])
    assert json.loads(verdict.read_text())["status"] == "unsupported"


def test_gpu_loader_counts_calls_and_names_failed_builds(harness, tmp_path):
    h, _ = harness
    built = types.ModuleType("relu_ext")
    built.relu = lambda x: x + 1
    built.SIZE = 7

    def fake_load_inline(name, *args, **kwargs):
        assert kwargs["build_directory"].startswith(str(tmp_path / "build"))
        if name == "broken":
            raise RuntimeError("Error building extension 'broken'")
        return built

    ext = h.GpuExtensions(str(tmp_path / "build"))
    ext.real = {"load_inline": fake_load_inline, "load": fake_load_inline}
    module = ext.load_inline("relu", "cpp", "cu")
    assert ext.load("relu", ["relu.cu"]) is module        # one wrapper per extension module
    assert module.SIZE == 7 and module.relu(1) == 2 and module.relu(2) == 3
    with pytest.raises(RuntimeError, match="Error building extension 'broken'"):
        ext.load_inline("broken", "cpp", "cu")
    assert ext.evidence(None, ext.counted.calls) == {"loaded": ["relu_ext"], "extension_calls": 2,
                                                     "build_failed": ["broken"]}
    assert ext.launches() is None
