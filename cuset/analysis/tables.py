"""Tables shaped like the paper's Tables 2, 3 and 5 and the curves of Figure 4 (pure).

Rows are plain dicts with metrics in percent (the paper's unit) and a `source`
column: "this run" for measured rows, "published (paper)" for reference rows
copied from published.json. Markdown rendering is separate from row building.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Sequence

from cuset.analysis.mdsafe import inline
from cuset.analysis.published import PUBLISHED_LABEL, published_figure4, published_rows
from cuset.analysis.results import METHOD_ORDER, METRIC_KEYS, ResultsError, RunResults, method_name

MEASURED = "this run"
SWITCHES = ("conf_mask", "cuda_mask", "region_weight")
HPARAMS = {"tau": "Confidence mask threshold τ", "lam": "CUDA mask scale λ", "window": "Sliding window size l  [tokens]"}
METRIC_COLUMNS = (("compile@1", "Pass@1 Compilation"), ("function@1", "Pass@1 Function"),
                  ("compile@3", "Pass@3 Compilation"), ("function@3", "Pass@3 Function"))
PUBLISHED_MODES = ("matched", "all", "none")


def _pct(value: float | None) -> float | None:
    return None if value is None else round(100.0 * value, 4)


def measured_metrics(run: RunResults) -> dict:
    return {k: _pct(run.metrics.get(k)) for k in METRIC_KEYS}


def published_metrics(row: dict) -> dict:
    return {"compile@1": row["pass@1"].get("compilation"), "function@1": row["pass@1"].get("function"),
            "compile@3": row["pass@3"].get("compilation"), "function@3": row["pass@3"].get("function")}


def _norm(name: Any) -> str:
    text = str(name or "").strip().rstrip("/").split("/")[-1].lower()
    return text


def _method_rank(method: str) -> tuple[int, str]:
    return (METHOD_ORDER.index(method), "") if method in METHOD_ORDER else (len(METHOD_ORDER), method)


def _wanted(published_mode: str, model: str, ours: set[str]) -> bool:
    if published_mode not in PUBLISHED_MODES:
        raise ValueError(f"published mode must be one of {', '.join(PUBLISHED_MODES)}, got {published_mode!r}")
    return published_mode == "all" or (published_mode == "matched" and _norm(model) in ours)


# ---- Table 2: model x method ------------------------------------------------------------

def settings_labels(runs: Sequence[RunResults], keys: Sequence[str] = (*HPARAMS, *SWITCHES)) -> dict[int, str]:
    """Per run, the `keys` labels whose values differ between runs of the same model and method.

    Tables list every run; when a sweep gives several rows of one (model, method),
    this "Setting" text tells them apart (empty when nothing differs).
    """
    groups: dict[tuple, list[RunResults]] = defaultdict(list)
    for r in runs:
        groups[(str(r.label("model")), method_name(r.label("method", "?")))].append(r)
    out: dict[int, str] = {}
    for members in groups.values():
        varying = [k for k in keys if len({str(m.label(k)) for m in members}) > 1]
        for m in members:
            out[id(m)] = ", ".join(f"{k}={m.label(k)}" for k in varying if m.label(k) is not None)
    return out


def _run_number(runs: Sequence[RunResults]) -> dict[int, int]:
    return {id(r): i for i, r in enumerate(runs, 1)}


def table2_rows(runs: Sequence[RunResults], published: str = "matched") -> list[dict]:
    """One row per main run, grouped by model in method order; then published rows of the same model."""
    num, setting = _run_number(runs), settings_labels(runs)
    rows = [{"model": str(r.label("model")), "method": method_name(r.label("method", "?")), "setting": setting[id(r)],
             "source": MEASURED, "run_number": num[id(r)], **measured_metrics(r), "n_tasks": r.counts.get("n_tasks"),
             "run": r.source} for r in runs]
    ours = {_norm(r["model"]) for r in rows}
    for p in published_rows("table2"):
        if _wanted(published, p["model"], ours):
            rows.append({"model": p["model"], "method": p["method"], "setting": "", "source": PUBLISHED_LABEL,
                         **published_metrics(p), "provenance": p["provenance"]})
    return _model_method_order(rows)


def _model_method_order(rows: list[dict]) -> list[dict]:
    """Models in order of first appearance; measured rows first, each block in Table 2's method order."""
    order = {m: i for i, m in enumerate(dict.fromkeys(r["model"] for r in rows))}
    return sorted(rows, key=lambda r: (order[r["model"]], r["source"] != MEASURED, _method_rank(r["method"])))


# ---- Table 3: models with type, #params and average generated tokens ------------------------

def format_params(value: Any) -> str:
    """7615616512 -> '7.6B'; strings ('7B', '40B/744B') are kept."""
    if value is None or value == "":
        return "?"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
            if value >= div:
                return f"{value / div:.3g}{unit}"
        return str(int(value))
    return str(value)


