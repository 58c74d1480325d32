"""GPU builds of KernelBench `load_inline` extensions, made by the parent, as torch makes them.

On the GPU a candidate's `load_inline` used to build in its own sandboxed run: nvcc for
every sample, every verification and every timing run (30-60 s each), never reused. This
builder makes the same build once, in the compile sandbox, for the compile cache
(`CompileCache(TorchExtensionBuilder())`): the source is an ExtensionSpec's JSON (every
argument of the call that changes what is built, the harness's `call_spec`), the
executable the extension module `<name>.so`.

The build is torch's own: `main.cpp` and `cuda.cu` written as `load_inline` writes them
(torch's headers, the pybind11 bindings of `functions`), torch's `build.ninja` (its
flags, the CUDA architectures, the candidate's extra flags), then `ninja` inside the
compile sandbox (the build dir the only writable place, no network, CPU/memory/process
limits). Nothing of the module is imported here: the candidate's run loads it (the
harness's GpuExtensions, from a private copy checked against the cache's sha256).

The fingerprint (the compile cache's key, with the spec) holds what else decides the
bytes built: torch's version, CUDA version and C++ ABI, the Python version and
extension suffix, `c++ --version` (and $CC, nvcc's host compiler), `nvcc --version`,
CUDA_HOME, the CUDA architectures (TORCH_CUDA_ARCH_LIST, else the visible GPUs'
compute capabilities, as torch would pick them) and this module's version.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import sysconfig
import threading
import time
from functools import lru_cache
from pathlib import Path

from cuset.execute.interface import CompileOutcome
from cuset.execute.kernelbench.build import FLAG_FIELDS, ExtensionSpec, torch_build_info
from cuset.execute.cpu.toolchain import ToolchainError
from cuset.execute.process import clean_env
from cuset.execute.result import Status, StepResult
from cuset.execute.sandbox import NVCC_MEMORY_BYTES, compile_policy, run_compiler

BUILDER_VERSION = 1   # part of the fingerprint: bump when the written sources or the build change
NINJA_JOBS = 2        # an extension has at most two translation units (main.cpp, cuda.cu)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ARCH_ENV = "TORCH_CUDA_ARCH_LIST"
_ARCH_LOCK = threading.Lock()   # the arch list reaches torch's flags through the environment


class TorchExtensionBuilder:
    """A compile-cache backend (`compile(source, workdir, timeout)`, `fingerprint()`) building
    one `load_inline` call the way torch does, in the compile sandbox."""

    name = "torch-kernelbench"

    def __init__(self, sandbox_mode: str = "auto", memory_bytes: int = NVCC_MEMORY_BYTES):
        self.sandbox_mode = sandbox_mode
        self.memory_bytes = memory_bytes
        self.max_data_bytes = None

    def fingerprint(self) -> str:
        facts = toolchain_facts()
        return "torch-ext-" + hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:20] + \
            f"-b{BUILDER_VERSION}"

    @staticmethod
    def module_name(spec: ExtensionSpec) -> str:
        """torch names the module after the call (-DTORCH_EXTENSION_NAME=<name>, PyInit_<name>)."""
        return spec.name

    def compile(self, source: str, workdir: Path, timeout: float) -> CompileOutcome:
        deadline = time.monotonic() + timeout
        workdir = Path(workdir).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        spec = ExtensionSpec.from_json(json.loads(source))
        refused = refusal(spec)
        if refused:
            return _failed(refused)
        ninja = shutil.which("ninja", path=clean_env().get("PATH"))
        if ninja is None:
            raise ToolchainError("load_inline builds need ninja on the evaluating machine's PATH "
                                 "(pip install ninja, or apt-get install ninja-build)")
        sources = write_sources(spec, workdir)
        write_ninja_file(spec, sources, workdir)
        left = deadline - time.monotonic()
        if left <= 0:
            return _failed(f"the build took longer than {timeout:.0f} s", timed_out=True)
        policy = compile_policy(left, self.sandbox_mode, self.memory_bytes)
        step = run_compiler([ninja, "-v", "-j", str(NINJA_JOBS)], build_dir=workdir, timeout=left, policy=policy,
                            readonly=readonly_paths(spec.with_cuda))
        log = (step.stdout + step.stderr).replace(f"{workdir}/", "")
        step = StepResult("compile", step.returncode, step.seconds, step.timed_out, "", log, step.limit,
                          cpu_seconds=step.cpu_seconds)
        if step.timed_out:
            return CompileOutcome(False, None, step, Status.COMPILE_ERROR, f"the build took longer than {timeout:.0f} s")
        if step.limit == "memory_limit":
            return CompileOutcome(False, None, step, Status.COMPILE_ERROR,
                                  f"the build used more than {policy.memory_bytes >> 20} MiB of memory")
        if step.returncode != 0:
            return CompileOutcome(False, None, step, Status.COMPILE_ERROR, f"Error building extension "
                                                                           f"'{spec.name}': {_errors(log)}")
        library = workdir / f"{spec.name}.so"
        try:
            regular = stat.S_ISREG(os.lstat(library).st_mode)
        except OSError:
            regular = False
        if not regular:   # the build's own doing (its flags can run commands): not a module to load
            return CompileOutcome(False, None, step, Status.COMPILE_ERROR,
                                  f"the build left no regular file {library.name}")
        for leftover in workdir.glob("*.o"):   # the cache keeps the module, not the objects
            leftover.unlink(missing_ok=True)
        return CompileOutcome(True, library, step)


def refusal(spec: ExtensionSpec) -> str | None:
    """Why the parent does not build `spec` (a compile_error), or None. torch would write a
    newline in a flag into build.ninja as it is (new ninja statements): refused here."""
    if not _IDENT.match(spec.name):
        return f"load_inline(name={spec.name!r}): an extension's name must be a C++ identifier"
    bad = [f for f in spec.functions if not _IDENT.match(f)]
    if bad:
        return f"load_inline({spec.name!r}, functions={bad!r}): not C++ identifiers"
    for field in FLAG_FIELDS:
        for flag in getattr(spec, field):
            if _CONTROL.search(flag):
                return f"load_inline({spec.name!r}, {field}=...): the flag {flag[:60]!r} holds a control character"
    return None


def write_sources(spec: ExtensionSpec, workdir: Path) -> list[str]:
    """main.cpp (and cuda.cu) as torch's load_inline writes them; their paths."""
    cpp = ["#include <torch/extension.h>", *spec.cpp_sources]
    if spec.functions:
        call = "torch::wrap_pybind_function({f})" if spec.with_pytorch_error_handling else "{f}"
        cpp += ["PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {",
                *(f'm.def("{f}", {call.format(f=f)}, "{f}");' for f in spec.functions), "}"]
    (workdir / "main.cpp").write_text("\n".join(cpp))
    sources = [str(workdir / "main.cpp")]
    if spec.cuda_sources:
        cuda = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>", *spec.cuda_sources]
        (workdir / "cuda.cu").write_text("\n".join(cuda))
        sources.append(str(workdir / "cuda.cu"))
    return sources


