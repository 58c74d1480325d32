"""`cuset analyze`: token-confidence and region analyses (paper section 3)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cuset.cli.common import console, fail, out

CONFIDENCE_HELP = (
    "Teacher-forced token confidence of CUDA-sensitive vs neutral tokens (Figures 1 and 2).\n\n"
    "Scores every response of --data with --model (batched forward passes, CPU or GPU), labels each response "
    "token CUDA-sensitive (it overlaps a span of --sensitive-kinds) or neutral, and writes into --out: "
    "scores.jsonl, confidence.json, confidence.md, fig1_confidence_density.png, fig2b_window_curve.png and "
    "fig2c_window_tokens.png.\n\n"
    "Re-analyse saved scores without the model: --scores OUT/scores.jsonl.")


def register(root: typer.Typer) -> None:
    app = typer.Typer(name="analyze", help="Token-confidence and region analyses (paper section 3).",
                      no_args_is_help=True, pretty_exceptions_enable=False)

    @app.command("confidence", help=CONFIDENCE_HELP)
    def confidence(
        model: Optional[str] = typer.Option(None, "--model", help="Model directory or hub name (a LoRA adapter directory is merged onto its base)."),
        data: Optional[Path] = typer.Option(None, "--data", help="JSONL of CUDABench tasks, chat messages, prompt/completion or alpaca records."),
        out_dir: Path = typer.Option(Path("runs/confidence"), "--out", help="Output directory."),
        window: int = typer.Option(64, "--window", help="Sliding-window size in tokens (the paper's Figure 2 uses 64; training uses 256)."),
        window_mode: str = typer.Option("full", "--window-mode", help="full: every run of `window` tokens, stride 1 (Figure 2b); centered: the paper's eq. 5 windows (one per token, clipped)."),
        sample: Optional[int] = typer.Option(None, "--sample", help="0-based index (among scored samples) of the sample drawn in Figure 2; default: the one with the lowest window."),
        batch_size: int = typer.Option(4, "--batch-size", help="Samples per forward pass."),
        device: str = typer.Option("auto", "--device", help="auto, cpu, cuda, cuda:1, ..."),
        dtype: str = typer.Option("auto", "--dtype", help="Model weights: auto (bfloat16 on GPU, float32 on CPU), float32, bfloat16, float16."),
        max_length: int = typer.Option(4096, "--max-length", help="Tokens per sample (prompt + response); longer samples are truncated."),
        limit: Optional[int] = typer.Option(None, "--limit", help="Score only the first N usable records."),
        data_format: str = typer.Option("auto", "--format", help="Record format: auto, cudabench, messages, prompt_completion, alpaca."),
        prompt_level: int = typer.Option(1, "--prompt-level", help="CUDABench prompt level rendered as the prompt (1, 2 or 3)."),
        sensitive_kinds: str = typer.Option("kernel_body,launch_config", "--sensitive-kinds", help="Comma-separated span kinds that make a token CUDA-sensitive."),
        scores: Optional[Path] = typer.Option(None, "--scores", help="Analyse a saved scores.jsonl instead of running a model."),
        strict: bool = typer.Option(False, "--strict", help="Stop at the first bad record instead of skipping and counting it."),
        progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    ):
        from cuset.analysis.confidence_report import analyze_confidence, load_scores, save_scores
        from cuset.analysis.windows import WINDOW_MODES
        from cuset.spans import ALL_KINDS

        kinds = tuple(k.strip() for k in sensitive_kinds.split(",") if k.strip())
        unknown = [k for k in kinds if k not in ALL_KINDS]
        if unknown or not kinds:
            fail(f"--sensitive-kinds: unknown kind(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(ALL_KINDS)}")
        if window < 1:
            fail(f"--window must be >= 1, got {window}")
        if window_mode not in WINDOW_MODES:
            fail(f"--window-mode must be one of {', '.join(WINDOW_MODES)}, got {window_mode!r}")
        skipped, messages = {}, []
        if scores is not None:
            if model or data:
                fail("--scores analyses saved scores: leave out --model and --data")
            samples = load_scores(scores)  # no file: MissingPath; a bad line: ScoresError or JsonlError (CusetErrors)
            model_label, data_label = f"scores from {scores}", str(scores)
        else:
            if not model or data is None:
                fail("give --model and --data (or --scores FILE to re-analyse saved scores)")
            samples, skipped, messages = _score(model, data, max_length=max_length, batch_size=batch_size, device=device,
                                                dtype=dtype, limit=limit, data_format=data_format,
                                                prompt_level=prompt_level, strict=strict, progress=progress)
            save_scores(out_dir / "scores.jsonl", samples)
            model_label, data_label = model, str(data)
        # nothing to analyse, or --sample out of range: ScoresError (a CusetError)
        result = analyze_confidence(samples, out_dir, window=window, mode=window_mode, sensitive_kinds=kinds,
                                    categories=ALL_KINDS, sample=sample, model_label=model_label,
                                    data_label=data_label, skipped=skipped, skipped_messages=messages)
        _print_summary(result, out_dir)


    root.add_typer(app, name="analyze")


def _score(model: str, data: Path, *, max_length, batch_size, device, dtype, limit, data_format, prompt_level, strict, progress):
    from cuset.experiment.scoring import encode_examples, load_model, resolve_device, score_batches
    from cuset.tasks.io import Problem
    from cuset.train.data import FORMATS, RecordOptions, read_examples

    if not data.exists():
        fail(f"{data}: no such data file")
    if data_format not in FORMATS:
        fail(f"--format must be one of {', '.join(FORMATS)}, got {data_format!r}")
    if prompt_level not in (1, 2, 3):
        fail(f"--prompt-level must be 1, 2 or 3, got {prompt_level}")
    if batch_size < 1 or max_length < 2:
        fail("--batch-size must be >= 1 and --max-length >= 2")
    device = resolve_device(device)  # ModelLoadError (a CusetError): no GPU, bad dtype, unloadable model
    console.print(f"loading {model} on {device} ...")
    lm, tokenizer = load_model(model, device=device, dtype=dtype)  # MissingPath or ModelLoadError (CusetErrors)
    items = read_examples(data, RecordOptions(format=data_format, prompt_level=prompt_level))
    if strict:
        items = list(items)
        bad = next((i for i in items if isinstance(i, Problem)), None)
        if bad is not None:
            fail(f"{bad.source}:{bad.line}: {bad.field}: {bad.message} (drop --strict to skip bad records)")
    encoded, skipped, messages = encode_examples(tokenizer, items, max_length=max_length, limit=limit)
    if strict and messages:
        fail(f"{messages[0]} (drop --strict to skip such records)")
    if not encoded:
        fail(f"{data}: no usable record ({', '.join(f'{k}={v}' for k, v in skipped.items()) or 'empty file'})")
    samples = score_batches(lm, tokenizer, encoded, batch_size=batch_size, device=device, progress=progress)
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
