"""`cuset data stats`: what is in a task file (token lengths, families, dtypes) and,
given a build manifest, why items were removed; as rich tables and PNG plots.

Token counts use a local Hugging Face tokenizer when one is given; otherwise a
lexer count (identifiers, numbers, literals and single punctuation characters),
which is named on the plots so the unit is never ambiguous.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from cuset.curation.cudatext import code_tokens
from cuset.errors import CusetError
from cuset.tasks import Task, render_prompt

STAGE_ORDER = ("sources", "synthesis", "validation", "dedup", "decontamination")
MAX_FAMILY_BARS = 30


@dataclass
class DatasetStats:
    tokenizer: str
    prompt_tokens: list[int] = field(default_factory=list)
    response_tokens: list[int] = field(default_factory=list)
    families: Counter = field(default_factory=Counter)
    input_dtypes: Counter = field(default_factory=Counter)
    output_dtypes: Counter = field(default_factory=Counter)

    @property
    def n_tasks(self) -> int:
        return len(self.prompt_tokens)


def lexer_token_counter() -> tuple[str, Callable[[str], int]]:
    return "lexer tokens", lambda text: len(code_tokens(text))


class TokenizerUnavailable(CusetError, ValueError):
    """The tokenizer given for token counts is not a loadable local directory."""


def hf_token_counter(path: str) -> tuple[str, Callable[[str], int]]:
    if not Path(path).is_dir():
        raise TokenizerUnavailable(f"cannot load a tokenizer from {path!r}: not a directory; pass a local tokenizer directory")
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as e:
        raise TokenizerUnavailable(f"cannot load a tokenizer from {path!r} ({type(e).__name__}: {e}); pass a local tokenizer directory") from None
    return f"{Path(path).name} tokens", lambda text: len(tok(text, add_special_tokens=False)["input_ids"])


def compute_stats(tasks: list[Task], counter: tuple[str, Callable[[str], int]], level: int = 1) -> DatasetStats:
    """Prompt = the rendered generation prompt (system + user) at `level`; response = bench.cu."""
    name, count = counter
    st = DatasetStats(tokenizer=name)
    for t in tasks:
        p = render_prompt(t, level)
        st.prompt_tokens.append(count(p.system + "\n" + p.user))
        st.response_tokens.append(count(t.bench_cu))
        st.families[t.family_name] += 1
        st.input_dtypes.update(s.dtype for s in t.inputs)
        st.output_dtypes.update(s.dtype for s in t.outputs)
    return st


def rejection_counts(manifest: dict) -> list[tuple[str, str, int]]:
    """(stage, reason, count) for every removal in a build manifest, in pipeline order."""
    rows = []
    stages = manifest.get("stages", {})
    for stage in STAGE_ORDER:
        s = stages.get(stage, {})
        for group in ("skipped", "rejected", "removed", "deferred"):
            for reason, n in s.get(group, {}).items():
                rows.append((stage, reason + (" (deferred)" if group == "deferred" else ""), int(n)))
    return rows


def _summary(values: list[int]) -> tuple[int, float, int, int]:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return ordered[0], statistics.median(ordered), p90, ordered[-1]


# ---- tables -------------------------------------------------------------------

def tables(st: DatasetStats, manifest: dict | None = None) -> list:
    from rich.table import Table

    out = []
    t = Table(title=f"Token lengths ({st.tokenizer}) over {st.n_tasks} tasks")
    for col in ("", "min", "median", "p90", "max", "total"):
        t.add_column(col, justify="right" if col else "left")
    for label, values in (("prompt", st.prompt_tokens), ("response (bench.cu)", st.response_tokens)):
        if values:
            lo, med, p90, hi = _summary(values)
            t.add_row(label, str(lo), f"{med:g}", str(p90), str(hi), str(sum(values)))
    out.append(t)
    fam = Table(title=f"Families ({len(st.families)})")
    fam.add_column("family")
    fam.add_column("tasks", justify="right")
    fam.add_column("share", justify="right")
    for name, n in st.families.most_common():
        fam.add_row(name, str(n), f"{n / st.n_tasks:.1%}")
    out.append(fam)
    dt = Table(title="Tensors by dtype")
    for col in ("dtype", "inputs", "outputs"):
        dt.add_column(col, justify="left" if col == "dtype" else "right")
    for d in sorted(set(st.input_dtypes) | set(st.output_dtypes)):
        dt.add_row(d, str(st.input_dtypes[d]), str(st.output_dtypes[d]))
    out.append(dt)
    if manifest is not None:
        rj = Table(title="Removed, by stage and reason")
        for col in ("stage", "reason", "items"):
            rj.add_column(col, justify="right" if col == "items" else "left")
        for stage, reason, n in rejection_counts(manifest):
            rj.add_row(stage, reason, str(n))
        out.append(rj)
    return out


# ---- plots --------------------------------------------------------------------

def _figure(width=8.0, height=4.5):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt, plt.subplots(figsize=(width, height), dpi=120)


def plot_token_lengths(st: DatasetStats, path: Path) -> Path:
    import numpy as np

    plt, (fig, ax) = _figure()
    everything = st.prompt_tokens + st.response_tokens
    lo, hi = min(everything), max(everything)
    pad = max(1.0, 0.05 * (hi - lo))
    bins = np.linspace(max(0.0, lo - pad), hi + pad, 31)
    for values, label, color in ((st.prompt_tokens, "prompt (system + user)", "tab:blue"),
                                 (st.response_tokens, "response (bench.cu)", "tab:orange")):
        med = statistics.median(values)
        ax.hist(values, bins=bins, alpha=0.55, color=color, label=f"{label}, median {med:g}")
        ax.axvline(med, color=color, linestyle="--", linewidth=1)
    ax.set_xlabel(f"length per task ({st.tokenizer})")
    ax.set_ylabel("tasks")
    ax.set_title(f"Token lengths of {st.n_tasks} tasks (dashed: medians)")
    _integer_axis(ax.yaxis)
    ax.legend()
    return _save(plt, fig, path)


def plot_families(st: DatasetStats, path: Path) -> Path:
    top = st.families.most_common(MAX_FAMILY_BARS)
    rest = st.n_tasks - sum(n for _, n in top)
    if rest:
        top.append((f"{len(st.families) - len(top)} other families", rest))
    plt, (fig, ax) = _figure(8.0, max(2.5, 0.28 * len(top) + 1.2))
    names = [n for n, _ in top][::-1]
    counts = [c for _, c in top][::-1]
    bars = ax.barh(names, counts, color="tab:green")
    ax.bar_label(bars, padding=2, fontsize=8)
    ax.set_xlabel("tasks")
    ax.set_ylabel("family")
    ax.set_title(f"Tasks per family ({len(st.families)} families, {st.n_tasks} tasks)")
    _integer_axis(ax.xaxis)
    ax.margins(x=0.1)
    return _save(plt, fig, path)


def plot_dtypes(st: DatasetStats, path: Path) -> Path:
    import numpy as np

    dtypes = sorted(set(st.input_dtypes) | set(st.output_dtypes))
    plt, (fig, ax) = _figure(max(5.0, 1.1 * len(dtypes) + 2), 4.0)
    x = np.arange(len(dtypes))
    for offset, counts, label, color in ((-0.2, st.input_dtypes, "inputs", "tab:blue"),
                                         (0.2, st.output_dtypes, "outputs", "tab:orange")):
        bars = ax.bar(x + offset, [counts[d] for d in dtypes], width=0.4, label=label, color=color)
        ax.bar_label(bars, padding=2, fontsize=8)
    ax.set_xticks(x, dtypes)
    ax.set_xlabel("dtype")
    ax.set_ylabel("tensors (declared inputs / outputs)")
    ax.set_title("Declared tensors by dtype")
    _integer_axis(ax.yaxis)
    ax.legend()
    ax.margins(y=0.15)
    return _save(plt, fig, path)


def plot_rejections(manifest: dict, path: Path) -> Path | None:
    rows = rejection_counts(manifest)
    if not rows:
        return None
    plt, (fig, ax) = _figure(9.0, max(2.5, 0.32 * len(rows) + 1.4))
    colors = dict(zip(STAGE_ORDER, ("tab:gray", "tab:purple", "tab:red", "tab:olive", "tab:cyan")))
    labels = [reason for _, reason, _ in rows][::-1]
    counts = [n for _, _, n in rows][::-1]
    stage_of = [stage for stage, _, _ in rows][::-1]
    bars = ax.barh(range(len(rows)), counts, color=[colors[s] for s in stage_of])
    ax.bar_label(bars, padding=2, fontsize=8)
    ax.set_yticks(range(len(rows)), labels)
    ax.set_xlabel("items removed")
    ax.set_ylabel("reason")
    ax.set_title("Why items were removed, by stage")
    from matplotlib.patches import Patch

    present = [s for s in STAGE_ORDER if s in stage_of]
    ax.legend(handles=[Patch(color=colors[s], label=s) for s in present], title="stage",
              loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.margins(x=0.1)
    _integer_axis(ax.xaxis)
    return _save(plt, fig, path)


def _integer_axis(axis) -> None:
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _save(plt, fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write_plots(st: DatasetStats, out_dir: Path, manifest: dict | None = None) -> list[Path]:
    paths = []
    if st.n_tasks:
        paths += [plot_token_lengths(st, out_dir / "token_lengths.png"),
                  plot_families(st, out_dir / "families.png"),
                  plot_dtypes(st, out_dir / "dtypes.png")]
    if manifest is not None:
        p = plot_rejections(manifest, out_dir / "rejections.png")
        if p is not None:
            paths.append(p)
    return paths
