"""Sharded training reproduces the unsharded run: FSDP (torch, gloo) and DeepSpeed ZeRO-2/3 (the real CLI).

The chunked LM head computes the loss inside the head module's own call, where FSDP and
ZeRO-3 hold its weight whole (cuset.losses.compute.head_forward_replaced). Reading the
weight outside that call, as cuset did before, fails under both: ZeRO-3 leaves an empty
placeholder ("label id ... is outside the vocabulary [0, 0)"), FSDP a flat shard.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cuset.train.callbacks import read_log

from . import sharded_worker
from .helpers import ROOT, TINY_FULL, TINY_LORA, cli_env, free_port, load_weights, max_abs_diff, overrides, tiny_config

pytestmark = pytest.mark.slow

FSDP_CASES = [
    "fsdp-full_shard:lora:cuset:untied",
    "fsdp-full_shard:full:cuset:untied",
    "fsdp-full_shard:lora:asft:untied",
    "fsdp-full_shard:full:asft:untied",
    "fsdp-full_shard:full:sft:tied",
    "fsdp-shard_grad_op:lora:cuset:tied",
]


@pytest.fixture(scope="module")
def fsdp_runs(tiny_model_dir, tmp_path_factory) -> Path:
    """All FSDP cases in one 2-process torchrun launch (the start-up is most of the cost)."""
    out = tmp_path_factory.mktemp("fsdp")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           str(Path(sharded_worker.__file__)), str(tiny_model_dir), str(out), *FSDP_CASES],
                          cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-6000:]
    return out


@pytest.mark.parametrize("case", FSDP_CASES)
def test_fsdp_two_processes_match_one_unsharded_process(case, fsdp_runs, tiny_model_dir):
    sharded = torch.load(fsdp_runs / f"{case.replace(':', '_')}.pt")
    plain = sharded_worker.run_case(str(tiny_model_dir), case, rank=0, world=1)
    assert len(sharded["losses"]) == sharded_worker.STEPS
    assert sharded["losses"] == pytest.approx(plain["losses"], rel=1e-5)
    assert sharded["weights"].keys() == plain["weights"].keys()
    assert max_abs_diff(sharded["weights"], plain["weights"]) < 1e-6
    # the steps really trained the weights that should move (and only those)
    initial = {k: v for k, v in sharded_worker.build(str(tiny_model_dir), case.split(":")[1],
                                                     case.endswith(":tied")).named_parameters()}
    moved = {k for k, v in plain["weights"].items() if (v - initial[k].detach()).abs().max() > 1e-5}
    if ":lora:" in case:
        assert moved and all("lora_" in k for k in moved), sorted(moved)[:5]
    else:
        assert any("lm_head" in k or "embed_tokens" in k for k in moved) and any("layers.1." in k for k in moved)


# --- DeepSpeed through `accelerate launch` and the real `cuset train` -------------------------------

ZERO_CASES = [
    ("deepspeed-zero3.yaml", TINY_LORA, "cuset"),
    ("deepspeed-zero3.yaml", TINY_FULL, "asft"),  # the frozen reference model is a ZeRO-3 engine of its own
    ("deepspeed-zero3.yaml", TINY_FULL, "cuset"),
    ("deepspeed-zero2.yaml", TINY_LORA, "asft"),
]


@pytest.mark.parametrize("accelerate_config,base,objective", ZERO_CASES,
                         ids=[f"{c.split('-')[1].split('.')[0]}-{b.stem}-{o}" for c, b, o in ZERO_CASES])
def test_zero_two_processes_match_one_process(accelerate_config, base, objective, warm_model_dir, train_data,
                                               tmp_path):
    """`accelerate launch --config_file configs/accelerate/<config> --num_processes 2` on CPU (gloo):
    batch 1 on each of 2 ranks == 1 plain process accumulating 2 micro-batches of 1."""
    from cuset.train.run import train

    common = ("optim.max_steps=3", "save_steps=0", "report_to=[]", "lora.dropout=0.0", "progress=false",
              "optim.per_device_batch_size=1", f"loss.name={objective}")
    train(tiny_config(warm_model_dir, train_data, tmp_path / "one", tmp_path / "c", *common,
                      "optim.gradient_accumulation_steps=2", base=base))
    args = overrides(warm_model_dir, train_data, tmp_path / "two", tmp_path / "c", *common,
                     "optim.gradient_accumulation_steps=1")
    proc = subprocess.run([sys.executable, "-m", "accelerate.commands.launch", "--config_file",
                           str(ROOT / "configs" / "accelerate" / accelerate_config), "--num_processes", "2",
                           "--main_process_port", str(free_port()),
                           "-m", "cuset.cli.main", "train", str(base), *args],
                          cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-6000:]
    summary = json.loads((tmp_path / "two" / "run_summary.json").read_text())
    stage = 3 if "zero3" in accelerate_config else 2
    assert summary["strategy"] == {"kind": "deepspeed", "zero_stage": stage, "fsdp_sharding": None}
    assert summary["world_size"] == 2
    # full sizes, not ZeRO-3's empty placeholders
    assert summary["trainable_parameters"] == json.loads((tmp_path / "one" / "run_summary.json").read_text())[
        "trainable_parameters"]
    one, two = read_log(tmp_path / "one" / "train_log.jsonl"), read_log(tmp_path / "two" / "train_log.jsonl")
    assert [r["step"] for r in two] == [1, 2, 3]
    for a, b in zip(one, two):
        for key in ("loss", "nll", "grad_norm", "target_tokens"):
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), (key, a["step"])
    name = "adapter" if base == TINY_LORA else "model"
    assert max_abs_diff(load_weights(tmp_path / "one" / name), load_weights(tmp_path / "two" / name)) < 1e-6


def test_zero3_head_is_an_empty_placeholder_outside_the_forward(warm_model_dir):
    """The premise of the tests above: under ZeRO-3 (deepspeed.zero.Init) the head's weight read after
    the forward is empty, and compute_loss still gets the loss and the head's gradient right."""
    import os

    import deepspeed
    from transformers import AutoModelForCausalLM
    from transformers.integrations import HfDeepSpeedConfig

    from cuset.losses import compute_loss
    from cuset.losses.config import LossConfig

    env = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port())}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        deepspeed.init_distributed(dist_backend="gloo")
        config = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3},
                  "optimizer": {"type": "SGD", "params": {"lr": 0.0}}, "zero_allow_untested_optimizer": True}
        keep = HfDeepSpeedConfig(config)  # noqa: F841  (from_pretrained partitions while it lives)
        model = AutoModelForCausalLM.from_pretrained(warm_model_dir)
        assert model.lm_head.weight.numel() == 0 and tuple(model.lm_head.weight.ds_shape)[0] > 0
        engine, *_ = deepspeed.initialize(model=model, config=config, model_parameters=model.parameters())
        plain = AutoModelForCausalLM.from_pretrained(warm_model_dir)  # (partitioned too: compare by values)
        ids = torch.tensor([[5, 17, 23, 42, 8, 99, 31, 64]])
        batch = {"input_ids": ids, "labels": ids.clone(), "attention_mask": torch.ones_like(ids)}
        loss, _ = compute_loss(engine, batch, LossConfig(name="sft"))
        engine.backward(loss)
        with deepspeed.zero.GatheredParameters(list(plain.parameters()), modifier_rank=0):
            expected = plain(**batch).loss
            expected.backward()
            expected_grad = plain.lm_head.weight.grad.clone()
        assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
        from deepspeed.utils import safe_get_full_grad

        grad = safe_get_full_grad(model.lm_head.weight)  # gathered from the partitions the gradient landed on
        assert grad is not None and grad.shape == expected_grad.shape
        torch.testing.assert_close(grad, expected_grad, rtol=1e-5, atol=1e-7)
    finally:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# --- accelerate's FSDP plugin through `cuset train`'s own save (`_save_final`) -------------------

