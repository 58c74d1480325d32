"""`cuset report` (tables and figures from evaluation results) and `cuset sweep` (grids of runs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, List, Optional

import typer

from cuset.cli.common import (OVERRIDES, config_argument, console, fail, help_config_option, options_command, out,
                              stage_config)

REPORT_HELP = (
    "Tables and figures from evaluation results: Table 2 (model x method), Table 3 (+ type, #params, average "
    "generated tokens), Table 5 (ablation switches) and Figure 4 (tau, lambda, window curves).\n\n"
    "RESULTS are eval run directories (results.jsonl + summary.json), results JSONL files or summary.json files. "
    "Labels (model, method, type, params, tau, lam, window, conf_mask, cuda_mask, region_weight) come from the "
    "run's metadata, a labels.json next to it, or --label, given once per RESULTS in the same order, e.g. "
    "--label model=Qwen2.5-Coder-7B-Instruct,method=CuSeT,params=7B,type=Code.\n\n"
    "The paper's numbers are shown only as rows whose Source is 'published (paper)'.")

SWEEP_HELP = (
    "Train and evaluate every cell of a grid (e.g. tau, lambda, window, objective), then write a report.\n\n"
    "CONFIG is a YAML SweepConfig (see configs/sweep/); key=value overrides follow it. Resumable: finished cells "
    "are skipped, failed ones are retried.")


@dataclass(frozen=True)
class ReportOptions:
    """The arguments and options of `cuset report` (the command's parameters, one field each)."""

    results: Annotated[List[Path], typer.Argument(help="Eval run directories, results JSONL or summary.json files.")]
    label: Annotated[Optional[List[str]], typer.Option("--label", help="key=value,... labels for one RESULTS argument (repeat once per RESULTS, in order).")] = None
    out_dir: Annotated[Path, typer.Option("--out", help="Output directory for report.md, report.json and PNGs.")] = Path("runs/report")
    published: Annotated[str, typer.Option("--published", help="Reference rows from the paper: matched (models you evaluated), all, none.")] = "matched"
    definition: Annotated[str, typer.Option("--definition", help="Metrics: unbiased (pass@k estimator), compat (official harness), compat_quirk.")] = "unbiased"
    title: Annotated[str, typer.Option("--title", help="Report title.")] = "CuSeT evaluation report"
    compare: Annotated[Optional[List[str]], typer.Option("--compare", help="A:B label selectors, e.g. "
                                                         "method=SFT:method=CuSeT: paired comparison of B - A over the "
                                                         "common tasks (runs matching a selector are its seeds: tasks and runs both random effects); "
                                                         "repeatable. Two RESULTS and no --compare: run 2 vs run 1.")] = None
    task_check: Annotated[Optional[Path], typer.Option("--task-check", help="A `cuset tasks check` result "
                                                       "(task_check.json or its directory): its defective tasks are "
                                                       "excluded or flagged (--defective), and the report says which "
                                                       "and why.")] = None
    defective: Annotated[str, typer.Option("--defective", help="With --task-check: exclude (left out of "
                                           "every number) or flag (counted, listed with their share of function@1).")] = "exclude"


def _sweep_keys():
    from cuset.experiment.sweep import SweepConfig

    return "SweepConfig keys (set in YAML or as key=value)", [(SweepConfig, "")]


def register(root: typer.Typer) -> None:
    @root.command("report", help=REPORT_HELP, no_args_is_help=True)
    @options_command(ReportOptions)
    def report(opts: ReportOptions):
        from cuset.analysis.report import build_report
        from cuset.analysis.results import DEFINITIONS, load_runs
        from cuset.analysis.tables import PUBLISHED_MODES

        published, definition, task_check, defective = opts.published, opts.definition, opts.task_check, opts.defective
        out_dir = opts.out_dir

        if published not in PUBLISHED_MODES:
            fail(f"--published must be one of {', '.join(PUBLISHED_MODES)}, got {published!r}")
        if definition not in DEFINITIONS:
            fail(f"--definition must be one of {', '.join(DEFINITIONS)}, got {definition!r}")
        section, exclude = None, ()
        if task_check is not None:
            from cuset.analysis.defects import MODES
            from cuset.evaluate.taskcheck import load_check

            if defective not in MODES:
                fail(f"--defective must be one of {', '.join(MODES)}, got {defective!r}")
            check = load_check(task_check)   # TaskCheckFileError (a CusetError): one line
            exclude = tuple(check.defective()) if defective == "exclude" else ()
        runs = load_runs(opts.results, opts.label or (), definition=definition,  # ResultsError (a CusetError): one line
                         exclude_tasks=exclude)
        if task_check is not None:
            from cuset.analysis.defects import defects_section

            section = defects_section(check, defective, runs)
        doc = build_report(runs, out_dir, published_mode=published, definition=definition, title=opts.title,
                           compare=opts.compare or (), task_check=section)
        if section is not None:
            console.print(f"{len(section['tasks'])} defective task(s) in {section['file']}: {defective}d "
                          f"(see the report's 'Benchmark defects')")
        _print_table2(doc)
        for cmp in doc["paired"]:
            for row in cmp["rows"]:
                out.print(row["sentence"])
        from cuset.analysis.difficulty import Correlation, correlation_sentence

        for d in doc["difficulty"]:
            corr = Correlation(**d["correlation"]) if d["correlation"] else None
            out.print(f"Run {d['run']} difficulty: " + correlation_sentence(corr, d["correlation_reason"], d["unit"]),
                      soft_wrap=True, highlight=False)
        console.print(f"report: {out_dir / 'report.md'}  json: {out_dir / 'report.json'}  "
                      f"figures: {', '.join(doc['figures'].values()) or 'none'}")

    @root.command("sweep", help=SWEEP_HELP, context_settings=OVERRIDES, no_args_is_help=True)
    def sweep(
        ctx: typer.Context,
        config: Optional[str] = config_argument("SweepConfig (see configs/sweep/)"),
        dry_run: bool = typer.Option(False, "--dry-run", help="List the cells and whether each is done; run nothing."),
        help_config: bool = help_config_option(_sweep_keys),
    ):
        from cuset.experiment.sweep import SweepConfig, plan_cells, run_sweep

        cfg = stage_config(ctx, SweepConfig, config)
        if dry_run:  # a bad grid: SweepError (a CusetError), one line
            for cell, state in plan_cells(cfg):
                out.print(f"{state:8s} {cell.cell_id}  {cell.describe()}")
            return
        result = run_sweep(cfg)
        counts = result["counts"]
        out.print(f"cells: {counts['done']} done ({counts['cached']} from earlier runs), {counts['failed']} failed")
        for f in result["failed"]:
            out.print(f"[red]failed[/] {f['cell_id']}: {f['error']}")
        if result.get("report"):
            console.print(f"report: {result['report']}")
        if counts["failed"]:
            raise typer.Exit(1)


def _print_table2(doc: dict) -> None:
    from rich.table import Table

    from cuset.analysis.tables import MEASURED

    rows = [r for r in doc["table2"] if r["source"] == MEASURED]
    if not rows:
        out.print("[yellow]no run is at a method's default setting; see Table 5 / Figure 4 in the report[/]")
        return
    table = Table(title=f"Pass@k ({doc['metric_definition']['name']}), % of tasks")
    for c in ("#", "model", "method", "P@1 comp", "P@1 func", "P@3 comp", "P@3 func"):
        table.add_column(c, justify="right" if c.startswith("P@") or c == "#" else "left")
    cell = lambda v: "n/a" if v is None else f"{v:.1f}"
    for r in rows:
        table.add_row(str(r["run_number"]), r["model"], r["method"],
                      *(cell(r[k]) for k in ("compile@1", "function@1", "compile@3", "function@3")))
    out.print(table)
