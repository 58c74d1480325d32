"""`cuset cpu-fuzz`: differential fuzzing of the CPU backend's fast paths against its fibers."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from cuset.cli.common import console, out


def register(root: typer.Typer) -> None:
    root.command("cpu-fuzz")(cpu_fuzz)


def cpu_fuzz(
    seed: int = typer.Option(1, "--seed", help="Seed of the kernels (kernel i of a seed is always the same kernel)."),
    kernels: int = typer.Option(200, "--kernels", min=1, help="Kernels to generate and check."),
    out_dir: Path = typer.Option(..., "--out", help="Run directory: state.json (resumed when run again with the same "
                                 "seed and --per-program), summary.json, repro/ (one minimised .cu + .json per "
                                 "disagreement)."),
    per_program: int = typer.Option(25, "--per-program", min=1, help="Kernels compiled together into one program."),
    jobs: int = typer.Option(1, "--jobs", min=1, help="Programs checked at a time."),
    minimise_budget: int = typer.Option(40, "--minimise-budget", min=0, help="Checks spent shrinking each "
                                        "disagreement (0: save it as generated)."),
    stop_at_first: bool = typer.Option(False, "--stop-at-first", help="Stop after the first disagreement."),
):
    """Fuzz the CPU backend: random CUDA kernels on its fast paths and order proof vs the fibers in every order.

    Every kernel whose verdict or output bytes differ is minimised into a reproducer; exit code 1 when one does."""
    from cuset.execute.cpu.fuzz.campaign import run_campaign
    from cuset.io import atomic_write_json

    def progress(tally) -> None:
        console.print(f"{tally.kernels} kernels, {len(tally.disagreements)} disagreement(s), "
                      f"{tally.seconds:.0f} s", highlight=False)

    tally = run_campaign(seed, kernels, out_dir, per_program=per_program, jobs=jobs,
                         minimise_budget=minimise_budget, progress=progress,
                         stop_when=(lambda t: bool(t.disagreements)) if stop_at_first else None)
    summary = tally.summary()
    atomic_write_json(out_dir / "summary.json", summary, indent=1)
    shown = {k: v for k, v in summary.items() if k not in ("disagreement_list", "features")}
    out.print_json(json.dumps(shown))
    for d in summary["disagreement_list"]:
        console.print(f"disagreement ({d['what']}): fibers {d['reference']}, default {d['default']}: "
                      f"{d['reproducer']}", highlight=False, soft_wrap=True)
    if summary["disagreements"] or summary["compile_errors"]:
        raise typer.Exit(1)
