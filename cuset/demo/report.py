"""The demo's report.md: a table shaped like the paper's Table 2/3 and the
confidence figure, every number recomputed from the per-sample result files."""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict
from pathlib import Path

from cuset.io import atomic_write_text
from cuset.provenance import provenance

BASE_LABEL = "Vanilla (pretrained base)"
PASS_KEYS = ("compile@1", "compile@3", "function@1", "function@3")
UNSTAMPED = "unstamped"   # how a report names results written before judges were stamped


def row_label(method: str) -> str:
    """`cuset` -> CuSeT, `cuset:paper:noconf` -> CuSeT (paper spans, no confidence mask)."""
    from cuset.analysis.results import method_name
    from cuset.demo.config import parse_method_spec

    if method == "vanilla":
        return BASE_LABEL
    spec = parse_method_spec(method)
    qualifiers = spec.qualifiers()
    return method_name(spec.loss) + (f" ({', '.join(qualifiers)})" if qualifiers else "")


def model_metrics(results_path: Path) -> dict:
    """Overall metrics of one model, summarised afresh from its results.jsonl."""
    from cuset.evaluate.metrics import summarize
    from cuset.evaluate.records import load_results

    summary = summarize(load_results(results_path))
    return {**summary.overall, "n_skipped_tasks": len(summary.skipped_tasks)}


def base_model_facts(model_dir: Path) -> dict:
    """Vocabulary and parameter count of the saved base model, read from its files (the
    BPE may stop short of the requested vocab_size when it runs out of merges)."""
    from safetensors import safe_open

    config = json.loads((model_dir / "config.json").read_text())
    n = 0
    for shard in model_dir.glob("*.safetensors"):
        with safe_open(str(shard), framework="pt") as f:
            n += sum(math.prod(f.get_slice(key).get_shape()) for key in f.keys())
    return {"vocab_size": config["vocab_size"], "parameters": n}


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}"


def _p_value(p: float) -> str:
    return "< 1e-300 (underflow)" if p == 0 else f"= {p:.2g}"


def _rel(path: Path, base: Path) -> str:
    return os.path.relpath(path, base)


# A committed report keeps each run's per-sample records without logs: enough to recompute
# every metric, interval and comparison (`cuset demo --report-from`, `cuset report`).
COMPACT_DETAIL_CHARS = 300


def write_compact_results(results_path: Path, out_path: Path) -> Path:
    """The per-sample records of `results_path` without step logs, details cut short."""
    from dataclasses import replace

    from cuset.evaluate.records import load_results, save_results

    save_results(out_path, (replace(r, steps=(), detail=r.detail[:COMPACT_DETAIL_CHARS],
                                    robust_detail=r.robust_detail[:COMPACT_DETAIL_CHARS])
                            for r in load_results(results_path)))
    return out_path


# What a committed report keeps beside its results so that its samples can be read (`cuset view`
# shows each sample's program, prompt and attribution from them): every run's generations and the
# evaluation tasks, gzip-compressed.
GENERATIONS_DIR = "generations"
EVAL_TASKS = "data/eval.jsonl.gz"


def write_generations(run, out: Path) -> dict[str, str]:
    """`<out>/generations/<run>.jsonl.gz` for every model and `<out>/data/eval.jsonl.gz`; returns
    run -> generations path relative to `out`."""
    from cuset.io import atomic_write_jsonl_gz, read_jsonl

    atomic_write_jsonl_gz(out / EVAL_TASKS, read_jsonl(run.eval_tasks))
    paths = {}
    for m in run.models:
        paths[m] = f"{GENERATIONS_DIR}/{m}.jsonl.gz"
        atomic_write_jsonl_gz(out / paths[m], read_jsonl(run.generations(m)))
    return paths


