"""Trainer callbacks: a JSONL log of every step and a progress bar with the key metrics."""

from __future__ import annotations

import math
from pathlib import Path

from transformers import TrainerCallback

from cuset.io import JsonlAppender, atomic_write_jsonl, iter_jsonl, read_jsonl

LOG_NAME = "train_log.jsonl"
BAR_KEYS = (("loss", "loss"), ("nll", "nll"), ("conf_kept_frac", "kept"), ("cuda_frac", "cuda"), ("learning_rate", "lr"), ("tokens_per_s", "tok/s"))


def _jsonable(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else str(v)
    return v


class JsonlLogCallback(TrainerCallback):
    """Appends one JSON object per training log event to `<output_dir>/train_log.jsonl`."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or "train_runtime" in logs:
            return
        record = {"step": state.global_step, "epoch": state.epoch, **{k: _jsonable(v) for k, v in logs.items()}}
        with JsonlAppender(self.path) as out:
            out.append(record)


def truncate_log(path: str | Path, last_step: int) -> int:
    """Drop log lines of steps after `last_step` (written by a run that was then killed), and a
    line torn by the kill. Returns lines kept."""
    path = Path(path)
    if not path.is_file():
        return 0
    return atomic_write_jsonl(path, [rec for _, rec in iter_jsonl(path) if rec.get("step", 0) <= last_step])


def read_log(path: str | Path) -> list[dict]:
    return read_jsonl(path)


class ProgressBarCallback(TrainerCallback):
    """A bar over optimizer steps (main process only) showing loss, NLL, kept/CUDA fractions, lr and tokens/s."""

    def __init__(self):
        self.bar = None
        self._context = None

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            from cuset.progress import progress_bar

            self._context = progress_bar("train", state.max_steps, completed=state.global_step)
            self.bar = self._context.__enter__()

    def on_step_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.update(completed=state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.bar is not None and logs and "loss" in logs:
            shown = {label: logs[key] for key, label in BAR_KEYS if isinstance(logs.get(key), (int, float))}
            self.bar.update(status=" ".join(f"{k}={v:.2e}" if k == "lr" else f"{k}={v:.4g}" for k, v in shown.items()))

    def on_train_end(self, args, state, control, **kwargs):
        if self._context is not None:
            self._context.__exit__(None, None, None)
            self.bar = self._context = None
