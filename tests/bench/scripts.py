"""The bench scripts are files, not a package: `load_bench_script` imports one as a module."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"


def load_bench_script(name: str) -> ModuleType:
    """bench/<name>.py as the module `name`, registered in sys.modules (dataclasses look their
    module up there) with bench/ on sys.path (the scripts import `_record` beside them). A test
    that must leave sys.modules as it found it says so to monkeypatch first (`delitem`)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
