"""`cuset train` under accelerate's FSDP plugin on CPUs (gloo); launched by `test_sharded.py`.

    accelerate launch --config_file configs/accelerate/fsdp.yaml --num_processes N --mixed_precision no \
        tests/train/fsdp_cpu_launch.py WEIGHTS_OUT CONFIG.yaml KEY=VALUE...

accelerate turns `distributed_type: FSDP` into its FSDP plugin only on accelerators; on CPUs it
silently falls back to DDP (MULTI_CPU), which is why `cuset train` refuses FSDP without CUDA.
This harness, for tests only, lets the plugin through on CPUs: it lets accelerate set up its
state as usual, then switches the state to FSDP with the plugin accelerate built from the
launch config (FULL_SHARD, TRANSFORMER_BASED_WRAP, FULL_STATE_DICT, use_orig_params, ...),
exactly as accelerate does on GPUs. Everything after that is the product's: the Trainer
wraps the model in FSDP, trains, and `cuset.train.run._save_final` saves through
`Trainer.save_model` -> `Accelerator.get_state_dict`.

At the end of training (before the save), rank 0 writes the trained LoRA tensors, read
from the live FSDP modules without any FSDP call that could change their state, to
WEIGHTS_OUT (a torch file), so the test can compare them with the saved adapter.
"""

from __future__ import annotations

import os
import sys

import torch


def _let_the_fsdp_plugin_run_on_cpu() -> None:
    from accelerate.state import AcceleratorState, PartialState
    from accelerate.utils import DistributedType

    original = AcceleratorState.__init__

    def init(self, *args, fsdp_plugin=None, **kwargs):
        original(self, *args, fsdp_plugin=fsdp_plugin, **kwargs)
        if fsdp_plugin is not None and self.distributed_type == DistributedType.MULTI_CPU:
            self.distributed_type = DistributedType.FSDP
            if self._mixed_precision != "no":
                fsdp_plugin.set_mixed_precision(self._mixed_precision)
            self.fsdp_plugin = fsdp_plugin
            PartialState._shared_state["distributed_type"] = self.distributed_type
            # FSDP's device_id: accelerate's CPU state says "cpu:0", FSDP's CPU compute device is "cpu"
            self.device = PartialState._shared_state["device"] = torch.device("cpu")

    AcceleratorState.__init__ = init


def _trained_lora_weights(model) -> dict[str, torch.Tensor]:
    """Every LoRA tensor by the name PEFT saves it under, read straight from the parameters.

    Only for units that hold their parameters whole (NO_SHARD, which FSDP also picks for
    FULL_SHARD on one process): a FULL_SHARD unit on several processes holds a flat shard."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy

    units = FSDP.fsdp_modules(model)
    assert units, "the model was not wrapped in FSDP"
    assert all(u.sharding_strategy == ShardingStrategy.NO_SHARD for u in units), \
        [str(u.sharding_strategy) for u in units]
    out = {}
    for name, param in model.named_parameters():
        if "lora_" in name:
            clean = name.replace("_fsdp_wrapped_module.", "").replace(".default.", ".")
            out[clean] = param.detach().clone()
    return out


def main(argv: list[str]) -> None:
    weights_out, config, *extra = argv
    _let_the_fsdp_plugin_run_on_cpu()
    from transformers import TrainerCallback

    import cuset.train.run as run
    from cuset.config import load_config
    from cuset.train.config import TrainConfig

    class RecordTrainedWeights(TrainerCallback):
        def on_train_end(self, args, state, control, model=None, **kwargs):
            weights = _trained_lora_weights(model)
            if args.process_index == 0:
                torch.save(weights, weights_out)

    run.check_launch = lambda finetune, strategy: None  # the product refuses FSDP on CPUs (see above)
    summary = run.train(load_config(TrainConfig, config, extra), callbacks=(RecordTrainedWeights(),))
    assert summary["strategy"]["kind"] == "fsdp", summary["strategy"]


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main(sys.argv[1:])
