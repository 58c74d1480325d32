"""`cuset inspect`: Show a sample's tokens coloured by supervision weight and span kind.

The sample is tokenised exactly as training does it (`cuset.train.data.tokenize_example`
and `response_spans`), so what is shown is what the CuSeT loss sees: which tokens are
supervised, which are in the CUDA mask (kernel body / launch configuration), and the span
kinds of every token. With `--model`, token confidences give the full hybrid weight
1[p > tau] + lambda * 1[CUDA] and the sample weight w_n = 1 - min window confidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer

from cuset.cli.common import console, fail, options_command, out
from cuset.io import atomic_write_text

RECORD_SUFFIXES = (".jsonl", ".json")


def register(root: typer.Typer) -> None:
    root.command("inspect")(inspect_sample)


@dataclass(frozen=True)
class InspectOptions:
    """The arguments and options of `cuset inspect` (the command's parameters, one field each)."""

    file: Annotated[Path, typer.Argument(help="A JSONL of training records (CUDABench tasks, chat messages, "
                                         "prompt/completion, alpaca), or any text file (.cu, .md, ...) taken as the response.")]
    index: Annotated[int, typer.Option("--index", "-i", min=0, help="Which record of a JSONL file (0-based, blank lines skipped).")] = 0
    tokenizer: Annotated[Optional[str], typer.Option("--tokenizer", "-t", help="Tokenizer directory (or hub name when online); "
                                                     "without one (and without --model) the response is shown cut at span boundaries.")] = None
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Causal LM (directory, adapter directory or hub name) "
                                                 "whose token confidences give the confidence mask and the sample weight.")] = None
    prompt: Annotated[str, typer.Option(help="User prompt for a plain text FILE (JSONL records carry their own).")] = "Write the CUDA program."
    format: Annotated[str, typer.Option("--format", help="Record format: auto, cudabench, messages, prompt_completion, alpaca.")] = "auto"
    level: Annotated[int, typer.Option("--level", min=1, max=3, help="CUDABench prompt level rendered as the prompt.")] = 1
    max_length: Annotated[int, typer.Option("--max-length", min=2, help="Tokens kept, as in training (the rest is shown as cut).")] = 4096
    lam: Annotated[float, typer.Option("--lambda", min=0.0, help="CUDA-mask weight lambda.")] = 1.0
    tau: Annotated[float, typer.Option("--tau", min=0.0, max=1.0, help="Confidence-mask threshold tau (with --model).")] = 0.1
    window: Annotated[int, typer.Option("--window", min=1, help="Sliding window l for the sample weight (with --model).")] = 256
    html: Annotated[Optional[Path], typer.Option("--html", help="Where to write the HTML page (default: inspect-<file>-<index>.html).")] = None
    no_html: Annotated[bool, typer.Option("--no-html", help="Only print to the terminal.")] = False
    device: Annotated[str, typer.Option(help="Device for --model: cpu, cuda, auto.")] = "cpu"


@options_command(InspectOptions)
def inspect_sample(opts: InspectOptions):
    """Show a sample's tokens coloured by supervision weight and span kind (terminal and HTML)."""
    from cuset.spans.view import SampleView, character_cells, to_html, to_rich

    file, index, lam = opts.file, opts.index, opts.lam
    if not file.exists():
        fail(f"{file}: no such file")
    if file.is_dir():
        fail(f"{file}: is a directory; give one JSONL file of training records or tasks")
    example = _load_example(file, index, opts.format, opts.level, opts.prompt)
    from cuset.train.data import response_spans

    spans = response_spans(example.response, example.code_range)
    title = f"{file.name}" + (f" record {index}" if file.suffix in RECORD_SUFFIXES else "")
    if opts.tokenizer is None and opts.model is None:
        view = SampleView(
            title=f"{title} (no tokenizer: the response cut at span boundaries)",
            cells=character_cells(example.response, spans, lam=lam), lam=lam, mode="characters",
            spans=tuple(spans), response=example.response,
            notes=("Give --tokenizer to see tokens and the chat template, --model for the confidence mask.",),
        )
    else:
        view = _token_view(title, example, spans, opts)
    out.print(to_rich(view))
    if not opts.no_html:
        target = opts.html or Path(f"inspect-{file.stem}-{index}.html")
        atomic_write_text(target, to_html(view))
        console.print(f"wrote {target}")


