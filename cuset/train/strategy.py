"""Which distributed strategy a run uses, and the combinations that cannot work, caught before loading.

`accelerate launch --config_file configs/accelerate/X.yaml` tells the processes what to do
through environment variables (ACCELERATE_USE_DEEPSPEED, ACCELERATE_USE_FSDP, ...); the
Trainer reads them when it builds its Accelerator. Reading the same variables here lets
`cuset train` refuse an impossible combination with the key to change, instead of
failing minutes later deep inside accelerate or DeepSpeed.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from cuset.train.errors import SetupError


@dataclass(frozen=True)
class Strategy:
    kind: str  # single | ddp | fsdp | deepspeed
    zero_stage: int | None = None  # DeepSpeed ZeRO stage
    fsdp_sharding: str | None = None  # FULL_SHARD, SHARD_GRAD_OP, ...

    def to_json(self) -> dict:
        return asdict(self)


def _flag(name: str) -> bool:
    return os.environ.get(name, "false").lower() in ("1", "true", "yes")


def _zero_stage_from_env() -> int | None:
    stage = os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE")
    if stage:
        return int(stage)
    path = os.environ.get("ACCELERATE_DEEPSPEED_CONFIG_FILE")
    if path and Path(path).is_file():
        try:
            return int(json.loads(Path(path).read_text()).get("zero_optimization", {}).get("stage", 0))
        except (ValueError, TypeError, AttributeError) as err:
            raise SetupError(f"{path}: not a DeepSpeed JSON config with zero_optimization.stage ({err})") from None
    return None


def launched_strategy() -> Strategy:
    """The strategy `accelerate launch` / `torchrun` asked for, from the environment."""
    if _flag("ACCELERATE_USE_DEEPSPEED"):
        return Strategy("deepspeed", zero_stage=_zero_stage_from_env())
    if _flag("ACCELERATE_USE_FSDP"):
        return Strategy("fsdp", fsdp_sharding=os.environ.get("FSDP_SHARDING_STRATEGY"))
    return Strategy("ddp" if int(os.environ.get("WORLD_SIZE", "1")) > 1 else "single")


def check_launch(finetune: str, strategy: Strategy) -> None:
    """Raise SetupError for combinations that cannot work, naming what to change."""
    if strategy.kind == "deepspeed":
        try:
            import deepspeed  # noqa: F401
        except ImportError:
            raise SetupError("the accelerate config asks for DeepSpeed (distributed_type: DEEPSPEED) but deepspeed "
                             "is not installed: pip install 'cuset[deepspeed]', or launch with another "
                             "--config_file (configs/accelerate/ddp-8gpu.yaml)") from None
    if strategy.kind == "fsdp" and not torch.cuda.is_available():
        raise SetupError("the accelerate config asks for FSDP, and accelerate's FSDP plugin runs on GPUs only; on a "
                         "CPU launch with --config_file configs/accelerate/deepspeed-zero3.yaml (DeepSpeed runs "
                         "ZeRO-3 on CPUs with gloo) or with torchrun (DDP)")
    sharded = strategy.kind == "fsdp" or (strategy.kind == "deepspeed" and strategy.zero_stage == 3)
    if finetune == "qlora" and sharded:
        raise SetupError("finetune=qlora: cuset does not shard 4-bit weights with ZeRO-3 or FSDP; set finetune=lora "
                         "to shard the model, or keep qlora and launch with DDP or ZeRO-2 (a 4-bit 32B model fits "
                         "one 80 GB GPU)")


def trainer_strategy(trainer) -> Strategy:
    """The strategy the Trainer's Accelerator actually set up (for the run summary)."""
    state = trainer.accelerator.state
    if getattr(state, "deepspeed_plugin", None) is not None:
        return Strategy("deepspeed", zero_stage=state.deepspeed_plugin.zero_stage)
    if getattr(state, "fsdp_plugin", None) is not None:
        sharding = getattr(state.fsdp_plugin, "sharding_strategy", None) or getattr(state.fsdp_plugin, "reshard_after_forward", None)
        return Strategy("fsdp", fsdp_sharding=str(sharding))
    return Strategy("ddp" if trainer.accelerator.num_processes > 1 else "single")


def is_zero3(trainer) -> bool:
    return trainer_strategy(trainer).zero_stage == 3
