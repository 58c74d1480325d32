"""Helpers every stage command shares: console, logging, config loading, errors."""

from __future__ import annotations

import logging
from pathlib import Path

import typer
from rich.console import Console
from rich.logging import RichHandler

from cuset.config import ConfigError, load_config
from cuset.progress import console  # stderr: errors, logging and progress bars share it

out = Console()  # stdout, for results meant to be piped

# Stage commands accept key=value overrides after their options.
OVERRIDES = {"allow_extra_args": True, "ignore_unknown_options": True}


def setup_logging(verbose: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(message)s", datefmt="[%X]",
        handlers=[RichHandler(console=console, show_path=False, rich_tracebacks=False)],
        force=True,
    )


def fail(message: str, code: int = 2) -> "typer.Exit":
    console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def global_config(ctx: typer.Context) -> Path | None:
    obj = ctx.find_root().obj or {}
    return obj.get("config")


def stage_config(ctx: typer.Context, cls: type, config: Path | None = None, overrides: list[str] | None = None, base: dict | None = None):
    """Load `cls` from the stage's --config (or the global one) plus key=value overrides.

    Prints every config error at once and exits 2 instead of a traceback.
    """
    path = config or global_config(ctx)
    extra = list(overrides if overrides is not None else ctx.args)
    try:
        return load_config(cls, path, extra, base=base)
    except ConfigError as e:
        console.print(f"[bold red]config error[/] ({len(e.errors)}):")
        for err in e.errors:
            console.print(f"  - {err}")
        raise typer.Exit(2)


def print_config_help(title: str, *sections: tuple[type, str]) -> None:
    """A table of every config key, its default and help: `(cls, key prefix)` per section."""
    from rich.table import Table

    from cuset.config import describe

    table = Table(title=title)
    for col in ("key", "default", "help"):
        table.add_column(col, overflow="fold")
    for cls, prefix in sections:
        for key, default, text in describe(cls, prefix):
            table.add_row(key, default, text)
    out.print(table)