def write_ninja_file(spec: ExtensionSpec, sources: list[str], workdir: Path) -> None:
    """torch's build.ninja for the extension (its own writer: its flags, as its build has them)."""
    from torch.utils import cpp_extension as ce

    ldflags = _torch_call(ce._prepare_ldflags, extra_ldflags=list(spec.extra_ldflags), with_cuda=spec.with_cuda,
                          with_sycl=False, verbose=False, is_standalone=False)
    with _ARCH_LOCK:
        arch, saved = cuda_arch_list(), os.environ.get(_ARCH_ENV)
        if spec.with_cuda and saved is None and arch:
            os.environ[_ARCH_ENV] = arch   # what torch would derive from the GPUs, without a CUDA context here
        try:
            _torch_call(ce._write_ninja_file_to_build_library, path=str(workdir / "build.ninja"), name=spec.name,
                        sources=sources, extra_cflags=list(spec.extra_cflags),
                        extra_cuda_cflags=list(spec.extra_cuda_cflags), extra_sycl_cflags=[], extra_ldflags=ldflags,
                        extra_include_paths=list(spec.extra_include_paths), with_cuda=spec.with_cuda,
                        with_sycl=False, is_standalone=False)
        finally:
            if saved is None:
                os.environ.pop(_ARCH_ENV, None)
    # The sandbox binds each read-only path where it really is (links resolved): name them so
    # (a venv reached through a link, as in a worktree, has no other path inside it).
    ninja_file = workdir / "build.ninja"
    text = ninja_file.read_text()
    for named in sorted(readonly_paths(spec.with_cuda), key=lambda p: -len(str(p))):
        if named.resolve() != named:
            text = text.replace(str(named), str(named.resolve()))
    ninja_file.write_text(text)


