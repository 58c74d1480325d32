"""Every shipped training and accelerate config loads; the `cuset train` command's error paths."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from cuset.cli.main import app
from cuset.config import load_config
from cuset.train.config import TrainConfig

from .conftest import RELU, write_jsonl
from .helpers import ROOT, TINY_LORA, overrides

TRAIN_CONFIGS = sorted((ROOT / "configs" / "train").rglob("*.yaml"))
ACCELERATE_CONFIGS = sorted((ROOT / "configs" / "accelerate").glob("*.yaml"))
PAPER_MODELS = {"Qwen/Qwen2.5-Coder-7B-Instruct", "deepseek-ai/deepseek-coder-6.7b-instruct",
                "ByteDance-Seed/Seed-Coder-8B-Instruct", "Qwen/Qwen3-4B", "Qwen/Qwen3-14B", "Qwen/Qwen2.5-Coder-32B-Instruct"}
OBJECTIVES = {"sft", "dft", "eaft", "asft", "profit", "cuset"}
runner = CliRunner()


@pytest.mark.parametrize("path", TRAIN_CONFIGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_train_config_loads(path):
    cfg = load_config(TrainConfig, path)
    assert cfg.loss.name in OBJECTIVES


def test_paper_configs_cover_every_model_and_objective_with_the_paper_setup():
    paper = [p for p in TRAIN_CONFIGS if p.parent.name != "tiny"]
    seen = set()
    for path in paper:
        cfg = load_config(TrainConfig, path)
        seen.add((cfg.model.name_or_path, cfg.loss.name))
        assert cfg.loss.name == path.stem
        assert (cfg.finetune, cfg.lora.r, cfg.lora.alpha, cfg.lora.dropout, cfg.lora.target_modules) == ("lora", 8, 16, 0.05, ["all-linear"])
        assert (cfg.optim.learning_rate, cfg.optim.epochs, cfg.optim.per_device_batch_size, cfg.data.max_length) == (1e-4, 3.0, 1, 4096)
        # ASFT as LLaMA-Factory runs it (beta 0.1, per-micro-batch mean); the others over num_items
        assert cfg.loss.reduction == ("micro_batch_mean" if cfg.loss.name == "asft" else "token")
        assert cfg.loss.name != "asft" or cfg.loss.asft_beta == 0.1
        if cfg.loss.name == "cuset":
            assert (cfg.loss.tau, cfg.loss.lam, cfg.loss.window) == (0.1, 1.0, 256)
        if "Qwen3" in cfg.model.name_or_path:
            assert cfg.data.chat_template_kwargs == {"enable_thinking": False}
    assert seen == {(m, o) for m in PAPER_MODELS for o in OBJECTIVES}


def test_generated_configs_are_up_to_date():
    proc = subprocess.run([sys.executable, str(ROOT / "configs" / "train" / "generate.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize("path", ACCELERATE_CONFIGS, ids=lambda p: p.name)
def test_every_accelerate_config_loads_in_accelerate(path):
    from accelerate.commands.config.config_args import ClusterConfig

    cfg = ClusterConfig.from_yaml_file(str(path))
    assert cfg.num_processes >= 1 and cfg.num_machines >= 1
    ds = (cfg.deepspeed_config or {}).get("deepspeed_config_file")
    if ds:
        spec = json.loads((ROOT / ds).read_text())
        assert spec["zero_optimization"]["stage"] in (2, 3)
        assert spec["gradient_accumulation_steps"] == "auto"  # taken from the cuset config
    names = {p.name for p in ACCELERATE_CONFIGS}
    assert {"ddp-8gpu.yaml", "ddp-multinode.yaml", "deepspeed-zero2.yaml", "deepspeed-zero3.yaml", "fsdp.yaml"} <= names


def test_help_config_lists_keys():
    res = runner.invoke(app, ["train", "--help-config"])
    assert res.exit_code == 0
    for key in ("loss.tau", "lora.r", "data.max_length", "optim.learning_rate", "finetune"):
        assert key in res.output


def test_config_errors_are_reported_together(tmp_path):
    res = runner.invoke(app, ["train", str(TINY_LORA), "lora.rank=4", "finetune=half", "optim.learning_rate=fast"])
    assert res.exit_code == 2
    out = res.output
    assert "config error (3)" in out and "lora.rank: unknown key" in out and "finetune: must be one of" in out
    assert "optim.learning_rate: expected a number" in out
    res = runner.invoke(app, ["train", str(TINY_LORA), "loss.name=sftt"])
    assert res.exit_code == 2 and "sftt" in res.output and "sft" in res.output


def test_bad_data_fails_with_file_and_line(tiny_model_dir, tmp_path):
    data = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "q", "completion": f"```cuda\n{RELU}```"}, {"prompt": "q"}])
    res = runner.invoke(app, ["train", str(TINY_LORA), *overrides(tiny_model_dir, data, tmp_path / "run", tmp_path / "c")])
    assert res.exit_code == 2
    out = " ".join(res.output.split())  # rich wraps long lines
    assert f"{data}:2: completion: missing (the prompt_completion format needs it) [missing_field]" in out
    assert f"{data}:1:" not in out and "data.strict=false" in out


def test_qlora_with_a_bitsandbytes_that_needs_cuda_is_a_clear_error(tiny_model_dir, tmp_path, monkeypatch):
    import bitsandbytes
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    monkeypatch.setattr(bitsandbytes, "__version__", "0.45.3")
    data = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "q", "completion": "int x;"}])
    res = runner.invoke(app, ["train", str(TINY_LORA), "finetune=qlora",
                              *overrides(tiny_model_dir, data, tmp_path / "run", tmp_path / "c")])
    out = " ".join(res.output.split())
    assert res.exit_code == 2 and "qlora on a CPU needs bitsandbytes >= 0.50 (installed: 0.45.3" in out


@pytest.mark.parametrize("env,finetune,message", [
    ({"ACCELERATE_USE_FSDP": "true"}, "lora", "accelerate's FSDP plugin runs on GPUs only"),
    ({"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3"}, "qlora",
     "finetune=qlora: cuset does not shard 4-bit weights with ZeRO-3 or FSDP; set finetune=lora"),
    ({"ACCELERATE_USE_DEEPSPEED": "true"}, "lora", "deepspeed is not installed: pip install 'cuset[deepspeed]'"),
])
def test_impossible_launch_combinations_are_clear_errors(env, finetune, message, tiny_model_dir, tmp_path, monkeypatch):
    import sys

    import torch

    if torch.cuda.is_available() and "FSDP" in message:
        pytest.skip("this machine has a GPU")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    if "not installed" in message:
        monkeypatch.setitem(sys.modules, "deepspeed", None)  # import deepspeed -> ImportError
    data = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "q", "completion": "int x;"}])
    res = runner.invoke(app, ["train", str(TINY_LORA), f"finetune={finetune}",
                              *overrides(tiny_model_dir, data, tmp_path / "run", tmp_path / "c")])
    assert res.exit_code == 2 and message in " ".join(res.output.split())
    assert not (tmp_path / "run").exists()  # refused before anything was loaded or written


def test_missing_model_is_a_clear_error(tmp_path):
    data = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "q", "completion": "int x;"}])
    res = runner.invoke(app, ["train", str(TINY_LORA), *overrides(tmp_path / "no-model", data, tmp_path / "run", tmp_path / "c")])
    assert res.exit_code == 2 and f"{tmp_path / 'no-model'}: no such file or directory" in " ".join(res.output.split())