def write_report(run) -> Path:
    """Write `<out>/report.md`, `<out>/report.json`, `<out>/results/<run>.jsonl` and the compressed
    generations (`write_generations`) for a finished DemoRun."""
    out: Path = run.out
    for m in run.models:
        write_compact_results(run.eval_dir(m) / "results.jsonl", out / "results" / f"{m}.jsonl")
    generations = write_generations(run, out)
    confidence = json.loads((out / "confidence" / "confidence.json").read_text())
    trains = {m: json.loads((run.cell_dir(m) / "train" / "run_summary.json").read_text()) for m in run.models if m != "vanilla"}
    doc = {"config": json.loads((out / "demo_config.json").read_text()),
           "method_order": ["vanilla"] + run.cfg.method_list(),
           "runs": {m: {"method": run.method_of(m), "seed": run.seed_of(m), "results": f"results/{m}.jsonl",
                        "generations": generations[m],
                        "full_results": _rel(run.eval_dir(m) / "results.jsonl", out)} for m in run.models},
           "base_nll": json.loads((out / "base_nll.json").read_text()),
           "reference_fit": {m: json.loads(run.reference_fit_path(m).read_text()) for m in run.models},
           "confidence": {k: confidence[k] for k in ("ks", "groups", "windows", "threshold")},
           "training": {m: {"steps": t["steps"], "final_metrics": t["final_metrics"],
                            "trainable_parameters": t["trainable_parameters"],
                            "cuda_spans": t["config"]["data"]["cuda_spans"],
                            "cuda_token_share": t["data"]["cuda_tokens"] / max(1, t["data"]["supervised_tokens"])}
                        for m, t in trains.items()},
           "base_model": base_model_facts(run.vanilla), "timings_s": run.timings,
           "time": run_time(run.timings, run.reused, time.perf_counter() - run.started),
           "provenance": provenance()}
    return _write(add_statistics(doc, out), out)


def report_from(report_json: Path) -> Path:
    """Recompute a demo report's metrics, intervals and comparisons from the compact per-sample
    results beside its report.json, and rewrite report.json and report.md."""
    from cuset.errors import CusetError

    path = Path(report_json)
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise CusetError(f"{path}: cannot read a demo report.json ({e})") from None
    runs = doc.get("runs", {})
    if "method_order" not in doc or any("results" not in info for info in runs.values()):
        raise CusetError(f"{path}: written before demo reports kept compact per-sample results; re-run the demo "
                         "(or the study) to get a report that can be recomputed")
    missing = [info["results"] for info in runs.values() if not (path.parent / info["results"]).is_file()]
    if missing:
        raise CusetError(f"{path}: per-sample results missing beside it: {', '.join(missing)}")
    if doc.get("attribution"):  # the report has a table of divergence causes: recomputed from its records
        from cuset.demo.attribute import ATTRIBUTION_DIR

        missing = [f"{ATTRIBUTION_DIR}/{r}.jsonl" for r in runs
                   if not (path.parent / ATTRIBUTION_DIR / f"{r}.jsonl").is_file()]
        if missing:
            raise CusetError(f"{path}: attribution records missing beside it: {', '.join(missing)} (copy the run's "
                             "attribution/ folder with its results)")
    return _write(add_statistics(doc, path.parent), path.parent)


def add_statistics(doc: dict, base: Path) -> dict:
    """Per-run metrics, each method's intervals and each method's paired comparison with the first,
    all from the per-sample results files that doc['runs'] names (relative to `base`)."""
    from cuset.analysis.results import load_run

    results = {r: base / info["results"] for r, info in doc["runs"].items()}
    doc["metrics"] = {r: model_metrics(p) for r, p in results.items()}
    scores = {r: load_run(p).task_metrics for r, p in results.items()}
    methods = doc["method_order"]
    by_method = {m: [r for r, info in doc["runs"].items() if info["method"] == m] for m in methods}
    doc["methods"] = {m: method_row([scores[r] for r in by_method[m]], [doc["metrics"][r] for r in by_method[m]])
                      for m in methods}
    doc["paired"] = paired_rows(scores, by_method, methods[1], methods[2:]) if len(methods) > 2 else []
    doc["two_by_two"] = two_by_two_rows(scores, by_method, methods[1]) if len(methods) > 2 else []
    doc["attribution"] = attribution_tables(base, list(doc["runs"]))
    doc["judges"] = judges_of(results)
    return doc


def judges_of(results: dict[str, Path]) -> dict[str, list[str]]:
    """Which evaluator judged each run's samples (cuset.evaluate.judge): judge -> runs; "" for
    results written before judges were stamped."""
    from cuset.evaluate.records import load_results

    found: dict[str, set[str]] = {}
    for run, path in results.items():
        for r in load_results(path):
            found.setdefault(r.judge, set()).add(run)
    return {judge: sorted(runs) for judge, runs in sorted(found.items())}


def judge_sentence(doc: dict) -> str:
    """One line on who judged the runs: one evaluator, or a warning that verdicts are mixed."""
    judges = doc.get("judges") or {}
    if set(judges) <= {""}:
        return ""   # a report from before judges were stamped
    if len(judges) == 1:
        return f" Every sample of every run was judged by one evaluator (judge `{next(iter(judges))}`)."
    parts = "; ".join(f"`{j or UNSTAMPED}`: {', '.join(runs)}" for j, runs in judges.items())
    return (f" **The samples were judged by {len(judges)} different evaluators** ({parts}): a difference "
            "between runs may be the evaluators'; run the demo's command again to judge them all alike.")


