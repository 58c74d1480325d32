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

BASE_LABEL = "Vanilla (pretrained base)"
PASS_KEYS = ("compile@1", "compile@3", "function@1", "function@3")


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


def write_report(run) -> Path:
    """Write `<out>/report.md` and `<out>/report.json` for a finished DemoRun."""
    from cuset.analysis.results import load_run

    out: Path = run.out
    rows = {model: model_metrics(run.eval_dir(model) / "results.jsonl") for model in run.models}
    runs = {model: load_run(run.eval_dir(model)) for model in run.models}
    methods = ["vanilla"] + run.cfg.method_list()
    by_method = {m: [r for r in run.models if run.method_of(r) == m] for m in methods}
    confidence = json.loads((out / "confidence" / "confidence.json").read_text())
    trains = {m: json.loads((run.cell_dir(m) / "train" / "run_summary.json").read_text()) for m in run.models if m != "vanilla"}
    doc = {"config": json.loads((out / "demo_config.json").read_text()), "metrics": rows,
           "methods": {m: method_row([runs[r] for r in by_method[m]], [rows[r] for r in by_method[m]])
                       for m in methods},
           "runs": {m: {"method": run.method_of(m), "seed": run.seed_of(m)} for m in run.models},
           "paired": paired_rows(runs, by_method, methods[1], methods[2:]) if len(methods) > 2 else [],
           "base_nll": json.loads((out / "base_nll.json").read_text()),
           "reference_fit": {m: json.loads(run.reference_fit_path(m).read_text()) for m in run.models},
           "confidence": {k: confidence[k] for k in ("ks", "groups", "windows", "threshold")},
           "training": {m: {"steps": t["steps"], "final_metrics": t["final_metrics"],
                            "trainable_parameters": t["trainable_parameters"],
                            "cuda_spans": t["config"]["data"]["cuda_spans"],
                            "cuda_token_share": t["data"]["cuda_tokens"] / max(1, t["data"]["supervised_tokens"])}
                        for m, t in trains.items()},
           "base_model": base_model_facts(run.vanilla), "timings_s": run.timings,
           "time": run_time(run.timings, run.reused, time.perf_counter() - run.started)}
    atomic_write_text(out / "report.json", json.dumps(doc, indent=1, default=str))
    atomic_write_text(out / "report.md", _markdown(run, doc))
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
    t = doc["time"]
    minutes = lambda s: f"{s / 60:.1f} minutes"  # noqa: E731
    reused = set(t["reused_steps"])
    lines = ["## Time per step (seconds)", "",
             f"Wall time of this invocation: {minutes(t['wall_s'])}. Sum of the step times, including steps reused "
             f"from earlier runs: {minutes(t['steps_s'])}; of the steps run this time: {minutes(t['steps_run_now_s'])} "
             f"({len(reused)} of {len(doc['timings_s'])} steps reused).", "",
             "| Step | Seconds | Ran |", "|---|---|---|"]
    lines += [f"| {k} | {v} | {'earlier run (reused)' if k in reused else 'this run'} |"
              for k, v in doc["timings_s"].items()]
    return lines


def method_row(runs: list, metrics: list[dict]) -> dict:
    """One method over its seeds: each Pass@k as mean with a 95% bootstrap interval over
    tasks and seeds (None where no task has k samples), plus the mean tokens per sample."""
    from cuset.analysis.paired import bootstrap_mean, common_tasks, task_matrix

    row = {"n_seeds": len(runs), "n_samples": sum(m["n_samples"] for m in metrics)}
    for key in PASS_KEYS:
        per_run = [{t: m.get(key) for t, m in r.task_metrics.items()} for r in runs]
        tasks = common_tasks(per_run)
        row[key] = asdict(bootstrap_mean(task_matrix(per_run, tasks))) if tasks else None
    tokens = [m["avg_tokens"] for m in metrics if m.get("avg_tokens") is not None]
    row["avg_tokens"] = sum(tokens) / len(tokens) if tokens else None
    return row


