"""Train a few steps of the tiny model under a sharding strategy; run by `test_sharded.py`.

    python -m torch.distributed.run --nproc_per_node=2 tests/train/sharded_worker.py MODEL_DIR OUT_DIR CASE...
    python tests/train/sharded_worker.py MODEL_DIR OUT_DIR CASE...          # the unsharded reference

A CASE is `strategy:finetune:objective:tied`, e.g. `fsdp-full_shard:lora:cuset:untied`. Every
case trains STEPS optimizer steps on the same global batch of WORLD=2 sequences: under
torchrun each rank takes its own sequence (the framework averages gradients over ranks,
hence `world_size=` in compute_loss); the reference process accumulates both. The loss
curve (summed over ranks) and the final full weights go to OUT_DIR/CASE.pt.

FSDP is torch's FullyShardedDataParallel configured as accelerate's FSDP plugin configures it
from configs/accelerate/fsdp.yaml (one unit per decoder layer, the head and embeddings in the
root unit, use_orig_params). accelerate itself enables its FSDP plugin only on accelerators,
so on this CPU machine the wrapping is done here with the same settings.
"""

from __future__ import annotations

import copy
import functools
import sys
from pathlib import Path

import torch
import torch.distributed as dist

STEPS = 3
WORLD = 2
SEQ = 24
VOCAB_USED = 200


def global_batch(step: int) -> list[dict]:
    """WORLD sequences of different lengths (padding included), with a CUDA mask."""
    g = torch.Generator().manual_seed(1000 + step)
    rows = []
    for r in range(WORLD):
        ids = torch.randint(3, VOCAB_USED, (1, SEQ), generator=g)
        attn = torch.ones_like(ids)
        attn[0, SEQ - 3 * r:] = 0  # rank 1's sequence is shorter: unequal token counts per rank
        labels = ids.clone()
        labels[0, :4] = -100  # the prompt
        labels[attn == 0] = -100
        cuda = (torch.rand(1, SEQ, generator=g) < 0.4).long()
        rows.append({"input_ids": ids, "attention_mask": attn, "labels": labels, "cuda_mask": cuda})
    return rows


def build(model_dir: str, finetune: str, tied: bool):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    if tied:  # one Parameter for the embeddings and the head, as in tie_word_embeddings models
        model.config.tie_word_embeddings = True
        model.lm_head.weight = model.get_input_embeddings().weight
    if finetune == "lora":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules="all-linear",
                                                 task_type="CAUSAL_LM"))
    return model


def wrap(model, strategy: str):
    if strategy == "plain":
        return model
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
    from transformers.models.qwen2.modeling_qwen2 import Qwen2DecoderLayer

    kind = {"fsdp-full_shard": ShardingStrategy.FULL_SHARD, "fsdp-shard_grad_op": ShardingStrategy.SHARD_GRAD_OP}
    policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Qwen2DecoderLayer})
    return FSDP(model, sharding_strategy=kind[strategy], auto_wrap_policy=policy, use_orig_params=True,
                device_id=torch.device("cpu"))


def full_weights(wrapped, strategy: str) -> dict[str, torch.Tensor]:
    """Every parameter, whole, by its unwrapped name."""
    if strategy == "plain":
        return {k: v.detach().clone() for k, v in wrapped.named_parameters()}
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    with FSDP.summon_full_params(wrapped, writeback=False):
        return {k.replace("_fsdp_wrapped_module.", ""): v.detach().clone() for k, v in wrapped.named_parameters()}


def run_case(model_dir: str, case: str, rank: int, world: int) -> dict:
    from cuset.losses import compute_loss, count_loss_items
    from cuset.losses.config import LossConfig

    strategy, finetune, objective, tied = case.split(":")
    cfg = LossConfig(name=objective, tau=0.0, window=8, asft_beta=0.5)  # tau=0: the tiny random model is unsure of everything
    model = build(model_dir, finetune, tied == "tied")
    ref = None
    if objective == "asft" and finetune == "full":
        ref = copy.deepcopy(model).eval().requires_grad_(False)  # as cuset.train.run.reference_model does
    wrapped = wrap(model, strategy if world > 1 else "plain")
    wrapped.train()
    opt = torch.optim.AdamW([p for p in wrapped.parameters() if p.requires_grad], lr=1e-2)
    losses = []
    for step in range(STEPS):
        rows = global_batch(step)
        n_items = sum(count_loss_items(r)["tokens"] for r in rows)
        n_samples = sum(count_loss_items(r)["samples"] for r in rows)
        mine = [rows[rank]] if world > 1 else rows
        opt.zero_grad()
        total = torch.zeros(())
        for row in mine:
            loss, _ = compute_loss(wrapped, row, cfg, num_items_in_batch=n_items, num_samples_in_batch=n_samples,
                                   world_size=world, ref_model_ctx=ref)
            loss.backward()
            total += loss.detach() / world
        if world > 1:
            dist.all_reduce(total)
        opt.step()
        losses.append(total.item())
    return {"losses": losses, "weights": full_weights(wrapped, strategy if world > 1 else "plain")}


def main(argv: list[str]) -> None:
    model_dir, out_dir, *cases = argv
    distributed = "RANK" in __import__("os").environ
    if distributed:
        dist.init_process_group("gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    if distributed and world != WORLD:
        raise SystemExit(f"run with --nproc_per_node={WORLD}")
    for case in cases:
        result = run_case(model_dir, case, rank, world)
        if rank == 0:
            result["peak_rss_kb"] = _peak_rss_kb()
            torch.save(result, Path(out_dir) / f"{case.replace(':', '_')}.pt")
    if distributed:
        dist.destroy_process_group()


def _peak_rss_kb() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


if __name__ == "__main__":
    main(sys.argv[1:])
