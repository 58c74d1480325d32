"""Figures as PNG files (matplotlib's object API: no pyplot global state, no display).

Each function takes plain numbers, writes one PNG and returns its path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

SENSITIVE_COLOR = "#d62728"
NEUTRAL_COLOR = "#1f77b4"
DPI = 150


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _save(fig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, format="png")
    return path


def format_pvalue(p: float) -> str:
    if p == 0.0:
        return "< 1e-300 (underflow)"
    if p < 1e-3:
        mant, exp = f"{p:.1e}".split("e")
        return f"{mant}e{int(exp)}"
    return f"{p:.3g}"


def confidence_density(path, sensitive, neutral, *, ks_statistic: float, ks_pvalue: float,
                       model_label: str = "", sensitive_label: str = "CUDA-sensitive", neutral_label: str = "CUDA-neutral") -> Path:
    """Figure 1: confidence of sensitive vs neutral tokens, with the two-sample KS test.

    Left: densities on [0, 1] as in the paper. Right: empirical CDFs on a log axis,
    which stay readable when confidences pile up near 0 (an untrained model) or 1,
    with the KS statistic drawn where the two CDFs are furthest apart.
    """
    from cuset.analysis.confidence import ks_location, reflected_kde

    groups = [(np.asarray(sensitive, dtype=np.float64), sensitive_label, SENSITIVE_COLOR),
              (np.asarray(neutral, dtype=np.float64), neutral_label, NEUTRAL_COLOR)]
    grid = np.linspace(0.0, 1.0, 1001)
    fig = _figure(12.0, 4.6)
    ax, ax2 = fig.subplots(1, 2, width_ratios=[1.15, 1])
    for v, label, color in groups:
        text = f"{label} tokens (n={v.size:,}, mean={v.mean():.3g})"
        try:
            dens = reflected_kde(v, grid)
        except ValueError:  # one value, or all equal: no density to draw, only where they are
            ax.axvline(v.mean(), color=color, lw=2, label=text + ", too few distinct values for a density")
            continue
        ax.plot(grid, dens, color=color, lw=2, label=text)
        ax.fill_between(grid, dens, color=color, alpha=0.18)
        ax.axvline(v.mean(), color=color, ls="--", lw=1)
    ax.set_xlim(0, 1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("Token confidence  p(target token | prefix)  [probability, 0-1]")
    ax.set_ylabel("Density  [1 / unit confidence]")
    ax.set_title(f"(a) Density (reflected Gaussian KDE; dashed: group means)\n"
                 f"two-sample KS test: D = {ks_statistic:.4f}, p = {format_pvalue(ks_pvalue)}", fontsize=10)
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    both = np.concatenate([groups[0][0], groups[1][0]])
    lo_q, hi_q = np.quantile(both, [0.01, 0.99])
    if hi_q - lo_q < 0.05:  # all mass in a sliver: say so instead of leaving a bare spike
        ax.text(0.5, 0.5, f"98% of tokens lie in [{lo_q:.3g}, {hi_q:.3g}];\nsee the CDF (b) for their shape",
                transform=ax.transAxes, ha="center", fontsize=9, color="0.3")
    floor = 1e-8
    for v, label, color in groups:
        x = np.sort(np.clip(v, floor, 1.0))
        ax2.step(x, np.arange(1, x.size + 1) / x.size, where="post", color=color, lw=1.8, label=f"{label} tokens")
    x_ks, fa, fb = ks_location(groups[0][0], groups[1][0])
    x_ks = max(x_ks, floor)
    ax2.plot([x_ks, x_ks], [fa, fb], color="black", lw=2.2, marker="_", ms=12, label=f"KS statistic D = {ks_statistic:.4f}")
    ax2.set_xscale("log")
    lo = max(floor, min(float(np.min(v)) for v, _, _ in groups if v.size))
    ax2.set_xlim(lo * 0.8, 1.05)
    ax2.set_ylim(0, 1.01)
    ax2.set_xlabel("Token confidence  [probability, log scale]")
    ax2.set_ylabel("Cumulative share of tokens  [fraction, 0-1]")
    ax2.set_title("(b) Empirical CDF", fontsize=10)
    ax2.legend(loc="upper left", fontsize=8)
    ax2.grid(alpha=0.3, which="both")
    fig.suptitle("Token confidence: CUDA-sensitive vs CUDA-neutral tokens" + (f" ({model_label})" if model_label else ""),
                 fontsize=11)
    return _save(fig, path)


def window_curve(path, starts, ends, means, *, threshold: float, window: int, mode: str,
                 sensitive_mask=None, sample_label: str = "", marked_window: int | None = None) -> Path:
    """Figure 2b: sliding-window mean confidence of one sample, low-confidence windows marked.

    Each window's mean is drawn at its centre token so the curve lines up with the
    strips below it: which tokens are CUDA-sensitive, and which lie in a low window.
    The threshold line is the corpus mean confidence of neutral tokens.
    """
    starts, ends, means = (np.asarray(a) for a in (starts, ends, means))
    n_tokens = int(ends.max()) if len(ends) else 0
    x = (starts + ends - 1) / 2.0
    low = means < threshold
    fig = _figure(9.0, 5.2)
    gs = fig.add_gridspec(2, 1, height_ratios=[5, 1.3])
    ax = fig.add_subplot(gs[0])
    ax.plot(x, means, color="0.2", lw=1.4, label=f"window mean confidence ({window}-token windows, stride 1, mode {mode})")
    ax.axhline(threshold, color=NEUTRAL_COLOR, ls="--", lw=1.2, label=f"threshold = mean confidence of neutral tokens ({threshold:.3g})")
    ax.fill_between(x, means, threshold, where=low, color=SENSITIVE_COLOR, alpha=0.3, interpolate=True,
                    label=f"low-confidence windows ({int(low.sum())} of {len(means)})")
    if marked_window is not None and 0 <= marked_window < len(means):
        ax.plot([x[marked_window]], [means[marked_window]], marker="^", color=SENSITIVE_COLOR, ms=10, ls="none",
                label=f"lowest window (tokens {int(starts[marked_window])}-{int(ends[marked_window]) - 1})")
    ax.set_ylabel("Window mean confidence\n[probability, 0-1]")
    # Zoom in when every mean is small (e.g. an untrained model), else show the whole [0, 1].
    top = max(float(means.max()) if len(means) else 0.0, threshold)
    ax.set_ylim(0, min(1.02, 1.35 * top) if top > 0 else 1.02)
    ax.set_xlim(-0.5, n_tokens - 0.5)
    ax.tick_params(labelbottom=False)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.01), ncols=2, fontsize=8, frameon=False)  # never over the curve
    fig.suptitle("Sliding-window confidence" + (f": {sample_label}" if sample_label else ""), fontsize=11)
    strip = fig.add_subplot(gs[1], sharex=ax)
    rows = np.zeros((2, n_tokens))
    if sensitive_mask is not None:
        rows[0, : len(sensitive_mask)] = np.asarray(sensitive_mask, dtype=float)[:n_tokens]
    for a, b in zip(starts[low], ends[low]):
        rows[1, a:b] = 1.0
    strip.imshow(rows, aspect="auto", cmap="Reds", vmin=0, vmax=1.5, extent=(-0.5, n_tokens - 0.5, 2, 0), interpolation="nearest")
    strip.set_yticks([0.5, 1.5], ["CUDA-sensitive token", "in a low window"], fontsize=8)
    strip.set_xlabel("Token position in the response  [tokens]  (window means drawn at the window centre)")
    return _save(fig, path)


def window_tokens(path, confidences, sensitive_mask, tokens: Sequence[str], *, start: int, threshold: float, sample_label: str = "") -> Path:
    """Figure 2c: individual token confidences inside one window, coloured by sensitivity."""
    conf = np.asarray(confidences, dtype=np.float64)
    mask = np.asarray(sensitive_mask, dtype=bool)
    n = conf.size
    fig = _figure(max(7.0, min(0.16 * n + 2, 22.0)), 4.4)
    ax = fig.add_subplot()
    colors = np.where(mask, SENSITIVE_COLOR, NEUTRAL_COLOR)
    ax.bar(np.arange(n), conf, color=colors, width=0.8)
    ax.axhline(threshold, color="0.3", ls="--", lw=1, label=f"mean confidence of neutral tokens ({threshold:.3g})")
    from matplotlib.patches import Patch

    handles = [Patch(color=SENSITIVE_COLOR, label="CUDA-sensitive token"), Patch(color=NEUTRAL_COLOR, label="CUDA-neutral token")]
    handles += ax.get_legend_handles_labels()[0]
    ax.legend(handles=handles, fontsize=8, loc="upper center", ncols=3)
    if tokens:
        # Make whitespace visible: "·" for a space, \n and \t spelled out.
        shown = [t.replace(" ", "·").replace("\n", "\\n").replace("\t", "\\t").replace("$", r"\$") or "∅" for t in tokens]
        ax.set_xticks(np.arange(n), shown, rotation=90, fontsize=7, family="monospace")
    ax.set_xlim(-0.6, n - 0.4)
    top = max(float(conf.max()) if n else 0.0, threshold)
    if top >= 0.7:
        ax.set_ylim(0, 1.18)  # room for the legend above the bars
        ax.set_yticks(np.linspace(0, 1, 6))
    else:  # zoom in on small confidences (e.g. an untrained model)
        ax.set_ylim(0, 1.5 * top if top > 0 else 1.0)
    ax.set_ylabel("Token confidence  [probability, 0-1]")
    ax.set_xlabel(f"Tokens {start}-{start + n - 1} of the response  (· = space)")
    ax.set_title("Token confidences inside the lowest-confidence window" + (f": {sample_label}" if sample_label else ""), fontsize=11)
    ax.grid(alpha=0.3, axis="y")
    return _save(fig, path)


def hyperparameter_curves(path, panels: Sequence[dict], *, title: str = "Hyper-parameter analysis") -> Path:
    """Figure 4: one panel per hyper-parameter; each panel plots metric series vs value.

    `panels`: [{"param": "tau", "xlabel": ..., "series": [{"label", "x", "y", "style"}]}]
    with y in percent; style "published" draws hollow markers and a dotted line.
    """
    n = max(1, len(panels))
    n_lines = max((len(p["series"]) for p in panels), default=1)
    fig = _figure(5.0 * n, 4.0 + 0.2 * n_lines)
    axes = fig.subplots(1, n, squeeze=False)[0]
    for ax, panel in zip(axes, panels):
        for s in panel["series"]:
            published = s.get("style") == "published"
            ax.plot(s["x"], s["y"], marker="s" if published else "o", ls=":" if published else "-",
                    lw=1.2 if published else 1.8, ms=7, mfc="white" if published else None, color=s.get("color"),
                    label=s["label"])
        ax.set_xlabel(panel["xlabel"])
        ax.set_ylabel("Pass@k  [% of tasks]")
        if panel.get("log_x"):
            ax.set_xscale("log", base=2)
        xs = sorted({float(v) for s in panel["series"] for v in s["x"]})
        if xs and len(xs) <= 10:
            ax.set_xticks(xs, [f"{v:g}" for v in xs])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2))
        ax.set_title(panel.get("title", panel["param"]), fontsize=10)
    fig.suptitle(title, fontsize=11)
    return _save(fig, path)


def method_bars(path, groups: Sequence[str], methods: Sequence[str], panels: Sequence[tuple[str, dict]], *, title: str) -> Path:
    """Grouped bars (Table 2 at a glance): per panel one group per model, one bar per method.

    `panels`: [(metric label, {(group, method): value in percent})]; each group's bars are
    centred on its tick; a method keeps its colour in every group and panel.
    """
    from matplotlib import colormaps

    palette = colormaps["tab10" if len(methods) <= 10 else "tab20"].colors
    color = {m: palette[i % len(palette)] for i, m in enumerate(methods)}
    n = max(1, len(panels))
    per_group = max((sum((g, m) in panel for m in methods) for _, panel in panels for g in groups), default=1)
    width_in = min(16.0, max(5.5, 0.42 * len(groups) * per_group + 2.5))
    fig = _figure(width_in * n, 5.0)
    axes = fig.subplots(1, n, squeeze=False)[0]
    width = 0.8 / max(1, per_group)
    for ax, (metric_label, values) in zip(axes, panels):
        for i, g in enumerate(groups):
            present = [m for m in methods if values.get((g, m)) is not None]
            for j, m in enumerate(present):
                x = i + (j - (len(present) - 1) / 2) * width
                bars = ax.bar([x], [values[(g, m)]], width=width * 0.95, color=color[m], label=m)
                ax.bar_label(bars, fmt="%.1f", fontsize=7, padding=1)
        ax.set_xticks(np.arange(len(groups)), list(groups), fontsize=8)
        ax.set_xlim(-0.6, len(groups) - 0.4)
        ax.set_ylabel(f"{metric_label}  [% of tasks]")
        ax.set_xlabel("Model")
        ax.set_ylim(0, 109)
        ax.set_title(metric_label, fontsize=10)
        ax.grid(alpha=0.3, axis="y")
    from matplotlib.patches import Patch

    handles = [Patch(color=color[m], label=m) for m in methods]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(5, max(1, len(methods))), fontsize=8,
               title="Method", title_fontsize=8)
    fig.suptitle(title, fontsize=11)
    return _save(fig, path)


def differences_against(path, series: dict[str, Sequence[tuple[float, float, float | None, float | None]]], *,
                        xlabel: str, ylabel: str, title: str, scale: float = 100.0, log_x: bool = True,
                        vline: tuple[float, str] | None = None) -> Path:
    """Paired differences (delta, low, high; None: no interval) against x, one line with error bars
    per series, with a line at 0: on a reversed log x axis (x > 0, lower x to the right) or, with
    `log_x=False`, a linear one (higher x to the right); `vline` = (x, label) marks a threshold.
    Series are spread a little along x so their bars do not hide each other."""
    fig = _figure(6.5, 4.2)
    ax = fig.add_subplot(1, 1, 1)
    n = len(series)
    xs_all = [x for points in series.values() for x, *_ in points] + ([vline[0]] if vline else [])
    span = (max(xs_all) - min(xs_all)) if xs_all else 0.0
    step = 0.01 * span if span > 0 else 0.5   # linear spread: 1% of the x range (half a unit when it is 0)
    for i, (label, points) in enumerate(series.items()):
        pts = sorted(points)
        if log_x and any(x <= 0 for x, *_ in pts):
            raise ValueError(f"{label}: x values must be > 0 for a log axis")
        offset = i - (n - 1) / 2
        xs = [x * (1 + 0.02 * offset) if log_x else x + step * offset for x, *_ in pts]
        ys = [scale * d for _, d, _, _ in pts]
        below = [scale * (d - lo) if lo is not None else 0.0 for _, d, lo, _ in pts]
        above = [scale * (hi - d) if hi is not None else 0.0 for _, d, _, hi in pts]
        ax.errorbar(xs, ys, yerr=[below, above], marker="o", capsize=3, label=label)
    ax.axhline(0.0, color="grey", linewidth=0.8)
    if vline is not None:
        ax.axvline(vline[0], color="grey", linestyle="--", linewidth=0.8, label=vline[1])
    if log_x:
        ax.set_xscale("log")
        ax.invert_xaxis()
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if n:
        ax.legend(fontsize=8)
    return _save(fig, path)
