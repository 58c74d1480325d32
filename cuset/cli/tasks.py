"""`cuset tasks`: validate, show and summarise task files."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from cuset.cli.common import OVERRIDES, config_argument, console, fail, help_config_option, out, stage_config

app = typer.Typer(help="Validate, show and summarise task files: JSONL of CUDABench or KernelBench records, "
                  "or a directory of KernelBench .py references.", no_args_is_help=True)
SOURCE_HELP = "JSONL path, directory of KernelBench .py references, or Hugging Face dataset name."


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="tasks")


def _load(source: str):
    """(tasks, report) of every valid record; a missing file or dataset is a one-line error."""
    from cuset.tasks import load_tasks

    return load_tasks(source, strict=False)  # a missing file or dataset: MissingPath (a CusetError)


@app.command("validate")
def validate(
    file: str = typer.Argument(..., help=SOURCE_HELP),
    lenient: bool = typer.Option(False, help="Skip bad records and count them instead of failing."),
):
    """Check every record; list each problem as file:line: field: message. Exits 1 if any."""
    tasks, report = _load(file)
    for p in report.problems:
        console.print(f"[red]{p}[/]", highlight=False)
    console.print(f"{report.loaded} valid task(s), {report.total_skipped} bad record(s) in {file}")
    if report.skipped:
        console.print("skipped by reason: " + ", ".join(f"{k}={v}" for k, v in sorted(report.skipped.items())))
    if report.problems and not lenient:
        raise typer.Exit(1)


@app.command("show")
def show(
    file: str = typer.Argument(..., help=SOURCE_HELP),
    id: str = typer.Option(..., "--id", help="Task id (an integer for CUDABench, a name for KernelBench)."),
    level: int = typer.Option(1, "--level", min=1, max=3, help="Prompt level 1, 2 or 3 (CUDABench only)."),
    compat: bool = typer.Option(False, help="Render the official harness prompt (CUDABench's or "
                                "KernelBench's) verbatim."),
    gpu: str = typer.Option(None, help="GPU label for the prompt."),
    field: str = typer.Option("prompt", help="What to print: prompt or json; CUDABench: bench.cu, gen.py, "
                              "compare.py; KernelBench: reference."),
):
    """Print the rendered generation prompt of one task (or one of its files)."""
    import json

    from cuset.tasks import get_kind, render_prompt

    tasks, _ = _load(file)
    by_id = {str(t.id): t for t in tasks}
    if id not in by_id:
        fail(f"no valid task with id {id} in {file} ({len(by_id)} valid tasks)")
    task = by_id[id]
    kind = get_kind(task.kind)
    files = [name for name, _ in kind.files]
    if field == "prompt":
        p = render_prompt(task, level, compat=compat, gpu=gpu)
        out.print("[bold]--- system ---[/]")
        out.print(p.system, markup=False, highlight=False)
        out.print("[bold]--- user ---[/]")
        out.print(p.user, markup=False, highlight=False)
    elif field == "json":
        out.print_json(json.dumps(task.to_json()))
    elif field in files:
        out.print(kind.file(task, field), markup=False, highlight=False)
    else:
        fail(f"--field must be prompt, {', '.join(files)} or json for a {task.kind} task, not {field!r}")


def _cudabench_columns(t) -> dict[str, str]:
    return {"inputs": ", ".join(f"{s.name}:{s.dtype}{s.shape}" for s in t.inputs),
            "outputs": ", ".join(f"{s.name}:{s.dtype}{s.shape}" for s in t.outputs),
            "data MB": f"{t.data_bytes / 1e6:.2f}"}


def _kernelbench_columns(t) -> dict[str, str]:
    # a KernelBench task's sizes are its module constants (read with ast, never run)
    variants = [f"{len(t.shape_variants)} shape"] if t.shape_variants else []
    variants += list(t.value_variants) + (["backward"] if t.backward else [])
    return {"constants": ", ".join(f"{k}={v}" for k, v in t.constants.items()), "atol/rtol": f"{t.atol:g}/{t.rtol:g}",
            "trials": str(t.n_trials), "robust variants": ", ".join(variants) or "-"}


def _listing_columns():
    from cuset.tasks.kinds import per_kind

    return per_kind({"cudabench": _cudabench_columns, "kernelbench": _kernelbench_columns}, "`tasks list` columns")


@app.command("list")
def list_tasks(file: str = typer.Argument(..., help=SOURCE_HELP)):
    """One line per task: id, name, family, then its kind's columns (CUDABench: I/O and data size;
    KernelBench: sizes and checks). One table per kind in the file."""
    tasks, report = _load(file)
    for kind, columns_of in _listing_columns().items():
        of_kind = [t for t in tasks if t.kind == kind]
        if not of_kind:
            continue
        rows = [columns_of(t) for t in of_kind]
        table = Table("id", "task_name", "family", *rows[0])
        for t, row in zip(of_kind, rows):
            table.add_row(str(t.id), t.task_name, t.family_name, *row.values())
        out.print(table)
    if report.total_skipped:
        console.print(f"[yellow]{report.total_skipped} invalid record(s) not shown; run `cuset tasks validate`[/]")


def _eval_keys():
    from cuset.evaluate.config import EvalConfig

    return "EvalConfig keys (set in YAML or as key=value; robust defaults to true here)", [(EvalConfig, "")]


@app.command("check", context_settings=OVERRIDES)
def check(
    ctx: typer.Context,
    file: str = typer.Argument(..., help=SOURCE_HELP),
    config: Optional[str] = config_argument("EvalConfig (see configs/eval/), as for `cuset eval`"),
    out_dir: Path = typer.Option(..., "--out", help="Directory for task_check.json, task_check.md and the "
                                                    "references' evaluation; a re-run resumes it."),
    backend: Optional[str] = typer.Option(None, "--backend", help="gpu, cpu or auto (default: config, else auto)."),
    help_config: bool = help_config_option(_eval_keys),
):
    """Run every task's own reference through the evaluation and its checker on corrupted outputs;
    list the tasks whose reference fails and those whose checker cannot fail. Exits 1 if any.

    The evaluation is `cuset eval`'s (same config keys; robust=true unless compat=true or
    robust=false); resumable: a re-run skips the tasks already checked."""
    from cuset.evaluate import EvalConfig
    from cuset.evaluate.taskcheck import check_tasks

    extra = list(ctx.args) + ([f"execution.backend={backend}"] if backend is not None else [])
    probe = stage_config(ctx, EvalConfig, config, extra)
    cfg = probe if probe.compat else stage_config(ctx, EvalConfig, config, extra, base={"robust": True})
    cfg = dataclasses.replace(cfg, trusted_programs=True)  # the tasks' own references (check_tasks says so too)
    backend_ = cfg.make_backend()  # no GPU, no nvcc or g++, bad backend options: CusetErrors
    # a bad task file, an output dir of other settings: CusetErrors, one line (file:line) each
    result = check_tasks(file, out_dir, cfg, backend=backend_)
    table = Table("id", "task", "kind", "reference", "robust", "corruptions rejected", "verdict",
                  title=f"{len(result.checks)} tasks of {file}")
    for c in result.checks:
        tried = len(c.corruptions)
        style = "red" if c.defects else ""
        table.add_row(str(c.task_id), escape(c.task_name), c.kind, c.reference_status, c.robust_status or "-",
                      f"{tried - len(c.accepted)}/{tried}" if tried else "-", c.verdict, style=style)
    out.print(table)
    for c in result.checks:
        if c.defects:
            out.print(f"[red]{escape(str(c.task_id))} {escape(c.task_name)}[/]: {escape(c.why())}", soft_wrap=True,
                      highlight=False)
    console.print(f"checkers tried now: {result.checked_now}, from earlier runs: {result.resumed}; "
                  f"{result.seconds:.0f} s; json: {result.json_path}  summary: {result.markdown_path}")
    if any(c.defects for c in result.checks):
        raise typer.Exit(1)