def attribution_tables(base: Path, runs: list[str]) -> dict | None:
    """Each run's table of divergence causes, from the attribution/<run>.jsonl files under `base`
    (None for a report written before the demo attributed its failures)."""
    from cuset.analysis.attribution import cause_table
    from cuset.demo.attribute import read_attribution

    records = {r: read_attribution(base, r) for r in runs}
    if any(v is None for v in records.values()):
        return None
    return {r: cause_table(v) for r, v in records.items()}


def _attribution_lines(doc: dict) -> list[str]:
    from cuset.analysis.attribution import table_lines

    tables = doc.get("attribution")
    if not tables:
        return []
    tau = doc["config"]["tau"]
    return ["", "## Where failing samples leave the correct programs", "",
            "For each failing sample: the first token where its program leaves every correct program of its task "
            "(the reference and every passing sample of any run; the longest common token prefix with any of them "
            "ends there), and the token the correct program it followed longest has there: its probability under the "
            f"base model before fine-tuning (p <= tau = {tau}: a token CuSeT's confidence mask and ProFit leave out "
            "of the loss) and whether the run's CUDA mask covers it. Shares are of the attributed samples; "
            "per-sample records in `attribution/<run>.jsonl` (cuset.analysis.attribution).", "",
            *table_lines(tables)]


def _write(doc: dict, out: Path) -> Path:
    atomic_write_text(out / "report.json", json.dumps(doc, indent=1, default=str))
    atomic_write_text(out / "report.md", _markdown(doc))
    return out / "report.md"


def run_time(timings: dict[str, float], reused, wall_s: float) -> dict:
    """The report's time figures. `wall_s` is this invocation's wall clock; the step times
    are kept apart from it, since a resumed run reuses steps an earlier one finished (their
    seconds are in `timings` but were not spent now) and the sum of the steps leaves out
    what runs between them."""
    return {"wall_s": round(wall_s, 1), "steps_s": round(sum(timings.values()), 1),
            "steps_run_now_s": round(sum(v for k, v in timings.items() if k not in reused), 1),
            "reused_steps": [k for k in timings if k in reused]}


def time_lines(doc: dict) -> list[str]:
    """The report's time section: wall time, the step times (reused ones named), a table per step."""
    minutes = lambda s: f"{s / 60:.1f} minutes"  # noqa: E731
    t = doc.get("time")
    if t is None:  # a report.json written before invocations kept their wall time
        reused = set()
        summary = (f"Sum of the step times: {minutes(sum(doc['timings_s'].values()))} (this report was written before "
                   "reports recorded their wall time or which steps an earlier invocation ran).")
    else:
        reused = set(t["reused_steps"])
        summary = (f"Wall time of this invocation: {minutes(t['wall_s'])}. Sum of the step times, including steps "
                   f"reused from earlier runs: {minutes(t['steps_s'])}; of the steps run this time: "
                   f"{minutes(t['steps_run_now_s'])} ({len(reused)} of {len(doc['timings_s'])} steps reused).")
    lines = ["## Time per step (seconds)", "", summary, "",
             "| Step | Seconds | Ran |", "|---|---|---|"]
    lines += [f"| {k} | {v} | {'earlier run (reused)' if k in reused else 'this run'} |"
              for k, v in doc["timings_s"].items()]
    return lines


def method_row(task_scores: list[dict], metrics: list[dict]) -> dict:
    """One method over its seeds: each Pass@k as mean with a 95% interval over tasks and runs
    (None where fewer than 2 tasks have k samples), plus the mean tokens per sample."""
    from cuset.analysis.paired import interval_of_task_scores

    row = {"n_seeds": len(task_scores), "n_samples": sum(m["n_samples"] for m in metrics)}
    for key in PASS_KEYS:
        interval = interval_of_task_scores([{t: m.get(key) for t, m in run.items()} for run in task_scores])
        row[key] = None if interval is None else asdict(interval)
    tokens = [m["avg_tokens"] for m in metrics if m.get("avg_tokens") is not None]
    row["avg_tokens"] = sum(tokens) / len(tokens) if tokens else None
    return row


