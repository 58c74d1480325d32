"""The C++ toolchain of the CPU backend: compiler flags, the fingerprint, and
the prebuilt runtime (precompiled header + runtime library).

The runtime is built once per fingerprint (the compiler, its flags and a hash of
every runtime file: code_hash.py) under a cache directory
(`~/.cache/cuset/cpu-pch/<fingerprint>/` by default) and shared by every
later compile. Concurrent processes take a file lock; the build goes to a
temporary directory that is renamed into place, so a reader never sees half
a build.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import platform
import shutil
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from cuset.errors import CusetError
from cuset.cachedir import cache_root
from cuset.execute.cpu import code_hash
from cuset.execute.process import clean_env, run_step

RUNTIME_DIR = Path(__file__).resolve().parent / "runtime"
INCLUDE_DIR = RUNTIME_DIR / "include"
SOURCE_DIR = RUNTIME_DIR / "src"
PCH_HEADER = "cuset_pch.h"
RUNTIME_LIB = "libcuset_cpu.a"


class ToolchainError(CusetError, RuntimeError):
    """The compiler is missing or the runtime does not build: the backend cannot work."""


def default_cache_dir() -> Path:
    return cache_root() / "cpu-pch"


@lru_cache(maxsize=8)
def compiler_version(cxx: str) -> str:
    path = shutil.which(cxx)
    if not path:
        raise ToolchainError(f"C++ compiler {cxx!r} not found on PATH: install g++ (12 or newer) "
                             "or pass cxx=... to the cpu backend")
    step = run_step("version", [path, "--version"], cwd=os.getcwd(), timeout=30, env=clean_env())
    if step.returncode != 0 or not step.stdout.strip():
        raise ToolchainError(f"{cxx} --version failed: {step.stderr.strip() or 'no output'}")
    return step.stdout.splitlines()[0].strip()


@lru_cache(maxsize=1)
def _cpu_has_fma() -> bool:
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return " fma " in f" {line.split(':', 1)[1].strip()} "
    except OSError:
        pass
    return False


def check_architecture() -> None:
    if platform.machine() not in ("x86_64", "AMD64", "aarch64", "arm64"):
        raise ToolchainError(f"the CPU backend's fiber context switch exists for x86-64 and aarch64 only, "
                             f"not {platform.machine()}")


@dataclass(frozen=True)
class Toolchain:
    """Compiler + flags. `asan` builds everything with AddressSanitizer;
    `race_check` instruments the program (not the runtime) for the data-race
    checker (runtime/src/racecheck.cpp)."""

    cxx: str = "g++"
    asan: bool = False
    race_check: bool = False
    cache_dir: Path | None = None

    def __post_init__(self):
        if self.asan and self.race_check:
            raise ValueError("asan and race_check cannot be combined: build one or the other")

    def flags(self) -> list[str]:
        """Flags of the runtime library (and, with program_flags' additions, of programs)."""
        # -fno-strict-aliasing/-fwrapv: CUDA code type-puns through pointers and
        # relies on wrapping integers, which nvcc does not exploit.
        # -fstack-clash-protection: large local arrays probe the stack guard page.
        # FMA: nvcc contracts a*b+c into fused multiply-adds by default.
        # -fno-builtin-printf, -U_FORTIFY_SOURCE: every printf call reaches the runtime's
        # printf (device output is held back as on a GPU, runtime/src/device_printf.cpp),
        # none becomes puts or __printf_chk.
        f = ["-std=gnu++17", "-O2", "-fno-strict-aliasing", "-fwrapv", "-fno-math-errno",
             "-fstack-clash-protection", "-pthread", "-fno-builtin-printf", "-U_FORTIFY_SOURCE"]
        if _cpu_has_fma():
            f.append("-mfma")
        if self.asan:
            f += ["-fsanitize=address", "-fno-omit-frame-pointer", "-g", "-DCUSET_CPU_ASAN=1"]
        if self.race_check:
            f.append("-DCUSET_CPU_RACECHECK=1")
        return f

    def program_flags(self) -> list[str]:
        # The sanitizers only instrument: linked without them, the checks go to the
        # runtime's own callbacks instead of libtsan / libubsan. float-cast-overflow
        # finds a kernel's out-of-range float-to-integer conversion, whose value a
        # GPU saturates and x86 does not (conversions.py, scheduler.cpp).
        return self.flags() + ["-fsanitize=float-cast-overflow", "-fsanitize-recover=float-cast-overflow"] + (
            ["-fsanitize=thread"] if self.race_check else [])

    def runtime_hash(self) -> str:
        """The runtime's headers and sources (code_hash.py: read once per process)."""
        return code_hash.runtime_hash()

    def fingerprint(self) -> str:
        """The prebuilt runtime's key: the compiler, the flags, every file it is built from."""
        parts = [compiler_version(self.cxx), " ".join(self.program_flags()), self.runtime_hash(), platform.machine()]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]

    def runtime_dir(self) -> Path:
        # resolved: the sandbox binds this path into a compile's view of the file system, and
        # a symlinked cache (~/.cache -> /scratch/...) would point at nothing in there
        return ((self.cache_dir or default_cache_dir()) / self.fingerprint()).resolve()

    def ensure_runtime(self, timeout: float = 600.0) -> Path:
        """Directory holding the PCH and the runtime library, built if needed."""
        check_architecture()
        final = self.runtime_dir()
        if _complete(final):
            _share_read_only(final)
            return final
        final.parent.mkdir(parents=True, exist_ok=True)
        lock_path = final.parent / f"{final.name}.lock"
        with open(lock_path, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if _complete(final):
                return final
            tmp = Path(tempfile.mkdtemp(prefix=f"{final.name}.tmp-", dir=final.parent))
            try:
                self._build(tmp, final, timeout)
                if final.exists():
                    shutil.rmtree(final)
                _share_read_only(tmp)
                os.rename(tmp, final)
            finally:
                if tmp.exists():
                    shutil.rmtree(tmp, ignore_errors=True)
        return final

    def _build(self, tmp: Path, final: Path, timeout: float) -> None:
        """Runtime objects and the PCH, compiled side by side (one job per core)."""
        flags = self.flags()
        (tmp / PCH_HEADER).write_text('#include "cuset_cpu.h"\n')
        jobs = {}
        for src in sorted(SOURCE_DIR.glob("*.cpp")):
            jobs[src.name] = [self.cxx, *flags, "-I", str(INCLUDE_DIR), "-I", str(SOURCE_DIR), "-c", str(src),
                              "-o", str(tmp / (src.stem + ".o"))]
        # The PCH is built with the programs' flags, where it will live.
        jobs["precompiled header"] = [self.cxx, *self.program_flags(), "-I", str(INCLUDE_DIR), "-x", "c++-header",
                                      str(tmp / PCH_HEADER), "-o", str(tmp / (PCH_HEADER + ".gch"))]
        self._build_archive(tmp, jobs, timeout, "the CPU runtime", RUNTIME_LIB)

    def _build_archive(self, tmp: Path, jobs: dict[str, list[str]], timeout: float, what: str, library: str) -> None:
        """Run the compile `jobs` (name -> argv; trusted sources only) side by side in `tmp`,
        archive the objects into `library` and mark `tmp` complete."""
        from concurrent.futures import ThreadPoolExecutor

        env = clean_env()
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            futures = {name: pool.submit(run_step, f"build {name}", argv, cwd=tmp, timeout=timeout, env=env)
                       for name, argv in jobs.items()}
            for name, fut in futures.items():
                step = fut.result()
                if step.returncode != 0:
                    raise ToolchainError(f"building {what} failed ({name}):\n{step.stderr}")
        objects = sorted(str(p) for p in tmp.glob("*.o"))
        # One relocatable object whose hidden symbols (CUSET_RT_PRIVATE: the diagnostics
        # writer) are made local: a program linked against the library cannot call them.
        combined = str(tmp / "cuset-runtime.o")
        for label, argv in (("link", ["ld", "-r", "-o", combined, *objects]),
                            ("localize", ["objcopy", "--localize-hidden", combined]),
                            ("archive", ["ar", "rcs", str(tmp / library), combined])):
            step = run_step(f"{label} runtime", argv, cwd=tmp, timeout=timeout, env=env)
            if step.returncode != 0:
                raise ToolchainError(f"building {what} failed at `{' '.join(argv[:2])}`:\n{step.stderr}")
        for obj in [*objects, combined]:
            os.unlink(obj)
        (tmp / "COMPLETE").write_text(self.fingerprint() + "\n")

    def compile_commands(self, runtime: Path, source: Path, output: Path) -> list[list[str]]:
        """g++ command lines that turn the rewritten source into `output`."""
        front = [self.cxx, *self.program_flags(), "-Winvalid-pch", "-I", str(INCLUDE_DIR),
                 "-include", str(runtime / PCH_HEADER), "-x", "c++", str(source)]
        # Compiled and linked apart: a link with the -fsanitize flags would pull in the
        # sanitizer's library (program_flags).
        obj = output.with_suffix(".o")
        return [front + ["-c", "-o", str(obj)],
                [self.cxx, *self.flags(), str(obj), str(runtime / RUNTIME_LIB), "-o", str(output)]]


def _share_read_only(path: Path) -> None:
    """The sandboxed compile step (another uid) reads the runtime: 0755/0644."""
    if path.stat().st_mode & 0o005 != 0o005:
        os.chmod(path, 0o755)
        for f in path.iterdir():
            os.chmod(f, 0o644)


def _complete(path: Path) -> bool:
    return (path / "COMPLETE").is_file() and (path / RUNTIME_LIB).is_file() \
        and (path / (PCH_HEADER + ".gch")).is_file()
