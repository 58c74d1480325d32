"""Helpers for the training tests: configs on the tiny model, reading adapters, running the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
TINY_LORA = ROOT / "configs" / "train" / "tiny" / "lora.yaml"
TINY_FULL = ROOT / "configs" / "train" / "tiny" / "full.yaml"


def overrides(model_dir, data, out_dir, cache_dir, *extra) -> list[str]:
    return [f"model.name_or_path={model_dir}", f"data.paths=[{data}]", f"output_dir={out_dir}",
            f"data.cache_dir={cache_dir}", *extra]


def tiny_config(model_dir, data, out_dir, cache_dir, *extra, base=TINY_LORA):
    from cuset.config import load_config
    from cuset.train.config import TrainConfig

    return load_config(TrainConfig, base, overrides(model_dir, data, out_dir, cache_dir, *extra))


def load_weights(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    files = sorted(Path(path).glob("*.safetensors"))
    assert files, f"no safetensors in {path}"
    out = {}
    for f in files:
        out.update(load_file(str(f)))
    return out


def max_abs_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max((a[k].double() - b[k].double()).abs().max().item() for k in a)


def free_port() -> int:
    """A TCP port nobody listens on now (for rendezvous: fixed ports collide with parallel runs)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cli_env() -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def cli(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cuset.cli.main", *args], cwd=ROOT, env=cli_env(),
                          capture_output=True, text=True, **kwargs)
