"""`cuset analyze confidence`: section 3 of the paper from scored samples to files.

Writes into one directory:
- scores.jsonl: per-sample token confidences, kinds and token text (re-analyse with
  another window or threshold without running the model again: `--scores`);
- confidence.json: KS test, threshold, per-category statistics, window statistics;
- fig1_confidence_density.png, fig2b_window_curve.png, fig2c_window_tokens.png;
- confidence.md: the same as a readable report, with the paper's numbers as a
  clearly labelled published reference.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

import numpy as np

from cuset.analysis import plots
from cuset.analysis.confidence import (
    ScoredSample, ScoresError, category_stats, describe, ks_test, low_window_stats, sample_windows, split_by_sensitivity,
)
from cuset.analysis.published import PUBLISHED_LABEL, published_section3
from cuset.io import atomic_write_jsonl, iter_jsonl, atomic_write_text
from cuset.localpath import MissingPath


def save_scores(path: str | Path, samples: Sequence[ScoredSample]) -> Path:
    path = Path(path)
    atomic_write_jsonl(path, ({"sample_id": s.sample_id, "confidences": [float(c) for c in s.confidences],
                               "kinds": [sorted(k) for k in s.kinds], "tokens": list(s.tokens)} for s in samples))
    return path


def load_scores(path: str | Path) -> list[ScoredSample]:
    """Samples of a scores.jsonl; errors name file:line and the field."""
    path = Path(path)
    if not path.exists():
        raise MissingPath(f"{path}: no such scores file (written by `cuset analyze confidence` as scores.jsonl)")
    out = []
    for lineno, d in iter_jsonl(path):  # a line that is not JSON: JsonlError naming path:line
        try:
            out.append(ScoredSample(str(d["sample_id"]), np.asarray(d["confidences"], dtype=np.float64),
                                    tuple(frozenset(k) for k in d["kinds"]), tuple(d.get("tokens") or ())))
        except KeyError as e:
            raise ScoresError(f"{path}:{lineno}: missing field {e.args[0]!r} (need sample_id, confidences, kinds)") from None
        except (TypeError, ValueError) as e:
            raise ScoresError(f"{path}:{lineno}: {e}") from None
    return out


def _pick_sample(per_sample, chosen: int | None) -> int:
    """The sample shown in Figure 2: `chosen`, else the one with the lowest window."""
    if chosen is not None:
        if not 0 <= chosen < len(per_sample):
            raise ScoresError(f"--sample {chosen} is out of range: {len(per_sample)} sample(s) were scored (0-based index)")
        return chosen
    mins = [float(sw.windows.means.min()) if len(sw.windows) else np.inf for sw in per_sample]
    return int(np.argmin(mins))


def analyze_confidence(samples: Sequence[ScoredSample], out_dir: str | Path, *, window: int = 64, mode: str = "full",
                       sensitive_kinds: Sequence[str], categories: Sequence[str], sample: int | None = None,
                       model_label: str = "", data_label: str = "", skipped: dict | None = None,
                       skipped_messages: Sequence[str] = ()) -> dict:
    """Compute everything of section 3 and write JSON, markdown and the three figures."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    samples = [s for s in samples if len(s) > 0]
    if not samples:
        raise ScoresError("no scored tokens: every sample was skipped or empty")
    sens, neut = split_by_sensitivity(samples, sensitive_kinds)
    ks = ks_test(sens, neut)
    threshold = float(neut.mean())
    per_sample = [sample_windows(s, threshold, window, mode, sensitive_kinds) for s in samples]
    chosen = _pick_sample(per_sample, sample)
    result = {
        "model": model_label, "data": data_label,
        "n_samples": len(samples), "skipped": dict(skipped or {}),
        "sensitive_kinds": list(sensitive_kinds),
        "ks": asdict(ks),
        "threshold": {"value": threshold, "definition": "mean confidence of CUDA-neutral tokens over the corpus"},
        "groups": {"cuda_sensitive": describe(sens, threshold), "cuda_neutral": describe(neut, threshold)},
        "categories": category_stats(samples, categories, threshold),
        "windows": {"size": window, "stride": 1, "mode": mode, **low_window_stats(per_sample)},
        "figure2_sample": _figure2_info(samples[chosen], per_sample[chosen], sample is None),
        "per_sample": [{"sample_id": s.sample_id, "n_tokens": len(s), "mean_confidence": float(np.mean(s.confidences)),
                        "min_window_mean": float(sw.windows.means.min()), "n_windows": len(sw.windows),
                        "n_low_windows": sw.n_low} for s, sw in zip(samples, per_sample)],
        "published_reference": {"label": PUBLISHED_LABEL, **published_section3()},
    }
    result["figures"] = _write_figures(out, samples, sens, neut, ks, threshold, per_sample, chosen, window, mode,
                                       sensitive_kinds, model_label)
    atomic_write_text(out / "confidence.json", json.dumps(result, indent=1))
    atomic_write_text(out / "confidence.md", confidence_markdown(result, skipped_messages))
    return result