def paired_rows(task_scores: dict, by_method: dict, reference: str, others: list[str]) -> list[dict]:
    """Each other method - the reference method, paired over tasks with run-to-run variance, per
    Pass@k; Holm-adjusted over all the rows (one family of comparisons)."""
    from cuset.analysis.paired import compare_task_scores, holm_adjust

    found = []
    for method in others:
        for key in PASS_KEYS:
            scores = lambda r: {t: m.get(key) for t, m in task_scores[r].items()}
            d = compare_task_scores([scores(r) for r in by_method[reference]], [scores(r) for r in by_method[method]],
                                    metric=key)
            if d is not None:
                found.append((method, d))
    adjusted = holm_adjust([d for _, d in found]) if len(found) > 1 else [d for _, d in found]
    return [{"a": reference, "b": method, **d.to_json(), "sentence": d.sentence(row_label(reference), row_label(method))}
            for (method, _), d in zip(found, adjusted)]


TWO_BY_TWO_PARTS = ("without", "with", "interaction")


def two_by_two_rows(task_scores: dict, by_method: dict, reference: str) -> list[dict]:
    """methods=2x2 (issue 60): for every method that ran, as `reference` (SFT) did, both without and
    with replaceable tokens in its fine-tuning programs, per Pass@k: method - reference without them,
    the same with them, and the interaction (with - without), each over the tasks every run of the
    cells scored, with tasks and runs as random effects (cuset.analysis.paired.contrast). Not
    Holm-adjusted: the paired comparisons above are the report's family; these are the 2x2's own
    questions. Empty where the reference has no twin with replaceable tokens."""
    from dataclasses import replace

    from cuset.analysis.paired import contrast_of_task_scores
    from cuset.demo.config import parse_method_spec

    specs = {m: parse_method_spec(m) for m in by_method if m != "vanilla"}
    twin = {m: next((r for r, spec in specs.items() if spec == replace(specs[m], replaceable=True)), None)
            for m in specs if not specs[m].replaceable}
    if twin.get(reference) is None:
        return []
    ref_on = twin[reference]
    rows = []
    for other, other_on in twin.items():
        if other == reference or other_on is None:
            continue
        terms = {"without": ((reference, -1), (other, 1)), "with": ((ref_on, -1), (other_on, 1)),
                 "interaction": ((reference, 1), (other, -1), (ref_on, -1), (other_on, 1))}
        a, b = row_label(reference), row_label(other)
        labels = {"without": f"{b} - {a}, without replaceable tokens", "with": f"{b} - {a}, with replaceable tokens",
                  "interaction": f"({b} - {a} with replaceable tokens) - ({b} - {a} without)"}
        for key in PASS_KEYS:
            for part in TWO_BY_TWO_PARTS:
                c = contrast_of_task_scores([(m, [{t: sc.get(key) for t, sc in task_scores[r].items()}
                                                  for r in by_method[m]], k) for m, k in terms[part]], metric=key)
                if c is not None:
                    rows.append({"method": other, "reference": reference, "method_on": other_on,
                                 "reference_on": ref_on, "part": part, **c.to_json(),
                                 "sentence": c.sentence(labels[part])})
    return rows


def two_by_two_lines(doc: dict) -> list[str]:
    """The report's 2x2 section: per method, its difference from the reference without and with
    replaceable tokens and the interaction, for the summary's metrics."""
    from cuset.analysis.paired import format_p

    rows = doc.get("two_by_two") or []
    if not rows:
        return []
    lines = ["", "## Replaceable tokens: the 2x2", "",
             "Each method minus the reference on the same tasks, in each condition of the fine-tuning programs, "
             "and the interaction: how much replaceable tokens change that difference (with - without). "
             "95% intervals with tasks and runs as random effects; not Holm-adjusted.", "",
             "| | " + " | ".join(METRIC_LABELS.get(m, m) for m in SUMMARY_METRICS) + " |",
             "|---" * (len(SUMMARY_METRICS) + 1) + "|"]
    for method in dict.fromkeys(r["method"] for r in rows):
        for part in TWO_BY_TWO_PARTS:
            cells = []
            for metric in SUMMARY_METRICS:
                r = next((x for x in rows if (x["method"], x["part"], x["metric"]) == (method, part, metric)), None)
                cells.append("n/a" if r is None else f"{100 * r['estimate']:+.1f} (no variation)" if r["low"] is None
                             else f"{100 * r['estimate']:+.1f} [{100 * r['low']:+.1f}, {100 * r['high']:+.1f}], "
                                  f"{format_p(r['p_value'])}")
            ref = row_label(rows[0]["reference"])
            label = {"without": f"{row_label(method)} - {ref}, without", "with": f"{row_label(method)} - {ref}, with",
                     "interaction": "interaction (with - without)"}[part]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def interval_text(cell: dict | None) -> str:
    """A rate with its 95% interval in percent; * when one run gave it (task sampling only)."""
    if cell is None:
        return "n/a"
    if cell["low"] is None:
        return f"{100 * cell['mean']:.1f} (no variation)"
    flag = "" if cell.get("run_variance", "estimated") == "estimated" else "*"
    return f"{100 * cell['mean']:.1f} [{100 * cell['low']:.1f}, {100 * cell['high']:.1f}]{flag}"


