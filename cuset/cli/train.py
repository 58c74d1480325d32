"""`cuset train`: Fine-tune a causal LM with CuSeT or a baseline objective."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cuset.cli.common import OVERRIDES, config_argument, console, help_config_option, out, stage_config


def _keys():
    from cuset.train.config import TrainConfig

    return "TrainConfig keys (set in YAML or as key=value)", [(TrainConfig, "")]


def register(root: typer.Typer) -> None:
    @root.command("train", context_settings=OVERRIDES)
    def train_cmd(
        ctx: typer.Context,
        config: Optional[str] = config_argument("TrainConfig (see configs/train/)"),
        resume: bool = typer.Option(False, "--resume", help="Continue the run in output_dir from its last complete checkpoint."),
        help_config: bool = help_config_option(_keys),
    ):
        """Fine-tune a causal LM with CuSeT or a baseline objective (LoRA, QLoRA or full).

        Multi-GPU / multi-node: `accelerate launch --config_file configs/accelerate/<setup>.yaml -m cuset.cli.main train CONFIG`.
        """
        from cuset.train.config import TrainConfig

        cfg = stage_config(ctx, TrainConfig, config)
        cfg.model.check_exists()  # before the training stack's imports (seconds)
        from cuset.train.run import train

        # bad data, template or setup, a missing file, an unloadable model: CusetErrors, one line each
        summary = train(cfg, resume=resume)
        if summary.get("final_metrics"):
            m = summary["final_metrics"]
            out.print(f"step {summary['steps']}: loss {m.get('loss', float('nan')):.4f}  nll {m.get('nll', float('nan')):.4f}")
        console.print(f"outputs: {', '.join(f'{k}={v}' for k, v in summary['outputs'].items())}")
        console.print(f"summary: {Path(cfg.output_dir) / 'run_summary.json'}")
