"""`cuset train`: Fine-tune a causal LM with CuSeT or a baseline objective."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from cuset.cli.common import OVERRIDES, console, fail, out, print_config_help, stage_config


def register(root: typer.Typer) -> None:
    @root.command("train", context_settings=OVERRIDES)
    def train_cmd(
        ctx: typer.Context,
        config: Optional[Path] = typer.Argument(None, help="YAML TrainConfig (see configs/train/); key=value overrides follow."),
        resume: bool = typer.Option(False, "--resume", help="Continue the run in output_dir from its last complete checkpoint."),
        help_config: bool = typer.Option(False, "--help-config", help="List every config key with its default and help."),
    ):
        """Fine-tune a causal LM with CuSeT or a baseline objective (LoRA, QLoRA or full).

        Multi-GPU / multi-node: `accelerate launch --config_file configs/accelerate/<setup>.yaml -m cuset.cli.main train CONFIG`.
        """
        if help_config:
            from cuset.train.config import TrainConfig

            print_config_help("TrainConfig keys (set in YAML or as key=value)", (TrainConfig, ""))
            raise typer.Exit()
        extra = list(ctx.args)
        if config is not None and "=" in config.name and not config.exists():  # only overrides were given
            extra.insert(0, str(config))
            config = None
        from cuset.train.config import TrainConfig

        cfg = stage_config(ctx, TrainConfig, config, extra)
        from cuset.train.data import DataError, TemplateError
        from cuset.train.errors import SetupError
        from cuset.train.run import train

        try:
            summary = train(cfg, resume=resume)
        except (SetupError, DataError, TemplateError, FileNotFoundError) as e:
            fail(escape(str(e)))
        except OSError as e:  # from_pretrained on a bad path or hub id
            fail(escape(f"{cfg.model.name_or_path}: {e}"))
        if summary.get("final_metrics"):
            m = summary["final_metrics"]
            out.print(f"step {summary['steps']}: loss {m.get('loss', float('nan')):.4f}  nll {m.get('nll', float('nan')):.4f}")
        console.print(f"outputs: {', '.join(f'{k}={v}' for k, v in summary['outputs'].items())}")
        console.print(f"summary: {Path(cfg.output_dir) / 'run_summary.json'}")
