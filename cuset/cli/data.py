"""`cuset data`: curate datasets: build (validated SFT data), synth (task factory), stats."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cuset.errors import CusetError
from cuset.cli.common import OVERRIDES, config_argument, console, fail, help_config_option, out, stage_config

app = typer.Typer(help="Curate datasets: build (validated SFT data), synth (task factory), stats.", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="data")


def _build_keys():
    from cuset.curation.config import DataBuildConfig, SourceConfig

    return "DataBuildConfig keys (set in YAML or as key=value)", [(DataBuildConfig, ""), (SourceConfig, "sources[].")]


@app.command("build", context_settings=OVERRIDES)
def build(
    ctx: typer.Context,
    config: Optional[str] = config_argument("DataBuildConfig (see configs/data/)"),
    help_config: bool = help_config_option(_build_keys),
):
    """Sources -> LLM task synthesis -> validation -> dedup/decontamination -> train.jsonl + manifest.

    Re-running with the same run directory resumes: finished items are not redone."""
    from cuset.curation.config import DataBuildConfig

    if config is None and not ctx.args:
        fail("give a config file: cuset data build CONFIG.yaml [key=value ...] (--help-config lists the keys)")
    cfg = stage_config(ctx, DataBuildConfig, config)
    from cuset.curation.build import build_dataset

    try:
        result = build_dataset(cfg)
    except CusetError as e:  # said with where the finished items are, which a rerun resumes from
        fail(f"{e}\n(finished items are kept in {cfg.out_dir}; the next run resumes from them)")
    _print_funnel(result.manifest)
    out.print(f"{result.manifest['stages']['output']['tasks']} tasks -> {result.train_path}", soft_wrap=True, highlight=False)
    console.print(f"manifest: {result.run_dir / 'manifest.json'}   summary: {result.run_dir / 'summary.md'}",
                  soft_wrap=True, highlight=False)
    if not result.manifest["complete"]:
        console.print("[yellow]incomplete: the LLM budget ran out; raise llm.max_requests / llm.max_total_tokens and run again[/]")


@app.command("synth")
def synth(
    n: int = typer.Option(..., "--n", min=1, help="Number of tasks."),
    seed: int = typer.Option(0, "--seed", help="Same seed (and options), same file."),
    out_file: Path = typer.Option(..., "--out", help="Output JSONL (CUDABench format)."),
    split: Optional[str] = typer.Option(None, "--split", help="train or eval: one side of a held-out partition (disjoint for the same seed)."),
    holdout: Optional[str] = typer.Option(None, "--holdout", help="What --split holds out: params (sizes/variants) or families (whole families)."),
):
    """Deterministic task factory: CUDABench-format tasks with reference programs, no LLM needed."""
    from cuset.curation.synth import synthesize
    from cuset.tasks import save_tasks

    if split not in (None, "train", "eval"):
        fail(f"--split must be train or eval, not {split!r}")
    if holdout not in (None, "params", "families"):
        fail(f"--holdout must be params or families, not {holdout!r}")
    options = {k: v for k, v in (("split", split), ("holdout", holdout)) if v is not None}
    tasks = synthesize(n, seed, **options)  # SynthError (a CusetError): more tasks than these options allow
    count = save_tasks(tasks, out_file)
    out.print(f"{count} tasks -> {out_file}", soft_wrap=True, highlight=False)


@app.command("stats")
def stats(
    file: Path = typer.Argument(..., help="Task JSONL, or a `cuset data build` run directory (uses its train.jsonl and manifest.json)."),
    manifest: Optional[Path] = typer.Option(None, "--manifest", help="Build manifest for the rejection-reason table and plot."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Where the PNGs go (default: <run dir>/stats or <file stem>_stats)."),
    tokenizer: Optional[str] = typer.Option(None, "--tokenizer", help="Local Hugging Face tokenizer directory; default counts lexer tokens."),
    level: int = typer.Option(1, "--level", min=1, max=3, help="Prompt level whose prompt is measured."),
    reasoning: Optional[Path] = typer.Option(None, "--reasoning", help="Reasoning manifest (5_reasoning.jsonl) for the "
                                             "difficulty analysis; default: the one in the run directory, if any."),
):
    """Tables (token lengths, families, dtypes, rejection reasons, task difficulty) and PNG plots.

    With a reasoning manifest: pass rate vs mean reasoning length of passing answers per task
    and family (ConCuR), their Spearman correlation, difficulty.png/.json/.md."""
    import json

    from cuset.analysis.difficulty import find_reasoning_manifest
    from cuset.curation import stats as S
    from cuset.tasks import load_tasks

    run_dir = None
    if file.is_dir():
        run_dir = file
        file = run_dir / "train.jsonl"
        if manifest is None and (run_dir / "manifest.json").exists():
            manifest = run_dir / "manifest.json"
        out_dir = out_dir or run_dir / "stats"
    out_dir = out_dir or file.with_name(f"{file.stem}_stats")
    if not file.exists():
        fail(f"no such task file: {file}")
    if reasoning is not None and not reasoning.is_file():
        fail(f"no such reasoning manifest: {reasoning} (written by `cuset data build` with reasoning as "
             "<run>/5_reasoning.jsonl)")
    tasks, report = load_tasks(file, strict=False)
    if report.total_skipped:
        console.print(f"[yellow]{report.total_skipped} invalid record(s) left out; see `cuset tasks validate {file}`[/]")
    manifest_data = None
    if manifest is not None:
        try:
            manifest_data = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            fail(f"cannot read manifest {manifest}: {e}")
    counter = S.hf_token_counter(tokenizer) if tokenizer else S.lexer_token_counter()  # TokenizerUnavailable: one line
    st = S.compute_stats(tasks, counter, level)
    for table in S.tables(st, manifest_data):
        out.print(table)
    for path in S.write_plots(st, out_dir, manifest_data):
        console.print(f"plot: {path}", soft_wrap=True, highlight=False)
    reasoning = reasoning or find_reasoning_manifest(run_dir or (manifest.parent if manifest else None))
    if reasoning is not None:
        _print_difficulty(reasoning, out_dir)


def _print_difficulty(reasoning: Path, out_dir: Path) -> None:
    from cuset.analysis.difficulty import correlation_sentence, difficulty_stats, rich_tables

    # ReasoningManifestError (a CusetError) names file:line, or a task under two families
    result, unit, paths = difficulty_stats(reasoning, out_dir)
    if not result.n_attempts:
        console.print(f"[yellow]{reasoning}: no candidates, so no difficulty analysis[/]", soft_wrap=True, highlight=False)
        return
    for table in rich_tables(result, unit):
        out.print(table)
    out.print(correlation_sentence(result.correlation, result.correlation_reason, unit), soft_wrap=True, highlight=False)
    out.print(correlation_sentence(result.family_correlation, result.family_correlation_reason, unit, "families"),
              soft_wrap=True, highlight=False)
    console.print(f"difficulty: {', '.join(str(p) for p in paths)}", soft_wrap=True, highlight=False)


def _print_funnel(manifest: dict) -> None:
    from rich.table import Table

    from cuset.curation.summary import STAGE_TITLES

    st = manifest["stages"]
    table = Table("stage", "in", "out", "removed, by reason", title="cuset data build")
    for name, title in STAGE_TITLES:
        s = st[name]
        if name == "sources":
            n_in, n_out, why = s["seen"], s["candidates"], s["skipped"]
        else:
            n_in, n_out = s["in"], s["out"]
            why = {**s.get("rejected", {}), **s.get("removed", {}), **{f"{k} (deferred)": v for k, v in s.get("deferred", {}).items()}}
        table.add_row(title, str(n_in), str(n_out), ", ".join(f"{k}={v}" for k, v in why.items()) or "-")
    console.print(table)
