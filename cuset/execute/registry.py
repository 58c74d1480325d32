"""Execution backends by name; each is imported only when chosen.

    backend = get_backend("cpu", workers=2)     # or "gpu", or "auto"

The interface they implement is `cuset.execute.interface.Backend`.
"""

from __future__ import annotations

import importlib

from cuset.errors import CusetError

# name -> "module:class"; a backend's module (and its heavy imports) loads only when chosen
BACKENDS = {"gpu": "cuset.execute.gpu:GpuBackend", "cpu": "cuset.execute.cpu:CpuBackend"}


class UnknownBackend(CusetError, ValueError):
    """A backend name that is not registered."""


def get_backend(name: str, **options):
    """'gpu', 'cpu' or 'auto' (gpu when an NVIDIA driver answers, else cpu)."""
    if name == "auto":
        name = "gpu" if gpu_available() else "cpu"
    if name not in BACKENDS:
        raise UnknownBackend(f"unknown execution backend {name!r}: use {', '.join(BACKENDS)} or auto")
    module, cls = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module), cls)(**options)


def gpu_available() -> bool:
    import shutil
    import subprocess

    if not shutil.which("nvidia-smi"):
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