def _figure2_info(sample: ScoredSample, sw, auto: bool) -> dict:
    lowest = int(np.argmin(sw.windows.means))
    return {"sample_id": sample.sample_id, "index_rule": "lowest window mean in the corpus" if auto else "chosen with --sample",
            "n_tokens": len(sample), "n_windows": len(sw.windows), "n_low_windows": sw.n_low,
            "lowest_window": {"start": int(sw.windows.starts[lowest]), "end": int(sw.windows.ends[lowest]),
                              "mean": float(sw.windows.means[lowest])}}


def _write_figures(out: Path, samples, sens, neut, ks, threshold, per_sample, chosen, window, mode, sensitive_kinds, model_label) -> dict:
    figs = {}
    figs["figure1"] = plots.confidence_density(out / "fig1_confidence_density.png", sens, neut, ks_statistic=ks.statistic,
                                               ks_pvalue=ks.pvalue, model_label=model_label).name
    s, sw = samples[chosen], per_sample[chosen]
    lowest = int(np.argmin(sw.windows.means))
    mask = s.sensitive(sensitive_kinds)
    figs["figure2b"] = plots.window_curve(out / "fig2b_window_curve.png", sw.windows.starts, sw.windows.ends, sw.windows.means,
                                          threshold=threshold, window=window, mode=mode, sensitive_mask=mask,
                                          sample_label=s.sample_id, marked_window=lowest).name
    a, b = int(sw.windows.starts[lowest]), int(sw.windows.ends[lowest])
    figs["figure2c"] = plots.window_tokens(out / "fig2c_window_tokens.png", s.confidences[a:b], mask[a:b],
                                           s.tokens[a:b] if s.tokens else (), start=a, threshold=threshold,
                                           sample_label=s.sample_id).name
    return figs


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.2f}%"


def _num(x, fmt=".4f") -> str:
    return "n/a" if x is None else format(x, fmt)


