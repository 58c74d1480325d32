"""The library that skips a candidate's own kernel launches on the GPU (launch_skip.c).

strict_kernels runs a passing KernelBench answer once more without its own kernels and
fails it if it still passes (cuset.evaluate.kernelbench). On the CPU backend the runtime
skips them (CUSET_CPU_SKIP_LAUNCHES); on the GPU this library does, preloaded into that
one candidate run: launches called from a shared object under the run dir return without
running. `library()` builds it once per source and compiler (trusted code, the parent's
own compiler) into the cache, where the sandbox binds it read-only. It is looked up at
every call (a stat), so a process follows the cache root it is told now and rebuilds a
library that was removed.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from cuset.cachedir import cache_root
from cuset.execute.cpu.toolchain import ToolchainError, compiler_version
from cuset.execute.process import clean_env, run_step

SOURCE = Path(__file__).with_name("launch_skip.c")
LIBRARY = "launch_skip.so"
CC = "gcc"


def library(cache_dir: Path | None = None) -> Path:
    """The built library (0755 dir, 0644 file), keyed by the source's and the compiler's
    identity; built under a lock when missing. Warnings do not stop the build (-Wall without
    -Werror): a GPU machine's other gcc may warn where ours does not."""
    source = SOURCE.read_bytes()
    key = hashlib.sha256(source + compiler_version(CC).encode()).hexdigest()[:20]
    final = ((cache_dir or cache_root() / "launch-skip") / key).resolve()
    if (final / LIBRARY).is_file():
        return final / LIBRARY
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.parent / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / LIBRARY).is_file():
            return final / LIBRARY
        tmp = Path(tempfile.mkdtemp(prefix=f"{key}.tmp-", dir=final.parent))
        try:
            step = run_step("build launch_skip", [CC, "-O2", "-shared", "-fPIC", "-Wall", "-o",
                                                  str(tmp / LIBRARY), str(SOURCE), "-ldl"],
                            cwd=tmp, timeout=120, env=clean_env())
            if step.returncode != 0:
                raise ToolchainError(f"building {SOURCE.name} failed:\n{step.stderr}")
            os.chmod(tmp, 0o755)
            os.chmod(tmp / LIBRARY, 0o644)
            os.rename(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return final / LIBRARY
