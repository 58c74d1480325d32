"""`cuset demo --regime`: when does CuSeT beat SFT? The same fine-tuning arms on bases of several
strengths (issue 39).

Each level is a whole demo run (`cuset.demo.run.DemoRun`) under `<out>/base-k<steps>`, its base
warmed up with `warmup_steps = k` steps of SFT on the fine-tuning families at points neither the
fine-tuning nor the evaluation set holds; every level after the first starts from the first
level's pretrained model, so the levels differ in the warm-up only. The map collects from each
level's report.json: the base's NLL and mechanism statistics on the fine-tuning set (before any
fine-tuning), each arm's function Pass@1 difference from SFT paired over tasks with tasks and
runs as random effects (`cuset.analysis.paired`, as the level's own report computes it), and per
arm the share of target tokens the objective left out of the loss over training (`dropped_frac`
of the training log). It writes regime.json, regime.md and regime.png; re-running with the same
`out` resumes every level.

Competence is the map's axis (issue 60): each base's compile@1 and function@1 on the evaluation
tasks before fine-tuning (its `vanilla` run, evaluated like every arm) stand beside its NLL and
token statistics, the figure plots each arm's difference from SFT against the base's function@1,
and the competence gate (`competence_gate`: untuned compile@1 >= gate_compile and function@1 >=
gate_function, the paper's bases being at 69-80% and 35-42%) says in words whether any base is
where the paper's claim can be tested. Each level also records the share of its base's p <= tau
tokens that are replaceable, with and without replaceable tokens in the fine-tuning programs
(`low_tokens.json`, cuset.demo.lowtokens), and the map states the fine-tuning regime and why it
deviates from the paper's where it does.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

from cuset.demo.config import DemoConfig
from cuset.io import atomic_write_text
from cuset.provenance import provenance

METRIC = "function@1"


def level_dir(out: Path, steps: int) -> Path:
    return out / f"base-k{steps}"


def run_regime(cfg: DemoConfig) -> Path:
    """Run (or resume) every level, then write the map; returns the path of regime.md."""
    from cuset.demo.run import DemoRun

    from cuset.demo.lowtokens import level_low_tokens
    from cuset.errors import CusetError
    from cuset.experiment import StepLog

    deviations = cfg.paper_finetune_deviations()
    if deviations and not cfg.finetune_reason.strip():
        raise CusetError(f"the map fine-tunes with {'; '.join(deviations)}, not as the paper does (LoRA r=8, alpha 16 "
                         "at 1e-4): say why with finetune_reason=\"...\" (the map prints it), or drop the overrides")
    out = Path(cfg.out) if cfg.out else Path("runs") / time.strftime("regime-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    pretrained = cfg.pretrained
    levels = []
    for steps in cfg.regime_level_list():
        run = DemoRun(replace(cfg, warmup_steps=steps, out=str(level_dir(out, steps)), pretrained=pretrained), level_dir(out, steps))
        run.run()
        StepLog(run.out, f"regime k={steps}").run("low_tokens", lambda run=run: level_low_tokens(run))
        pretrained = pretrained or str(run.pretrained_model.resolve())  # the first level's pretraining, shared by the rest
        levels.append(run)
    doc = regime_map([(steps, run.out) for steps, run in zip(cfg.regime_level_list(), levels)], out,
                     gate=(cfg.gate_compile, cfg.gate_function))
    doc["wall_s"] = round(time.perf_counter() - started, 1)
    doc["provenance"] = provenance()  # of the map; each level's report.json keeps its own
    return write_map(doc, out)


def levels_under(out: Path) -> list[tuple[int, Path]]:
    """The finished levels (a report.json written) under a map's directory, weakest base first."""
    found = []
    for directory in out.glob("base-k*"):
        suffix = directory.name[len("base-k"):]
        if suffix.isdigit() and (directory / "report.json").is_file():
            found.append((int(suffix), directory))
    return sorted(found)