FSDP_PLUGIN_CASES = {"one-process": ("1",), "two-processes-no_shard": ("2", "--fsdp_sharding_strategy", "NO_SHARD")}


@pytest.fixture(scope="module")
def fsdp_plugin_runs(tiny_model_dir, train_data, tmp_path_factory) -> dict:
    """`cuset train` (LoRA, CuSeT) under configs/accelerate/fsdp.yaml on CPUs, through fsdp_cpu_launch.py.

    One process: FSDP replaces FULL_SHARD by NO_SHARD (the GPU rehearsal's setting); two: NO_SHARD
    asked for. sync_module_states (hence cpu_ram_efficient_loading) is off: FSDP 1 refuses it on CPUs.
    Both crashed in the final save ("FSDP assumes ...embed_tokens.weight is in the state_dict")
    before cuset.train.fsdp.register_hidden_parameters, and then saved an adapter without a tensor
    before cuset.train.fsdp.module_names_without_fsdp."""
    from . import fsdp_cpu_launch

    root = tmp_path_factory.mktemp("fsdp_plugin")
    runs = {}
    for name, (procs, *flags) in FSDP_PLUGIN_CASES.items():
        args = overrides(tiny_model_dir, train_data, root / name, root / "cache", "optim.max_steps=2", "save_steps=0",
                         "report_to=[]", "lora.dropout=0.0", "progress=false")
        proc = subprocess.run([sys.executable, "-m", "accelerate.commands.launch", "--config_file",
                               str(ROOT / "configs" / "accelerate" / "fsdp.yaml"), "--num_processes", procs, *flags,
                               "--mixed_precision", "no", "--fsdp_sync_module_states", "false",
                               "--fsdp_cpu_ram_efficient_loading", "false", "--main_process_port", str(free_port()),
                               str(Path(fsdp_cpu_launch.__file__)), str(root / f"{name}.pt"), str(TINY_LORA), *args],
                              cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=600)
        runs[name] = (proc, root / name, root / f"{name}.pt")
    return runs


@pytest.mark.parametrize("case", FSDP_PLUGIN_CASES)
def test_fsdp_plugin_lora_run_saves_its_final_adapter(case, fsdp_plugin_runs):
    proc, run_dir, _ = fsdp_plugin_runs[case]
    assert proc.returncode == 0, proc.stderr[-6000:]
    summary = json.loads((run_dir / "run_summary.json").read_text())
    assert summary["strategy"]["kind"] == "fsdp" and summary["steps"] == 2
    assert (run_dir / "adapter" / "adapter_model.safetensors").is_file()


@pytest.mark.parametrize("case", FSDP_PLUGIN_CASES)
def test_fsdp_plugin_lora_adapter_holds_the_trained_tensors(case, fsdp_plugin_runs):
    proc, run_dir, trained_path = fsdp_plugin_runs[case]
    assert proc.returncode == 0, proc.stderr[-6000:]
    trained = torch.load(trained_path)
    assert len(trained) == 2 * 7 * 2  # 2 layers x 7 linear modules x (lora_A, lora_B)
    assert any(v.abs().max() > 0 for k, v in trained.items() if "lora_B" in k)  # lora_B starts at zero: it trained
    assert max_abs_diff(load_weights(run_dir / "adapter"), trained) == 0.0
