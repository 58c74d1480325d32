"""`cuset generate`: sample CUDA programs for tasks (transformers, vLLM or an OpenAI-compatible server)."""

from __future__ import annotations

from typing import Optional

import typer

from cuset.cli.common import OVERRIDES, config_argument, console, help_config_option, out, stage_config


def _keys():
    from cuset.generate.config import GenerateConfig

    return "GenerateConfig keys (set in YAML or as key=value)", [(GenerateConfig, "")]


def register(root: typer.Typer) -> None:
    @root.command("generate", context_settings=OVERRIDES)
    def generate_cmd(
        ctx: typer.Context,
        config: Optional[str] = config_argument("GenerateConfig (see configs/generate/)"),
        help_config: bool = help_config_option(_keys),
    ):
        """Generate n samples per task into a JSONL (resumable: a re-run fills in missing samples).

        Example: cuset generate configs/generate/hf.yaml model=./ckpt tasks=tasks.jsonl out=gens.jsonl
        """
        from rich.table import Table

        from cuset.generate.config import GenerateConfig
        from cuset.generate.records import load_generations
        from cuset.generate.run import generate_file

        cfg = stage_config(ctx, GenerateConfig, config)
        stats = generate_file(cfg)  # a backend that fails, a missing or bad task file: CusetErrors, one line each
        records = [r for r in load_generations(cfg.out)]
        table = Table(title=f"{cfg.out}")
        for col in ("tasks", "new samples", "kept from before", "with code", "avg tokens"):
            table.add_column(col, justify="right")
        tokens = [r.n_tokens for r in records if r.n_tokens is not None]
        table.add_row(str(stats.tasks), str(stats.requested), str(stats.already_done),
                      f"{sum(r.code is not None for r in records)}/{len(records)}",
                      f"{sum(tokens) / len(tokens):,.0f}" if tokens else "n/a")
        out.print(table)
        if stats.invalid_tasks:
            console.print(f"[yellow]{stats.invalid_tasks} invalid task record(s) skipped; run `cuset tasks validate`[/]")
