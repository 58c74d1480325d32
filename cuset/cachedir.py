"""The one cache root: `$CUSET_CACHE`, else `~/.cache/cuset`.

Read when used, never at import, so a test or a long-lived process that sets
CUSET_CACHE gets the directory it asked for. Each cache is a subdirectory:
`compile/` (compile cache), `cpu-pch/` and `kb-pch/` (CPU runtime and KernelBench
precompiled headers), `tokenized/` (tokenised training data).
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """Resolved: the sandbox hides and binds cache paths by name, and a symlinked cache
    (~/.cache -> /scratch/...) must be hidden and bound where it really is."""
    return Path(os.environ.get("CUSET_CACHE") or Path.home() / ".cache" / "cuset").expanduser().resolve()
