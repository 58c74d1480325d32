"""Helpers every stage command shares: console, logging, config loading, errors."""

from __future__ import annotations

import dataclasses
import inspect
import logging
import typing
from pathlib import Path
from typing import Callable, Optional

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape

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
    console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True, highlight=False)
    raise typer.Exit(code)


def config_argument(what: str, annotated: bool = False) -> Optional[str]:
    """The CONFIG argument every stage command takes the same way: `cuset STAGE [CONFIG] [key=value ...]`.
    `annotated`: for `Annotated[Optional[str], config_argument(...)] = None` (an options_command
    record's field), where the default is the field's own."""
    return typer.Argument(*(() if annotated else (None,)), metavar="CONFIG", show_default=False,
                          help=f"YAML {what}; key=value overrides follow (CONFIG may be left out).")


def help_config_option(sections: Callable[[], tuple[str, list[tuple[type, str]]]]):
    """`--help-config`: print every key of the stage's config (type, default, help) and exit.

    `sections()` returns the table title and `(config class, key prefix)` pairs; it runs only
    when the flag is given (config modules import lazily). Eager, so it works without the
    command's required arguments."""
    def show(value: bool) -> None:
        if value:
            title, parts = sections()
            print_config_help(title, *parts)
            raise typer.Exit()

    return typer.Option(False, "--help-config", callback=show, is_eager=True, expose_value=False,
                        help="List every config key with its type, default and help, then exit.")


def stage_config(ctx: typer.Context, cls: type, config: str | Path | None = None, overrides: list[str] | None = None, base: dict | None = None):
    """Load `cls` from CONFIG plus key=value overrides (the command's extra arguments unless
    `overrides` is given). A CONFIG that holds `=` and is no file is the first override, so
    `cuset STAGE key=value ...` needs no config file.

    A ConfigError (every problem at once) goes up to the root group, which prints it
    (`config_error`) and exits 2.
    """
    extra = list(overrides if overrides is not None else ctx.args)
    if config is not None and "=" in str(config) and not Path(config).exists():
        extra.insert(0, str(config))
        config = None
    return load_config(cls, config, extra, base=base)


def config_error(e: ConfigError) -> "typer.Exit":
    """Print a ConfigError (one line for one problem, else a list) and exit 2."""
    if len(e.errors) == 1:
        console.print(f"[bold red]config error:[/] {escape(e.errors[0])}", soft_wrap=True, highlight=False)
    else:
        console.print(f"[bold red]config error[/] ({len(e.errors)}):")
        for err in e.errors:
            console.print(f"  - {escape(err)}", soft_wrap=True, highlight=False)
    raise typer.Exit(2)


def print_config_help(title: str, *sections: tuple[type, str]) -> None:
    """A table of every config key, its type, default and help: `(cls, key prefix)` per section."""
    from rich.table import Table

    from cuset.config import describe

    table = Table(title=title)
    table.add_column("key", no_wrap=True)  # whole, so it can be copied (and grepped)
    for col in ("type", "default", "help"):
        table.add_column(col, overflow="fold")
    for cls, prefix in sections:
        for key, kind, default, text in describe(cls, prefix):
            table.add_row(escape(key), escape(kind), escape(default), escape(text))
    out.print(table)


def options_command(record: type, **signature_only) -> Callable:
    """Decorator: a Typer command whose command-line parameters are the fields of the frozen
    dataclass `record`, each annotated `Annotated[type, typer.Option(...)]` (or
    typer.Argument), and which receives them as one record: `def command(options)`, or
    `def command(ctx, options)` for a command that reads its extra arguments. Typer reads the
    parameters from the command's signature, which is made from the record's fields (plus
    `ctx`); `signature_only` adds parameters that never reach the command (an eager
    `--help-config` option, expose_value=False). So a command with many options is one
    record, not a function of as many parameters (tests/test_parameter_counts.py)."""
    hints = typing.get_type_hints(record, include_extras=True)
    fields = dataclasses.fields(record)

    def decorate(func: Callable) -> Callable:
        takes_ctx = "ctx" in inspect.signature(func).parameters

        def command(**values):
            ctx = values.pop("ctx", None)
            for name in signature_only:
                values.pop(name, None)
            options = record(**values)
            return func(ctx, options) if takes_ctx else func(options)

        params = [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)] if takes_ctx else []
        for f in fields:
            default = f.default if f.default is not dataclasses.MISSING else inspect.Parameter.empty
            params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                            annotation=hints[f.name]))
        for name, info in signature_only.items():
            params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=bool))
        command.__signature__ = inspect.Signature(params)
        command.__name__, command.__qualname__, command.__doc__ = func.__name__, func.__qualname__, func.__doc__
        command.__module__ = func.__module__
        return command

    return decorate