def _load_example(file: Path, index: int, format: str, level: int, prompt: str):
    from cuset.train.data.records import FORMATS, Example, RecordOptions, read_examples

    if file.suffix not in RECORD_SUFFIXES:
        raw = file.read_bytes()
        text = raw.decode("utf-8", errors="replace")
        if not text.strip():
            fail(f"{file}: empty file, nothing to inspect")
        return Example(({"role": "user", "content": prompt},), text, str(file), 1, None)
    if format not in FORMATS:
        fail(f"--format {format!r}: expected one of {', '.join(FORMATS)}")
    options = RecordOptions(format=format, prompt_level=level)
    for position, item in enumerate(read_examples(file, options)):
        if position < index:
            continue
        if isinstance(item, Example):
            return item
        fail(f"{item.source}:{item.line}: {item.field}: {item.message} (reason: {item.reason})")
    fail(f"{file}: --index {index} is past the last record")


def _token_view(title, example, spans, opts: InspectOptions):
    """The sample's tokens as training sees them (with --model: their confidences and the sample weight)."""
    from cuset.spans import token_kinds
    from cuset.spans.view import SampleView, token_cells
    from cuset.train.data.tokenize import PromptTooLongError, TemplateError, tokenize_example

    tokenizer_name, model_name, max_length = opts.tokenizer, opts.model, opts.max_length
    lam, tau, window = opts.lam, opts.tau, opts.window
    model = None
    if model_name is not None:
        from cuset.experiment.scoring import load_model, resolve_device

        # no such directory, no GPU or an unloadable model: MissingPath or ModelLoadError (CusetErrors)
        model, model_tokenizer = load_model(model_name, device=resolve_device(opts.device))
        tok = _load_tokenizer(tokenizer_name) if tokenizer_name else model_tokenizer
    else:
        tok = _load_tokenizer(tokenizer_name)
    try:
        encoded = tokenize_example(tok, list(example.prompt), example.response, max_length=max_length, spans=spans)
    except (TemplateError, PromptTooLongError) as error:
        fail(f"{example.source}:{example.line}: {error}")
    offsets = encoded["offsets"]
    start = encoded["response_start"]
    kinds = token_kinds(spans, offsets, response_start=start, response_end=start + len(example.response))
    supervised = [label != -100 for label in encoded["labels"]]
    cuda = [flag > 0 for flag in encoded["cuda_mask"]]
    confidences = sample_weight = None
    notes = []
    if model is not None:
        confidences, sample_weight = _confidences(model, tok, encoded, supervised, kinds, window)
    else:
        notes.append("Weights show the CUDA mask only (lambda * 1[CUDA]); give --model for the confidence mask 1[p > tau].")
    if encoded["truncated"]:
        notes.append(f"Truncated to --max-length {max_length} tokens: the rest of the text is shown as not supervised.")
    return SampleView(
        title=f"{title} ({getattr(tok, 'name_or_path', '') or 'tokenizer'})",
        cells=token_cells(encoded["text"], offsets, supervised, cuda, kinds, lam=lam, confidences=confidences,
                          tau=tau if model is not None else None),
        lam=lam, mode="tokens", tau=tau if model is not None else None, sample_weight=sample_weight,
        spans=tuple(spans), response=example.response, response_start=start, notes=tuple(notes),
    )


def _load_tokenizer(name: str):
    from cuset.experiment.scoring import load_tokenizer

    return load_tokenizer(name, "--tokenizer")  # no such directory or unloadable: MissingPath or ModelLoadError


def _confidences(model, tokenizer, encoded: dict, supervised: list[bool], kinds, window: int) -> tuple[list[float | None], float | None]:
    """p(y_t | y_<t) for every supervised token (teacher forcing, the library scorer
    `cuset.experiment.scoring.score_batches`), and w_n = 1 - min_t C_t."""
    import numpy as np
    import torch

    from cuset.experiment.scoring import Encoded, score_batches
    from cuset.losses.segments import segment_min, segment_runs, window_confidence

    positions = [t for t, sup in enumerate(supervised) if sup and t > 0]
    result: list[float | None] = [None] * len(supervised)
    if not positions:
        return result, None
    sample = Encoded(sample_id="inspect", input_ids=list(encoded["input_ids"]), positions=np.asarray(positions),
                     kinds=tuple(frozenset(kinds[t]) for t in positions), tokens=())
    device = str(next(model.parameters()).device)
    probs = score_batches(model, tokenizer, [sample], batch_size=1, device=device, progress=False)[0].confidences
    for t, p in zip(positions, probs.tolist()):
        result[t] = p
    probs = torch.as_tensor(probs, dtype=torch.float64)
    runs = segment_runs(torch.zeros(len(positions), dtype=torch.long))
    c_min = segment_min(window_confidence(probs, runs, window), runs)
    return result, float(1.0 - c_min[0])
