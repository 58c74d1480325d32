"""One training run: data -> model -> CusetTrainer -> adapter / merged model / run summary.

    summary = train(load_config(TrainConfig, "configs/train/tiny/lora.yaml"), resume=False)

Works the same under `python`, `accelerate launch` and `torchrun`: the Trainer
reads the distributed setup from the environment; tokenisation runs on the main
process first and the others read its cache.
"""

from __future__ import annotations

import copy
import logging
import time
from pathlib import Path

import torch
import yaml

from cuset.config import to_dict
from cuset.io import atomic_write_json, atomic_write_text
from cuset.losses.objectives import get_loss
from cuset.train.callbacks import LOG_NAME, JsonlLogCallback, ProgressBarCallback, read_log, truncate_log
from cuset.train.checkpoint import clear_staging, last_checkpoint, publish, staging_dir
from cuset.train.config import TrainConfig
from cuset.train.data import PadCollator, build_dataset
from cuset.train.errors import RunExistsError, SetupError
from cuset.train.strategy import check_launch, is_zero3, launched_strategy, trainer_strategy

log = logging.getLogger(__name__)

SUMMARY_NAME = "run_summary.json"
CONFIG_NAME = "train_config.yaml"


def _precision(cfg: TrainConfig) -> dict:
    precision = cfg.precision
    if precision == "auto":
        if torch.cuda.is_available():
            precision = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
        else:
            precision = "fp32"
    if precision in ("bf16", "fp16") and not torch.cuda.is_available():
        raise SetupError(f"precision={precision} needs a GPU here; use precision=fp32 (or auto) on CPU")
    return {"bf16": precision == "bf16", "fp16": precision == "fp16"}


def training_arguments(cfg: TrainConfig):
    from transformers import TrainingArguments

    o = cfg.optim
    save = cfg.save_steps > 0
    args = TrainingArguments(
        output_dir=cfg.output_dir,
        per_device_train_batch_size=o.per_device_batch_size,
        gradient_accumulation_steps=o.gradient_accumulation_steps,
        num_train_epochs=o.epochs,
        max_steps=o.max_steps,
        learning_rate=o.learning_rate,
        lr_scheduler_type=o.lr_scheduler,
        warmup_steps=o.warmup_ratio,  # a float in [0, 1) is a ratio of the total steps
        weight_decay=o.weight_decay,
        max_grad_norm=o.max_grad_norm,
        optim=o.optim,
        logging_strategy="steps",
        logging_steps=cfg.logging_steps,
        save_strategy="steps" if save else "no",
        save_steps=cfg.save_steps if save else 500,
        save_total_limit=cfg.save_total_limit,
        seed=cfg.seed,
        data_seed=cfg.seed,
        report_to=[r for r in cfg.report_to if r != "tensorboard"] or "none",
        remove_unused_columns=False,  # keep the cuda_mask column
        label_names=["labels"],
        average_tokens_across_devices=True,
        dataloader_num_workers=cfg.dataloader_num_workers,
        disable_tqdm=True,  # our own bar replaces the Trainer's, which prints every log dict
        use_cpu=not torch.cuda.is_available(),
        ddp_find_unused_parameters=False,
        **_precision(cfg),
    )
    if args.n_gpu > 1:
        # Several GPUs but one process: the Trainer would fall back to nn.DataParallel,
        # whose replicas break the loss's hidden-state hook. Use one GPU and say how to use all.
        log.warning("%d GPUs visible but one process: training on one GPU. For data parallelism launch with "
                    "`accelerate launch --config_file configs/accelerate/ddp-8gpu.yaml -m cuset.cli.main train ...`",
                    args.n_gpu)
        args._n_gpu = 1
    return args


def _callbacks(cfg: TrainConfig, run_dir: Path, is_main: bool) -> list:
    callbacks = [JsonlLogCallback(run_dir / LOG_NAME)]
    if cfg.progress:
        callbacks.append(ProgressBarCallback())
    if "tensorboard" in cfg.report_to and is_main:
        from torch.utils.tensorboard import SummaryWriter
        from transformers.integrations import TensorBoardCallback

        callbacks.append(TensorBoardCallback(tb_writer=SummaryWriter(log_dir=str(run_dir / "tensorboard"))))
    return callbacks


