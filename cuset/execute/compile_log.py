"""Compiler logs of untrusted sources, made safe to store in results.

`#include "/some/file"` makes the compiler quote that file's lines in its
diagnostics (and a program could include anything its sandbox can read), so only
diagnostics about files in the build dir, the CPU runtime's headers and the
system's public headers are kept; a diagnostic about any other file keeps its
position but loses its message and quoted source. Both g++ (`path:line:col:`) and
nvcc (`path(line):`) formats are read. The result is truncated like every log.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from cuset.execute.result import truncate_log

# Public headers whose text may appear in a log.
PUBLIC_PREFIXES = ("/usr/include/", "/usr/lib/gcc/", "/usr/local/include/", "/usr/local/cuda", "/opt/nvidia/",
                   "/usr/lib/cuda/")
_GCC_HEADER = re.compile(r"^(?P<path>[^\s:][^:]*?):(?P<line>\d+)(?::\d+)?: ")
_NVCC_HEADER = re.compile(r"^(?P<path>[^\s(][^(]*?)\((?P<line>\d+)\): ")
_INCLUDED = re.compile(r"^(In file included from|\s+from) ")


def clean_compile_log(text: str, build_dir: Path, trusted: tuple[Path, ...] = ()) -> str:
    """Drop everything a compiler quoted from files outside `build_dir`, `trusted`
    dirs and the public headers; then truncate."""
    build = str(Path(build_dir).resolve())
    allowed = (build + "/", *(str(Path(t).resolve()) + "/" for t in trusted), *PUBLIC_PREFIXES)
    out: list[str] = []
    keep = True
    for line in text.splitlines():
        if _INCLUDED.match(line):
            out.append(line)
            continue
        m = _GCC_HEADER.match(line) or _NVCC_HEADER.match(line)
        if m:
            path = m.group("path")
            full = os.path.normpath(path if os.path.isabs(path) else os.path.join(build, path))
            # An existing file under an allowed dir: a quoted line of some other file that
            # happens to look like a diagnostic (nvcc quotes lines bare) does not pass.
            keep = full.startswith(allowed) and os.path.exists(full)
            if not keep:
                # The name only if it is one (a quoted line can look like a diagnostic).
                where = f"{path}:{m.group('line')}" if os.path.exists(full) else "<another file>"
                out.append(f"{where}: [diagnostic about a file outside the build dir omitted]")
                continue
        if keep:
            out.append(line)
    return truncate_log("\n".join(out) + ("\n" if text.endswith("\n") else ""))
