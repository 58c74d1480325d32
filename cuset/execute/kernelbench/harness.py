"""KernelBench verification harness: runs INSIDE the sandbox (`python -I harness.py config.json`).

Standalone (imports torch and safetensors, never cuset). One process runs ONE side:

- role "reference": loads the reference (`Model`, `get_inputs`, `get_init_inputs`)
  and, for each check of the config, applies its module-constant overrides, seeds
  and builds the model (`torch.manual_seed(model_seed)`, as KernelBench does) and
  per trial builds the inputs (`torch.manual_seed(seed)`; `get_inputs()`; an
  optional value transform) and runs the forward (with `backward`: a fixed random
  cotangent and the gradients of inputs and parameters). It writes `inputs/`
  (init inputs, inputs, cotangents: what the candidate run receives) and
  `expected/` (outputs and gradients: read by the parent only).
- role "candidate": loads the candidate (`ModelNew`), builds it under the same
  seed from the reference's init inputs, runs it on the inputs (forward, and
  backward with the given cotangents) and writes `outputs/`.

Files are `<stem>.json` (the values' structure) next to `<stem>.safetensors`
(the tensors): nothing is pickled. This process compares nothing: the parent
(compare.py) judges the candidate's files against the reference's, so a
candidate patching torch or numpy in its own process changes no verdict, and
the candidate's process never holds the expected outputs or the reference
source. It writes a JSON record to `verdict.json` (`ran`, or a failure);
`progress.json` names the step in progress, and a step overrunning
`step_timeout` ends the process through faulthandler (no GIL needed: a kernel
spinning in C++ is stopped too), leaving `timeout.txt`.

backend "cpu": before the candidate is imported, `load_inline` returns the
extension the parent built on the CPU (by content key) and device
placement (`.cuda()`, `device="cuda"`, `.to("cuda")`, `torch.cuda.*`,
`x.is_cuda`) maps to the CPU (in the reference run too, where `x.is_cuda` stays
False). backend "gpu": the real `load_inline` (nvcc), models and inputs on the GPU.

Extensions on demand (CPU): a `load_inline` call, wherever the candidate makes it
(at import, in `__init__`, in `forward`), whose extension the parent has not built
ends the process on the spot (`end_run`: verdict `need_extensions` naming the call,
then `os._exit`): no exception the candidate could catch. The parent builds it (or
refuses it: then the parent's verdict, `unsupported` or `compile_error`, stands) and
runs the candidate again. A build that failed raises torch's own error on the next
run (catchable, as on a GPU); the parent knows it was asked for. `cpp_extension.load`
(sources in files) ends the run as `unsupported` the same way on the CPU; on the GPU
both build with nvcc in this process, a failed build raising torch's own error.

Evidence of kernel work: every extension returned is wrapped to count calls of its
functions; on the CPU the runtime linked into each extension also counts its kernel
launches. Both are read around the checked calls (forward/backward of every trial)
and reported with `ran` (`loaded`, `kernel_launches`, `extension_calls`; on the GPU
`build_failed` names builds torch's load_inline failed).
"""

import contextlib
import faulthandler
import functools
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import traceback
import types

VALUE_VARIANTS = ("negative", "zeros", "large")
EVAL_MODES = ("train", "eval")
LAUNCHES_FUNCTION = "_cuset_kernel_launches"   # build.LAUNCHES_FUNCTION: each CPU extension's launch count
EXTENSIONS = None   # the extension loader in use (CpuExtensions or GpuExtensions)
STEPS = None        # the Steps of this run (end_run names the step in progress)
# Bound before the candidate is imported: a candidate replacing os._exit or json.dumps in
# its own process does not turn a request or a refusal back into an exception it can catch,
# nor change what write_json writes.
_EXIT, _OPEN, _WRITE, _CLOSE, _REPLACE, _DUMPS = os._exit, os.open, os.write, os.close, os.replace, json.dumps
# GPU-only Python packages a candidate may use instead of load_inline: `unsupported` on the CPU.
GPU_ONLY_MODULES = {"triton": "Triton kernels", "cupy": "CuPy", "pycuda": "PyCUDA",
                    "tilelang": "TileLang kernels", "cutlass": "CUTLASS Python", "cuda": "CUDA Python bindings"}