def paired_rows(runs: dict, by_method: dict, reference: str, others: list[str]) -> list[dict]:
    """Each other method - the reference method, paired over tasks and seeds, per Pass@k."""
    from cuset.analysis.paired import common_tasks, paired_bootstrap, task_matrix

    out = []
    for method in others:
        for key in PASS_KEYS:
            per_run = [{t: m.get(key) for t, m in runs[r].task_metrics.items()}
                       for r in by_method[reference] + by_method[method]]
            tasks = common_tasks(per_run)
            if len(tasks) < 2:
                continue
            n_ref = len(by_method[reference])
            d = paired_bootstrap(task_matrix(per_run[:n_ref], tasks), task_matrix(per_run[n_ref:], tasks), metric=key)
            out.append({"a": reference, "b": method, **d.to_json(),
                        "sentence": d.sentence(row_label(reference), row_label(method))})
    return out


def _interval(cell: dict | None) -> str:
    return "n/a" if cell is None else f"{100 * cell['mean']:.1f} [{100 * cell['low']:.1f}, {100 * cell['high']:.1f}]"


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


def _markdown(run, doc: dict) -> str:
    out: Path = run.out
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
        f"{instruct} (\"vanilla\"): it never saw the fine-tuning families ({cfg['families']}). "
        f"Before fine-tuning, its NLL per response token on the fine-tuning set is **{nll['nll']:.3f}** "
        f"({nll['n_examples']} examples, {nll['n_tokens']:,} tokens). It was then fine-tuned ({cfg['finetune']}) for "
        f"{cfg['finetune_steps']} steps with each of {', '.join(row_label(m) for m in methods)} "
        f"(CuSeT: tau={cfg['tau']}, lambda={cfg['lam']}, window={cfg['window']}) on {cfg['n_train']} synthesised "
        f"tasks, {seeds} seed(s) each. Each model generated {cfg['samples']} samples for each of {cfg['n_eval']} "
        f"held-out tasks (holdout: {cfg['holdout']}), which were compiled with nvcc and run on the CPU execution "
        "backend.",
        "",
        "## Results (Table 2/3 shape)",
        "",
        "Compilation = nvcc compiled the program; Function = its outputs passed the task's checker. "
        "Pass@k uses the unbiased estimator over the samples of each task, averaged over tasks (percent; "
        "with several seeds, also over seeds); brackets: 95% bootstrap interval over tasks and seeds.",
        "",
        "| Model | Compilation Pass@1 | Compilation Pass@3 | Function Pass@1 | Function Pass@3 | Avg. tokens | Samples | Per-sample results |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for method, m in doc["methods"].items():
        links = ", ".join(f"[{_rel(run.eval_dir(r) / 'results.jsonl', out)}]({_rel(run.eval_dir(r) / 'results.jsonl', out)})"
                          for r, info in doc["runs"].items() if info["method"] == method)
        tokens = "n/a" if m.get("avg_tokens") is None else f"{m['avg_tokens']:.0f}"
        lines.append(f"| {row_label(method)} | {_interval(m['compile@1'])} | {_interval(m['compile@3'])} | "
                     f"{_interval(m['function@1'])} | {_interval(m['function@3'])} | {tokens} | {m['n_samples']} | "
                     f"{links} |")
    if doc["paired"]:
        ref = row_label(doc["paired"][0]["a"])
        lines += ["", f"## Paired comparisons with {ref}", "",
                  f"Each method minus {ref} on the same tasks: a bootstrap over tasks and, within each, seeds "
                  "(`cuset report --compare` computes the same for any two result sets).", ""]
        lines += [f"- {p['sentence']}" for p in doc["paired"]]
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
    lines += ["", *time_lines(doc)]
    lines += ["", "These are demo-scale numbers measured by this run (tiny model, synthetic tasks, minutes of CPU "
              "training): they show that the pipeline works end to end, not the paper's results.", ""]
    return "\n".join(lines)
