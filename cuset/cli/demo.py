"""`cuset demo`: the whole method end to end on a CPU, in minutes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer

from cuset.cli.common import (OVERRIDES, config_argument, console, help_config_option, options_command, out,
                              stage_config)


def _keys():
    from cuset.demo.config import FAST, REGIME, STUDY, DemoConfig

    return ("DemoConfig keys (key=value; --fast changes " + ", ".join(FAST) + "; --study changes " + ", ".join(STUDY)
            + "; --regime changes " + ", ".join(REGIME) + ")",
            [(DemoConfig, "")])


@dataclass(frozen=True)
class DemoOptions:
    """The CONFIG argument and the options of `cuset demo` (the command's parameters, one field each)."""

    config: Annotated[Optional[str], config_argument("DemoConfig", annotated=True)] = None
    fast: Annotated[bool, typer.Option("--fast", help="A few-minute variant (fewer tasks, steps and tokens).")] = False
    study: Annotated[bool, typer.Option("--study", help="The powered variant: a base pretrained longer on more "
                                        "instruction pairs, 64 evaluation tasks, 2 seeds of SFT, CuSeT and DFT (500 steps "
                                        "each), paired comparisons with intervals (about 55 minutes on 2 cores).")] = False
    regime: Annotated[bool, typer.Option("--regime", help="The base-strength map: the study's settings on bases "
                                         "warmed up for each of regime_levels steps (sft, cuset, cuset:noconf:noregion, "
                                         "cuset:wnorm; one seed), a table and figure of function Pass@1 minus SFT against "
                                         "base NLL (<out>/regime.md). With --fast: the same machinery in about a minute.")] = False
    calibrate: Annotated[Optional[str], typer.Option("--calibrate", help="Run no fine-tuning: one warm-up of this "
                                                     "config's base that saves it at each of these comma-separated steps "
                                                     "(e.g. 10,20,40,80), each scored on the fine-tuning set (NLL, tokens "
                                                     "at p <= tau, regime): which warmup_steps / regime_levels give weak, "
                                                     "mid and strong bases (<out>/calibration.md). Combines with --fast, "
                                                     "--study and --regime (their configs).")] = None
    map_only: Annotated[bool, typer.Option("--map-only", help="With --regime: run nothing, write regime.md/json/png "
                                           "from the levels already finished under --out (levels run separately or with "
                                           "different arms).")] = False
    out_dir: Annotated[Optional[Path], typer.Option("--out", help="Run directory (default runs/demo-<timestamp>); "
                                                    "an existing one is resumed.")] = None
    report_from: Annotated[Optional[Path], typer.Option("--report-from", help="Run nothing: recompute the "
                                                        "intervals and comparisons of a demo/study report.json from the "
                                                        "per-task scores it holds and rewrite report.json/report.md beside it.")] = None


def register(root: typer.Typer) -> None:
    @root.command("demo", context_settings=OVERRIDES)
    @options_command(DemoOptions, help_config=help_config_option(_keys))
    def demo(ctx: typer.Context, opts: DemoOptions):
        """Synthesise tasks, build and pretrain a small base model on other families, fine-tune it with
        SFT and CuSeT, generate, evaluate (nvcc + CPU backend) and write runs/demo-*/report.md."""
        from dataclasses import replace

        from cuset.demo.config import FAST, REGIME, REGIME_FAST, STUDY, DemoConfig
        from cuset.demo.run import run_demo

        fast, study, regime, out_dir, report_from = opts.fast, opts.study, opts.regime, opts.out_dir, opts.report_from
        if report_from is not None:
            from cuset.demo.report import report_from as rewrite

            report = rewrite(report_from)
            out.print(report.read_text(), markup=False, highlight=False)
            console.print(f"[bold green]report:[/] {report}")
            return
        if study and (fast or regime):
            raise typer.BadParameter("--study is a preset of its own: drop --fast/--regime (key=value overrides "
                                     "still apply)")
        base = (REGIME_FAST if fast else REGIME) if regime else FAST if fast else STUDY if study else None
        cfg = stage_config(ctx, DemoConfig, opts.config, base=base)
        if out_dir is not None:
            cfg = replace(cfg, out=str(out_dir))
        if opts.map_only:
            if not regime or out_dir is None:
                raise typer.BadParameter("--map-only writes the map of an existing --regime run: give --regime and "
                                         "--out DIR")
            from cuset.demo.regime import map_from_levels

            report = map_from_levels(out_dir, gate=(cfg.gate_compile, cfg.gate_function))
            out.print(report.read_text(), markup=False, highlight=False)
            console.print(f"[bold green]report:[/] {report}")
            return
        if opts.calibrate is not None:
            from cuset.demo.regime import calibrate as run_calibration

            try:
                steps = [int(x) for x in opts.calibrate.split(",") if x.strip()]
                if not steps or min(steps) < 1:
                    raise ValueError
            except ValueError:
                raise typer.BadParameter(f"--calibrate takes comma-separated warm-up steps >= 1, e.g. 10,20,40; got "
                                         f"{opts.calibrate!r}") from None
            report = run_calibration(cfg, steps)
        elif regime:
            from cuset.demo.regime import run_regime

            report = run_regime(cfg)
        else:
            report = run_demo(cfg)
        out.print(report.read_text(), markup=False, highlight=False)
        console.print(f"[bold green]report:[/] {report}")
