"""Training runs on a tiny local model: every objective, full and LoRA, merge, summary, errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from cuset.losses import LOSSES
from cuset.train.callbacks import read_log
from cuset.train.errors import RunExistsError

from .helpers import TINY_FULL, TINY_LORA, load_weights, max_abs_diff, tiny_config


def initial_adapter(cfg) -> dict[str, torch.Tensor]:
    """The adapter a run starts from: same seed, same construction."""
    from peft import get_peft_model_state_dict
    from transformers import set_seed

    from cuset.train.model import build_model

    set_seed(cfg.seed)
    return {k: v.detach().clone() for k, v in get_peft_model_state_dict(build_model(cfg)).items()}


@pytest.mark.parametrize("objective", sorted(LOSSES))
def test_every_objective_trains_and_changes_the_adapter(objective, warm_model_dir, train_data, tmp_path):
    from cuset.train.run import train

    cfg = tiny_config(warm_model_dir, train_data, tmp_path / "run", tmp_path / "cache",
                      f"loss.name={objective}", "optim.max_steps=2", "save_steps=0", "report_to=[]")
    before = initial_adapter(cfg)
    summary = train(cfg)
    after = load_weights(tmp_path / "run" / "adapter")
    assert {k.replace(".default", "") for k in before} == set(after)
    # all-linear: every projection of every layer, never the LM head
    assert not any("lm_head" in k for k in after)
    assert {k.split(".")[-3] for k in after} == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    before = {k.replace(".default", ""): v for k, v in before.items()}
    for name, w in after.items():
        assert not torch.equal(w, before[name]), f"{objective}: {name} did not change"
        if "lora_B" in name:
            assert w.abs().max() > 0  # B starts at zero
    log = read_log(tmp_path / "run" / "train_log.jsonl")
    assert [r["step"] for r in log] == [1, 2] and summary["steps"] == 2 and summary["objective"] == objective
    for r in log:
        for key in ("loss", "nll", "conf_kept_frac", "cuda_frac", "w_mean", "w_min", "w_max", "learning_rate", "tokens_per_s"):
            assert isinstance(r[key], float) and math.isfinite(r[key]), (key, r)
        assert 0 < r["cuda_frac"] < 1 and 0 <= r["conf_kept_frac"] <= 1 and r["tokens_per_s"] > 0
        assert r["w_min"] <= r["w_mean"] <= r["w_max"]
        if objective == "sft":  # token reduction of plain NLL: the objective is the step's mean NLL
            assert r["loss"] == pytest.approx(r["nll"], rel=1e-6)
            assert r["w_min"] == r["w_max"] == 1.0
        if objective in ("profit", "cuset"):
            assert 0 < r["conf_kept_frac"] < 1  # the warm model is confident on some targets only
        if objective == "cuset":
            assert 0 < r["w_min"] and r["w_max"] < 1


@pytest.mark.parametrize("extra, base, wanted", [
    (("loss.name=asft",), TINY_FULL, True),
    (("loss.name=asft", "loss.asft_beta=0"), TINY_FULL, False),  # no KL term: no reference pass
    (("loss.name=asft",), TINY_LORA, False),                     # LoRA disables its adapter instead
    (("loss.name=sft",), TINY_FULL, False),
])
def test_a_reference_model_exactly_when_the_objective_has_a_kl_term_under_full_fine_tuning(tmp_path, extra, base, wanted):
    from cuset.train.run import reference_model

    cfg = tiny_config("m", "d.jsonl", tmp_path / "run", tmp_path / "cache", *extra, base=base)
    model = torch.nn.Linear(2, 2)
    ref = reference_model(cfg, model)
    assert (ref is not None) == wanted
    if wanted:
        assert ref is not model and torch.equal(ref.weight, model.weight) and not ref.weight.requires_grad


def test_full_finetune_with_a_reference_model(warm_model_dir, train_data, tmp_path):
    from transformers import AutoModelForCausalLM

    from cuset.train.run import train

    cfg = tiny_config(warm_model_dir, train_data, tmp_path / "run", tmp_path / "cache", "loss.name=asft",
                      "optim.max_steps=2", "save_steps=0", base=TINY_FULL)
    summary = train(cfg)
    before, after = load_weights(warm_model_dir), load_weights(tmp_path / "run" / "model")
    assert set(after) == set(before)
    changed = [k for k in after if not torch.equal(after[k], before[k])]
    assert len(changed) == len(after)  # every weight moves under full fine-tuning
    assert summary["trainable_parameters"] == sum(v.numel() for v in before.values())
    AutoModelForCausalLM.from_pretrained(tmp_path / "run" / "model")  # loadable as a plain model


@pytest.mark.parametrize("weight_norm", [False, True])
def test_gradient_accumulation_equals_a_larger_batch(weight_norm, warm_model_dir, train_data, tmp_path):
    """Trap from the method note: the loss must divide by the step's tokens, not per micro-batch;
    with loss.weight_norm (cuset:wnorm) w_n must be divided by the mean of the step's samples, not of
    each micro-batch's (one sample each here: w_n / w_n = 1, and the weights would vanish)."""
    from cuset.train.run import train

    common = ("optim.max_steps=3", "save_steps=0", "report_to=[]", "lora.dropout=0.0", "loss.name=cuset",
              f"loss.weight_norm={str(weight_norm).lower()}")
    train(tiny_config(warm_model_dir, train_data, tmp_path / "ga", tmp_path / "c", *common,
                      "optim.per_device_batch_size=1", "optim.gradient_accumulation_steps=2"))
    train(tiny_config(warm_model_dir, train_data, tmp_path / "bs", tmp_path / "c", *common,
                      "optim.per_device_batch_size=2", "optim.gradient_accumulation_steps=1"))
    ga, bs = read_log(tmp_path / "ga" / "train_log.jsonl"), read_log(tmp_path / "bs" / "train_log.jsonl")
    for a, b in zip(ga, bs):
        for key in ("loss", "nll", "grad_norm", "cuda_frac"):
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), key
    assert max_abs_diff(load_weights(tmp_path / "ga" / "adapter"), load_weights(tmp_path / "bs" / "adapter")) < 1e-6


