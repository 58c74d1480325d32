"""Backends are looked up by name in a registry apart from the interface they implement;
an unknown name is a user error naming the choices, and a backend's module loads only
when it is chosen."""

import subprocess
import sys

import pytest

from cuset.errors import CusetError
from cuset.execute.registry import BACKENDS, get_backend
from cuset.generate.backends.registry import GENERATORS


def test_unknown_execution_backend_names_the_choices():
    with pytest.raises(CusetError, match=r"unknown execution backend 'tpu': use gpu, cpu or auto"):
        get_backend("tpu")


def test_cpu_backend_from_the_registry_implements_the_interface():
    from cuset.execute.interface import Backend

    backend = get_backend("cpu")
    assert isinstance(backend, Backend) and backend.name == "cpu"


def test_registered_classes_exist():
    import importlib

    for spec in list(BACKENDS.values()) + list(GENERATORS.values()):
        module, cls = spec.split(":")
        assert isinstance(getattr(importlib.import_module(module), cls), type), spec


def test_interfaces_import_no_backend_module():
    code = ("import sys, cuset.execute.interface, cuset.execute.registry, cuset.generate.backends.registry\n"
            "heavy = [m for m in ('cuset.execute.gpu', 'cuset.execute.cpu', 'cuset.generate.backends.hf', "
            "'cuset.generate.backends.vllm', 'cuset.generate.backends.openai', 'torch') if m in sys.modules]\n"
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_stage_configs_load_without_torch():
    """Config checks (and the CLI's one-line errors built on them) answer in well under a
    second: loading and validating a stage config imports no torch."""
    code = ("import sys\n"
            "from cuset.config import load_config\n"
            "from cuset.train.config import TrainConfig\n"
            "from cuset.demo.config import DemoConfig\n"
            "load_config(TrainConfig, base={'output_dir': 'o', 'model': {'name_or_path': 'm'}, 'loss': {'name': 'cuset'}})\n"
            "try:\n"
            "    load_config(TrainConfig, base={'output_dir': 'o', 'model': {'name_or_path': 'm'}, 'loss': {'name': 'cusset'}})\n"
            "except Exception as e:\n"
            "    print(type(e).__name__, 'did you mean' in str(e))\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["ConfigError", "True", "False"]


def test_loss_names_match_the_registry():
    from cuset.losses.config import LOSS_NAMES
    from cuset.losses.objectives import LOSSES

    assert tuple(LOSSES) == LOSS_NAMES
