"""`cuset report`: evaluation runs -> report.md, report.json and PNG figures.

Tables like the paper's Table 2 (model x method), Table 3 (+ type, #params and
average generated tokens), Table 5 (ablation switches) and hyper-parameter curves
like Figure 4. Published numbers appear only as rows whose Source column says
"published (paper)".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from cuset.analysis.mdsafe import code, inline
from cuset.analysis import plots
from cuset.analysis.defects import defects_markdown
from cuset.analysis.difficulty import DifficultyResult, difficulty_markdown, difficulty_table, plot_difficulty
from cuset.analysis.published import PUBLISHED_LABEL, published
from cuset.analysis.paired import RUN_VARIANCE, compare_task_scores, format_p, holm_adjust
from cuset.analysis.results import METRIC_KEYS, PERF_METRIC_KEYS, ResultsError, RunResults, method_name, parse_label_arg
from cuset.analysis.tables import (
    HPARAMS, MEASURED, hparam_markdown, hparam_series, published_points, table2_markdown, table2_rows,
    table3_markdown, table3_rows, table5_markdown, table5_rows,
)
from cuset.io import atomic_write_text

DEFINITION_TEXT = {
    "unbiased": "unbiased pass@k estimator (Chen et al., 2021) over each task's samples; compilation = the compiler "
                "succeeded, function = outputs accepted by compare.py",
    "compat": "the official CUDABench harness definitions: Pass@1 = first sample, Pass@3 = any of the first three; "
              "its 'compilation' = compiled AND ran with exit code 0",
    "compat_quirk": "as compat, plus the official harness's quirk of ignoring a task's samples after one without code",
}


def build_report(runs: Sequence[RunResults], out_dir: str | Path, *, published_mode: str = "matched",
                 definition: str = "unbiased", title: str = "CuSeT evaluation report",
                 compare: Sequence[str] = (), task_check: dict | None = None) -> dict:
    """Write report.md, report.json and the figures; return the JSON document.

    `task_check`: the benchmark-defects section (cuset.analysis.defects.defects_section) of
    the runs, reported as it is (the runs were loaded with its exclusions already).

    `compare`: "A:B" label selectors (e.g. "method=SFT:method=CuSeT"), each a paired comparison of
    B - A over the tasks both score (runs matching a selector are its seeds); with none and
    exactly two runs, run 2 is compared with run 1."""
    if not runs:
        raise ValueError("no runs to report")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t2 = table2_rows(runs, published_mode)
    t3 = table3_rows(runs, published_mode)
    t5 = table5_rows(runs, published_mode)
    curves = {p: hparam_series(runs, p) for p in HPARAMS}
    doc = {
        "title": title,
        "units": {"pass": "percent of tasks", "avg_tokens": "generated tokens per sample"},
        "metric_definition": {"name": definition, "text": DEFINITION_TEXT[definition]},
        "published_label": PUBLISHED_LABEL, "published_source": published()["source"],
        "runs": [{"source": r.source, "labels": r.labels, "metrics": r.metrics, "counts": r.counts} for r in runs],
        "table2": t2, "table3": t3,
        "table5": t5 if any(r["source"] == MEASURED for r in t5) else [],
        "figure4": {p: s for p, s in curves.items() if s},
        "figures": {},
        "paired": paired_comparisons(runs, compare),
        "task_check": task_check,
    }
    doc["figures"].update(_figures(out, t2, curves))
    doc["difficulty"] = difficulty_sections(runs, out)
    doc["figures"].update({f"difficulty_run{d['run']}": d["figure"] for d in doc["difficulty"]})
    atomic_write_text(out / "report.json", json.dumps(doc, indent=1, default=str))
    atomic_write_text(out / "report.md", report_markdown(doc))
    return doc


# Evaluation results count reasoning with the generation backend's tokenizer (SampleResult.reasoning_tokens).
DIFFICULTY_UNIT = "reasoning tokens"


def difficulty_sections(runs: Sequence[RunResults], out: Path) -> list[dict]:
    """ConCuR difficulty (pass rate vs reasoning length of passing samples) for each run
    whose samples counted reasoning traces, with its scatter plot."""
    sections = []
    for i, r in enumerate(runs, 1):
        if not r.attempts:
            continue
        result = difficulty_table(r.attempts)
        figure = plot_difficulty(result, out / f"difficulty_run{i}.png", DIFFICULTY_UNIT).name
        sections.append({"run": i, "source": r.source, "unit": DIFFICULTY_UNIT, "figure": figure, **result.to_json()})
    return sections


def _select(runs: Sequence[RunResults], selector: str) -> list[int]:
    wanted = parse_label_arg(selector)
    if "method" in wanted:
        wanted["method"] = method_name(wanted["method"])
    return [i for i, r in enumerate(runs) if all(str(r.labels.get(k)) == str(v) for k, v in wanted.items())]


def paired_comparisons(runs: Sequence[RunResults], compare: Sequence[str]) -> list[dict]:
    """Paired comparisons (cuset.analysis.paired) for each "A:B" selector pair, Holm-adjusted together."""
    pairs = []
    for spec in compare:
        if spec.count(":") != 1:
            raise ResultsError(f"--compare {spec!r}: write two label selectors separated by ':', "
                             "e.g. method=SFT:method=CuSeT")
        sel_a, sel_b = spec.split(":")
        a, b = _select(runs, sel_a), _select(runs, sel_b)
        for sel, idx in ((sel_a, a), (sel_b, b)):
            if not idx:
                raise ResultsError(f"--compare {spec!r}: no run has the labels {sel!r} "
                                 f"(labels: {[r.labels for r in runs]})")
        pairs.append((sel_a, a, sel_b, b))
    if not compare and len(runs) == 2:
        pairs.append(("run 1", [0], "run 2", [1]))
    found = []   # (pair index, difference): every comparison of the report is one family for Holm
    for k, (_, a, _, b) in enumerate(pairs):
        for metric in (*METRIC_KEYS, *PERF_METRIC_KEYS):
            score = lambda i: {t: m.get(metric) for t, m in runs[i].task_metrics.items()}
            d = compare_task_scores([score(i) for i in a], [score(i) for i in b], metric=metric)
            if d is not None:
                found.append((k, d))
    adjusted = holm_adjust([d for _, d in found]) if len(found) > 1 else [d for _, d in found]
    out = []
    for k, (name_a, a, name_b, b) in enumerate(pairs):
        rows = [{**d.to_json(), "sentence": d.sentence(name_a, name_b)}
                for (j, _), d in zip(found, adjusted) if j == k]
        out.append({"a": name_a, "b": name_b, "runs_a": [i + 1 for i in a], "runs_b": [i + 1 for i in b],
                    "n_comparisons": len(found), "rows": rows})
    return out


PAIRED_METHOD_TEXT = (
    "B - A over the tasks both sides score, in percentage points. Tasks and training runs are both random: the "
    "interval is Student's t with Satterthwaite degrees of freedom on the task-level variance of the paired "
    "differences plus each side's run-to-run variance (a run answers every task, so its effect does not average "
    "out over tasks); p is the same t-test of no difference (cuset.analysis.paired).")


def _figures(out: Path, t2: list[dict], curves: dict) -> dict:
    figs = {}
    measured = [r for r in t2 if r["source"] == MEASURED]
    if any(not r["setting"] for r in measured):  # the method comparison; sweep cells have their own figure
        measured = [r for r in measured if not r["setting"]]
    if measured:
        models = list(dict.fromkeys(r["model"] for r in measured))
        series = list(dict.fromkeys(_series_name(r) for r in measured))  # Table 2's order: methods, then settings
        panels = [(label, {(r["model"], _series_name(r)): r[key] for r in measured if r[key] is not None})
                  for key, label in (("function@1", "Pass@1 Function"), ("function@3", "Pass@3 Function"))]
        figs["table2"] = plots.method_bars(out / "table2_function.png", models, series, panels,
                                           title="Functional correctness by model and method (this run"
                                           + ("; runs with a Setting in Table 2 are left out)" if len(measured) < sum(
                                               r["source"] == MEASURED for r in t2) else ")")).name
    panels = []
    for param, series in curves.items():
        if not series:
            continue
        lines = []
        colors = iter(f"C{i}" for i in range(100))
        first = {}
        for s in series:
            tag = ", ".join(f"{v}" for k, v in s["key"].items() if k in ("model", "method"))
            for key, label in (("function@1", "Pass@1 Function"), ("function@3", "Pass@3 Function")):
                color = next(colors)
                first.setdefault(key, color)
                lines.append({"label": f"{label}: {tag}", "x": s["x"], "y": s["metrics"][key], "color": color})
        for key, label in (("function@1", "Pass@1 Function"), ("function@3", "Pass@3 Function")):
            metric = "pass@" + key.split("@")[1]
            pts = sorted((p["value"], p[metric]["function"]) for p in published_points(param) if "function" in p.get(metric, {}))
            if pts:
                lines.append({"label": f"{label}: {PUBLISHED_LABEL}, Qwen2.5-Coder-7B (values stated in its text)",
                              "x": [x for x, _ in pts], "y": [y for _, y in pts], "style": "published",
                              "color": first.get(key)})
        panels.append({"param": param, "xlabel": HPARAMS[param], "title": HPARAMS[param], "series": lines,
                       "log_x": param in ("window", "lam")})
    if panels:
        figs["figure4"] = plots.hyperparameter_curves(out / "fig4_hyperparameters.png", panels,
                                                      title="Hyper-parameter analysis (Figure 4)").name
    return figs


def _series_name(row: dict) -> str:
    return f"{row['method']} ({row['setting']})" if row.get("setting") else row["method"]


def report_markdown(doc: dict) -> str:
    lines = [f"# {doc['title']}", "",
             f"Metrics: {doc['metric_definition']['text']}. Numbers are percent of tasks.",
             f"Rows whose Source is \"{doc['published_label']}\" are copied from the paper "
             f"({doc['published_source']['title']}, arXiv {doc['published_source']['arxiv']}) for reference; "
             "they were measured by its authors on other hardware and models, not by this toolkit.", "",
             "## Runs", "",
             "| # | Run | Labels | Tasks | Samples | Skipped tasks |", "|---:|---|---|---:|---:|---:|"]
    for i, r in enumerate(doc["runs"], 1):
        labels = inline(", ".join(f"{k}={v}" for k, v in r["labels"].items()))
        c = r["counts"]
        lines.append(f"| {i} | {code(r['source'])} | {labels} | {c.get('n_tasks')} | {c.get('n_samples')} | "
                     f"{c.get('n_skipped_tasks', 0)} |")
    lines.append("")
    if doc.get("task_check"):
        lines += defects_markdown(doc["task_check"])
    lines += ["## Main results (shaped like Table 2)", "", table2_markdown(doc["table2"]), ""]
    lines += perf_runs_markdown(doc["runs"])
    for cmp in doc.get("paired", []):
        lines += [f"## Paired comparison: {inline(cmp['b'])} (runs {cmp['runs_b']}) vs {inline(cmp['a'])} "
                  f"(runs {cmp['runs_a']})", "",
                  PAIRED_METHOD_TEXT + (f" Holm-adjusted p (column p_Holm) over the {cmp['n_comparisons']} comparisons "
                                        "in this report; 'significant' uses it." if cmp.get("n_comparisons", 1) > 1
                                        else ""), "",
                  "| metric | tasks | runs A/B | A | B | B - A | 95% interval | p | p_Holm | significant |",
                  "|---|---:|---|---:|---:|---:|---|---|---|---|"]
        for r in cmp["rows"]:
            interval = ("none (no variation)" if r["low"] is None
                        else f"[{100 * r['low']:+.1f}, {100 * r['high']:+.1f}]")
            runs_note = "" if r["run_variance"] == "estimated" else " *"
            lines.append(f"| {inline(r['metric'])} | {r['n_tasks']} | {r['n_seeds'][0]}/{r['n_seeds'][1]}{runs_note} | "
                         f"{100 * r['mean_a']:.1f} | {100 * r['mean_b']:.1f} | {100 * r['delta']:+.1f} | {interval} | "
                         f"{format_p(r['p_value'])[2:]} | "
                         f"{'' if r.get('p_holm') is None else format_p(r['p_holm'])[2:]} | "
                         f"{'yes' if r['significant'] else 'no'} |")
        notes = sorted({r["run_variance"] for r in cmp["rows"]} - {"estimated"})
        lines += [f"\\* {RUN_VARIANCE[n]}." for n in notes]
        lines += [""] + [f"- {inline(r['sentence'])}" for r in cmp["rows"]] + [""]
    if "table2" in doc["figures"]:
        lines += [f"![Table 2]({doc['figures']['table2']})", ""]
    lines += ["## Models, size and generation cost (shaped like Table 3)", "", table3_markdown(doc["table3"]), ""]
    if doc["table5"]:
        lines += ["## Ablation of CuSeT components (shaped like Table 5)", "",
                  "Switches marked `?` are inferred for published rows (the paper's check marks are lost in its text "
                  "version; see published.json).", "", table5_markdown(doc["table5"]), ""]
    if doc["figure4"]:
        lines += ["## Hyper-parameter analysis (like Figure 4)", ""]
        for param, series in doc["figure4"].items():
            lines += [f"### {HPARAMS[param]}", "", hparam_markdown(series, param), ""]
        if "figure4" in doc["figures"]:
            lines += [f"![Figure 4]({doc['figures']['figure4']})", ""]
    for d in doc.get("difficulty", []):
        labels = inline(", ".join(f"{k}={v}" for k, v in doc["runs"][d["run"] - 1]["labels"].items()))
        lines += [difficulty_markdown(DifficultyResult.from_json(d), d["unit"], figure=d["figure"],
                                      title=f"Task difficulty from reasoning length (ConCuR), run {d['run']} ({labels})")]
    statuses = {}
    for r in doc["runs"]:
        for k, v in (r["counts"].get("statuses") or {}).items():
            statuses.setdefault(k, []).append(v)
    if statuses:
        lines += ["## Sample outcomes per run", "", "| Run | " + " | ".join(inline(k) for k in sorted(statuses)) + " |",
                  "|---" * (len(statuses) + 1) + "|"]
        for i, r in enumerate(doc["runs"], 1):
            st = r["counts"].get("statuses") or {}
            lines.append(f"| {i} | " + " | ".join(str(st.get(k, 0)) for k in sorted(statuses)) + " |")
        lines.append("")
    return "\n".join(lines)


def perf_runs_markdown(runs: list[dict]) -> list[str]:
    """Each perf=true run's performance numbers (summary.json's overall.perf) side by side."""
    rows = [(i, r["counts"].get("perf")) for i, r in enumerate(runs, 1) if r["counts"].get("perf")]
    if not rows:
        return []
    num = lambda v, f="{:.2f}": "n/a" if v is None else f.format(v)  # noqa: E731
    lines = ["## Performance per run", "",
             "| Run | measured | median speedup (eager) | geomean (eager) | fast_1 (eager) | fast_1 (compile) | "
             "CUDABench mean score | BU | CE |", "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for i, p in rows:
        if not p.get("measured"):
            lines.append(f"| {i} | {inline(p.get('reason') or 'no')} | n/a | n/a | n/a | n/a | n/a | n/a | n/a |")
            continue
        kb, cb = p.get("kernelbench") or {}, p.get("cudabench") or {}
        eager = kb.get("speedup_eager") or {}
        lines.append(f"| {i} | on {inline(', '.join(p.get('devices') or ['?']))} | {num(eager.get('median'))} | "
                     f"{num(eager.get('geomean'))} | {num((kb.get('fast_p') or {}).get('1'), '{:.1%}')} | "
                     f"{num((kb.get('fast_p_compile') or {}).get('1'), '{:.1%}')} | "
                     f"{num(cb.get('mean_score'), '{:.3f}')} | {num(cb.get('mean_bandwidth_utilisation'), '{:.3f}')} | "
                     f"{num(cb.get('mean_compute_efficiency'), '{:.3f}')} |")
    lines += ["", "Paired comparisons below include fast_p (per task: the share of its samples that are correct and "
                  "faster than eager by more than p) and the CUDABench roofline score where both runs timed them.", ""]
    return lines