class Verdict(Exception):
    def __init__(self, status, detail, **extra):
        super().__init__(detail)
        self.record = {"status": status, "detail": detail, **extra}


def end_run(record):
    """Write `record` as this run's verdict and end the process now: no `except` in the
    candidate's code sees it (a request for an extension, a refusal)."""
    if STEPS is not None:
        record.setdefault("step", STEPS.current)
    write_json(CONFIG["verdict_path"], record)
    _EXIT(0)


CONFIG = {}   # this run's config (end_run writes to its verdict_path)


def write_json(path, obj):
    """`obj` as JSON at `path` (written whole, then renamed), with the functions bound above: a
    candidate that replaces json.dumps, os.open or os.replace does not change what is written."""
    data = _DUMPS(obj).encode()
    fd = _OPEN(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    while data:
        data = data[_WRITE(fd, data):]
    _CLOSE(fd)
    _REPLACE(path + ".tmp", path)


class Steps:
    """Progress file + per-step watchdog."""

    def __init__(self, cfg):
        self.path = cfg["progress_path"]
        self.timeout_file = open(cfg["timeout_path"], "w")
        self.current = {}

    @contextlib.contextmanager
    def step(self, what, timeout, **where):
        self.current = {"step": what, "timeout": timeout, **where}
        write_json(self.path, self.current)
        faulthandler.dump_traceback_later(timeout, repeat=False, file=self.timeout_file, exit=True)
        try:
            yield
        finally:
            faulthandler.cancel_dump_traceback_later()


def tail(text, n=12):
    lines = text.strip().splitlines()
    return "\n".join(lines[-n:])


def exc_summary(e):
    tb = traceback.format_exception(type(e), e, e.__traceback__)
    return f"{type(e).__name__}: {e}", tail("".join(tb), 20)


def spec_key(d):
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()


def as_tuple(v):
    if v is None:
        return ()
    if isinstance(v, str):
        return (v,)
    return tuple(str(s) for s in v)


# ---------------------------------------------------------------- CPU mode
class Counted:
    """Calls of the candidate's extension functions during the checked calls."""

    def __init__(self):
        self.calls = 0

    def wrap(self, module, hidden=(LAUNCHES_FUNCTION,)):
        """A module object like `module` whose functions count their calls here."""
        wrapped = types.ModuleType(module.__name__, getattr(module, "__doc__", None))
        for attr in dir(module):
            if attr in hidden or attr in ("__name__", "__doc__"):
                continue
            value = getattr(module, attr)
            if callable(value) and not isinstance(value, type) and not attr.startswith("__"):
                value = self.counting(value)
            setattr(wrapped, attr, value)
        return wrapped

    def counting(self, fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            self.calls += 1
            return fn(*args, **kwargs)
        return call


# load_inline's arguments that decide what is built: the content key of a build holds them all
# (build.ExtensionSpec.to_json is the same record, made by the parent).
FLAG_ARGS = ("extra_cflags", "extra_cuda_cflags", "extra_ldflags", "extra_include_paths")
# Arguments that change nothing in the module built (where torch builds it, its log, its objects).
HARMLESS_ARGS = ("verbose", "build_directory", "keep_intermediates")


def load_inline_signature():
    """torch's own load_inline signature (taken before it is replaced): calls are bound by it."""
    import inspect
    from torch.utils import cpp_extension

    return inspect.signature(cpp_extension.load_inline)


def call_spec(signature, args, kwargs, strict=False):
    """The build record of one load_inline call (what the parent builds and keys on), or None
    when `strict` (the GPU: torch's real build) and the call asks for something the record does
    not hold: then only torch's own build in this process is exact. Not strict (the CPU
    backend's build, which honours no argument beyond the sources and functions), anything
    else is ignored. TypeError for a call torch's load_inline would refuse the same way."""
    given = dict(signature.bind(*args, **kwargs).arguments)
    functions = given.get("functions")
    lists = {"cpp_sources": given.get("cpp_sources"), "cuda_sources": given.get("cuda_sources") or None,
             "functions": list(functions) if isinstance(functions, dict) else functions,
             **{f: given.get(f) for f in FLAG_ARGS}}
    with_cuda, handling = given.get("with_cuda"), given.get("with_pytorch_error_handling", True)
    if strict and not _exact(signature, given, lists, with_cuda, handling):
        return None
    spec = {"name": str(given["name"]), **{k: list(as_tuple(v)) for k, v in lists.items()}}
    spec["with_cuda"] = bool(spec["cuda_sources"]) if with_cuda is None else bool(with_cuda)
    spec["with_pytorch_error_handling"] = bool(handling)
    return spec


def _exact(signature, given, lists, with_cuda, handling):
    """Whether the build record of a call holds everything torch's build of it depends on."""
    keyed = {"name", *lists, "with_cuda", "with_pytorch_error_handling"}
    for arg, value in given.items():
        if arg not in keyed and arg not in HARMLESS_ARGS and value != signature.parameters[arg].default:
            return False    # sycl_sources, use_pch, is_python_module=False, ...
    functions = given.get("functions")
    if isinstance(functions, dict) or (functions is not None and not isinstance(functions, str) and not functions):
        return False        # the bindings' docstrings; an empty binding block (functions=[])
    if given.get("extra_include_paths"):
        return False        # headers read from the host's directories: not in the record
    strings = all(v is None or isinstance(v, str) or (isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v))
                  for v in lists.values())
    return strings and isinstance(given["name"], str) and (with_cuda is None or isinstance(with_cuda, bool)) \
        and isinstance(handling, bool)


def load_extension(module_name, path):
    """The extension module at `path` (a build the parent made), imported as torch imports one."""
    loader = importlib.machinery.ExtensionFileLoader(module_name, path)
    spec_ = importlib.util.spec_from_file_location(module_name, path, loader=loader)
    module = importlib.util.module_from_spec(spec_)
    loader.exec_module(module)
    return module


class CpuExtensions:
    """load_inline replacement: the parent's builds, looked up by content key."""

    def __init__(self, manifest):
        # key -> {"so": path, "module": name}, or a failed build the candidate asked for in an
        # earlier run: {"status", "detail", "log"}
        self.manifest = manifest
        self.signature = load_inline_signature()
        self.loaded = {}            # key -> module: one load per extension, however often it is asked for
        self.raw = []               # the loaded modules themselves (their launch counters)
        self.counted = Counted()

    def load_inline(self, *args, **kwargs):
        spec = call_spec(self.signature, args, kwargs)
        key = spec_key(spec)
        entry = self.manifest.get(key)
        if entry is None:  # the parent builds it (or refuses it) and runs the candidate again
            end_run({"status": "need_extensions", "detail": "", "specs": [spec]})
        if "so" not in entry:  # torch's load_inline raises this on a failed build
            raise RuntimeError(f"Error building extension '{spec['name']}': {entry['detail']}")
        if key in self.loaded:
            return self.loaded[key]
        module = load_extension(entry["module"], entry["so"])
        self.raw.append(module)
        self.loaded[key] = self.counted.wrap(module)
        return self.loaded[key]

    def load(self, name, sources, *args, **kwargs):
        end_run({"status": "unsupported", "detail": "torch.utils.cpp_extension.load (extension sources in files) "
                                                    "is not supported by the CPU backend; KernelBench candidates "
                                                    "pass their sources to load_inline"})

    def launches(self):
        return sum(int(getattr(m, LAUNCHES_FUNCTION)()) for m in self.raw)

    def evidence(self, launches, calls):
        return {"loaded": sorted(self.loaded), "kernel_launches": launches, "extension_calls": calls}


def is_cuda_device(d):
    import torch

    if isinstance(d, torch.device):
        return d.type == "cuda"
    return isinstance(d, str) and (d == "cuda" or d.startswith("cuda:"))


def map_device(d):
    import torch

    return torch.device("cpu") if is_cuda_device(d) else d


def install_cpu_device_map(candidate_path):
    """Device placement in the candidate's Python code, mapped to the CPU."""
    import torch
    from torch.overrides import TorchFunctionMode

    def to_self(self, *args, **kwargs):
        return self

    torch.Tensor.cuda = to_self
    torch.nn.Module.cuda = to_self
    is_cuda_getter = torch.Tensor.is_cuda.__get__

    class CudaOnCpu(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func == is_cuda_getter:
                # `if x.is_cuda: <kernel> else: <torch fallback>` in the candidate must take the kernel
                # path; torch's own Python code (cuDNN paths of RNNs...) must keep seeing a CPU tensor.
                return sys._getframe(1).f_code.co_filename == candidate_path or func(*args, **kwargs)
            if "device" in kwargs:
                kwargs["device"] = map_device(kwargs["device"])
            if getattr(func, "__name__", "") == "to":
                args = tuple(map_device(a) for a in args)
            return func(*args, **kwargs)

    class Stream:
        cuda_stream = 0
        device = torch.device("cpu")

        def __init__(self, *a, **k):
            pass

        def synchronize(self):
            pass

        def wait_stream(self, other):
            pass

        def wait_event(self, event):
            pass

        def record_event(self, event=None):
            return event or Event()

        def query(self):
            return True

    class Event:
        def __init__(self, *a, **k):
            import time

            self._time = time.perf_counter
            self.t = None

        def record(self, stream=None):
            self.t = self._time()

        def synchronize(self):
            pass

        def wait(self, stream=None):
            pass

        def query(self):
            return True

        def elapsed_time(self, other):
            return (other.t - self.t) * 1e3

    cuda = torch.cuda
    noop = lambda *a, **k: None  # noqa: E731
    for name, value in {
        "is_available": lambda: True, "device_count": lambda: 1, "current_device": lambda: 0,
        "synchronize": noop, "manual_seed": noop, "manual_seed_all": noop, "set_device": noop,
        "empty_cache": noop, "current_stream": lambda *a, **k: Stream(), "default_stream": lambda *a, **k: Stream(),
        "Stream": Stream, "Event": Event, "stream": lambda *a, **k: contextlib.nullcontext(),
        "device": lambda *a, **k: contextlib.nullcontext(), "get_device_name": lambda *a, **k: "cuset CPU backend",
        "is_initialized": lambda: True, "init": noop,
        # What candidates read to size grids: an H100-like device (the CPU runtime reports its own to C++).
        "get_device_properties": lambda *a, **k: types.SimpleNamespace(
            name="cuset CPU backend", major=9, minor=0, multi_processor_count=132, total_memory=80 << 30,
            max_threads_per_multi_processor=2048, warp_size=32, L2_cache_size=50 << 20),
        "get_device_capability": lambda *a, **k: (9, 0),
    }.items():
        setattr(cuda, name, value)
    mode = CudaOnCpu()
    mode.__enter__()
    return mode


class GpuExtensions:
    """load_inline (and load) on the GPU. A call whose build record (call_spec, strict) the
    parent built is loaded from the run dir's copy of that build (`manifest`: key -> {"so",
    "module"}, or a failed build: {"status", "detail"}, raised as torch raises it); any other
    is torch's real load_inline, building under the run dir in this sandbox (never kept for
    another run). A failed build raises torch's own error (as it does on any GPU machine)
    and is named in the run's record."""

    def __init__(self, build_dir, manifest=None):
        from torch.utils import cpp_extension

        self.build_dir = build_dir
        self.manifest = manifest or {}
        self.signature = load_inline_signature()
        self.real = {"load_inline": cpp_extension.load_inline, "load": cpp_extension.load}
        self.loaded = {}
        self.built = {}             # key -> module: the parent's builds loaded so far
        self.build_failed = []
        self.counted = Counted()

    def load_inline(self, *args, **kwargs):
        try:
            spec = call_spec(self.signature, args, kwargs, strict=True)
        except TypeError:
            spec = None             # torch's own call raises it, as it would anywhere
        entry = self.manifest.get(spec_key(spec)) if spec is not None else None
        if entry is not None:
            return self.prebuilt(spec, entry)
        return self.build("load_inline", args, kwargs)

    def prebuilt(self, spec, entry):
        key = spec_key(spec)
        if "so" not in entry:       # the parent's build failed: torch's error, as its own build raises it
            self.build_failed.append(spec["name"])
            raise RuntimeError(f"Error building extension '{spec['name']}': {entry.get('detail', '')}")
        if key not in self.built:
            module = load_extension(entry["module"], entry["so"])
            self.built[key] = self.loaded[module] = self.counted.wrap(module)
        return self.built[key]

    def load(self, *args, **kwargs):
        return self.build("load", args, kwargs)

    def build(self, how, args, kwargs):
        name = args[0] if args else kwargs.get("name")
        kwargs.setdefault("build_directory", None)
        if kwargs["build_directory"] is None:
            path = os.path.join(self.build_dir, hashlib.sha256(repr((how, args, sorted(kwargs.items())))
                                                               .encode()).hexdigest()[:16])
            os.makedirs(path, exist_ok=True)
            kwargs["build_directory"] = path
        try:
            module = self.real[how](*args, **kwargs)
        except RuntimeError as e:
            if "Ninja is required" in str(e):  # the machine's fault, not the candidate's (verify checks it first)
                end_run({"status": "runtime_error", "detail": f"{how} needs ninja on the evaluating machine: {e}"})
            if "Error building extension" in str(e):
                self.build_failed.append(str(name))
            raise
        if module not in self.loaded:
            self.loaded[module] = self.counted.wrap(module)
        return self.loaded[module]

    def launches(self):
        return None   # counted by the CPU runtime only: on the GPU, calls of the extension functions

    def evidence(self, launches, calls):
        return {"loaded": [getattr(m, "__name__", "?") for m in self.loaded], "extension_calls": calls,
                "build_failed": list(self.build_failed)}


def install_extensions(ext):
    from torch.utils import cpp_extension

    global EXTENSIONS
    EXTENSIONS = ext
    cpp_extension.load_inline = ext.load_inline
    cpp_extension.load = ext.load
    return ext


# ---------------------------------------------------------------- transport
def flatten(out):
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in flatten(o)]
    return [out]


def encode(x, tensors, key):
    """A JSON description of `x`; its tensors go to `tensors` (saved as safetensors, never pickled)."""
    import torch

    if isinstance(x, torch.Tensor):
        tensors[key] = x.detach().cpu().contiguous().clone()   # clone: safetensors refuses shared storage
        return {"t": key}
    if isinstance(x, (list, tuple)):
        return {"l": [encode(v, tensors, f"{key}.{i}") for i, v in enumerate(x)], "tuple": isinstance(x, tuple)}
    if x is None or isinstance(x, (bool, int, float, str)):
        return {"v": x}
    return {"repr": repr(x)}


def decode(e, tensors, device):
    if "t" in e:
        return tensors[e["t"]].to(device)
    if "l" in e:
        items = [decode(v, tensors, device) for v in e["l"]]
        return tuple(items) if e.get("tuple") else items
    if "v" in e:
        return e["v"]
    raise ValueError(f"a value of type {e.get('repr', '?')} cannot be passed to the candidate run")


def save(directory, stem, meta, tensors):
    from safetensors.torch import save_file

    os.makedirs(directory, exist_ok=True)
    save_file(tensors, os.path.join(directory, stem + ".safetensors"))
    write_json(os.path.join(directory, stem + ".json"), meta)   # last: its presence means both are complete


def load(directory, stem):
    from safetensors.torch import load_file

    with open(os.path.join(directory, stem + ".json")) as f:
        meta = json.load(f)
    return meta, load_file(os.path.join(directory, stem + ".safetensors"))


def transform(x, variant):
    import torch

    if variant is None or not isinstance(x, torch.Tensor) or not x.is_floating_point():
        return x
    if variant == "negative":
        return -x.abs()
    if variant == "zeros":
        return torch.zeros_like(x)
    if variant == "large":
        return x * 1e3
    raise ValueError(f"unknown value variant {variant!r}: use one of {VALUE_VARIANTS}")


def with_grad(xs):
    import torch

    for x in xs:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            x.requires_grad_(True)
    return xs


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------- reference run
def run_reference(cfg, steps, device, sync):
    """Inputs (shared with the candidate run) and expected outputs/gradients (kept by the parent)."""
    with steps.step("import reference", cfg["import_timeout"]):
        try:
            ref_mod = load_module("reference", cfg["reference_path"])
        except Exception as e:
            head, tb = exc_summary(e)
            raise Verdict("skipped", f"the task's reference does not import: {head}", log=tb)
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(ref_mod, name):
            raise Verdict("skipped", f"the task's reference defines no {name}")
    for ci, check in enumerate(cfg["checks"]):
        reference_check(ci, check, ref_mod, steps, cfg, device, sync)
    return {"status": "ran", "detail": ""}


def reference_check(ci, check, ref_mod, steps, cfg, device, sync):
    import torch

    cname = check["name"]
    inputs_dir, expected_dir = cfg["inputs_dir"], cfg["expected_dir"]
    saved = {k: getattr(ref_mod, k) for k in check.get("overrides", {}) if hasattr(ref_mod, k)}
    missing = [k for k in check.get("overrides", {}) if k not in saved]
    if missing:
        raise Verdict("skipped", f"check {cname}: the reference has no module constant {', '.join(missing)}",
                      check=cname)
    for k, v in check.get("overrides", {}).items():
        setattr(ref_mod, k, v)
    try:
        where = {"check": cname}
        model_seed = check["model_seed"]
        with steps.step("build models", cfg["step_timeout"], **where):
            try:
                torch.manual_seed(model_seed)
                init = ref_mod.get_init_inputs()
                tensors = {}
                init_meta = {"init": encode(list(init), tensors, "init")}
                decode(init_meta["init"], tensors, "cpu")   # fails here on what cannot be passed on
                save(inputs_dir, f"c{ci}", init_meta, tensors)
                torch.manual_seed(model_seed)
                ref = ref_mod.Model(*init).to(device)
                set_mode(ref, cfg)
            except Exception as e:
                head, tb = exc_summary(e)
                raise Verdict("skipped", f"check {cname}: the reference model does not build: {head}", log=tb,
                              check=cname)
        backward = check.get("backward", False)
        for trial, seed in enumerate(check["seeds"]):
            where = {"check": cname, "trial": trial, "seed": seed}
            torch.manual_seed(seed)
            inputs = [transform(x, check.get("value")) for x in ref_mod.get_inputs()]
            shared = {}
            meta = {"inputs": [encode(x, shared, f"in.{k}") for k, x in enumerate(inputs)]}
            ref_in = [x.to(device).clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            if backward:
                with_grad(ref_in)
            with steps.step("reference forward", cfg["step_timeout"], **where):
                try:
                    with torch.set_grad_enabled(backward):
                        ref_out = ref(*ref_in)
                    sync()
                except Exception as e:
                    head, tb = exc_summary(e)
                    raise Verdict("skipped", f"check {cname}: the reference forward failed: {head}", log=tb, **where)
            outs = flatten(ref_out)
            expected = {}
            exp_meta = {"outputs": [encode(o, expected, f"out.{k}") for k, o in enumerate(outs)]}
            if backward:
                pairs = [k for k, r in enumerate(outs) if isinstance(r, torch.Tensor) and r.requires_grad]
                meta["pairs"] = exp_meta["pairs"] = pairs
                if pairs:
                    gen = torch.Generator(device="cpu").manual_seed(seed + 7919)
                    cots = [torch.randn(outs[k].shape, generator=gen, dtype=outs[k].dtype) for k in pairs]
                    meta["cotangents"] = [encode(c, shared, f"cot.{j}") for j, c in enumerate(cots)]
                    with steps.step("reference backward", cfg["step_timeout"], **where):
                        sum((outs[k] * c.to(outs[k].device)).sum() for k, c in zip(pairs, cots)).backward()
                        sync()
                    exp_meta["input_grads"] = {
                        str(k): encode(x.grad, expected, f"grad.in.{k}") for k, x in enumerate(ref_in)
                        if isinstance(x, torch.Tensor) and x.requires_grad and x.grad is not None}
                    exp_meta["param_grads"] = {
                        name: encode(p.grad, expected, f"grad.param.{name}") for name, p in ref.named_parameters()
                        if p.grad is not None}
            save(inputs_dir, f"c{ci}_t{trial}", meta, shared)
            save(expected_dir, f"c{ci}_t{trial}", exp_meta, expected)
    finally:
        for k, v in saved.items():
            setattr(ref_mod, k, v)


def set_mode(model, cfg):
    """KernelBench builds both models in train mode (nn.Module's default); eval_mode "eval"
    switches both, as harnesses that call .eval() do (dropout, batch-norm statistics)."""
    mode = cfg.get("eval_mode", "train")
    if mode not in EVAL_MODES:
        raise ValueError(f"eval_mode {mode!r}: use one of {EVAL_MODES}")
    if mode == "eval" and hasattr(model, "eval"):
        model.eval()


# ---------------------------------------------------------------- candidate run
def run_candidate(cfg, steps, device, sync, ext, gpu):
    """ModelNew on the inputs the reference run wrote; its outputs and gradients
    written for the parent to compare (this process never sees the expected ones)."""
    before = set(sys.modules)
    with steps.step("import candidate", cfg["import_timeout"]):
        try:
            cand_mod = load_module("candidate", cfg["candidate_path"])
        except Verdict:
            raise
        except Exception as e:
            missing = (getattr(e, "name", None) or "").split(".")[0] if isinstance(e, ImportError) else ""
            if not gpu and missing in GPU_ONLY_MODULES:
                raise Verdict("unsupported", f"imports {missing} ({GPU_ONLY_MODULES[missing]}), which does not run "
                                             "on the CPU backend")
            head, tb = exc_summary(e)
            raise Verdict("runtime_error", f"importing the candidate failed: {head}", log=tb)
    if not gpu:  # installed here, but their kernels need a GPU driver
        new = sorted({m.split(".")[0] for m in set(sys.modules) - before} & set(GPU_ONLY_MODULES))
        if new:
            raise Verdict("unsupported", f"imports {new[0]} ({GPU_ONLY_MODULES[new[0]]}), which does not run on "
                                         "the CPU backend")
    if not hasattr(cand_mod, "ModelNew"):
        raise Verdict("runtime_error", "the candidate module defines no ModelNew after import")
    launches, calls = 0, 0   # of the checked calls only (not import, not ModelNew's construction)
    for ci, check in enumerate(cfg["checks"]):
        went_on, n_launches, n_calls = candidate_check(ci, check, cand_mod, steps, cfg, device, sync, ext)
        launches = None if n_launches is None else launches + n_launches
        calls += n_calls
        if not went_on:
            break
    return {"status": "ran", "detail": "", **ext.evidence(launches, calls)}


def candidate_check(ci, check, cand_mod, steps, cfg, device, sync, ext):
    """(False when the parent's comparison fails here anyway (an output that is not
    differentiable), the own kernels launched and the extension calls during its trials)."""
    import torch

    cname = check["name"]
    inputs_dir, out_dir = cfg["inputs_dir"], cfg["outputs_dir"]
    where = {"check": cname}
    init_meta, init_tensors = load(inputs_dir, f"c{ci}")
    init = decode(init_meta["init"], init_tensors, "cpu")
    with steps.step("build models", cfg["step_timeout"], **where):
        try:
            torch.manual_seed(check["model_seed"])   # as the reference's: the same parameters
            new = cand_mod.ModelNew(*init).to(device)
            set_mode(new, cfg)
        except Verdict:
            raise
        except Exception as e:
            head, tb = exc_summary(e)
            raise Verdict("runtime_error", f"ModelNew(*get_init_inputs()) failed: {head}", log=tb, check=cname)
    backward = check.get("backward", False)
    launches_before, calls_before = ext.launches(), ext.counted.calls

    def counts():
        after = ext.launches()
        return None if after is None else after - launches_before, ext.counted.calls - calls_before

    for trial, seed in enumerate(check["seeds"]):
        where = {"check": cname, "trial": trial, "seed": seed}
        suffix = f"(check {cname}, trial {trial}, seed {seed})"
        meta, tensors = load(inputs_dir, f"c{ci}_t{trial}")
        new_in = decode({"l": meta["inputs"]}, tensors, device)
        if backward:
            with_grad(new_in)
        torch.manual_seed(seed)
        with steps.step("candidate forward", cfg["step_timeout"], **where):
            try:
                with torch.set_grad_enabled(backward):
                    new_out = new(*new_in)
                sync()
            except Verdict:
                raise
            except Exception as e:
                head, tb = exc_summary(e)
                raise Verdict("runtime_error", f"forward raised {head} {suffix}", log=tb, **where)
        outs = flatten(new_out)
        written = {}
        out_meta = {"outputs": [encode(o, written, f"out.{k}") for k, o in enumerate(outs)],
                    "requires_grad": [isinstance(o, torch.Tensor) and o.requires_grad for o in outs]}
        save(out_dir, f"c{ci}_t{trial}", out_meta, written)
        pairs = meta.get("pairs") or []
        if not backward or not pairs:
            continue
        if any(k >= len(outs) or not out_meta["requires_grad"][k] for k in pairs):
            return (False, *counts())
        cots = [c.to(device) for c in decode({"l": meta["cotangents"]}, tensors, "cpu")]
        with steps.step("candidate backward", cfg["step_timeout"], **where):
            try:
                sum((outs[k] * c).sum() for k, c in zip(pairs, cots)).backward()
                sync()
            except Exception as e:
                head, tb = exc_summary(e)
                raise Verdict("runtime_error", f"backward raised {head} {suffix}", log=tb, **where)
        grads = {}
        grad_meta = {
            "input_grads": {str(k): None if x.grad is None else encode(x.grad, grads, f"grad.in.{k}")
                            for k, x in enumerate(new_in) if isinstance(x, torch.Tensor) and x.requires_grad},
            "param_grads": {name: None if p.grad is None else encode(p.grad, grads, f"grad.param.{name}")
                            for name, p in new.named_parameters()}}
        save(out_dir, f"c{ci}_t{trial}_grad", grad_meta, grads)
    return (True, *counts())


# ---------------------------------------------------------------- main
def run(cfg, steps):
    import torch

    gpu = cfg["backend"] == "gpu"
    device = torch.device("cuda" if gpu else "cpu")
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    if cfg["role"] == "reference":
        if not gpu:  # a reference may place itself with .cuda() too; x.is_cuda stays False in its code
            install_cpu_device_map(None)
        return run_reference(cfg, steps, device, sync)
    if gpu:
        ext = install_extensions(GpuExtensions(cfg["build_dir"], cfg.get("extensions")))
    else:
        install_cpu_device_map(cfg["candidate_path"])
        ext = install_extensions(CpuExtensions(cfg["extensions"]))
    return run_candidate(cfg, steps, device, sync, ext, gpu)


def main():
    global STEPS
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    CONFIG.update(cfg)
    steps = STEPS = Steps(cfg)
    try:
        with steps.step("import torch", cfg["import_timeout"]):
            try:
                import torch  # noqa: F401
            except ImportError as e:  # the evaluating machine's fault, not the candidate's
                raise Verdict("infra_error", f"torch does not import in the harness: {e}")
            torch.set_num_threads(1)
        record = run(cfg, steps)
    except Verdict as v:
        record = v.record
    except BaseException as e:  # SystemExit, KeyboardInterrupt... from the candidate
        head, tb = exc_summary(e)
        record = {"status": "runtime_error", "detail": f"{head} ({steps.current.get('step', '')})", "log": tb}
    record.setdefault("step", steps.current)
    if getattr(EXTENSIONS, "build_failed", None):  # GPU: what torch's load_inline failed to build, whatever came next
        record.setdefault("build_failed", list(EXTENSIONS.build_failed))
    write_json(cfg["verdict_path"], record)
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown (extension destructors, candidate atexit hooks)


if __name__ == "__main__":
    main()
