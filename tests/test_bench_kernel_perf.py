"""bench/kernel_perf.py refuses to time anything without a GPU (no CPU time as a GPU number)."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "kernel_perf.py"


def load():
    spec = importlib.util.spec_from_file_location("kernel_perf", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_a_gpu_it_refuses_with_the_reason(monkeypatch, capsys):
    import cuset.execute.registry as registry

    monkeypatch.setattr(registry, "gpu_available", lambda: False)
    assert load().main([]) == 2
    assert "no timing is taken on the CPU" in capsys.readouterr().err


def test_help_names_the_options(capsys):
    with pytest.raises(SystemExit) as done:
        load().main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "--trials" in out and "--budget-s" in out and "fast_p" in out