def confidence_markdown(r: dict, skipped_messages: Sequence[str] = ()) -> str:
    w = r["windows"]
    pub = r["published_reference"]
    g = r["groups"]
    lines = [
        "# Token confidence of CUDA-sensitive and CUDA-neutral tokens",
        "",
        f"- model: `{r['model'] or '?'}`",
        f"- data: `{r['data'] or '?'}` ({r['n_samples']} samples scored"
        + (f"; skipped: {', '.join(f'{k}={v}' for k, v in sorted(r['skipped'].items()))}" if r["skipped"] else "") + ")",
        f"- CUDA-sensitive = a token overlapping a span of kind {', '.join(r['sensitive_kinds'])}; all other response tokens are neutral",
        "- confidence = teacher-forced p(target token | prompt, previous response tokens)",
        "",
        "## Figure 1: confidence distributions",
        "",
        "![Figure 1](fig1_confidence_density.png)",
        "",
        "| group | tokens | mean | median | p10 | share below threshold |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, key in (("CUDA-sensitive", "cuda_sensitive"), ("CUDA-neutral", "cuda_neutral")):
        d = g[key]
        lines.append(f"| {name} | {d['n']:,} | {d['mean']:.4f} | {d['median']:.4f} | {d['p10']:.4f} | {_pct(d['share_below_threshold'])} |")
    lines += [
        "",
        f"Two-sample KS test (scipy.stats.ks_2samp, two-sided): D = {r['ks']['statistic']:.4f}, "
        f"p = {plots.format_pvalue(r['ks']['pvalue'])} "
        f"(n = {r['ks']['n_sensitive']:,} sensitive, {r['ks']['n_neutral']:,} neutral tokens).",
        "",
        "## Confidence per span category",
        "",
        "Categories overlap (an index expression inside a kernel counts for both), so counts do not add up.",
        "",
        "| category | tokens | mean | median | share below threshold |",
        "|---|---:|---:|---:|---:|",
    ]
    for kind, d in r["categories"].items():
        if d.get("n", 0) == 0:
            lines.append(f"| {kind} | 0 | n/a | n/a | n/a |")
        else:
            lines.append(f"| {kind} | {d['n']:,} | {d['mean']:.4f} | {d['median']:.4f} | {_pct(d['share_below_threshold'])} |")
    f2 = r["figure2_sample"]
    lines += [
        "",
        "## Figure 2: low-confidence windows",
        "",
        f"Windows of {w['size']} tokens, stride {w['stride']} (mode `{w['mode']}`); a window is *low* when its mean "
        f"confidence is below the threshold = mean confidence of neutral tokens = {r['threshold']['value']:.4f}.",
        "",
        f"Sample shown: `{f2['sample_id']}` ({f2['index_rule']}); {f2['n_low_windows']} of {f2['n_windows']} windows are low; "
        f"lowest window: tokens {f2['lowest_window']['start']}-{f2['lowest_window']['end'] - 1}, mean {f2['lowest_window']['mean']:.4f}.",
        "",
        "![Figure 2b](fig2b_window_curve.png)",
        "",
        "![Figure 2c](fig2c_window_tokens.png)",
        "",
        "| corpus statistic | this run | " + PUBLISHED_LABEL + f" ({pub['model']}, window {pub['window']}) |",
        "|---|---:|---:|",
        f"| samples with >= 1 low-confidence window | {_pct(w['share_samples_with_low_window'])} "
        f"({w['n_samples_with_low_window']}/{w['n_samples']}) | {pub['share_samples_with_low_window']:.2f}% |",
        f"| low-confidence windows overlapping CUDA-sensitive tokens | {_pct(w['share_low_windows_overlapping_sensitive'])} "
        f"({w['n_low_windows_overlapping_sensitive']}/{w['n_low_windows']}) | {pub['share_low_windows_overlapping_sensitive']:.2f}% |",
        f"| all windows overlapping CUDA-sensitive tokens (base rate) | {_pct(w['share_windows_overlapping_sensitive'])} | not reported |",
        f"| low-confidence windows with > 50% CUDA-sensitive tokens | {_pct(w['share_low_windows_majority_sensitive'])} | not reported |",
        f"| low-confidence regions (runs of low windows) overlapping CUDA-sensitive tokens | "
        f"{_pct(w['share_low_regions_overlapping_sensitive'])} ({w['n_low_regions_overlapping_sensitive']}/{w['n_low_regions']}) | not reported |",
        f"| KS p-value | {plots.format_pvalue(r['ks']['pvalue'])} | {pub['ks_pvalue']:.1e} |",
        "",
        f"The {PUBLISHED_LABEL} column is copied from the paper ({pub['provenance']}); it was measured on other data "
        "with another model and is shown only for reference.",
        "",
    ]
    if skipped_messages:
        lines += ["## Skipped samples", ""] + [f"- {m}" for m in skipped_messages[:50]]
        if len(skipped_messages) > 50:
            lines.append(f"- ... and {len(skipped_messages) - 50} more")
        lines.append("")
    return "\n".join(lines)
