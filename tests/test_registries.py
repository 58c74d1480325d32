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