def test_merge_writes_a_plain_model_equal_to_base_plus_adapter(warm_model_dir, train_data, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from cuset.train.run import train

    cfg = tiny_config(warm_model_dir, train_data, tmp_path / "run", tmp_path / "c", "optim.max_steps=1", "save_steps=0",
                      "merge=true", "report_to=[]")
    summary = train(cfg)
    merged_dir = tmp_path / "run" / "merged"
    assert summary["outputs"]["merged"] == str(merged_dir)
    assert (merged_dir / "model.safetensors").is_file() and (merged_dir / "tokenizer.json").is_file()
    assert not any("lora" in k for k in load_weights(merged_dir))
    ids = torch.tensor([[5, 17, 42, 99, 7]])
    merged = AutoModelForCausalLM.from_pretrained(merged_dir).eval()
    ref = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(warm_model_dir), str(tmp_path / "run" / "adapter")).eval()
    with torch.no_grad():
        torch.testing.assert_close(merged(ids).logits, ref(ids).logits, rtol=1e-5, atol=1e-5)


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("/proc/self/status has no VmRSS")


def test_summary_and_refusing_to_overwrite_a_run(warm_model_dir, train_data, tmp_path):
    from cuset.train.run import train

    from cuset.train.checkpoint import checkpoints

    cfg = tiny_config(warm_model_dir, train_data, tmp_path / "run", tmp_path / "c", "optim.max_steps=3", "save_steps=1",
                      "save_total_limit=2")
    rss_before_mib = _rss_mib()
    train(cfg)
    summary = json.loads((tmp_path / "run" / "run_summary.json").read_text())
    # the kernel's high-water mark of this process: at least what it held before training; no GPU here
    assert summary["peak_memory_mib"]["process_rss"] >= rss_before_mib > 0
    assert summary["peak_memory_mib"]["cuda_allocated"] is None and summary["peak_memory_mib"]["cuda_reserved"] is None
    assert summary["steps"] == 3 and summary["world_size"] == 1 and summary["global_batch_size"] == 2
    assert summary["data"]["examples"] == 6 and summary["data"]["cuda_tokens"] > 0
    assert summary["final_metrics"]["step"] == 3 and summary["loss_reduction"] == "token"
    assert summary["config"]["loss"]["name"] == "cuset" and summary["resumed_from"] is None
    assert [p.name for p in checkpoints(tmp_path / "run")] == ["checkpoint-2", "checkpoint-3"]  # oldest rotated out
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    events.Reload()
    for tag in ("train/loss", "train/nll", "train/conf_kept_frac", "train/cuda_frac", "train/w_mean", "train/tokens_per_s",
                "train/learning_rate"):
        assert [e.step for e in events.Scalars(tag)] == [1, 2, 3], tag
    assert not (tmp_path / "run" / ".staging").exists()
    with pytest.raises(RunExistsError, match="--resume"):
        train(cfg)