def reference_model(cfg: TrainConfig, model):
    """The initial policy, for an objective with a KL term to it (ASFT with beta > 0) under full
    fine-tuning; LoRA disables its adapter instead, and no other objective needs one."""
    if cfg.finetune != "full" or not get_loss(cfg.loss.name).needs_kl(cfg.loss):
        return None
    from transformers.integrations import is_deepspeed_zero3_enabled

    if is_deepspeed_zero3_enabled():
        # a deep copy of a ZeRO-3 model copies empty partitions without DeepSpeed's hooks:
        # load the initial weights again (partitioned the same way); `_zero3_engine` hooks them up
        from cuset.train.model import load_base_model

        ref = load_base_model(cfg.model)
    else:
        ref = copy.deepcopy(model)
    ref.eval()
    ref.requires_grad_(False)
    return ref


def _zero3_engine(ref, cfg: TrainConfig):
    """A frozen ZeRO-3 model wrapped by DeepSpeed, whose hooks gather each module's weights in its forward."""
    import deepspeed

    bf16, fp16 = (_precision(cfg)[k] for k in ("bf16", "fp16"))
    ds_config = {"train_micro_batch_size_per_gpu": cfg.optim.per_device_batch_size,
                 "zero_optimization": {"stage": 3}, "bf16": {"enabled": bf16}, "fp16": {"enabled": fp16}}
    engine, *_ = deepspeed.initialize(model=ref, config=ds_config)
    engine.eval()
    return engine


def _check_resume(cfg: TrainConfig, run_dir: Path, resume: bool) -> Path | None:
    ckpt = last_checkpoint(run_dir)
    if ckpt is not None and not resume:
        raise RunExistsError(f"{run_dir} already holds {ckpt.name}: pass --resume to continue that run, "
                             "or choose another output_dir")
    if resume and ckpt is None:
        log.warning("--resume: no complete checkpoint in %s, starting from scratch", run_dir)
    if ckpt is not None and (run_dir / CONFIG_NAME).is_file():
        before = yaml.safe_load((run_dir / CONFIG_NAME).read_text())
        now = to_dict(cfg)
        changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
        if changed:
            log.warning("resuming with a config that differs from the original in: %s", ", ".join(changed))
    return ckpt


def _save_final(trainer, cfg: TrainConfig, run_dir: Path, tokenizer) -> dict[str, str]:
    """The adapter (or full model) and, on request, the merged model; each renamed into place whole."""
    is_peft = cfg.finetune in ("lora", "qlora")
    name = "adapter" if is_peft else "model"
    staged = staging_dir(run_dir) / name
    if trainer.args.should_save:
        clear_staging(run_dir)
    trainer.accelerator.wait_for_everyone()
    trainer.save_model(str(staged))  # gathers sharded weights (DeepSpeed / FSDP); writes on the main process
    outputs = {name: str(run_dir / name)}
    if trainer.args.should_save:
        tokenizer.save_pretrained(str(staged))
        publish(staged, run_dir / name)
        if cfg.merge and is_peft:
            from cuset.train.model import merge_adapter

            merged = staging_dir(run_dir) / "merged"
            merge_adapter(cfg, run_dir / name, merged)
            tokenizer.save_pretrained(str(merged))
            publish(merged, run_dir / "merged")
            outputs["merged"] = str(run_dir / "merged")
        elif cfg.merge:
            outputs["merged"] = str(run_dir / name)  # full fine-tuning: the model is already plain weights
        clear_staging(run_dir)
    trainer.accelerator.wait_for_everyone()
    return outputs


def _write_json_atomically(path: Path, data: dict) -> None:
    atomic_write_json(path, data, indent=2)


def _versions() -> dict[str, str]:
    import accelerate
    import peft
    import transformers

    import cuset

    return {"cuset": cuset.__version__, "torch": torch.__version__, "transformers": transformers.__version__,
            "peft": peft.__version__, "accelerate": accelerate.__version__}


def _prepare_run_dir(cfg: TrainConfig, run_dir: Path, ckpt: Path | None) -> None:
    """Main process: a fresh run starts a new log and records its config; a resumed one drops
    log lines written after its checkpoint by the interrupted process."""
    run_dir.mkdir(parents=True, exist_ok=True)
    clear_staging(run_dir)
    if ckpt is None:
        (run_dir / LOG_NAME).unlink(missing_ok=True)
        atomic_write_text(run_dir / CONFIG_NAME, yaml.safe_dump(to_dict(cfg), sort_keys=False))
    else:
        truncate_log(run_dir / LOG_NAME, int(ckpt.name.split("-")[-1]))


def peak_memory_mib() -> dict:
    """This process's peak memory so far: resident set (the kernel's high-water mark) and, with a
    GPU, what torch's allocator held at most on this process's device (allocated and reserved)."""
    import resource

    out = {"process_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # KiB on Linux
           "cuda_allocated": None, "cuda_reserved": None}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda_allocated"] = torch.cuda.max_memory_allocated() / 2**20
        out["cuda_reserved"] = torch.cuda.max_memory_reserved() / 2**20
    return out


