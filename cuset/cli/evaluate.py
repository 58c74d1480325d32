"""`cuset eval`: compile, run and check generated programs; Pass@k report."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cuset.cli.common import OVERRIDES, config_argument, console, fail, help_config_option, out, stage_config


def _keys():
    from cuset.evaluate.config import EvalConfig

    return "EvalConfig keys (set in YAML or as key=value)", [(EvalConfig, "")]


def register(root: typer.Typer) -> None:
    @root.command("eval", context_settings=OVERRIDES)
    def eval_cmd(
        ctx: typer.Context,
        tasks: str = typer.Argument(..., help="Tasks: JSONL path (CUDABench format) or Hugging Face dataset name."),
        generations: Path = typer.Argument(..., help="Generations JSONL written by `cuset generate`."),
        config: Optional[str] = config_argument("EvalConfig (see configs/eval/)"),
        out_dir: Path = typer.Option(..., "--out", help="Directory for results.jsonl, summary.json and report.md."),
        backend: Optional[str] = typer.Option(None, "--backend", help="gpu, cpu or auto (default: config, else auto)."),
        compat: bool = typer.Option(False, "--compat", help="Official CUDABench definitions (the config's compat key)."),
        help_config: bool = help_config_option(_keys),
    ):
        """Evaluate GENERATIONS on TASKS; resumable: a re-run skips samples already in --out."""
        from cuset.evaluate import EvalConfig, evaluate_file

        extra = list(ctx.args)
        if backend is not None:
            extra.append(f"execution.backend={backend}")
        if compat:
            extra.append("compat=true")
        cfg = stage_config(ctx, EvalConfig, config, extra)
        if not generations.exists():
            fail(f"{generations}: no such generations file (write one with `cuset generate`)")
        # no GPU, no nvcc or g++, bad backend options: CusetErrors, one line each
        backend_ = cfg.make_backend()
        # no sandbox, bad tasks or generations, missing tasks: CusetErrors, one line each
        summary = evaluate_file(tasks, generations, out_dir / "results.jsonl", cfg, backend=backend_)
        _print_table(summary)
        console.print(f"results: {out_dir / 'results.jsonl'}  summary: {out_dir / 'summary.json'}  "
                      f"report: {out_dir / 'report.md'}")


def _print_table(summary) -> None:
    from rich.table import Table

    from cuset.evaluate.report import COLUMNS, judge_line, pct

    o = summary.overall
    table = Table(title=f"{o['n_tasks']} tasks, {o['n_samples']} samples", show_lines=False)
    table.add_column("definition")
    for c in ("Pass@1 comp", "Pass@1 func", "Pass@3 comp", "Pass@3 func", "avg tokens"):
        table.add_column(c, justify="right")
    tokens = "n/a" if o["avg_tokens"] is None else f"{o['avg_tokens']:,.0f}"
    for label, m in (("unbiased", o), ("official", o["compat"]), ("official + quirk", o["compat_quirk"])):
        table.add_row(label, *[pct(m.get(c)) for c in COLUMNS], tokens)
    out.print(table)
    statuses = ", ".join(f"{k}={v}" for k, v in sorted(o["statuses"].items(), key=lambda kv: -kv[1]))
    out.print(f"outcomes: {statuses or 'none'}")
    out.print(judge_line(summary.meta).replace("**", ""), markup=False, soft_wrap=True)
    if summary.skipped_tasks:
        out.print(f"[yellow]{len(summary.skipped_tasks)} task(s) skipped (not in denominators); see report.md[/]")
    if summary.infra_errors:
        out.print(f"[red]{len(summary.infra_errors)} sample(s) lost to infrastructure failures (not in denominators); "
                  "see report.md[/]")
    if summary.missing_tasks:
        out.print(f"[yellow]{len(summary.missing_tasks)} task(s) without samples counted as failed "
                  f"(allow_missing=true); see report.md[/]")
