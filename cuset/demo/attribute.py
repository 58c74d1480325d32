"""The demo's attribution step: every failing sample of every run traced to the first token where
it leaves every correct program of its task (`cuset.analysis.attribution` defines it), with the
base model's probability of the reference token there and whether the run's CUDA mask covers it.

Inputs, all from the demo's own files: the evaluation tasks (references, prompts at level 1),
each run's generations and results; the correct programs of a task are its reference and every
sample of it that passed in any run of the demo (in the order runs are listed, reference first).
Programs are tokenized as training tokenizes a reference (the fenced response after the task's
chat-rendered prompt), and the correct ones scored teacher-forced under the demo's base model
(`models/vanilla`: the model every run fine-tuned from). Writes `attribution/<run>.jsonl` (one
`Attribution` per failing sample) and `attribution/meta.json`; the report recomputes its table
from those files.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from cuset.analysis.attribution import Attribution, CorrectProgram, attribute
from cuset.io import atomic_write_json, atomic_write_jsonl

ATTRIBUTION_DIR = "attribution"
MAX_LENGTH = 4096   # prompt + the longest sample (max_new_tokens) fits; nothing is cut


def _example(task, code: str):
    from cuset.tasks import render_prompt
    from cuset.train.data.records import Example, wrap_response

    response, code_range = wrap_response(code, "fenced", "cuda")
    return Example(tuple(render_prompt(task, 1).messages()), response, "attribution", 0, code_range)


def _response_tokens(encoded) -> tuple[list[int], tuple[str, ...]]:
    return [encoded.input_ids[i] for i in encoded.positions], encoded.tokens


def attribute_runs(*, tasks_path: Path, runs: dict[str, tuple[Path, Path, str]], base_model: Path, tau: float,
                   out: Path, progress: bool = False) -> dict[str, list[Attribution]]:
    """`runs`: run name -> (generations.jsonl, results.jsonl, CUDA span mode of its mask).
    Writes `out/<run>.jsonl` and `out/meta.json`; returns the records per run."""
    from cuset.evaluate.records import load_results
    from cuset.experiment.scoring import encode_example, load_model, score_batches
    from cuset.generate.records import load_generations
    from cuset.tasks import load_tasks

    tasks = {str(t.id): t for t in load_tasks(tasks_path)[0]}
    results = {r: load_results(paths[1]) for r, paths in runs.items()}
    codes = {r: {(str(g.task_id), g.sample): g.code for g in load_generations(paths[0])} for r, paths in runs.items()}
    correct_code: dict[str, list[tuple[str, str]]] = {t: [("reference", task.bench_cu)] for t, task in tasks.items()}
    for run, records in results.items():
        for rec in sorted(records, key=lambda r: (str(r.task_id), r.sample)):
            code = codes[run].get((str(rec.task_id), rec.sample))
            if rec.passed and code and str(rec.task_id) in correct_code:
                correct_code[str(rec.task_id)].append((f"{run} sample {rec.sample}", code))
    model, tokenizer = load_model(str(base_model), device="cpu", dtype="float32")
    modes = sorted({mode for _, _, mode in runs.values()})
    # the base's probabilities do not depend on the span mode: scored once, the mask flags per mode
    flat = [(t, source, code) for t, programs in correct_code.items() for source, code in programs]
    encoded = {mode: [encode_example(tokenizer, _example(tasks[t], code), sample_id=f"{t}:{source}",
                                     max_length=MAX_LENGTH, spans_mode=mode) for t, source, code in flat]
               for mode in modes}
    scored = score_batches(model, tokenizer, encoded[modes[0]], batch_size=8, progress=progress)
    from cuset.spans import CUSET_KINDS

    correct: dict[str, dict[str, list[CorrectProgram]]] = {mode: {} for mode in modes}
    for mode in modes:
        for (t, source, _), enc, s in zip(flat, encoded[mode], scored):
            ids, texts = _response_tokens(enc)
            correct[mode].setdefault(t, []).append(CorrectProgram(
                source, tuple(ids), texts, tuple(float(p) for p in s.confidences),
                tuple(bool(k & frozenset(CUSET_KINDS)) for k in enc.kinds)))
    found: dict[str, list[Attribution]] = {}
    for run, records in results.items():
        mode = runs[run][2]
        rows = []
        for rec in sorted(records, key=lambda r: (str(r.task_id), r.sample)):
            tid = str(rec.task_id)
            if rec.passed or rec.status.value == "skipped" or tid not in tasks:
                continue
            code = codes[run].get((tid, rec.sample))
            ids = texts = None
            if code:
                ids, texts = _response_tokens(encode_example(tokenizer, _example(tasks[tid], code), sample_id=tid,
                                                             max_length=MAX_LENGTH, spans_mode=mode))
            rows.append(attribute(ids, texts or (), correct[mode][tid], tau=tau, task_id=rec.task_id,
                                  sample=rec.sample, status=rec.status.value))
        atomic_write_jsonl(out / f"{run}.jsonl", [r.to_json() for r in rows])
        found[run] = rows
    atomic_write_json(out / "meta.json", {
        "tau": tau, "base_model": str(base_model), "tasks": str(tasks_path),
        "spans": {run: paths[2] for run, paths in runs.items()},
        "inputs": {run: inputs_digest(paths[0], paths[1]) for run, paths in runs.items()},
        "correct_programs": {t: [source for source, _ in programs] for t, programs in correct_code.items()}}, indent=1)
    return found


def attribute_demo(run) -> None:
    """The attribution step of a finished `cuset.demo.run.DemoRun` (every run evaluated)."""
    cfg = run.cfg
    runs = {}
    for model in run.models:
        method = run.method_of(model)
        mode = cfg.cuda_spans if method == "vanilla" else cfg.method_spec(method).spans
        runs[model] = (run.generations(model), run.eval_dir(model) / "results.jsonl", mode)
    attribute_runs(tasks_path=run.eval_tasks, runs=runs, base_model=run.vanilla, tau=cfg.tau,
                   out=run.out / ATTRIBUTION_DIR, progress=cfg.progress)


def inputs_digest(generations: Path, results: Path) -> str:
    """sha256 of what a run's attribution reads: each sample's program and verdict (not the logs or
    timings, which differ between two evaluations that agree)."""
    from cuset.evaluate.records import load_results
    from cuset.generate.records import load_generations

    codes = sorted((str(g.task_id), g.sample, g.code or "") for g in load_generations(generations)) \
        if Path(generations).is_file() else []
    verdicts = sorted((str(r.task_id), r.sample, r.status.value, r.passed) for r in load_results(results))
    return hashlib.sha256(json.dumps([codes, verdicts]).encode()).hexdigest()


def attribution_stale(run) -> bool:
    """Whether a finished attribution step of `run` (a DemoRun) was computed from other programs or
    verdicts than it has now (an arm added to a finished demo, a run whose evaluator changed a
    verdict): the step must run again, over every run."""
    meta = run.out / ATTRIBUTION_DIR / "meta.json"
    if not meta.is_file():
        return False
    digests = json.loads(meta.read_text()).get("inputs") or {}
    return digests != {model: inputs_digest(run.generations(model), run.eval_dir(model) / "results.jsonl")
                       for model in run.models}


def read_attribution(directory: Path, run: str) -> list[Attribution] | None:
    """The attribution records of `run` under a demo (or committed report) directory; None when
    the demo wrote none (a report from before attribution)."""
    path = Path(directory) / ATTRIBUTION_DIR / f"{run}.jsonl"
    if not path.is_file():
        return None
    return [Attribution.from_json(json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]