def trainable_parameters(model) -> int:
    """Trainable parameters at full size. Counted before `trainer.train()`, which wraps the model
    for FSDP (a rank then holds a shard of each); under ZeRO-3 the weights are already partitioned
    when loaded, each an empty placeholder whose full size is `ds_numel` (p.numel() counted only
    the small weights kept whole: 44,032 of a 140.8M full fine-tune on an H200)."""
    return sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters() if p.requires_grad)


def _summary(cfg: TrainConfig, trainer, result, report, outputs: dict, ckpt: Path | None, started: float,
             trainable: int) -> dict:
    run_dir = Path(cfg.output_dir)
    world = trainer.accelerator.num_processes
    history = read_log(run_dir / LOG_NAME) if (run_dir / LOG_NAME).is_file() else []
    return {
        "output_dir": str(run_dir),
        "objective": cfg.loss.name,
        "loss_reduction": cfg.loss.reduction,
        "finetune": cfg.finetune,
        "world_size": world,
        "strategy": trainer_strategy(trainer).to_json(),
        "global_batch_size": cfg.optim.per_device_batch_size * cfg.optim.gradient_accumulation_steps * world,
        "steps": trainer.state.global_step,
        "epochs": trainer.state.epoch,
        "resumed_from": str(ckpt) if ckpt else None,
        "train_runtime_s": result.metrics.get("train_runtime"),
        "wall_time_s": time.time() - started,
        "final_metrics": history[-1] if history else {},
        "trainable_parameters": trainable,
        "peak_memory_mib": peak_memory_mib(),  # of the main process (each rank has its own)
        "data": {k: v for k, v in report.to_json().items() if k != "problems"},
        "outputs": {**outputs, "log": str(run_dir / LOG_NAME), "tensorboard": str(run_dir / "tensorboard"),
                    "config": str(run_dir / CONFIG_NAME)},
        "versions": _versions(),
        "config": to_dict(cfg),
    }


def train(cfg: TrainConfig, *, resume: bool = False, callbacks: tuple = ()) -> dict:
    """Run (or continue, with resume=True) a training run; returns the run summary."""
    from transformers import set_seed
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    from cuset.train.model import build_model, load_tokenizer
    from cuset.train.trainer import CusetTrainer

    run_dir = Path(cfg.output_dir)
    check_launch(cfg.finetune, launched_strategy())
    args = training_arguments(cfg)  # also sets up the distributed state when launched on several processes
    is_main = args.process_index == 0
    ckpt = _check_resume(cfg, run_dir, resume)
    started = time.time()

    tokenizer = load_tokenizer(cfg.model)
    with args.main_process_first(desc="tokenize"):
        dataset, report = build_dataset(cfg.data, tokenizer, progress=is_main and cfg.progress)
    log.info("data: %d examples, %d supervised tokens (%.1f%% CUDA-marked, cuda_spans=%s), %d skipped %s",
             report.examples, report.supervised_tokens, 100 * report.cuda_tokens / max(1, report.supervised_tokens),
             cfg.data.cuda_spans, sum(report.skipped.values()), dict(report.skipped) or "")

    set_seed(cfg.seed)  # adapter initialisation draws from the global RNG
    model = build_model(cfg)
    trainer = CusetTrainer(
        model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
        data_collator=PadCollator(pad_token_id=tokenizer.pad_token_id),
        loss_config=cfg.loss, ref_model=reference_model(cfg, model),
        callbacks=_callbacks(cfg, run_dir, is_main) + list(callbacks),
    )
    if trainer.ref_model is not None and trainer.is_deepspeed_enabled and is_zero3(trainer):
        trainer.ref_model = _zero3_engine(trainer.ref_model, cfg)
    for noisy in (PrinterCallback, ProgressCallback):  # they print every log dict; our bar shows the metrics
        trainer.remove_callback(noisy)
    if is_main:
        _prepare_run_dir(cfg, run_dir, ckpt)
    trainable = trainable_parameters(trainer.model)
    result = trainer.train(resume_from_checkpoint=str(ckpt) if ckpt else None)
    outputs = _save_final(trainer, cfg, run_dir, tokenizer)
    summary = _summary(cfg, trainer, result, report, outputs, ckpt, started, trainable)
    if is_main:
        _write_json_atomically(run_dir / SUMMARY_NAME, summary)
    return summary
