"""`CusetTrainer`: transformers' Trainer with the loss looked up by name.

The trainer stays thin: `compute_loss` hands the batch to
`cuset.losses.compute_loss`, which runs the model, scores only the target tokens
through a chunked LM head and returns the objective already normalised by the
number of supervised tokens in the whole optimizer step (`num_items_in_batch`,
across gradient accumulation and data-parallel ranks). Everything else (data
order, optimizer, schedule, mixed precision, DDP / DeepSpeed / FSDP, resuming)
is the Trainer's. Two additions: per-step CuSeT metrics in the logs, and
checkpoints written atomically.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import Trainer

from cuset.train.checkpoint import clear_staging, publish, staging_dir
from cuset.train.metrics import StepMetrics


class CusetTrainer(Trainer):
    # compute_loss divides by the token count of the whole accumulated step, so the
    # Trainer must not divide by the accumulation steps again.
    loss_is_scaled_for_ga = True

    def __init__(self, *args, loss_config, ref_model=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.loss_config = loss_config
        self.ref_model = ref_model
        self.step_metrics = StepMetrics()
        self._samples_in_step = None
        self._micro_batches_in_step = None
        self._weight_mean_in_step = None
        self._checkpoint_root: str | None = None

    # -- loss ---------------------------------------------------------------------
    def _loss_world_size(self) -> int:
        # The token count is summed over ranks and DDP averages gradients, so each
        # rank's loss is multiplied by the number of ranks to give the global mean.
        return self.accelerator.num_processes if self.args.average_tokens_across_devices else 1

    def get_batch_samples(self, epoch_iterator, num_batches, device):
        """The micro-batches of one optimizer step and its supervised-token count.

        Counted here (not by the Trainer, which counts only for models that take loss
        kwargs) and summed over ranks, so the loss divides by the tokens of the whole
        step; without it gradients would scale with the accumulation steps. The
        step's sample count is kept for the per-sample reductions.
        """
        from cuset.losses import count_loss_items

        batches = []
        for _ in range(num_batches):
            try:
                batches.append(next(epoch_iterator))
            except StopIteration:
                break
        counts = [count_loss_items(b) for b in batches]
        totals = torch.tensor([sum(c["tokens"] for c in counts), sum(c["samples"] for c in counts), len(batches)],
                              device=device)
        if self.args.average_tokens_across_devices and self.accelerator.num_processes > 1:
            totals = self.accelerator.reduce(totals, reduction="sum")
        self._samples_in_step = totals[1]
        self._micro_batches_in_step = totals[2]
        self._weight_mean_in_step = self._step_weight_mean(batches, device)
        self.step_metrics.new_step()
        return batches, totals[0]

    def _step_weight_mean(self, batches: list[dict], device):
        """loss.weight_norm: the mean sample weight w_n over every sample of the step, from a
        forward pass without gradients over its micro-batches (None where the step is one
        micro-batch on one process: compute_loss then takes that micro-batch's own mean)."""
        from cuset.losses.compute import needs_step_weights, sample_weight_totals

        distributed = self.args.average_tokens_across_devices and self.accelerator.num_processes > 1
        if not needs_step_weights(self.loss_config) or (len(batches) == 1 and not distributed):
            return None
        if self.is_deepspeed_enabled or self.is_fsdp_enabled:
            raise NotImplementedError("loss.weight_norm over several micro-batches reads the LM head's weight "
                                      "outside the model's forward, which DeepSpeed and FSDP shard; train with "
                                      "gradient_accumulation_steps=1 on one process, or without weight_norm")
        model = self.model_wrapped if self.model_wrapped is not None else self.model
        total, count = torch.zeros((), dtype=torch.float64, device=device), 0
        for batch in batches:
            w_sum, n = sample_weight_totals(model, self._prepare_inputs(batch), self.loss_config)
            total, count = total + w_sum.to(device), count + n
        totals = torch.stack([total, torch.tensor(float(count), dtype=torch.float64, device=device)])
        if distributed:
            totals = self.accelerator.reduce(totals, reduction="sum")
        return totals[0] / totals[1].clamp(min=1.0)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        from cuset.losses import compute_loss

        loss, metrics = compute_loss(model, inputs, self.loss_config, num_items_in_batch=num_items_in_batch,
                                     num_samples_in_batch=self._samples_in_step if model.training else None,
                                     num_micro_batches=self._micro_batches_in_step if model.training else None,
                                     world_size=self._loss_world_size(), ref_model_ctx=self.ref_model,
                                     step_weight_mean=self._weight_mean_in_step if model.training else None)
        if model.training:
            self.step_metrics.add(loss, metrics, samples=inputs["input_ids"].shape[0],
                                  input_tokens=inputs["attention_mask"].sum())
        return (loss, metrics) if return_outputs else loss

    def training_step(self, model, inputs, num_items_in_batch=None):
        loss = super().training_step(model, inputs, num_items_in_batch)
        if self.is_fsdp_enabled:  # FSDP 1 under NO_SHARD leaves frozen parameters hidden (cuset.train.fsdp)
            from cuset.train.fsdp import register_hidden_parameters

            register_hidden_parameters(self.model_wrapped)
        return loss

    # -- logging ------------------------------------------------------------------
    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs and "train_runtime" not in logs:  # a training-step log, on every rank
            extra = self.step_metrics.summary(world_size=self.accelerator.num_processes, device=self.args.device)
            if extra:
                logs = {**logs, "loss": extra.pop("objective"), **extra}
        super().log(logs, start_time)

    # -- saving ---------------------------------------------------------------------
    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        if not self.is_fsdp_enabled:
            return super()._save(output_dir, state_dict)
        from cuset.train.fsdp import module_names_without_fsdp

        # PEFT selects the adapter's tensors by module name; FSDP units nested in the model rename them
        with module_names_without_fsdp(self.accelerator.unwrap_model(self.model, keep_torch_compile=False)):
            return super()._save(output_dir, state_dict)

    # -- atomic checkpoints ---------------------------------------------------------
    def _get_output_dir(self, trial) -> str:
        return self._checkpoint_root or super()._get_output_dir(trial)

    def _save_checkpoint(self, model, trial) -> None:
        from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints

        run_dir = super()._get_output_dir(trial)
        staging = staging_dir(run_dir)
        name = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        if self.args.should_save:
            clear_staging(run_dir)
        self.accelerator.wait_for_everyone()
        self._checkpoint_root = str(staging)
        try:
            super()._save_checkpoint(model, trial)  # every rank writes its part into the staging folder
        finally:
            self._checkpoint_root = None
        self.accelerator.wait_for_everyone()
        if self.args.should_save:
            publish(staging / name, Path(run_dir) / name)
            clear_staging(run_dir)
            rotate_checkpoints(output_dir=run_dir, save_total_limit=self.args.save_total_limit,
                               best_model_checkpoint=self.state.best_model_checkpoint, use_mtime=False)
        self.accelerator.wait_for_everyone()
