"""CPU builds of KernelBench `load_inline` extensions.

A candidate's `load_inline(name, cpp_sources, cuda_sources, functions=[...])`
becomes a Python extension module compiled with g++:

- `cuda.cu`: the CUDA sources through the cuset rewriter (as CUDABench programs
  on the CPU backend), features the CPU cannot run refused as `unsupported`;
- `main.cpp`: the C++ sources plus bindings of `functions` (cuset_kb/binder.h,
  no pybind11);
- linked with a position-independent build of the CPU runtime and libtorch.

Both translation units start from one precompiled header (include/cuset_kb/pch.h:
Python.h, torch/types.h, the bindings, the CPU runtime, CUDA header shims and
the device map), built once per fingerprint (compiler, flags, runtime, rewriter,
torch version and ABI, Python headers) under `~/.cache/cuset/kb-pch/<fingerprint>/`.
Built extensions are content-addressed (`ExtensionBuilder` is a compile-cache
backend: same sources and toolchain, no rebuild). The compiles of untrusted
sources run in the compile sandbox, like the CPU backend's.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import sys
import sysconfig
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from cuset.execute.interface import CompileOutcome
from cuset.execute.cpu.diagnostics import summarize_compile_errors
from cuset.execute.cpu import rewrite_worker
from cuset.execute.cpu.features import find_embedded_files
from cuset.execute.cpu.lexer import tokenize
from cuset.execute.cpu.toolchain import INCLUDE_DIR, SOURCE_DIR, Toolchain, ToolchainError, default_cache_dir
from cuset.execute.result import Status, StepResult
from cuset.execute.sandbox import COMPILE_MEMORY_BYTES, compile_policy, run_compiler

KB_INCLUDE_DIR = Path(__file__).resolve().parent / "include"
PCH_NAME = "cuset_kb_pch.h"
RUNTIME_LIB = "libcuset_cpu_pic.a"
CUDA_NAME = "cuda.cu"
MAIN_NAME = "main.cpp"
BINDINGS_NAME = "cuset_bindings.cpp"
MODULE_PREFIX = "cuset_kb_ext_"
LAUNCHES_FUNCTION = "_cuset_kernel_launches"   # in every CPU extension: its runtime's launch count (harness.py)
BUILDER_VERSION = 4   # part of the fingerprint: bump when the generated sources or the feature checks change
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TORCH_CUDA_NS = re.compile(r"\b(?:at|c10)\s*::\s*cuda\s*::")


class SpecError(ValueError):
    """A load_inline call the CPU builder cannot express (bad function names, no functions=)."""


FLAG_FIELDS = ("extra_cflags", "extra_cuda_cflags", "extra_ldflags", "extra_include_paths")
# load_inline's arguments in the build record (harness.call_spec), and those that change nothing
# that is built (where torch builds it, its log, its objects kept): the same lists as the harness's.
KEYED_ARGS = ("name", "cpp_sources", "cuda_sources", "functions", *FLAG_FIELDS, "with_cuda",
              "with_pytorch_error_handling")
HARMLESS_ARGS = ("verbose", "build_directory", "keep_intermediates")


@dataclass(frozen=True)
class ExtensionSpec:
    """What one load_inline call asks for: every argument that changes what torch builds
    (the harness's call_spec makes the same record from the call it sees). The CPU build
    honours the sources and functions; the flags are in the key all the same."""

    name: str
    cpp_sources: tuple[str, ...]
    cuda_sources: tuple[str, ...]
    functions: tuple[str, ...]
    extra_cflags: tuple[str, ...] = ()
    extra_cuda_cflags: tuple[str, ...] = ()
    extra_ldflags: tuple[str, ...] = ()
    extra_include_paths: tuple[str, ...] = ()
    with_cuda: bool | None = None                 # None: as torch decides it, True iff there are CUDA sources
    with_pytorch_error_handling: bool = True

    def __post_init__(self):
        if self.with_cuda is None:
            object.__setattr__(self, "with_cuda", bool(self.cuda_sources))

    @classmethod
    def from_call(cls, name, cpp_sources, cuda_sources=None, functions=None, *, extra_cflags=None,
                  extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None, with_cuda=None,
                  with_pytorch_error_handling=True) -> "ExtensionSpec":
        def strings(v) -> tuple[str, ...]:
            if v is None:
                return ()
            if isinstance(v, str):
                return (v,)
            return tuple(str(s) for s in v)

        if isinstance(functions, dict):
            functions = list(functions)
        return cls(str(name), strings(cpp_sources), strings(cuda_sources or None), strings(functions),
                   strings(extra_cflags), strings(extra_cuda_cflags), strings(extra_ldflags),
                   strings(extra_include_paths), None if with_cuda is None else bool(with_cuda),
                   bool(with_pytorch_error_handling))

    def to_json(self) -> dict:
        return {"name": self.name, "cpp_sources": list(self.cpp_sources), "cuda_sources": list(self.cuda_sources),
                "functions": list(self.functions), **{f: list(getattr(self, f)) for f in FLAG_FIELDS},
                "with_cuda": self.with_cuda, "with_pytorch_error_handling": self.with_pytorch_error_handling}

    @classmethod
    def from_json(cls, d: dict) -> "ExtensionSpec":
        return cls(d["name"], tuple(d["cpp_sources"]), tuple(d["cuda_sources"]), tuple(d["functions"]),
                   *(tuple(d.get(f, ())) for f in FLAG_FIELDS), d.get("with_cuda"),
                   d.get("with_pytorch_error_handling", True))

    def key(self) -> str:
        """Content key: the harness finds a call's build by it (same on both sides)."""
        return spec_key(self.to_json())

    def module_name(self) -> str:
        return MODULE_PREFIX + self.key()[:16]


def spec_key(d: dict) -> str:
    """sha256 of the call's JSON (harness.py computes the same)."""
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()


@lru_cache(maxsize=1)
def torch_build_info() -> dict:
    """Include/library paths and ABI of the installed torch (the harness's torch)."""
    try:
        import torch
        from torch.utils import cpp_extension
    except ImportError as e:
        raise ToolchainError(f"KernelBench extensions are built against the evaluating interpreter's torch, "
                             f"which does not import ({e}): install torch in {sys.executable}'s environment") from e

    return {"version": torch.__version__, "abi": int(bool(torch._C._GLIBCXX_USE_CXX11_ABI)),
            "include": [str(p) for p in cpp_extension.include_paths()],
            "lib": str(Path(torch.__file__).resolve().parent / "lib"),
            "python_include": sysconfig.get_paths()["include"]}


class KbToolchain(Toolchain):
    """The CPU backend's toolchain, position independent (the code lives in a
    shared object), with the torch + runtime precompiled header."""

    def flags(self) -> list[str]:
        return super().flags() + ["-fPIC"]

    def include_flags(self) -> list[str]:
        info = torch_build_info()
        # -I before -isystem: the shims (torch/extension.h, ATen/cuda/...) win over torch's own.
        flags = ["-I", str(KB_INCLUDE_DIR), "-I", str(INCLUDE_DIR)]
        for path in info["include"]:
            flags += ["-isystem", path]
        return flags + ["-isystem", info["python_include"], f"-D_GLIBCXX_USE_CXX11_ABI={info['abi']}"]

    def fingerprint(self) -> str:
        info = torch_build_info()
        h = hashlib.sha256(super().fingerprint().encode())
        h.update(json.dumps(info, sort_keys=True).encode())
        for path in sorted(KB_INCLUDE_DIR.rglob("*.h")):
            h.update(str(path.relative_to(KB_INCLUDE_DIR)).encode())
            h.update(path.read_bytes())
        return "kb-" + h.hexdigest()[:20]

    def runtime_dir(self) -> Path:
        return ((self.cache_dir or default_cache_dir().parent / "kb-pch") / self.fingerprint()).resolve()

    def ensure_runtime(self, timeout: float = 900.0) -> Path:
        final = self.runtime_dir()
        if _complete(final):
            return final
        final.parent.mkdir(parents=True, exist_ok=True)
        with open(final.parent / f"{final.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if _complete(final):
                return final
            tmp = Path(tempfile.mkdtemp(prefix=f"{final.name}.tmp-", dir=final.parent))
            try:
                self._build_kb(tmp, timeout)
                if final.exists():
                    shutil.rmtree(final)
                os.chmod(tmp, 0o755)
                for f in tmp.iterdir():
                    os.chmod(f, 0o644)
                os.rename(tmp, final)
            finally:
                if tmp.exists():
                    shutil.rmtree(tmp, ignore_errors=True)
        return final

    def _build_kb(self, tmp: Path, timeout: float) -> None:
        """PIC runtime objects and the PCH, side by side (trusted sources only)."""
        (tmp / PCH_NAME).write_text('#include "cuset_kb/pch.h"\n')
        jobs = {src.name: [self.cxx, *self.flags(), "-I", str(INCLUDE_DIR), "-I", str(SOURCE_DIR), "-c", str(src),
                           "-o", str(tmp / (src.stem + ".o"))] for src in sorted(SOURCE_DIR.glob("*.cpp"))}
        jobs["precompiled header"] = [self.cxx, *self.program_flags(), *self.include_flags(), "-x", "c++-header",
                                      str(tmp / PCH_NAME), "-o", str(tmp / (PCH_NAME + ".gch"))]
        self._build_archive(tmp, jobs, timeout, "the KernelBench CPU toolchain (PIC runtime)", RUNTIME_LIB)

    def object_command(self, runtime: Path, source: Path, output: Path) -> list[str]:
        return [self.cxx, *self.program_flags(), "-Winvalid-pch", *self.include_flags(),
                "-include", str(runtime / PCH_NAME), "-x", "c++", "-c", str(source), "-o", str(output)]

    def link_command(self, runtime: Path, objects: list[Path], output: Path) -> list[str]:
        lib = torch_build_info()["lib"]
        return [self.cxx, "-shared", "-pthread", *[str(o) for o in objects], str(runtime / RUNTIME_LIB),
                f"-L{lib}", "-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python", f"-Wl,-rpath,{lib}",
                "-o", str(output)]


def _complete(path: Path) -> bool:
    return (path / "COMPLETE").is_file() and (path / RUNTIME_LIB).is_file() and (path / (PCH_NAME + ".gch")).is_file()


def bindings_source(spec: ExtensionSpec) -> str:
    """main.cpp: the C++ sources (line numbers kept) and the module's bindings."""
    if not spec.functions:
        raise SpecError("load_inline without functions= (bindings written with PYBIND11_MODULE in the source): "
                        "pybind11 bindings are not provided by the CPU backend; pass functions=[...]")
    bad = [f for f in spec.functions if not _IDENT.match(f)]
    if bad:
        raise SpecError(f"load_inline functions={bad!r}: not C++ identifiers")
    lines = []
    for k, f in enumerate(spec.functions):
        lines.append(f"static PyObject* cuset_kb_fn_{k}(PyObject*, PyObject* args) "
                     f'{{ return cuset_kb::invoke("{f}", &{f}, args); }}')
    # The CPU runtime's count of this extension's kernel launches (each extension links its own runtime).
    lines += ['extern "C" unsigned long long cuset_rt_kernel_launches(void);',
              f"static PyObject* cuset_kb_launches(PyObject*, PyObject*) "
              f"{{ return PyLong_FromUnsignedLongLong(cuset_rt_kernel_launches()); }}"]
    table = ", ".join(f'{{"{f}", cuset_kb_fn_{k}, METH_VARARGS, "{f}"}}' for k, f in enumerate(spec.functions))
    table += f', {{"{LAUNCHES_FUNCTION}", cuset_kb_launches, METH_NOARGS, "kernel launches (cuset)"}}'
    mod = spec.module_name()
    lines += [f"static PyMethodDef cuset_kb_methods[] = {{{table}, {{nullptr, nullptr, 0, nullptr}}}};",
              f'static PyModuleDef cuset_kb_module = {{PyModuleDef_HEAD_INIT, "{mod}", nullptr, -1, cuset_kb_methods}};',
              f'extern "C" __attribute__((visibility("default"))) PyObject* PyInit_{mod}() {{',
              "  if (!cuset_kb::layout_ok()) return nullptr;",
              "  return PyModule_Create(&cuset_kb_module);", "}", ""]
    return "\n".join(lines)


def translation_units(spec: ExtensionSpec, cuda_rewritten: str | None) -> dict[str, tuple[str, dict[str, str]]]:
    """{unit: (text compiled, {file named by #line: its text})}: the named files are
    written next to the unit, so the (cleaned) compiler log keeps their diagnostics."""
    bindings = bindings_source(spec)
    cpp = "\n".join(spec.cpp_sources)
    units = {MAIN_NAME: (f'#line 1 "{MAIN_NAME}"\n{cpp}\n#line 1 "{BINDINGS_NAME}"\n{bindings}',
                         {MAIN_NAME: cpp, BINDINGS_NAME: bindings})}
    if cuda_rewritten is not None:
        units[CUDA_NAME] = (f'#line 1 "{CUDA_NAME}"\n{cuda_rewritten}', {CUDA_NAME: "\n".join(spec.cuda_sources)})
    return units


class ExtensionBuilder:
    """A compile-cache backend (`compile(source, workdir, timeout)`, `fingerprint()`)
    whose source is an ExtensionSpec's JSON and whose executable is the extension (.so)."""

    name = "cpu-kernelbench"

    def __init__(self, cxx: str = "g++", cache_dir: str | Path | None = None, sandbox_mode: str = "auto",
                 compile_memory_bytes: int = COMPILE_MEMORY_BYTES):
        self.toolchain = KbToolchain(cxx=cxx, cache_dir=Path(cache_dir) if cache_dir else None)
        self.sandbox_mode = sandbox_mode
        self.compile_memory_bytes = compile_memory_bytes
        self.max_data_bytes = None

    def fingerprint(self) -> str:
        """The compile-cache key's part: the toolchain (PCH) and the generated sources' version."""
        return f"{self.toolchain.fingerprint()}-b{BUILDER_VERSION}"

    @staticmethod
    def module_name(spec: ExtensionSpec) -> str:
        """The module's name in its PyInit_ (bindings_source): one per build, never the candidate's."""
        return spec.module_name()

    def prepare(self) -> None:
        """Build the shared toolchain (PIC runtime, precompiled header) now, if not built yet:
        trusted work that no candidate's build budget should pay for."""
        self.toolchain.ensure_runtime()

    def compile(self, source: str, workdir: Path, timeout: float) -> CompileOutcome:
        """Build one extension; `timeout` bounds the whole build (rewriter, both compiles and
        the link together), so a sample's build budget holds whatever the sources do."""
        deadline = time.monotonic() + timeout

        def left() -> float:
            return deadline - time.monotonic()

        workdir = Path(workdir).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        spec = ExtensionSpec.from_json(json.loads(source))
        embedded = [u for src in spec.cpp_sources for u in find_embedded_files(tokenize(src))]
        if embedded:   # cpp_sources see no rewriter: their file-reading directives are refused here
            return _failed(Status.UNSUPPORTED, "cpp_sources use " + "; ".join(u.describe() for u in embedded))
        cuda_rewritten = None
        if spec.cuda_sources:
            cuda_src = "\n".join(spec.cuda_sources)
            # `at::cuda::` / `c10::cuda::` are torch's (shimmed), not libcu++'s `cuda::`.
            masked_src = _TORCH_CUDA_NS.sub(lambda m: m.group(0).replace("cuda", "cu_a"), cuda_src)
            try:   # in a worker under the compile timeout: pathological sources make the rewriter slow
                (_, unsupported), (real, _) = rewrite_worker.analyse([masked_src, cuda_src], left())
            except (rewrite_worker.RewriteTimeout, rewrite_worker.RewriteFailed) as e:
                return _failed(Status.COMPILE_ERROR, str(e), timed_out=isinstance(e, rewrite_worker.RewriteTimeout))
            if unsupported:
                return _failed(Status.UNSUPPORTED, "uses " + "; ".join(u.describe() for u in unsupported))
            cuda_rewritten = real.source
        try:
            tus = translation_units(spec, cuda_rewritten)
        except SpecError as e:
            return _failed(Status.UNSUPPORTED, str(e))
        try:
            runtime = self.toolchain.ensure_runtime()
        except ToolchainError as e:
            return _failed(Status.COMPILE_ERROR, f"CPU toolchain for KernelBench extensions unavailable: {e}")
        if left() <= 0:
            return _failed(Status.COMPILE_ERROR, f"the build took longer than {timeout:.0f} s", timed_out=True)
        policy = compile_policy(left(), self.sandbox_mode, self.compile_memory_bytes)
        info = torch_build_info()
        readonly = (runtime, INCLUDE_DIR, KB_INCLUDE_DIR, Path(info["python_include"]),
                    *dict.fromkeys(Path(p) for p in info["include"]))

        def compile_one(name: str, unit: tuple[str, dict[str, str]]) -> StepResult:
            # Each translation unit in a build dir of its own: a sandboxed step owns its dir (its own uid).
            sub = workdir / name.replace(".", "_")
            sub.mkdir(exist_ok=True)
            text, named = unit
            for fname, ftext in named.items():
                (sub / fname).write_text(ftext)
            src = sub / (name.replace(".", "_") + ".cpp")
            src.write_text(text)
            return run_compiler(self.toolchain.object_command(runtime, src, src.with_suffix(".o")),
                                build_dir=sub, timeout=max(left(), 0.0), policy=policy, readonly=readonly)

        # The two translation units compile side by side (the link waits for both).
        with ThreadPoolExecutor(max_workers=len(tus)) as pool:
            steps = dict(zip(tus, pool.map(lambda item: compile_one(*item), tus.items())))
        merged = _merge(list(steps.values()))
        for name, step in steps.items():
            if step.timed_out:
                return CompileOutcome(False, None, merged, Status.COMPILE_ERROR, f"g++ timed out after {timeout:.0f} s")
            if step.returncode != 0:
                errors = summarize_compile_errors(step.stderr, name)
                return CompileOutcome(False, None, merged, Status.COMPILE_ERROR, f"{name}: {errors}")
        so = workdir / f"{spec.module_name()}.so"
        objects = [workdir / n.replace(".", "_") / (n.replace(".", "_") + ".o") for n in tus]
        if left() <= 0:
            return CompileOutcome(False, None, dataclasses.replace(merged, timed_out=True), Status.COMPILE_ERROR,
                                  f"the build took longer than {timeout:.0f} s (before the link)")
        link = run_compiler(self.toolchain.link_command(runtime, objects, so), build_dir=workdir, timeout=left(),
                            policy=policy, readonly=readonly + (Path(info["lib"]),))
        merged = _merge([merged, link])
        if link.timed_out:
            return CompileOutcome(False, None, merged, Status.COMPILE_ERROR,
                                  f"the build took longer than {timeout:.0f} s (in the link)")
        if link.returncode != 0 or not so.is_file():
            return CompileOutcome(False, None, merged, Status.COMPILE_ERROR,
                                  f"link: {summarize_compile_errors(link.stderr, MAIN_NAME)}")
        for obj in objects:
            obj.unlink(missing_ok=True)
        return CompileOutcome(True, so, merged)


def _failed(status: Status, detail: str, timed_out: bool = False) -> CompileOutcome:
    return CompileOutcome(False, None, StepResult("compile", None, 0.0, timed_out, "", detail), status, detail)


def _merge(steps: list[StepResult]) -> StepResult:
    """One compile step from several compiler runs (logs concatenated, the worst exit)."""
    worst = next((s for s in steps if s.timed_out or s.returncode != 0), steps[-1])
    cpu = [s.cpu_seconds for s in steps if s.cpu_seconds is not None]
    return StepResult("compile", worst.returncode, sum(s.seconds for s in steps), any(s.timed_out for s in steps),
                      "".join(s.stdout for s in steps), "".join(s.stderr for s in steps), worst.limit,
                      cpu_seconds=sum(cpu) if cpu else None)