def _reference_fit_lines(fits: dict, tau: float) -> list[str]:
    """The table of how closely each model fits the held-out reference programs."""
    some = next(iter(fits.values()), {})
    lines = ["## How closely each model fits the held-out reference programs", "",
             f"Teacher-forced on the first {some.get('n_samples', 0)} held-out reference programs. Low = p <= tau "
             f"({tau}): the tokens CuSeT's confidence mask and ProFit leave out of the loss (DFT weights them by p). "
             f"Unreachable = the share of references holding a token at p < {some.get('unreachable', 1e-3)}, "
             "which the model will almost never write.", "",
             "| Run | NLL per token | Low tokens | Low among CUDA-sensitive | Low among neutral | Median p of low tokens "
             "| Unreachable references |",
             "|---|---|---|---|---|---|---|"]
    for model, f in fits.items():
        if not f.get("n_tokens"):
            lines.append(f"| {model} | no reference scored | | | | | |")
            continue
        median = "n/a" if f["median_p_low"] is None else f"{f['median_p_low']:.1e}"
        pct = lambda x: "n/a" if x is None else f"{_pct(x)}%"
        lines.append(f"| {model} | {f['nll']:.3f} | {pct(f['share_low'])} | {pct(f['share_low_sensitive'])} | "
                     f"{pct(f['share_low_neutral'])} | {median} | {pct(f['share_samples_unreachable'])} |")
    return lines


SUMMARY_METRICS = ("compile@1", "function@1", "function@3")
METRIC_LABELS = {"compile@1": "Compilation Pass@1", "function@1": "Function Pass@1", "function@3": "Function Pass@3"}


def summary_table(doc: dict) -> list[str]:
    """The report's headline table: each method's Compilation Pass@1 and Function Pass@1/@3 with
    intervals and its runs' function Pass@1, then each paired difference with its Holm-adjusted
    p. The README quotes it as written (tests/demo/test_study_docs.py checks that it does)."""
    from cuset.analysis.paired import format_p

    lines = ["| | Compilation Pass@1 | Function Pass@1 | Function Pass@3 | Runs (function Pass@1) |",
             "|---|---|---|---|---|"]
    for method, m in doc["methods"].items():
        runs = ", ".join(_pct(doc["metrics"][r].get("function@1"))
                         for r, info in doc["runs"].items() if info["method"] == method)
        lines.append(f"| {row_label(method)} | " + " | ".join(interval_text(m[k]) for k in SUMMARY_METRICS) + f" | {runs} |")
    for a, b in dict.fromkeys((p["a"], p["b"]) for p in doc["paired"]):
        cells = []
        for metric in SUMMARY_METRICS:
            d = next((p for p in doc["paired"] if (p["a"], p["b"], p["metric"]) == (a, b, metric)), None)
            if d is None:
                cells.append("n/a")
            elif d["low"] is None:
                cells.append(f"{100 * d['delta']:+.1f} (no variation: no test)")
            else:
                cells.append(f"{100 * d['delta']:+.1f} [{100 * d['low']:+.1f}, {100 * d['high']:+.1f}], "
                             f"Holm {format_p(d['p_holm'])}")
        lines.append(f"| {row_label(b)} - {row_label(a)} | " + " | ".join(cells) + " | |")
    return lines


def _warmup_text(cfg: dict) -> str:
    if not cfg.get("warmup_steps"):
        return f" (\"vanilla\"): it never saw the fine-tuning families ({cfg['families']})."
    return (f", then warmed up with {cfg['warmup_steps']} steps of SFT (learning rate {cfg['warmup_lr']}) on "
            f"{cfg['n_warmup']} prompt/program pairs of the fine-tuning families ({cfg['families']}) at (family, "
            "variant, size) points that neither the fine-tuning nor the evaluation set holds (checked) (\"vanilla\").")


