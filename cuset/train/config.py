"""`TrainConfig`: everything `cuset train` needs, as dataclasses with help text.

    cfg = load_config(TrainConfig, "configs/train/qwen2.5-coder-7b-instruct/cuset.yaml", ["optim.learning_rate=5e-5"])

Defaults reproduce the paper's setup (section 5.1): LoRA r=8, alpha=16, dropout 0.05
on all linear layers, max length 4096, batch 1 per device, lr 1e-4, 3 epochs. The
paper trained with LLaMA-Factory without naming the schedule; its example recipes use
cosine decay with 10% warmup, which are the defaults here.
"""

from __future__ import annotations

from dataclasses import dataclass

from cuset.config import option
from cuset.losses import LossConfig
from cuset.train.data.config import DataConfig

FINETUNE = ("lora", "full", "qlora")
DTYPES = ("auto", "float32", "bfloat16", "float16")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
SCHEDULERS = ("cosine", "linear", "constant", "constant_with_warmup", "cosine_with_restarts", "polynomial")


@dataclass
class ModelConfig:
    name_or_path: str = option(help="Hugging Face model id or local directory, loaded with from_pretrained.")
    revision: str | None = option(None, help="Model revision (branch, tag or commit) on the hub.")
    dtype: str = option("auto", help="Weight dtype: auto (bfloat16 on a GPU that supports it, else float32), "
                        "float32, bfloat16, float16.", choices=DTYPES)
    attn_implementation: str | None = option(None, help="Attention kernel: sdpa, eager, flash_attention_2 (None: transformers' choice).")
    trust_remote_code: bool = option(False, help="Allow model code from the hub (needed by some architectures).")
    gradient_checkpointing: bool = option(False, help="Recompute activations in backward: less memory, ~30% more time.")

    def check_exists(self) -> None:
        """A path-looking model that does not exist is a typo, not a hub id: say so at once
        (cheap: the CLI calls it before importing the training stack)."""
        from cuset.localpath import require_existing

        require_existing(self.name_or_path, "model.name_or_path", "a model directory")


@dataclass
class LoraOptions:
    r: int = option(8, help="LoRA rank.")
    alpha: int = option(16, help="LoRA alpha (scale = alpha / r).")
    dropout: float = option(0.05, help="Dropout on the LoRA input.")
    target_modules: list[str] = option(default_factory=lambda: ["all-linear"],
                                       help="Modules that get adapters; all-linear = every linear layer except the LM head.")

    def __post_init__(self):
        if self.r < 1 or self.alpha < 1:
            raise ValueError(f"r and alpha must be positive, got r={self.r}, alpha={self.alpha}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")


@dataclass
class OptimConfig:
    learning_rate: float = option(1e-4, help="Peak learning rate.")
    epochs: float = option(3.0, help="Passes over the data (ignored when max_steps > 0).")
    max_steps: int = option(-1, help="Stop after this many optimizer steps (-1: run the epochs).")
    per_device_batch_size: int = option(1, help="Examples per device per micro-batch.")
    gradient_accumulation_steps: int = option(1, help="Micro-batches per optimizer step. Global batch = "
                                              "per_device_batch_size x devices x gradient_accumulation_steps.")
    lr_scheduler: str = option("cosine", help="Learning-rate schedule.", choices=SCHEDULERS)
    warmup_ratio: float = option(0.1, help="Fraction of the steps spent warming up linearly from 0.")
    weight_decay: float = option(0.0, help="AdamW weight decay.")
    max_grad_norm: float = option(1.0, help="Gradient clipping norm (0: off).")
    optim: str = option("adamw_torch", help="transformers optimizer name (adamw_torch, adamw_torch_fused, paged_adamw_8bit, ...).")

    def __post_init__(self):
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate}")
        if self.per_device_batch_size < 1 or self.gradient_accumulation_steps < 1:
            raise ValueError("per_device_batch_size and gradient_accumulation_steps must be >= 1")
        if not 0 <= self.warmup_ratio < 1:
            raise ValueError(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if self.max_steps <= 0 and self.epochs <= 0:
            raise ValueError("set epochs > 0 or max_steps > 0")


@dataclass
class TrainConfig:
    output_dir: str = option(help="Run directory: checkpoints, logs, adapter, merged model, run_summary.json.")
    model: ModelConfig = option(help="The causal LM to fine-tune.")
    data: DataConfig = option(default_factory=DataConfig, help="Training data.")
    loss: LossConfig = option(default_factory=LossConfig, help="The objective (cuset.losses).")
    finetune: str = option("lora", help="lora (peft adapters), full (every weight), or qlora (4-bit base + LoRA through bitsandbytes; on a CPU needs bitsandbytes >= 0.50).",
                           choices=FINETUNE)
    lora: LoraOptions = option(default_factory=LoraOptions, help="Adapter settings (lora and qlora).")
    optim: OptimConfig = option(default_factory=OptimConfig, help="Optimizer and schedule.")
    precision: str = option("auto", help="Compute precision: auto (bf16 on a GPU that supports it, else fp32), fp32, bf16, fp16.",
                            choices=PRECISIONS)
    seed: int = option(42, help="Seed for weights of new modules, data order and dropout.")
    logging_steps: int = option(1, help="Log metrics every N optimizer steps.")
    save_steps: int = option(500, help="Write a checkpoint every N optimizer steps (0: only at the end).")
    save_total_limit: int | None = option(2, help="Keep at most this many checkpoints (None: all).")
    merge: bool = option(False, help="Also write the base model with the adapter merged in (safetensors), loadable by transformers and vLLM.")
    report_to: list[str] = option(default_factory=lambda: ["tensorboard"], help="Trackers besides the JSONL log (tensorboard, wandb, ...; [] for none).")
    progress: bool = option(True, help="Show a progress bar.")
    dataloader_num_workers: int = option(0, help="Worker processes for data loading.")

    def __post_init__(self):
        if self.logging_steps < 1:
            raise ValueError(f"logging_steps must be >= 1, got {self.logging_steps}")
        if self.save_steps < 0:
            raise ValueError(f"save_steps must be >= 0, got {self.save_steps}")