def map_from_levels(out: Path, gate: tuple[float, float] | None = None) -> Path:
    """Write the map from the levels already finished under `out`, running nothing: a map whose
    levels ran in separate invocations, or with different arms (e.g. the Table 5 switches at one
    level only); each level's own report.json says which arms it holds. `gate`: (compile@1,
    function@1) of the competence gate (default DemoConfig's)."""
    levels = levels_under(out)
    if not levels:
        from cuset.errors import CusetError

        raise CusetError(f"{out}: no finished level (base-k<steps>/report.json) to map; run `cuset demo --regime "
                         f"--out {out}` first")
    doc = regime_map(levels, out, **({"gate": gate} if gate else {}))
    doc["provenance"] = provenance()
    return write_map(doc, out)


def calibrate(cfg: DemoConfig, checkpoints: list[int]) -> Path:
    """Which warm-up lengths give which base strength: one warm-up of max(checkpoints) steps that
    saves the model at every multiple of the smallest spacing, then each checkpoint in
    `checkpoints` scored on the fine-tuning references as a level's base is (NLL per token and
    the mechanism statistics). A level of k steps schedules its learning rate over k steps, a
    checkpoint at step k of a longer warm-up over max(checkpoints): the calibration picks the
    levels, each level's own base is measured again when it runs. Writes calibration.json and
    calibration.md in `cfg.out`; resumable (finished checkpoints are not scored twice)."""
    import math

    import numpy as np

    from cuset.demo.report import regime_of
    from cuset.demo.run import DemoRun, base_mechanism
    from cuset.experiment import StepLog

    checkpoints = sorted(set(checkpoints))
    if not checkpoints or checkpoints[0] < 1:
        raise ValueError(f"calibration checkpoints must be warm-up steps >= 1, got {checkpoints}")
    out = Path(cfg.out) if cfg.out else Path("runs") / time.strftime("regime-calibration-%Y%m%d-%H%M%S")
    run = DemoRun(replace(cfg, warmup_steps=checkpoints[-1], out=str(out)), out)
    out.mkdir(parents=True, exist_ok=True)
    steps = StepLog(out, "calibration")
    steps.run("data", run.make_data)
    steps.run("base_model", run.make_base_model)
    every = math.gcd(*checkpoints)
    warm_dir = out / "warmup"
    steps.run("warmup", lambda: _warm_up_with_checkpoints(run, warm_dir, checkpoints[-1], every))
    path = out / "calibration.json"
    doc = json.loads(path.read_text()) if path.exists() else {"levels": {}}
    for k in [0] + checkpoints:
        if str(k) in doc["levels"]:
            continue
        model = run.pretrained_model if k == 0 else warm_dir / f"checkpoint-{k}"
        samples, _, _ = run._score(run.train_tasks, limit=64, model=str(model))
        nll = np.concatenate([-np.log(np.clip(s.confidences, 1e-12, 1.0)) for s in samples])
        doc["levels"][str(k)] = {"warmup_steps": k, "nll": float(nll.mean()), "n_examples": len(samples),
                                 "mechanism": base_mechanism(samples, tau=cfg.tau)}
        atomic_write_text(path, json.dumps(doc, indent=1))
    doc.update(warmup_steps_total=checkpoints[-1], warmup_lr=cfg.warmup_lr, n_warmup=cfg.n_warmup,
               seconds=StepLog(out, "calibration").seconds, provenance=provenance())
    atomic_write_text(path, json.dumps(doc, indent=1))
    lines = ["# Base-strength calibration", "",
             f"One warm-up of {checkpoints[-1]} steps (lr {cfg.warmup_lr}, {cfg.n_warmup} warm-up tasks); each "
             "checkpoint scored on the first 64 fine-tuning references.", "",
             "| Warm-up step | NLL | Low tokens (p <= tau) | Low CUDA-sensitive | Low neutral | Mean p sensitive | "
             "Mean p neutral | Regime |", "|---|---|---|---|---|---|---|---|"]
    for row in sorted(doc["levels"].values(), key=lambda r: r["warmup_steps"]):
        m = row["mechanism"]
        lines.append(f"| {row['warmup_steps']} | {row['nll']:.3f} | {_share(m['fit'].get('share_low'))} | "
                     f"{_share(m['fit'].get('share_low_sensitive'))} | {_share(m['fit'].get('share_low_neutral'))} | "
                     f"{m['mean_conf_sensitive']:.3f} | {m['mean_conf_neutral']:.3f} | {regime_of(row)[0]} |")
    atomic_write_text(out / "calibration.md", "\n".join(lines) + "\n")
    return out / "calibration.md"


