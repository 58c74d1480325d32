"""`cuset`: one subcommand per stage, in the order data flows."""

from __future__ import annotations

import typer
from typer.core import TyperGroup

from cuset import __version__
from cuset.cli import analyze, carry, data, demo, evaluate, fuzz, generate, inspect, report, tasks, train, view
from cuset.cli.common import config_error, fail, setup_logging
from cuset.config import ConfigError
from cuset.errors import CusetError

# The order of the pipeline, which is the order `--help` lists the stages in.
STAGES = ("tasks", "data", "inspect", "train", "sweep", "generate", "eval", "analyze", "report", "view", "demo", "carry")


class _PipelineOrder(TyperGroup):
    """Lists subcommands in data-flow order (Typer puts plain commands before command groups),
    and turns a CusetError raised anywhere below into one line (a ConfigError: one line per
    problem) and exit code 2; any other exception is a bug and keeps its traceback."""

    def list_commands(self, ctx):
        names = super().list_commands(ctx)
        return sorted(names, key=lambda n: STAGES.index(n) if n in STAGES else len(STAGES))

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except ConfigError as error:
            config_error(error)
        except CusetError as error:
            fail(str(error))


app = typer.Typer(
    name="cuset",
    cls=_PipelineOrder,
    help="CUDA-Sensitive Instruction Tuning: tasks -> spans -> losses -> train -> generate -> execute -> evaluate -> analysis.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _version(value: bool):
    if value:
        typer.echo(f"cuset {__version__}")
        raise typer.Exit()


@app.callback()
def main_callback(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Debug logging."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
):
    setup_logging(verbose)


for module in (tasks, data, inspect, train, generate, evaluate, analyze, report, view, demo, carry, fuzz):
    module.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