def _torch_call(fn, **kwargs):
    """torch's private build helper `fn` with the arguments its version takes; ToolchainError
    when it needs one cuset does not know (a torch this builder was not written for)."""
    params = inspect.signature(fn).parameters
    unknown = [p for p, v in params.items() if v.default is inspect.Parameter.empty and p not in kwargs]
    if unknown:
        import torch

        raise ToolchainError(f"torch {torch.__version__}: torch.utils.cpp_extension.{fn.__name__} needs {unknown}, "
                             f"which cuset's load_inline builder does not pass (update "
                             f"cuset/execute/kernelbench/torch_build.py for this torch)")
    return fn(**{k: v for k, v in kwargs.items() if k in params})


def readonly_paths(with_cuda: bool) -> tuple[Path, ...]:
    """What the build reads besides the compile sandbox's root: torch's headers and libraries,
    Python's headers, the CUDA toolkit."""
    from torch.utils import cpp_extension as ce

    paths = [*ce.include_paths("cuda" if with_cuda else "cpu"), *ce.library_paths("cuda" if with_cuda else "cpu"),
             sysconfig.get_paths()["include"]]
    if with_cuda and ce.CUDA_HOME:
        paths.append(ce.CUDA_HOME)
    # as build.ninja names them (a link in the path, e.g. a linked venv, is bound where it is named);
    # one bind per tree (torch's include/torch/csrc/api/include lies in its include/)
    found = list(dict.fromkeys(Path(p).absolute() for p in paths if Path(p).exists()))
    return tuple(p for p in found if not any(p != q and p.is_relative_to(q) for q in found))


@lru_cache(maxsize=1)
def toolchain_facts() -> dict:
    """Everything besides the spec that decides what a build makes (the fingerprint's content)."""
    info = torch_build_info()   # ToolchainError, naming the fix, where torch does not import
    import torch
    from torch.utils import cpp_extension as ce

    cxx = ce.get_cxx_compiler()
    nvcc = Path(ce.CUDA_HOME) / "bin" / "nvcc" if ce.CUDA_HOME else None
    return {"torch": info["version"], "torch_cuda": torch.version.cuda, "abi": info["abi"], "python": sys.version,
            "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX"), "cxx": cxx, "cxx_version": _version(cxx),
            "cc": os.environ.get("CC"), "cuda_home": ce.CUDA_HOME,
            "nvcc_version": _version(str(nvcc)) if nvcc is not None and nvcc.exists() else None,
            "cuda_arch_list": cuda_arch_list()}


@lru_cache(maxsize=1)
def cuda_arch_list() -> str:
    """TORCH_CUDA_ARCH_LIST, else the compute capabilities of the machine's GPUs ("8.0;9.0"),
    as nvidia-smi reports them ("" without one): the architectures torch builds for."""
    if os.environ.get(_ARCH_ENV):
        return os.environ[_ARCH_ENV]
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ""
    try:
        out = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    caps = sorted({c.strip() for c in out.stdout.splitlines() if re.fullmatch(r"\d+\.\d+", c.strip())})
    return ";".join(caps) if out.returncode == 0 else ""


def _version(compiler: str) -> str:
    try:
        out = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ToolchainError(f"{compiler} --version failed ({e}): the compiler of load_inline builds is missing")
    return " ".join(out.stdout.split())[:400]


def _errors(log: str, limit: int = 3) -> str:
    lines = [ln for ln in log.splitlines() if "error" in ln.lower() and not ln.startswith("[")]
    if not lines:
        lines = [ln for ln in log.splitlines() if ln.strip()][-limit:]
    return " | ".join(ln.strip()[:300] for ln in lines[:limit]) or "the build failed without a message"


def _failed(detail: str, timed_out: bool = False) -> CompileOutcome:
    return CompileOutcome(False, None, StepResult("compile", None, 0.0, timed_out, "", detail), Status.COMPILE_ERROR,
                          detail)