def _warm_up_with_checkpoints(run, directory: Path, steps: int, every: int) -> None:
    """One warm-up of `steps` steps of `run`'s pretrained base on its warm-up set, as a level's base is
    warmed up (cuset.demo.warm_build), saving the model and tokenizer at every multiple of `every`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cuset.demo.base_build import base_corpus
    from cuset.demo.warm_build import reply_rows, warm_up
    from cuset.tasks import load_tasks

    cfg = run.cfg
    torch.manual_seed(cfg.seed)
    tokenizer = AutoTokenizer.from_pretrained(run.pretrained_model)
    model = AutoModelForCausalLM.from_pretrained(run.pretrained_model, dtype=torch.float32)

    def save(step: int, loss: float) -> None:
        if step % every == 0:
            model.save_pretrained(directory / f"checkpoint-{step}")
            tokenizer.save_pretrained(directory / f"checkpoint-{step}")

    pairs = base_corpus([], load_tasks(run.warmup_tasks)[0]).conversations
    warm_up(model, reply_rows(tokenizer, pairs)[0], steps=steps, batch_size=cfg.batch_size, lr=cfg.warmup_lr,
            seed=cfg.seed, on_step=save)


def dropped_over_training(train_log: Path) -> dict:
    """Share of target tokens the objective left out of the loss (`dropped_frac`, token-weighted per
    logged step): at the first and last logged step and averaged over the logged steps."""
    from cuset.train.callbacks import read_log

    values = [r["dropped_frac"] for r in read_log(train_log) if "dropped_frac" in r]
    if not values:
        return {"first": None, "last": None, "mean": None, "n_logged": 0}
    return {"first": values[0], "last": values[-1], "mean": sum(values) / len(values), "n_logged": len(values)}


def _default_gate() -> tuple[float, float]:
    fields = DemoConfig.__dataclass_fields__
    return fields["gate_compile"].default, fields["gate_function"].default


def base_competence(report: dict) -> dict:
    """The base's compile@1 and function@1 on the evaluation tasks before fine-tuning: its
    `vanilla` run of the level's report (mean over tasks of each task's Pass@1)."""
    row = report["methods"]["vanilla"]
    return {key: row[key]["mean"] if row.get(key) else None for key in ("compile@1", "function@1")} | {
        "n_tasks": row["function@1"]["n_tasks"] if row.get("function@1") else None, "n_samples": row["n_samples"]}


def finetune_regime(config: dict) -> dict:
    """How a level fine-tuned (from its report's config), with its deviations from the paper's."""
    from dataclasses import fields

    known = {f.name for f in fields(DemoConfig)}
    cfg = DemoConfig(**{k: v for k, v in config.items() if k in known})
    return {"finetune": cfg.finetune, "finetune_lr": cfg.finetune_lr, "finetune_steps": cfg.finetune_steps,
            "deviations": cfg.paper_finetune_deviations(), "reason": cfg.finetune_reason}


def competence_gate(levels: list[dict], *, min_compile: float, min_function: float) -> dict:
    """Which bases pass the competence gate (untuned compile@1 >= min_compile and function@1 >=
    min_function on the evaluation tasks), with the sentence the map states."""
    passed = [row["warmup_steps"] for row in levels
              if row["base"]["compile@1"] is not None and row["base"]["function@1"] is not None
              and row["base"]["compile@1"] >= min_compile and row["base"]["function@1"] >= min_function]
    each = "; ".join(f"k = {row['warmup_steps']}: compile@1 {_share(row['base']['compile@1'])}, function@1 "
                     f"{_share(row['base']['function@1'])}" for row in levels)
    rule = (f"compile@1 >= {100 * min_compile:.0f}% and function@1 >= {100 * min_function:.0f}% on the evaluation "
            "tasks before fine-tuning (the paper's bases: 69-80% and 35-42%)")
    if passed:
        text = (f"Competence gate ({rule}): passed by the base at k = {', '.join(map(str, passed))}; the comparisons "
                f"there test the paper's claim on a base of its competence ({each}).")
    else:
        text = (f"Competence gate ({rule}): no base passes it ({each}). No comparison in this map is made on a base "
                "at the paper's competence, so the map cannot test the paper's claim; it shows how the objectives "
                "behave on bases below it.")
    return {"min_compile": min_compile, "min_function": min_function, "passed": passed, "text": text}


def regime_map(levels: list[tuple[int, Path]], out: Path, gate: tuple[float, float] | None = None) -> dict:
    """The map's rows from each level's report.json, low_tokens.json and training logs (paths
    relative to `out`), and the competence gate over them (`gate`: its compile@1 and function@1,
    default DemoConfig's)."""
    from cuset.demo.lowtokens import LOW_TOKENS

    rows = []
    for steps, directory in levels:
        report = json.loads((directory / "report.json").read_text())
        paired = {p["b"]: p for p in report["paired"] if p["metric"] == METRIC and p["a"] == "sft"}
        dropped = {}
        for run, info in report["runs"].items():
            log = directory / "cells" / run / "train" / "train_log.jsonl"
            if info["method"] != "vanilla" and log.is_file():
                dropped.setdefault(info["method"], []).append(dropped_over_training(log))
        rows.append({
            "warmup_steps": steps, "dir": str(directory.relative_to(out)) if directory.is_relative_to(out) else str(directory),
            "base_nll": report["base_nll"]["nll"], "mechanism": report["base_nll"].get("mechanism"),
            "base": base_competence(report), "finetune": finetune_regime(report["config"]),
            "low_tokens": (json.loads((directory / LOW_TOKENS).read_text())["conditions"]
                           if (directory / LOW_TOKENS).is_file() else None),
            "methods": {m: report["methods"][m][METRIC] for m in report["method_order"] if m != "vanilla"},
            "paired": {m: {k: p[k] for k in ("delta", "low", "high", "p_value", "p_holm", "significant",
                                              "n_tasks", "n_seeds", "run_variance", "sentence")}
                       for m, p in paired.items()},
            "two_by_two": {f"{r['method']}/{r['part']}": {
                "method": r["method"], "reference": r["reference"], "method_on": r["method_on"],
                "reference_on": r["reference_on"], "part": r["part"], "delta": r["estimate"],
                **{k: r[k] for k in ("low", "high", "p_value", "significant", "n_tasks", "n_seeds", "run_variance",
                                     "sentence")}}
                for r in report.get("two_by_two") or [] if r["metric"] == METRIC},
            "dropped": dropped,
            "holm_family": holm_family(report["paired"]),
            # evaluator -> runs (cuset.evaluate.judge); absent in reports from before judges
            **({"judges": report["judges"]} if report.get("judges") else {}),
        })
    min_compile, min_function = gate or _default_gate()
    return {"metric": METRIC, "levels": rows,
            "gate": competence_gate(rows, min_compile=min_compile, min_function=min_function)}


def holm_family(paired: list[dict]) -> dict:
    """The comparisons a level's Holm adjustment runs over (cuset.demo.report.paired_rows): every
    arm's difference from the reference on every Pass@k metric of its report."""
    return {"arms": len({p["b"] for p in paired}), "metrics": list(dict.fromkeys(p["metric"] for p in paired)),
            "comparisons": len(paired)}


def _family_words(row: dict) -> str:
    f = row["holm_family"]
    grid = f"{f['arms']} arm{'s' * (f['arms'] != 1)} x {len(f['metrics'])} Pass@k metric{'s' * (len(f['metrics']) != 1)}"
    full = f["arms"] * len(f["metrics"])
    return (f"{grid} = {full} comparisons" if f["comparisons"] == full
            else f"{f['comparisons']} testable comparisons of {grid}")


def comparisons(row: dict) -> dict[str, tuple[str, dict]]:
    """Each fine-tuned arm of a level -> (the arm it is compared with, the comparison): SFT for
    every arm, except an arm fine-tuned on programs with replaceable tokens whose reference ran
    in that condition too (methods=2x2), which is compared within its condition (CuSeT:repl with
    SFT:repl, from the level's 2x2 contrasts, not Holm-adjusted): measured against SFT on the
    programs as written, its difference would mix the condition's effect into the method's."""
    out = {arm: ("sft", p) for arm, p in row["paired"].items()}
    for c in (row.get("two_by_two") or {}).values():
        if c["part"] == "with":
            out[c["method_on"]] = (c["reference_on"], c)
    return out


def interactions(row: dict) -> dict[str, dict]:
    """method -> its 2x2 interaction at this level: how much replaceable tokens change its
    difference from the reference ((with) - (without))."""
    return {c["method"]: c for c in (row.get("two_by_two") or {}).values() if c["part"] == "interaction"}


def _comparator(doc: dict, arm: str) -> str:
    """What `arm` is compared with in the map (the same at every level where it ran)."""
    return next((comparisons(row)[arm][0] for row in doc["levels"] if arm in comparisons(row)), "sft")


def write_map(doc: dict, out: Path) -> Path:
    atomic_write_text(out / "regime.json", json.dumps(doc, indent=1, default=str))
    if any(row["paired"] for row in doc["levels"]):
        map_figure(doc, out / "regime.png")
    atomic_write_text(out / "regime.md", regime_markdown(doc))
    return out / "regime.md"


def map_figure(doc: dict, path: Path) -> Path:
    """Function Pass@1 difference from SFT against the base's function@1 on the evaluation tasks
    before fine-tuning (its competence), one series per arm, with its paired 95% interval; the
    competence gate's function@1 as a dashed line."""
    from cuset.analysis.plots import differences_against
    from cuset.demo.report import row_label

    arms = sorted({m for row in doc["levels"] for m in row["paired"]}, key=_arm_order(doc))
    series = {f"{row_label(arm)} - {row_label(_comparator(doc, arm))}":
              [(100 * row["base"]["function@1"], p["delta"], p["low"], p["high"])
               for row in doc["levels"] for _, p in [comparisons(row).get(arm, (None, None))] if p is not None]
              for arm in arms}
    return differences_against(path, series, xlabel="base function@1 on the evaluation tasks before fine-tuning (%; "
                               "each base's NLL is in regime.md)", ylabel=f"{doc['metric']} difference (points)",
                               title="When does CuSeT beat SFT? (95% paired intervals)", log_x=False,
                               vline=(100 * doc["gate"]["min_function"], "competence gate"))


def _arm_order(doc: dict):
    order = []
    for row in doc["levels"]:
        order += [m for m in row["methods"] if m not in order]
    return lambda m: order.index(m) if m in order else len(order)


# How run-to-run variance entered an interval (cuset.analysis.paired.RUN_VARIANCE), as the map marks it.
_VARIANCE_FLAGS = {"estimated": "", "borrowed": "†"}   # anything else: "*", task sampling only
_VARIANCE_NOTE = ("* one run per side: run-to-run variance not estimated, the interval covers task sampling only; "
                  "† one side has a single run: the other side's run-to-run variance stands in for it")


def _cell(p: dict | None) -> str:
    if p is None:
        return "n/a"
    interval = "no interval" if p["low"] is None else f"[{100 * p['low']:+.1f}, {100 * p['high']:+.1f}]"
    flag = _VARIANCE_FLAGS.get(p["run_variance"], "*")
    sig = " (significant)" if p["significant"] else ""
    return f"{100 * p['delta']:+.1f} {interval}{flag}{sig}"


def _p(p) -> str:
    return "n/a" if p is None else "< 1e-300 (underflow)" if p == 0 else f"{p:.2g}"


def _share(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


# The token statistics' regime (cuset.demo.report.regime_of) as the map words it: what the statistics show,
# not a claim about the model; competence (the gate) is what says whether the paper's claim is testable.
MAP_REGIME_WORDS = {"premise": "token statistics as the paper's premise has them",
                    "between": "token statistics between the weak and the premise regime",
                    "weak": "token statistics of a weak base", "unknown": "token statistics not recorded"}


def _base_words(row: dict) -> str:
    """`base function@1 0.0%, compile@1 55.2%, NLL 1.489`: a base as the map's sentences name it."""
    base = row.get("base") or {}
    return (f"base function@1 {_share(base.get('function@1'))}, compile@1 {_share(base.get('compile@1'))}, "
            f"NLL {row['base_nll']:.3f}")


def conclusion_lines(doc: dict) -> list[str]:
    """Per CuSeT arm, the levels where it beats SFT significantly, loses significantly, or shows no
    difference the data can tell, each level with its base's regime; written from the numbers,
    whatever they say. With one run per arm the intervals cover task sampling only, so a
    'significant' there is about these training runs, not the method (the powered run is needed)."""
    from cuset.demo.report import regime_of, row_label

    lines = []
    arms = sorted({m for row in doc["levels"] for m in row["paired"]}, key=_arm_order(doc))
    for arm in arms:
        verdicts = {"beats": [], "loses to": [], "shows no significant difference from": [], "cannot be tested against": []}
        kinds = {}
        for row in doc["levels"]:
            _, p = comparisons(row).get(arm, (None, None))
            if p is None:
                continue
            regime = regime_of({"mechanism": row["mechanism"]})[0] if row["mechanism"] else "unknown"
            where = f"k = {row['warmup_steps']} ({_base_words(row)}, {MAP_REGIME_WORDS[regime]}: {_cell(p)})"
            key = ("cannot be tested against" if p["p_value"] is None else "shows no significant difference from"
                   if not p["significant"] else "beats" if p["delta"] > 0 else "loses to")
            if key.startswith("shows no") and "p_holm" in p and p["low"] is not None and (p["low"] > 0 or p["high"] < 0):
                # the interval is unadjusted; the verdict is Holm's, over the level's whole family
                where = (f"{where[:-1]}; its unadjusted interval excludes 0, but Holm's adjustment over the "
                         f"level's {_family_words(row)} leaves it at p = {_p(p['p_holm'])})")
            verdicts[key].append(where)
            kinds[row["warmup_steps"]] = p["run_variance"]
        other = row_label(_comparator(doc, arm))
        within = " (within the replaceable-token condition; not Holm-adjusted)" if _comparator(doc, arm) != "sft" else ""
        parts = [f"{verb} {other} at " + "; ".join(where) for verb, where in verdicts.items() if where]
        lines.append(f"- {row_label(arm)} {' and '.join(parts)}{within}.{_variance_sentence(kinds)}")
    for method in dict.fromkeys(m for row in doc["levels"] for m in interactions(row)):
        parts = []
        for row in doc["levels"]:
            c = interactions(row).get(method)
            if c is not None:
                verdict = ("no test possible" if c["p_value"] is None else "significant" if c["significant"]
                           else "not significant")
                parts.append(f"k = {row['warmup_steps']}: {_cell({**c, 'significant': False})}, {verdict}")
        ref = row_label(next(c["reference"] for row in doc["levels"] for c in interactions(row).values()))
        lines.append(f"- Replaceable tokens change {row_label(method)} - {ref} by (with - without): "
                     + "; ".join(parts) + " (the 2x2's interaction; not Holm-adjusted).")
    return lines or ["- No fine-tuned arm besides SFT was run."]


def _variance_sentence(kinds: dict) -> str:
    """What the intervals of one arm's comparisons carry, level by level (warm-up steps -> run_variance)."""
    single = [k for k, v in kinds.items() if v not in _VARIANCE_FLAGS]
    borrowed = [k for k, v in kinds.items() if v == "borrowed"]
    if single and len(single) == len(kinds):
        return " One run per arm: the intervals cover task sampling only."

    def levels(ks: list) -> str:
        return "k = " + ", ".join(str(k) for k in ks)

    out = ""
    if single:
        out += f" At {levels(single)} one run per side: those intervals cover task sampling only."
    if borrowed:
        out += (f" At {levels(borrowed)} one side has a single run: the other side's run-to-run variance "
                "stands in for it.")
    return out


def _finetune_lines(levels: list[dict]) -> list[str]:
    """The fine-tuning regime of the map's levels, and why it deviates from the paper's where it does."""
    regimes = {json.dumps(row["finetune"], sort_keys=True): row["finetune"] for row in levels}
    lines = []
    for ft in regimes.values():
        how = (f"{ft['finetune']} fine-tuning at learning rate {ft['finetune_lr']:g} for {ft['finetune_steps']} steps"
               + (" (LoRA r=8, alpha 16)" if ft["finetune"] == "lora" else ""))
        where = "" if len(regimes) == 1 else " at k = " + ", ".join(
            str(row["warmup_steps"]) for row in levels if row["finetune"] == ft)
        if not ft["deviations"]:
            lines.append(f"Fine-tuning{where}: {how}, the paper's regime.")
        else:
            reason = ft["reason"].strip() or "no reason was recorded with the run"
            lines.append(f"Fine-tuning{where}: {how}; it deviates from the paper's (LoRA r=8, alpha 16 at 1e-4): "
                         f"{'; '.join(ft['deviations'])}. Why: {reason}.")
    return lines


def _low_token_lines(levels: list[dict]) -> list[str]:
    """Per level and replaceable-token condition: the base's tokens at p <= tau and what they are."""
    rows = [(row, name, c) for row in levels for name, c in (row.get("low_tokens") or {}).items()]
    if not rows:
        return []
    lines = ["", "## What the base's low tokens are, with and without replaceable tokens", "",
             "The base scored teacher-forced on the first fine-tuning references as written (replaceable tokens off) "
             "and on their replaceable variant (on: function names, comment lines and indentation drawn per program, "
             "the `:repl` arms' training set). Of the tokens at p <= tau (what the confidence mask drops): the shares "
             "that are CUDA-sensitive, neutral and replaceable (a function name, a whole-line comment or indentation; "
             "replaceable tokens may be either); and the share of replaceable tokens that are low "
             "(cuset.demo.lowtokens).", "",
             "| k | Replaceable tokens | Tokens | Low tokens | Low: CUDA-sensitive | Low: neutral | Low: replaceable | "
             "Replaceable tokens that are low |", "|---|---|---|---|---|---|---|---|"]
    for row, name, c in rows:
        lines.append(f"| {row['warmup_steps']} | {name} | {c['n_tokens']:,} | {_share(c['share_low'])} | "
                     f"{_share(c['low_sensitive'])} | {_share(c['low_neutral'])} | {_share(c['low_replaceable'])} | "
                     f"{_share(c['replaceable_low'])} |")
    return lines


def _judge_lines(levels: list[dict]) -> list[str]:
    """A warning for each level whose runs different evaluators judged (cuset.evaluate.judge)."""
    from cuset.demo.report import UNSTAMPED

    lines = [f"**k = {row['warmup_steps']}: its runs were judged by {len(row['judges'])} different evaluators** "
             f"({'; '.join(f'`{j or UNSTAMPED}`: {len(runs)} run(s)' for j, runs in row['judges'].items())}); "
             "its differences may be the evaluators'. Run the map's command again to judge them alike."
             for row in levels if len(row.get("judges") or {}) > 1]
    return [*lines, ""] if lines else []


def regime_markdown(doc: dict) -> str:
    from cuset.demo.report import PREMISE_MAX_LOW, WEAK_MIN_LOW, regime_of, row_label

    levels = doc["levels"]
    arms = sorted({m for row in levels for m in row["methods"]}, key=_arm_order(doc))
    others = [m for m in arms if m != "sft"]
    crossed = list(dict.fromkeys(m for row in levels for m in interactions(row)))
    within = any(_comparator(doc, m) != "sft" for m in others)
    families = "; ".join(f"k = {row['warmup_steps']}: {_family_words(row)}" for row in levels
                         if row["holm_family"]["comparisons"])
    lines = ["# When does CuSeT beat SFT? A base-strength map", "",
             f"Each level is one demo run (linked) whose base was warmed up with k steps of SFT on the fine-tuning "
             f"families at points neither the fine-tuning nor the evaluation set holds. {doc['metric']} of each arm "
             "minus SFT on the same tasks, with a 95% interval from tasks and training runs as random effects "
             "(cuset.analysis.paired; 'significant' is Holm-adjusted within each level"
             + (f", over its family: {families}; the intervals are not adjusted" if families else "")
             + f"; {_VARIANCE_NOTE})."
             + (" An arm fine-tuned on programs with replaceable tokens is compared with SFT fine-tuned on the same "
                "programs, and each interaction is how much replaceable tokens change a method's difference from "
                "SFT: the 2x2's own contrasts, not Holm-adjusted." if within else ""), "",
             f"**{doc['gate']['text']}**", "", *_judge_lines(levels), *_finetune_lines(levels), "",
             "| Warm-up steps k | Base compile@1 | Base function@1 | Base NLL | SFT " + doc["metric"] + " | "
             + " | ".join(f"{row_label(m)} - {row_label(_comparator(doc, m))}" for m in others)
             + "".join(f" | Interaction: {row_label(m)} - SFT, with - without" for m in crossed) + " |",
             "|---" * (5 + len(others) + len(crossed)) + "|"]
    for row in levels:
        sft = row["methods"].get("sft")
        sft_text = "n/a" if sft is None else f"{100 * sft['mean']:.1f}"
        compared = comparisons(row)
        lines.append(f"| [{row['warmup_steps']}]({row['dir']}/report.md) | {_share(row['base']['compile@1'])} | "
                     f"{_share(row['base']['function@1'])} | {row['base_nll']:.3f} | {sft_text} | "
                     + " | ".join(_cell(compared.get(m, (None, None))[1]) for m in others)
                     + "".join(f" | {_cell(interactions(row).get(m))}" for m in crossed) + " |")
    lines += ["", "Base compile@1 and function@1: the base before fine-tuning on the evaluation tasks (its vanilla run, "
              "the mean over tasks of each task's Pass@1); the figure plots each arm's difference from "
              + ("the arm the table compares it with" if within else "SFT") + " against the base's function@1.", "",
              "![map](regime.png)", "", "## What the map says", ""] + conclusion_lines(doc) + [
              "", "## Each base before fine-tuning (fine-tuning references)", "",
              "Low = target tokens at p <= tau, the ones CuSeT's confidence mask leaves out of the loss. The paper's "
              "premise (its Fig. 1): a base that finds most target tokens likely, CUDA-sensitive tokens less "
              f"confident than neutral ones. Regime: premise = at most {100 * PREMISE_MAX_LOW:.0f}% low tokens and "
              f"sensitive tokens significantly less confident (KS p < 0.05); weak = over {100 * WEAK_MIN_LOW:.0f}% "
              "low tokens; between otherwise.", "",
              "| k | Compile@1 | Function@1 | NLL | Low tokens | Low CUDA-sensitive | Low neutral | Mean p CUDA-sensitive "
              "| Mean p neutral | KS D | KS p | Regime (token statistics) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in levels:
        m = row["mechanism"]
        competence = f"{_share(row['base']['compile@1'])} | {_share(row['base']['function@1'])}"
        if not m:
            lines.append(f"| {row['warmup_steps']} | {competence} | {row['base_nll']:.3f} | not recorded | | | | | | | |")
            continue
        regime = regime_of({"mechanism": m})[0]
        fit, ks = m["fit"], m["ks"] or {}
        mean = lambda x: "n/a" if x is None else f"{x:.3f}"  # noqa: E731
        lines.append(f"| {row['warmup_steps']} | {competence} | {row['base_nll']:.3f} | {_share(fit.get('share_low'))} | "
                     f"{_share(fit.get('share_low_sensitive'))} | {_share(fit.get('share_low_neutral'))} | "
                     f"{mean(m['mean_conf_sensitive'])} | {mean(m['mean_conf_neutral'])} | "
                     f"{mean(ks.get('statistic'))} | {_p(ks.get('pvalue'))} | {regime} |")
    lines += _low_token_lines(levels)
    lines += ["", "## Tokens each arm left out of the loss over training", "",
              "dropped_frac of the training log: the share of target tokens whose loss coefficient is 0 (for CuSeT: "
              "p <= tau and outside the CUDA mask), at the first and last logged step and averaged over them "
              "(mean over seeds).", "",
              "| k | Arm | First step | Last step | Mean over training |", "|---|---|---|---|---|"]
    for row in levels:
        for arm in arms:
            runs = row["dropped"].get(arm, [])
            if not runs:
                continue
            avg = lambda key: _share(None if any(r[key] is None for r in runs)  # noqa: E731
                                     else sum(r[key] for r in runs) / len(runs))
            lines.append(f"| {row['warmup_steps']} | {row_label(arm)} | {avg('first')} | {avg('last')} | "
                         f"{avg('mean')} |")
    lines += ["", "## Paired comparisons, in full", ""]
    for row in levels:
        lines += [f"- k = {row['warmup_steps']}: {p['sentence']}" for p in row["paired"].values()]
        lines += [f"- k = {row['warmup_steps']}: {c['sentence']} (2x2, not Holm-adjusted)"
                  for c in (row.get("two_by_two") or {}).values()]
    if "wall_s" in doc:
        lines += ["", f"Wall time of this invocation: {doc['wall_s'] / 60:.1f} minutes (levels resumed from an "
                  "earlier invocation count only the time spent now)."]
    return "\n".join(lines) + "\n"
