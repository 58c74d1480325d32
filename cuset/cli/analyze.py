"""`cuset analyze`: token-confidence and region analyses (paper section 3)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer

from cuset.cli.common import console, fail, options_command, out

CONFIDENCE_HELP = (
    "Teacher-forced token confidence of CUDA-sensitive vs neutral tokens (Figures 1 and 2).\n\n"
    "Scores every response of --data with --model (batched forward passes, CPU or GPU), labels each response "
    "token CUDA-sensitive (it overlaps a span of --sensitive-kinds) or neutral, and writes into --out: "
    "scores.jsonl, confidence.json, confidence.md, fig1_confidence_density.png, fig2b_window_curve.png and "
    "fig2c_window_tokens.png.\n\n"
    "Re-analyse saved scores without the model: --scores OUT/scores.jsonl.")


@dataclass(frozen=True)
class ConfidenceOptions:
    """The options of `cuset analyze confidence` (the command's parameters, one field each)."""

    model: Annotated[Optional[str], typer.Option("--model", help="Model directory or hub name (a LoRA adapter directory is merged onto its base).")] = None
    data: Annotated[Optional[Path], typer.Option("--data", help="JSONL of CUDABench tasks, chat messages, prompt/completion or alpaca records.")] = None
    out_dir: Annotated[Path, typer.Option("--out", help="Output directory.")] = Path("runs/confidence")
    window: Annotated[int, typer.Option("--window", help="Sliding-window size in tokens (the paper's Figure 2 uses 64; training uses 256).")] = 64
    window_mode: Annotated[str, typer.Option("--window-mode", help="full: every run of `window` tokens, stride 1 (Figure 2b); centered: the paper's eq. 5 windows (one per token, clipped).")] = "full"
    sample: Annotated[Optional[int], typer.Option("--sample", help="0-based index (among scored samples) of the sample drawn in Figure 2; default: the one with the lowest window.")] = None
    batch_size: Annotated[int, typer.Option("--batch-size", help="Samples per forward pass.")] = 4
    device: Annotated[str, typer.Option("--device", help="auto, cpu, cuda, cuda:1, ...")] = "auto"
    dtype: Annotated[str, typer.Option("--dtype", help="Model weights: auto (bfloat16 on GPU, float32 on CPU), float32, bfloat16, float16.")] = "auto"
    max_length: Annotated[int, typer.Option("--max-length", help="Tokens per sample (prompt + response); longer samples are truncated.")] = 4096
    limit: Annotated[Optional[int], typer.Option("--limit", help="Score only the first N usable records.")] = None
    data_format: Annotated[str, typer.Option("--format", help="Record format: auto, cudabench, messages, prompt_completion, alpaca.")] = "auto"
    prompt_level: Annotated[int, typer.Option("--prompt-level", help="CUDABench prompt level rendered as the prompt (1, 2 or 3).")] = 1
    sensitive_kinds: Annotated[str, typer.Option("--sensitive-kinds", help="Comma-separated span kinds that make a token CUDA-sensitive.")] = "kernel_body,launch_config"
    scores: Annotated[Optional[Path], typer.Option("--scores", help="Analyse a saved scores.jsonl instead of running a model.")] = None
    strict: Annotated[bool, typer.Option("--strict", help="Stop at the first bad record instead of skipping and counting it.")] = False
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar.")] = True


def register(root: typer.Typer) -> None:
    app = typer.Typer(name="analyze", help="Token-confidence and region analyses (paper section 3).",
                      no_args_is_help=True, pretty_exceptions_enable=False)

    @app.command("confidence", help=CONFIDENCE_HELP)
    @options_command(ConfidenceOptions)
    def confidence(opts: ConfidenceOptions):
        from cuset.analysis.confidence_report import analyze_confidence, load_scores, save_scores
        from cuset.analysis.windows import WINDOW_MODES
        from cuset.spans import ALL_KINDS

        kinds = tuple(k.strip() for k in opts.sensitive_kinds.split(",") if k.strip())
        unknown = [k for k in kinds if k not in ALL_KINDS]
        if unknown or not kinds:
            fail(f"--sensitive-kinds: unknown kind(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(ALL_KINDS)}")
        if opts.window < 1:
            fail(f"--window must be >= 1, got {opts.window}")
        if opts.window_mode not in WINDOW_MODES:
            fail(f"--window-mode must be one of {', '.join(WINDOW_MODES)}, got {opts.window_mode!r}")
        skipped, messages = {}, []
        if opts.scores is not None:
            if opts.model or opts.data:
                fail("--scores analyses saved scores: leave out --model and --data")
            samples = load_scores(opts.scores)  # no file: MissingPath; a bad line: ScoresError or JsonlError (CusetErrors)
            model_label, data_label = f"scores from {opts.scores}", str(opts.scores)
        else:
            if not opts.model or opts.data is None:
                fail("give --model and --data (or --scores FILE to re-analyse saved scores)")
            samples, skipped, messages = _score(opts)
            save_scores(opts.out_dir / "scores.jsonl", samples)
            model_label, data_label = opts.model, str(opts.data)
        # nothing to analyse, or --sample out of range: ScoresError (a CusetError)
        result = analyze_confidence(samples, opts.out_dir, window=opts.window, mode=opts.window_mode, sensitive_kinds=kinds,
                                    categories=ALL_KINDS, sample=opts.sample, model_label=model_label,
                                    data_label=data_label, skipped=skipped, skipped_messages=messages)
        _print_summary(result, opts.out_dir)


    root.add_typer(app, name="analyze")


def _score(opts: ConfidenceOptions):
    """Score --data with --model as `opts` says: (samples, skipped counts, messages of skipped records)."""
    from cuset.experiment.scoring import encode_examples, load_model, resolve_device, score_batches
    from cuset.tasks.io import Problem
    from cuset.train.data import FORMATS, RecordOptions, read_examples

    data, model = opts.data, opts.model
    if not data.exists():
        fail(f"{data}: no such data file")
    if opts.data_format not in FORMATS:
        fail(f"--format must be one of {', '.join(FORMATS)}, got {opts.data_format!r}")
    if opts.prompt_level not in (1, 2, 3):
        fail(f"--prompt-level must be 1, 2 or 3, got {opts.prompt_level}")
    if opts.batch_size < 1 or opts.max_length < 2:
        fail("--batch-size must be >= 1 and --max-length >= 2")
    device = resolve_device(opts.device)  # ModelLoadError (a CusetError): no GPU, bad dtype, unloadable model
    console.print(f"loading {model} on {device} ...")
    lm, tokenizer = load_model(model, device=device, dtype=opts.dtype)  # MissingPath or ModelLoadError (CusetErrors)
    items = read_examples(data, RecordOptions(format=opts.data_format, prompt_level=opts.prompt_level))
    if opts.strict:
        items = list(items)
        bad = next((i for i in items if isinstance(i, Problem)), None)
        if bad is not None:
            fail(f"{bad.source}:{bad.line}: {bad.field}: {bad.message} (drop --strict to skip bad records)")
    encoded, skipped, messages = encode_examples(tokenizer, items, max_length=opts.max_length, limit=opts.limit)
    if opts.strict and messages:
        fail(f"{messages[0]} (drop --strict to skip such records)")
    if not encoded:
        fail(f"{data}: no usable record ({', '.join(f'{k}={v}' for k, v in skipped.items()) or 'empty file'})")
    samples = score_batches(lm, tokenizer, encoded, batch_size=opts.batch_size, device=device, progress=opts.progress)
    return samples, dict(skipped), messages


def _print_summary(result: dict, out_dir: Path) -> None:
    ks, w = result["ks"], result["windows"]
    g = result["groups"]
    pct = lambda x: "n/a" if x is None else f"{100 * x:.2f}%"
    out.print(f"scored {result['n_samples']} samples: {ks['n_sensitive']:,} CUDA-sensitive tokens "
              f"(mean confidence {g['cuda_sensitive']['mean']:.4f}), {ks['n_neutral']:,} neutral "
              f"(mean {g['cuda_neutral']['mean']:.4f})")
    out.print(f"KS test: D = {ks['statistic']:.4f}, p = {ks['pvalue']:.3g}")
    out.print(f"samples with >= 1 low-confidence window: {pct(w['share_samples_with_low_window'])}; "
              f"low windows overlapping CUDA-sensitive tokens: {pct(w['share_low_windows_overlapping_sensitive'])} "
              f"(base rate over all windows {pct(w['share_windows_overlapping_sensitive'])})")
    if result["skipped"]:
        out.print(f"[yellow]skipped: {', '.join(f'{k}={v}' for k, v in sorted(result['skipped'].items()))}[/]")
    console.print(f"report: {out_dir / 'confidence.md'}  json: {out_dir / 'confidence.json'}")