def table3_rows(runs: Sequence[RunResults], published: str = "matched") -> list[dict]:
    num, setting = _run_number(runs), settings_labels(runs)
    rows = [{"model": str(r.label("model")), "method": method_name(r.label("method", "?")), "setting": setting[id(r)],
             "type": r.label("type", "?"), "params": format_params(r.label("params")), "source": MEASURED,
             "run_number": num[id(r)], **measured_metrics(r), "avg_tokens": r.metrics.get("avg_tokens"), "run": r.source}
            for r in runs]
    ours = {_norm(r["model"]) for r in rows}
    for p in published_rows("table3"):
        if _wanted(published, p["model"], ours):
            rows.append({"model": p["model"], "method": p["method"], "setting": "", "type": p["type"], "params": p["params"],
                         "source": PUBLISHED_LABEL, **published_metrics(p), "avg_tokens": p["avg_tokens"],
                         "provenance": p["provenance"]})
    return _model_method_order(rows)


# ---- Table 5: ablation switches -------------------------------------------------------------

def switches_of(run: RunResults) -> tuple[bool, bool, bool] | None:
    """The (conf_mask, cuda_mask, region_weight) switches a run was trained with, or None.

    Explicit switch labels win; missing ones follow the identities of the method note:
    SFT = all off, ProFit = confidence mask only, CuSeT = all on. Other methods
    (DFT, EAFT, ...) have no switches unless all three are labelled.
    """
    labels = run.labels
    implied = {"SFT": (False, False, False), "ProFit": (True, False, False),
               "CuSeT": (True, True, True)}.get(method_name(labels.get("method", "")))
    if implied is None and not all(k in labels for k in SWITCHES):
        return None
    base = implied or (False, False, False)
    return tuple(bool(labels.get(k, d)) for k, d in zip(SWITCHES, base))  # type: ignore[return-value]


def table5_rows(runs: Sequence[RunResults], published: str = "matched", model: str | None = None) -> list[dict]:
    """Runs with identifiable switches (optionally of one model), in the paper's row order.

    A "setting" column names hyper-parameters that differ between a model's rows
    (a sweep may hold ablations at several tau, lambda or window values).
    """
    num = _run_number(runs)
    chosen = [r for r in runs if switches_of(r) is not None and (model is None or _norm(r.label("model")) == _norm(model))]
    by_model: dict[str, list[RunResults]] = defaultdict(list)
    for r in chosen:
        by_model[str(r.label("model"))].append(r)
    setting: dict[int, str] = {}
    for members in by_model.values():
        varying = [k for k in HPARAMS if len({str(m.label(k)) for m in members}) > 1]
        for m in members:
            setting[id(m)] = ", ".join(f"{k}={m.label(k)}" for k in varying if m.label(k) is not None)
    rows = [{"model": str(r.label("model")), **dict(zip(SWITCHES, switches_of(r))), "setting": setting[id(r)],
             "source": MEASURED, "run_number": num[id(r)], **measured_metrics(r), "run": r.source} for r in chosen]
    ours = {_norm(r["model"]) for r in rows}
    for p in published_rows("table5"):
        if _wanted(published, p["model"], ours):
            rows.append({"model": p["model"], **{k: p[k] for k in SWITCHES}, "setting": "", "source": PUBLISHED_LABEL,
                         **published_metrics(p), "switches_inferred": p["switches_inferred"], "provenance": p["provenance"]})
    paper_order = [(False, False, False), (True, False, False), (True, True, False), (True, False, True), (True, True, True)]
    rank = lambda sw: paper_order.index(sw) if sw in paper_order else len(paper_order) + sum(sw)
    return sorted(rows, key=lambda r: (r["source"] != MEASURED, r["model"], rank(tuple(r[k] for k in SWITCHES)),
                                       r["setting"]))


def _as_float(value) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


# ---- Figure 4: hyper-parameter curves -------------------------------------------------------

def hparam_series(runs: Sequence[RunResults], param: str) -> list[dict]:
    """Series of runs that differ only in `param`: same model, method and other labels.

    Returns [{"key": {...fixed labels...}, "x": [...], "n_runs": [...], "metrics": {metric: [...]},
    "runs": [[...]]}] for every group with at least two distinct values of `param`; runs
    with the same value (replicates, or the default cell shared by several sweeps) are
    averaged and counted in n_runs.
    """
    if param not in HPARAMS:
        raise ValueError(f"unknown hyper-parameter {param!r}; one of {', '.join(HPARAMS)}")
    fixed_keys = ("model", "method", *(h for h in HPARAMS if h != param), *SWITCHES)
    groups: dict[tuple, list[RunResults]] = defaultdict(list)
    for r in runs:
        if r.label(param) is None:
            continue
        groups[tuple((k, str(r.label(k))) for k in fixed_keys)].append(r)
    out = []
    for key, members in groups.items():
        by_x: dict[float, list[RunResults]] = defaultdict(list)
        for r in members:
            x = _as_float(r.label(param))
            if x is None:
                raise ResultsError(f"{r.source}: label {param}={r.label(param)!r} is not a number")
            by_x[x].append(r)
        if len(by_x) < 2:
            continue
        xs = sorted(by_x)
        out.append({"param": param, "key": {k: v for k, v in key if v != "None"}, "x": xs,
                    "n_runs": [len(by_x[x]) for x in xs],
                    "metrics": {m: [_mean_pct([r.metrics.get(m) for r in by_x[x]]) for x in xs] for m in METRIC_KEYS},
                    "runs": [[r.source for r in by_x[x]] for x in xs]})
    return out


