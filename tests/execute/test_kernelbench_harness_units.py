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
                                 "cuda_sources": ["__global__ void k() {}"], "functions": ["f"],
                                 "extra_cflags": [], "extra_cuda_cflags": [], "extra_ldflags": [],
                                 "extra_include_paths": [], "with_cuda": True, "with_pytorch_error_handling": True}]}
    # the parent believes the request whole (claims): the record it builds is the one the run looks up
    from cuset.execute.kernelbench import claims

    assert claims.checked_record(record, "candidate")["specs"] == record["specs"]


def test_a_failed_build_raises_torchs_error_and_file_load_is_refused(harness):
    h, verdict = harness
    spec = h.call_spec(h.load_inline_signature(), ("bad", "int f();"), {"functions": ["f"]})
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


# ---------------------------------------------------------------- build records (issue 62)
CALLS = [   # (args, kwargs) of load_inline calls as candidates write them
    (("relu", "int f();", "__global__ void k() {}"), {"functions": ["f"]}),
    (("relu",), {"cpp_sources": ["int f();"], "cuda_sources": "__global__ void k() {}", "functions": "f",
                 "extra_cuda_cflags": ["-O3", "--use_fast_math"], "verbose": True}),
    (("relu", ["int f();"], None, None, ["f"], ["-DX=1"]), {"extra_ldflags": ["-lcublas"]}),
    (("cpp_only", "int f();"), {"functions": ["f"], "with_cuda": False, "with_pytorch_error_handling": False}),
    (("empty_cuda", "int f();", ""), {"functions": ["f"]}),
]


@pytest.mark.parametrize("args,kwargs", CALLS)
def test_the_harness_keys_a_call_as_the_parent_does(harness, args, kwargs):
    """The run looks a call's build up by the same record the parent built: harness.call_spec
    of the call == build.ExtensionSpec of the same arguments (bound by torch's signature)."""
    import inspect

    from cuset.execute.kernelbench.build import ExtensionSpec

    h, _ = harness
    signature = h.load_inline_signature()
    given = signature.bind(*args, **kwargs).arguments
    spec = ExtensionSpec.from_call(**{k: v for k, v in given.items() if k in inspect.signature(
        ExtensionSpec.from_call).parameters})
    for strict in (False, True):
        record = h.call_spec(signature, args, kwargs, strict=strict)
        assert record == spec.to_json() and h.spec_key(record) == spec.key()


def test_the_record_names_flags_and_cuda_as_torch_decides(harness):
    h, _ = harness
    signature = h.load_inline_signature()
    record = h.call_spec(signature, ("a", "int f();", ""), {"functions": "f", "extra_cflags": ["-O3"]})
    assert (record["cuda_sources"], record["with_cuda"], record["functions"], record["extra_cflags"]) == \
        ([], False, ["f"], ["-O3"])
    plain = h.call_spec(signature, ("a", "int f();"), {"functions": "f"})
    assert h.spec_key(plain) != h.spec_key(record)


@pytest.mark.parametrize("kwargs", [{"use_pch": True}, {"is_python_module": False}, {"sycl_sources": "x"},
                                    {"functions": {"f": "its doc"}}, {"extra_include_paths": ["inc"]},
                                    {"with_cuda": 1}, {"extra_cflags": [3]}, {"functions": []}])
def test_calls_the_record_does_not_hold_take_torchs_own_build_on_the_gpu(harness, tmp_path, kwargs):
    """On the GPU a call with an argument outside the build record is not looked up (None),
    whatever the manifest holds: torch's own build in the run is the exact path. The CPU
    backend's build (not strict) honours none of them and keys the call all the same."""
    h, _ = harness
    signature = h.load_inline_signature()
    base = {"functions": ["f"], **kwargs}
    assert h.call_spec(signature, ("a", "int f();"), base, strict=True) is None
    if not {"extra_cflags", "with_cuda"} & set(kwargs):
        assert h.call_spec(signature, ("a", "int f();"), base)["name"] == "a"
    # default values of those arguments change nothing: still looked up
    assert h.call_spec(signature, ("a", "int f();"), {"functions": ["f"], "use_pch": False,
                                                      "is_python_module": True}, strict=True) is not None


def test_gpu_loader_loads_the_parents_build_and_falls_back_to_torch(harness, tmp_path):
    """A call whose record is in the manifest loads the parent's build (no load_inline of
    torch); a failed parent build raises torch's error; any other call builds with torch."""
    h, _ = harness
    signature = h.load_inline_signature()
    calls, loaded = [], types.ModuleType("cached_ext")
    loaded.f = lambda: 41

    def fake_load_inline(*args, **kwargs):
        calls.append(args[0])
        return types.ModuleType(args[0])

    key = h.spec_key(h.call_spec(signature, ("cached", "int f();"), {"functions": ["f"]}))
    failed = h.spec_key(h.call_spec(signature, ("failed", "int f();"), {"functions": ["f"]}))
    ext = h.GpuExtensions(str(tmp_path / "build"), {key: {"so": "/x/cached.so", "module": "cached"},
                                                    failed: {"status": "compile_error", "detail": "no"}})
    ext.real = {"load_inline": fake_load_inline, "load": fake_load_inline}
    opened = []
    h.load_extension = lambda module, path: opened.append((module, path)) or loaded
    module = ext.load_inline("cached", "int f();", functions=["f"])
    assert module.f() == 41 and ext.load_inline("cached", cpp_sources="int f();", functions=["f"]) is module
    assert opened == [("cached", "/x/cached.so")] and calls == []
    with pytest.raises(RuntimeError, match="^Error building extension 'failed': no$"):
        ext.load_inline("failed", "int f();", functions=["f"])
    ext.load_inline("cached", "int f();", functions=["f"], extra_cflags=["-O3"])   # another record: torch builds
    ext.load_inline("other", "int g();", functions=["g"], use_pch=True)
    assert calls == ["cached", "other"]
    assert ext.evidence(None, ext.counted.calls) == {"loaded": ["cached_ext", "cached", "other"],
                                                     "extension_calls": 1, "build_failed": ["failed"]}


def test_the_harness_and_the_parent_name_the_same_arguments(harness):
    """harness.py imports nothing of cuset: its lists are copies of build.py's, kept equal here."""
    from cuset.execute.kernelbench import build

    h, _ = harness
    assert (h.FLAG_ARGS, h.HARMLESS_ARGS) == (build.FLAG_FIELDS, build.HARMLESS_ARGS)
    assert h.LAUNCHES_FUNCTION == build.LAUNCHES_FUNCTION