# The regime a base is in, from its mechanism statistics on the fine-tuning references. The
# paper's premise (its Fig. 1, on 4B-32B code models): the base already finds almost every target
# token likely, so the few at p <= tau are replaceable noise the confidence mask may drop, and
# CUDA-sensitive tokens are the less confident ones. Thresholds on the share of tokens at p <= tau:
PREMISE_MAX_LOW = 0.05   # at most 5% dropped by the mask: "few tokens at p <= tau"
WEAK_MIN_LOW = 0.10      # over 10%: the mask drops a tenth of what the model must learn
NEARLY_NONE_LOW = 0.01   # under 1%: the mask has almost nothing to drop, whatever the regime's name


def regime_of(nll: dict) -> tuple[str, str]:
    """('premise' | 'between' | 'weak' | 'unknown', why) for a base, from base_nll.json."""
    m = nll.get("mechanism")
    if not m or m["fit"].get("share_low") is None:
        return "unknown", "its mechanism statistics were not recorded"
    low, ks = m["fit"]["share_low"], m.get("ks")
    ordered = (ks is not None and m["mean_conf_sensitive"] < m["mean_conf_neutral"] and ks["pvalue"] < 0.05)
    order = ("CUDA-sensitive tokens are significantly less confident than neutral ones" if ordered
             else "CUDA-sensitive tokens are not significantly less confident than neutral ones")
    if low <= PREMISE_MAX_LOW and ordered:
        return "premise", f"{100 * low:.1f}% of target tokens at p <= tau (at most {100 * PREMISE_MAX_LOW:.0f}%) and {order}"
    if low > WEAK_MIN_LOW:
        return "weak", (f"{100 * low:.1f}% of target tokens at p <= tau (over {100 * WEAK_MIN_LOW:.0f}%): the mask "
                        "drops tokens the model has yet to learn")
    return "between", f"{100 * low:.1f}% of target tokens at p <= tau and {order}"


REGIME_WORDS = {"premise": "the paper's premise holds on this base", "between": "between the weak and the premise regime",
                "weak": "weak base: the paper's premise does not hold", "unknown": "not determined"}


def regime_sentence(nll: dict, tau: float) -> str:
    regime, why = regime_of(nll)
    text = (f"**Regime: {REGIME_WORDS[regime]}** ({why}; tau = {tau}; `cuset demo --regime` maps CuSeT against SFT "
            "across base strengths).")
    low = ((nll.get("mechanism") or {}).get("fit") or {}).get("share_low")
    if low is not None and low < NEARLY_NONE_LOW:
        # "few tokens at p <= tau" taken to its limit: the premise's statistics hold, the mask does nothing
        text += (f" With {100 * low:.2f}% of target tokens at p <= tau the confidence mask has almost nothing to "
                 "drop: CuSeT can differ from SFT here only through its CUDA-span weight and its sample weight.")
    return text


# The paper's bases before fine-tuning, CUDABench Level 1 (its Table 2): what "a competent base" means.
PAPER_BASE_COMPILE = (0.69, 0.80)
PAPER_BASE_FUNCTION = (0.35, 0.42)


def competence_sentence(vanilla: dict) -> str:
    """The untuned base's compile@1 and function@1 in plain words, against the paper's bases.
    `vanilla`: the base's row of doc["methods"] (intervals with a mean)."""
    comp, func = (vanilla.get(k) for k in ("compile@1", "function@1"))
    if comp is None or func is None:
        return "**Base competence: not measured** (the untuned base's samples were not evaluated)."
    c, f = comp["mean"], func["mean"]
    if c >= PAPER_BASE_COMPILE[0] and f >= PAPER_BASE_FUNCTION[0]:
        verdict = "this base is as competent as theirs"
    elif c >= PAPER_BASE_COMPILE[0] / 2 and f >= PAPER_BASE_FUNCTION[0] / 2:
        verdict = "this base is below that"
    else:
        verdict = "this base is far below that, so this demo cannot test the paper's claim, only run its pipeline"
    return (f"**Base competence: the untuned base compiles {100 * c:.1f}% and passes {100 * f:.1f}%** of its samples "
            f"(compile@1, function@1); the paper's bases compile {100 * PAPER_BASE_COMPILE[0]:.0f}-"
            f"{100 * PAPER_BASE_COMPILE[1]:.0f}% and pass {100 * PAPER_BASE_FUNCTION[0]:.0f}-"
            f"{100 * PAPER_BASE_FUNCTION[1]:.0f}% of CUDABench Level 1 before fine-tuning (its Table 2): {verdict}.")