def _mean_pct(values: list) -> float | None:
    if not values or any(v is None for v in values):
        return None
    return _pct(sum(values) / len(values))


def published_points(param: str) -> list[dict]:
    return [p for p in published_figure4()["points"] if p["param"] == param]


# ---- Markdown ---------------------------------------------------------------------------------

def _cell(value: Any, fmt: str = ".1f") -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "✓" if value else "✗"
    if isinstance(value, float):
        return format(value, fmt)
    return str(value)


def _best_marks(rows: list[dict], group_key: str, columns: Iterable[str]) -> dict[tuple[int, str], str]:
    """Bold the best and underline the second best measured value per group and column."""
    marks: dict[tuple[int, str], str] = {}
    groups: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        if r["source"] == MEASURED:
            groups[r[group_key]].append(i)
    for idx in groups.values():
        for col in columns:
            vals = sorted({rows[i][col] for i in idx if rows[i][col] is not None}, reverse=True)
            if len(idx) < 2 or len(vals) < 2:  # one row, or all tied: nothing stands out
                continue
            for i in idx:
                if rows[i][col] == vals[0]:
                    marks[(i, col)] = "**"
                elif len(vals) > 1 and rows[i][col] == vals[1]:
                    marks[(i, col)] = "<u>"
    return marks


def _fmt_marked(value, mark: str | None) -> str:
    text = _cell(value)
    if mark == "**":
        return f"**{text}**"
    if mark == "<u>":
        return f"<u>{text}</u>"
    return text


def _source(row: dict) -> str:
    """`this run (#3)` points at the Runs table; published rows say so."""
    return f"{MEASURED} (#{row['run_number']})" if row["source"] == MEASURED and "run_number" in row else row["source"]


def markdown_table(headers: Sequence[str], body: Sequence[Sequence[str]], align: str | None = None) -> str:
    align = align or "l" * len(headers)
    sep = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def _text(row: dict, *keys: str) -> list[str]:
    """The row's texts from records (model, method, setting, ...), inert in Markdown."""
    return [inline(row.get(k, "")) for k in keys]


def table2_markdown(rows: list[dict]) -> str:
    cols = [c for c, _ in METRIC_COLUMNS]
    marks = _best_marks(rows, "model", cols)
    body = [[*_text(r, "model", "method", "setting"), inline(_source(r)),
             *(_fmt_marked(r[c], marks.get((i, c))) for c in cols)]
            for i, r in enumerate(rows)]
    return markdown_table(["Model", "Method", "Setting", "Source", *(h for _, h in METRIC_COLUMNS)], body, "llll" + "r" * 4)


def table3_markdown(rows: list[dict]) -> str:
    body = [[*_text(r, "model", "method", "setting", "type", "params"), inline(_source(r)),
             *(_cell(r[c]) for c, _ in METRIC_COLUMNS), "n/a" if r["avg_tokens"] is None else f"{r['avg_tokens']:,.0f}"]
            for r in rows]
    return markdown_table(["Model", "Method", "Setting", "Type", "#Params", "Source", *(h for _, h in METRIC_COLUMNS),
                           "Avg. generated tokens"], body, "llllll" + "r" * 5)


def table5_markdown(rows: list[dict]) -> str:
    cols = [c for c, _ in METRIC_COLUMNS]
    marks = _best_marks(rows, "model", cols)
    body = []
    for i, r in enumerate(rows):
        switches = [_cell(r[k]) + ("?" if r.get("switches_inferred") else "") for k in SWITCHES]
        body.append([inline(r["model"]), *switches, inline(r.get("setting", "")), inline(_source(r)),
                     *(_fmt_marked(r[c], marks.get((i, c))) for c in cols)])
    return markdown_table(["Model", "Confidence mask", "CUDA mask", "Region-aware sample reweighting", "Setting", "Source",
                           *(h for _, h in METRIC_COLUMNS)], body, "lcccll" + "r" * 4)


def hparam_markdown(series: list[dict], param: str) -> str:
    body = []
    for s in series:
        fixed = inline(", ".join(f"{k}={v}" for k, v in s["key"].items()))
        for j, x in enumerate(s["x"]):
            n = s["n_runs"][j]
            source = MEASURED if n == 1 else f"{MEASURED} (mean of {n} runs)"
            body.append([f"{x:g}", fixed, source, *(_cell(s["metrics"][c][j]) for c, _ in METRIC_COLUMNS)])
    for p in published_points(param):
        body.append([f"{p['value']:g}", "Qwen2.5-Coder-7B-Instruct, CuSeT", PUBLISHED_LABEL,
                     _cell(p.get("pass@1", {}).get("compilation")), _cell(p.get("pass@1", {}).get("function")),
                     _cell(p.get("pass@3", {}).get("compilation")), _cell(p.get("pass@3", {}).get("function"))])
    return markdown_table([param, "fixed settings", "Source", *(h for _, h in METRIC_COLUMNS)], body, "rll" + "r" * 4)