def _mechanism_text(m: dict | None, tau: float) -> str:
    """The paper's premise on this base (fine-tuning references), as a clause."""
    if not m or not m["fit"].get("n_tokens"):
        return ""
    fit, ks = m["fit"], m["ks"]
    pct = lambda x: "n/a" if x is None else f"{100 * x:.1f}%"  # noqa: E731
    text = (f"; {pct(fit['share_low'])} of its target tokens there are at p <= tau = {tau} (CUDA-sensitive "
            f"{pct(fit['share_low_sensitive'])}, neutral {pct(fit['share_low_neutral'])}), the tokens CuSeT's "
            f"confidence mask leaves out of the loss")
    if ks is not None:
        holds = m["mean_conf_sensitive"] < m["mean_conf_neutral"]
        text += (f"; mean confidence CUDA-sensitive {m['mean_conf_sensitive']:.3f} vs neutral "
                 f"{m['mean_conf_neutral']:.3f} (KS D = {ks['statistic']:.3f}, p {_p_value(ks['pvalue'])}; sensitive "
                 f"tokens {'less' if holds else 'not less'} confident than neutral ones)")
    return text


def _markdown(doc: dict) -> str:
    cfg = doc["config"]
    base = doc["base_model"]
    instruct = (f" and {cfg['n_instruct']} chat-formatted prompt/program pairs ({cfg['instruct_families']})"
                if cfg.get("n_instruct") else "")
    seeds = cfg.get("seeds", 1)
    methods = [m for m in doc["methods"] if m != "vanilla"]
    nll = doc["base_nll"]
    lines = [
        "# cuset demo: CuSeT vs SFT in miniature",
        "",
        f"A {cfg['layers']}-layer, hidden-{cfg['hidden']} Qwen2-architecture model ({base['parameters']:,} parameters) "
        f"with a {base['vocab_size']:,}-token byte-level BPE was built here and pretrained for "
        f"{cfg['pretrain_steps']} steps on {cfg.get('n_pretrain', 0)} programs of other families"
        f"{instruct}{_warmup_text(cfg)} "
        f"Before fine-tuning, its NLL per response token on the fine-tuning set is **{nll['nll']:.3f}** "
        f"({nll['n_examples']} examples, {nll['n_tokens']:,} tokens){_mechanism_text(nll.get('mechanism'), cfg['tau'])}. "
        f"It was then fine-tuned ({cfg['finetune']}) for "
        f"{cfg['finetune_steps']} steps with each of {', '.join(row_label(m) for m in methods)} "
        f"(CuSeT: tau={cfg['tau']}, lambda={cfg['lam']}, window={cfg['window']}) on {cfg['n_train']} synthesised "
        f"tasks, {seeds} seed(s) each. Each model generated {cfg['samples']} samples for each of {cfg['n_eval']} "
        f"held-out tasks (holdout: {cfg['holdout']}), which were compiled with nvcc and run on the CPU execution "
        f"backend.{judge_sentence(doc)}",
        "",
        competence_sentence(doc["methods"]["vanilla"]),
        "",
        regime_sentence(nll, cfg["tau"]) + " The regime is read from token statistics alone; the competence "
        "line above says whether the base writes working programs.",
        "",
        *[f"Carried over: run `{r}`, {why}." for r, why in doc.get("carried_runs", {}).items()],
        *([""] if doc.get("carried_runs") else []),
        "## Results (Table 2/3 shape)",
        "",
        "Compilation = nvcc compiled the program; Function = its outputs passed the task's checker. "
        "Pass@k uses the unbiased estimator over the samples of each task, averaged over tasks (percent; "
        "with several seeds, also over seeds); brackets: 95% interval with tasks and training runs as random "
        "effects (Student's t, Satterthwaite df; cuset.analysis.paired); * one run per method: run-to-run variance "
        "not estimated, the interval covers task sampling only.",
        "",
        "Summary (the differences: each method minus the first fine-tuned one on the same tasks, Holm-adjusted "
        "p over the report's comparisons; details below):",
        "",
        *summary_table(doc),
        "",
        "| Model | Compilation Pass@1 | Compilation Pass@3 | Function Pass@1 | Function Pass@3 | Avg. tokens | Samples | Per-sample results |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for method, m in doc["methods"].items():
        links = ", ".join(f"[{info['results']}]({info['results']})"
                          for info in doc["runs"].values() if info["method"] == method)
        tokens = "n/a" if m.get("avg_tokens") is None else f"{m['avg_tokens']:.0f}"
        lines.append(f"| {row_label(method)} | {interval_text(m['compile@1'])} | {interval_text(m['compile@3'])} | "
                     f"{interval_text(m['function@1'])} | {interval_text(m['function@3'])} | {tokens} | {m['n_samples']} | "
                     f"{links} |")
    if doc["paired"]:
        ref = row_label(doc["paired"][0]["a"])
        lines += ["", f"## Paired comparisons with {ref}", "",
                  f"Each method minus {ref} on the same tasks, with tasks and training runs as random effects; p is the "
                  f"t-test of no difference, and Holm-adjusted over the {len(doc['paired'])} comparisons below "
                  "('significant' uses the adjusted p) "
                  "(`cuset report --compare` computes the same for any two result sets).", ""]
        lines += [f"- {p['sentence']}" for p in doc["paired"]]
    lines += two_by_two_lines(doc)
    if seeds > 1:
        lines += ["", "Per run:", "", "| Run | Seed | Compilation Pass@1 | Function Pass@1 | Function Pass@3 |",
                  "|---|---|---|---|---|"]
        lines += [f"| {r} | {doc['runs'][r]['seed']} | {_pct(m.get('compile@1'))} | {_pct(m.get('function@1'))} | "
                  f"{_pct(m.get('function@3'))} |" for r, m in doc["metrics"].items()]
    lines += ["", "Outcomes per run (status counts over all samples):", ""]
    for model, m in doc["metrics"].items():
        counts = ", ".join(f"{k} {v}" for k, v in sorted(m.get("statuses", {}).items()))
        lines.append(f"- {model}: {counts or 'none'}")
    c = doc["confidence"]
    ks, groups, windows = c["ks"], c["groups"], c["windows"]
    pct = lambda x: "n/a" if x is None else f"{100 * x:.2f}%"
    lines += [
        "",
        "## Token confidence of the vanilla model (paper section 3)",
        "",
        f"Teacher-forced probability of each token of the held-out reference programs: CUDA-sensitive tokens (kernel bodies and launch "
        f"configurations) have mean confidence {groups['cuda_sensitive']['mean']:.3f} "
        f"({ks['n_sensitive']:,} tokens), neutral tokens {groups['cuda_neutral']['mean']:.3f} ({ks['n_neutral']:,}); "
        f"two-sample KS D = {ks['statistic']:.3f}, p {_p_value(ks['pvalue'])}. "
        f"{pct(windows.get('share_samples_with_low_window'))} of samples have a low-confidence window "
        f"(window {windows['size']}, below the neutral mean), and {pct(windows.get('share_low_windows_overlapping_sensitive'))} "
        f"of low-confidence windows overlap CUDA-sensitive tokens (paper: 74.47% and 91.18% on its data and models).",
        "",
        "![Figure 1: confidence densities](confidence/fig1_confidence_density.png)",
        "",
        "![Figure 2b: sliding-window confidence](confidence/fig2b_window_curve.png)",
        "",
        "Details: [confidence/confidence.md](confidence/confidence.md).",
        "",
        "## Training",
        "",
        f"Base model before fine-tuning: NLL {nll['nll']:.4f} per token on the fine-tuning set.",
        "",
        "CUDA-marked = share of the supervised response tokens inside the CUDA mask (`cuda_spans`: broad or paper).",
        "",
        "| Run | Steps | Trainable parameters | CUDA spans | CUDA-marked tokens | Final loss | Final NLL |",
        "|---|---|---|---|---|---|---|",
    ]
    for m, t in doc["training"].items():
        fm = t["final_metrics"]
        loss = fm.get("loss")
        final_nll = fm.get("nll")
        lines.append(f"| {m} | {t['steps']} | {t['trainable_parameters']:,} | {t['cuda_spans']} | "
                     f"{100 * t['cuda_token_share']:.1f}% | "
                     f"{'n/a' if loss is None else f'{loss:.4f}'} | "
                     f"{'n/a' if final_nll is None else f'{final_nll:.4f}'} |")
    lines += ["", "Logs: `train/<run>/` (JSONL log, TensorBoard, run_summary.json).", ""]
    lines += _reference_fit_lines(doc["reference_fit"], cfg["tau"])
    lines += _attribution_lines(doc)
    lines += ["", *time_lines(doc)]
    lines += ["", "These are demo-scale numbers measured by this run (tiny model, synthetic tasks, minutes of CPU "
              "training): they show that the pipeline works end to end, not the paper's results.", ""]
    return "\n".join(lines)
