"""The demo pipeline: a miniature but honest CuSeT experiment on a CPU.

    data -> base model -> base NLL -> fine-tune (each method x seed) -> generate -> evaluate
         -> reference fit (each model) -> confidence -> report (intervals, paired comparisons)

A fine-tuned run is named after its method, with `-seed<k>` for the k-th seed after
the first (`sft`, `sft-seed1`, ...); `--study` is the same pipeline with more tasks,
seeds and methods.

The demo's own steps (data, base model, base NLL, confidence) write their outputs
under the run directory and record themselves in its steps.json; each model's train ->
generate -> evaluate is a cell of `cuset.experiment` under cells/<model>/ (with its own
steps.json), as in `cuset sweep`: one `StepLog` skips whatever finished.
Re-running with the same `out` skips whatever finished, so an interrupted demo
resumes. Every number in the report is read back from the per-sample result
files this run wrote.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict
from pathlib import Path

from cuset.demo.config import DemoConfig
from cuset.demo.corpus import base_tasks, demo_sets
from cuset.demo.expect import announce
from cuset.experiment import StepLog, run_cell, step_seconds
from cuset.io import atomic_write_text
from cuset.localpath import MissingPath

log = logging.getLogger(__name__)

VANILLA = "vanilla"
# Reference programs scored teacher-forced (base NLL, reference fit, confidence): a few
# seconds per model on 2 cores.
SCORED_REFERENCES = 64


def run_name(method: str, k: int) -> str:
    """The k-th fine-tuning run of method spec `method` (k = 0 keeps the plain name;
    `cuset:paper` -> `cuset-paper`, a directory name)."""
    name = method.replace(":", "-")
    return name if k == 0 else f"{name}-seed{k}"


class DemoRun:
    def __init__(self, cfg: DemoConfig, out: Path):
        self.cfg, self.out = cfg, out
        self.timings: dict[str, float] = {}    # seconds of each finished step, however long ago it ran
        self.reused: frozenset[str] = frozenset()  # steps of `timings` an earlier invocation ran
        self.started: float | None = None          # perf_counter when this invocation began
        # (run, method, seed index) of every fine-tuned run, seeds outermost: an interrupted
        # study has whole seeds of every method done first
        self.finetuned = [(run_name(m, k), m, k) for k in range(cfg.seeds) for m in cfg.method_list()]
        self.models = [VANILLA] + [r for r, _, _ in self.finetuned]

    def method_of(self, model: str) -> str:
        return {r: m for r, m, _ in self.finetuned}.get(model, VANILLA)

    def seed_of(self, model: str) -> int:
        """The seed a run trained and sampled with (the vanilla base: the config's)."""
        return self.cfg.seed + {r: k for r, _, k in self.finetuned}.get(model, 0)

    # -- paths -------------------------------------------------------------
    @property
    def train_tasks(self) -> Path:
        return self.out / "data" / "train.jsonl"

    @property
    def eval_tasks(self) -> Path:
        return self.out / "data" / "eval.jsonl"

    @property
    def replaceable_train_tasks(self) -> Path:
        """The fine-tuning set with replaceable tokens (`:repl` arms; `replaceable_train_set` writes it)."""
        return self.out / "data" / "train-replaceable.jsonl"

    def replaceable_train_set(self) -> Path:
        """Write the `:repl` arms' fine-tuning set when it is not there: every training task's program varied
        by cuset.curation.variation (a pure function of program and seed, so a level that gains a `:repl`
        arm after its data step gets the same file a first run would have)."""
        if not self.replaceable_train_tasks.is_file():
            from cuset.curation.variation import vary_task
            from cuset.tasks import load_tasks, save_tasks

            save_tasks([vary_task(t, self.cfg.seed) for t in load_tasks(self.train_tasks)[0]],
                       self.replaceable_train_tasks)
        return self.replaceable_train_tasks

    @property
    def instruct_tasks(self) -> Path:
        return self.out / "data" / "instruct.jsonl"

    @property
    def pretrain_tasks(self) -> Path:
        return self.out / "data" / "pretrain.jsonl"

    @property
    def warmup_tasks(self) -> Path:
        return self.out / "data" / "warmup.jsonl"

    @property
    def points(self) -> Path:
        """The (family, variant, size) point of every task of the fine-tuning, evaluation and warm-up sets."""
        return self.out / "data" / "points.json"

    @property
    def vanilla(self) -> Path:
        """The base model every run fine-tunes from (after the warm-up, when there is one)."""
        return self.out / "models" / "vanilla"

    @property
    def pretrained_model(self) -> Path:
        """The pretrained model: the base itself without warm-up, what the warm-up starts from with it."""
        return self.out / "models" / ("pretrained" if self.cfg.warmup_steps else "vanilla")

    def cell_dir(self, model: str) -> Path:
        return self.out / "cells" / model

    def generations(self, model: str) -> Path:
        return self.cell_dir(model) / "generations.jsonl"

    def eval_dir(self, model: str) -> Path:
        return self.cell_dir(model) / "eval"

    # -- driver ------------------------------------------------------------
    def step_timings(self) -> dict[str, float]:
        """Seconds of every finished step, in the order the steps run: the demo's own steps
        and each model's cell steps (`<step>_<model>`), read from their steps.json files."""
        demo = StepLog(self.out, "demo").seconds
        timings = {k: demo[k] for k in ("data", "base_model", "warmup", "base_nll") if k in demo}
        for model in self.models:
            timings.update({f"{key}_{model}": s for key, s in step_seconds(self.cell_dir(model)).items()})
        timings.update({k: demo[k] for k in ("confidence", "attribution") if k in demo})
        return timings

    def run(self) -> Path:
        self.started = time.perf_counter()  # the report's wall time is this invocation's
        self.out.mkdir(parents=True, exist_ok=True)
        earlier = set(self.step_timings())  # steps an earlier invocation finished: skipped, their time reused
        atomic_write_text(self.out / "demo_config.json", json.dumps(asdict(self.cfg), indent=1))
        steps = StepLog(self.out, "demo")
        c = self.cfg
        steps.run("data", self.make_data, announce(c, "data"))
        steps.run("base_model", self.make_base_model,
                  "the shipped or cached base of this recipe, else pretrain one (announced when it must)")
        if c.warmup_steps:
            steps.run("warmup", self.warm_up, "the shipped or cached warmed base of this recipe, else warm one up "
                                              "(announced when it must)")
        steps.run("base_nll", self.base_nll, announce(c, "base_nll"))
        for model in self.models:
            method = self.method_of(model)
            run_cell(self.cell(model), name=f"demo {model}",
                     about={step: announce(c, step, method) for step in ("train", "generate", "evaluate")
                            if step != "train" or model != VANILLA})
        for model in self.models:  # a step of each cell: a run added to a finished demo gets its own
            StepLog(self.cell_dir(model), f"demo {model}").run("reference_fit", lambda m=model: self.reference_fit(m),
                                                                announce(c, "reference_fit"))
        steps.run("confidence", self.confidence, announce(c, "confidence"))
        from cuset.demo.attribute import attribution_stale

        if attribution_stale(self):  # a run added since it ran: the correct programs change with it
            steps.seconds.pop("attribution", None)
        steps.run("attribution", self.attribution)
        self.timings = self.step_timings()
        self.reused = frozenset(k for k in self.timings if k in earlier)
        from cuset.demo.report import write_report

        return write_report(self)

    # -- steps ---------------------------------------------------------------
    def make_data(self) -> None:
        from cuset.curation.synth import point_of
        from cuset.tasks import save_tasks

        points, tasks = demo_sets(self.cfg)
        pretrain, instruct = base_tasks(self.cfg)
        save_tasks(tasks["train"], self.train_tasks)
        save_tasks(tasks["eval"], self.eval_tasks)
        if "warmup" in tasks:
            save_tasks(tasks["warmup"], self.warmup_tasks)
        save_tasks(instruct, self.instruct_tasks)
        save_tasks(pretrain, self.pretrain_tasks)
        atomic_write_text(self.points, json.dumps({name: [list(point_of(x)) for x in p] for name, p in points.items()}))

    def make_base_model(self) -> None:
        """Tokenizer + model pretrained on programs of the other families (raw) and on instruction
        pairs from other families (chat-formatted): nothing of the fine-tuning or evaluation
        families, whose prompts and programs the tokenizer does not see either. Built once per
        recipe (cuset.demo.base): the shipped base, or the one cached under $CUSET_CACHE."""
        from cuset.demo.base import provide_base
        from cuset.demo.base_build import base_corpus
        from cuset.tasks import load_tasks

        c = self.cfg
        target = self.pretrained_model
        staging = target.with_name(target.name + ".partial")
        if c.pretrained:
            _copy_pretrained(Path(c.pretrained), staging, c)
            staging.rename(target)
            return
        corpus = base_corpus(load_tasks(self.pretrain_tasks)[0], load_tasks(self.instruct_tasks)[0])
        provide_base(asdict(c), corpus, staging, progress=c.progress)
        staging.rename(target)

    def warm_up(self) -> None:
        """Base strength: warmup_steps of supervised training on the warm-up set (cuset.demo.warm_build),
        after checking that it shares no (family, variant, size) point, and no prompt, with the
        fine-tuning and evaluation sets. Made once per recipe: the shipped warmed base, or the one
        cached under $CUSET_CACHE (cuset.demo.base)."""
        from cuset.demo.base import provide_warm_base
        from cuset.demo.base_build import base_corpus
        from cuset.tasks import load_tasks

        points = json.loads(self.points.read_text())
        tasks = {name: load_tasks(path)[0] for name, path in (
            ("warmup", self.warmup_tasks), ("train", self.train_tasks), ("eval", self.eval_tasks))}
        check_warmup_disjoint({k: [tuple(p) for p in v] for k, v in points.items()}, tasks)
        staging = self.vanilla.with_name("vanilla.partial")
        provide_warm_base(asdict(self.cfg), self.pretrained_model, base_corpus([], tasks["warmup"]), staging,
                          progress=self.cfg.progress)
        staging.rename(self.vanilla)

    def cell(self, model: str):
        """`model` through train (unless vanilla) -> generate -> evaluate, by cuset.experiment."""
        from cuset.config import load_config
        from cuset.evaluate.config import EvalConfig
        from cuset.experiment import Cell
        from cuset.generate.config import GenerateConfig
        from cuset.train.config import TrainConfig

        c, method = self.cfg, self.method_of(model)
        train = None
        if model != VANILLA:
            spec = c.method_spec(method)
            train = load_config(TrainConfig, base={
                "output_dir": str(self.cell_dir(model) / "train"),
                "model": {"name_or_path": str(self.vanilla), "dtype": "float32"},
                "data": {"paths": [str(self.replaceable_train_set() if spec.replaceable else self.train_tasks)],
                         "format": "cudabench", "prompt_level": 1,
                         "max_length": 2048, "cache_dir": str(self.out / "cache" / "tokenized"),
                         "cuda_spans": spec.spans},
                "loss": {"name": spec.loss, "window": c.window, "tau": c.tau, "lam": c.lam, **spec.loss_switches()},
                "finetune": c.finetune,
                "optim": {"learning_rate": c.finetune_lr, "max_steps": c.finetune_steps,
                          "per_device_batch_size": c.forward_batch,
                          "gradient_accumulation_steps": c.batch_size // c.forward_batch, "warmup_ratio": 0.05},
                "precision": "fp32", "seed": self.seed_of(model), "save_steps": 0, "report_to": [],
                "progress": c.progress,
            })
        generate = load_config(GenerateConfig, base={
            "tasks": str(self.eval_tasks), "out": str(self.generations(model)), "backend": "hf",
            "model": str(self.vanilla), "n_samples": c.samples, "level": 1, "progress": c.progress,
            "sampling": {"temperature": c.temperature, "top_p": 0.95, "max_new_tokens": c.max_new_tokens,
                         "seed": self.seed_of(model)},
            "hf": {"batch_size": 16, "device": "cpu", "dtype": "float32"},
        })
        # Compilation is judged by nvcc (the paper's metric); the CPU backend runs what compiled.
        evaluate = load_config(EvalConfig, base={"execution": {"backend": "cpu", "compile_judge": "nvcc",
                                                               "backend_options": {"seed": c.seed + 1}},
                                                 "progress": c.progress, "cache_dir": str(self.out / "cache")})
        labels = {"model": "demo-base", "method": method, "seed": self.seed_of(model)}
        return Cell(self.cell_dir(model), str(self.eval_tasks), generate=generate, evaluate=evaluate,
                    train=train, labels=labels)

    def reference_fit_path(self, model: str) -> Path:
        return self.cell_dir(model) / "reference_fit.json"

    def _score(self, tasks: Path, limit: int, model: str = ""):
        """Teacher-forced confidences of `model` (a model or adapter directory; default the
        vanilla model) on the reference responses of `tasks`."""
        from cuset.experiment.scoring import encode_examples, load_model, score_batches
        from cuset.train.data import RecordOptions, read_examples

        model, tokenizer = load_model(model or str(self.vanilla), device="cpu", dtype="float32")
        items = read_examples(tasks, RecordOptions(format="cudabench", prompt_level=1))
        encoded, skipped, messages = encode_examples(tokenizer, items, max_length=2048, limit=limit)
        return score_batches(model, tokenizer, encoded, batch_size=8, progress=self.cfg.progress), skipped, messages

    def base_nll(self) -> None:
        """The vanilla model's NLL per response token on the fine-tuning set before any
        fine-tuning: near 0 would mean it already knows the data and fine-tuning (CuSeT's
        weight 1 - min window confidence above all) has nothing left to teach."""
        import numpy as np

        samples, _, _ = self._score(self.train_tasks, limit=SCORED_REFERENCES)
        nll = np.concatenate([-np.log(np.clip(s.confidences, 1e-12, 1.0)) for s in samples])
        atomic_write_text(self.out / "base_nll.json", json.dumps(
            {"nll": float(nll.mean()), "n_examples": len(samples), "n_tokens": int(nll.size),
             "data": str(self.train_tasks.relative_to(self.out)),
             "mechanism": base_mechanism(samples, tau=self.cfg.tau)}))

    def reference_fit(self, model: str) -> None:
        """How closely `model` fits the held-out reference programs, teacher-forced. Tokens it
        finds unlikely (p <= tau) are the ones CuSeT's confidence mask and ProFit leave out of
        the loss (and DFT all but leaves out); a reference holding a token below 1e-3 is one
        the model will almost never write."""
        from cuset.analysis.confidence import reference_fit
        from cuset.experiment import trained_model
        from cuset.spans import CUSET_KINDS

        path, adapter = trained_model(self.cell(model))
        samples, _, _ = self._score(self.eval_tasks, limit=SCORED_REFERENCES, model=adapter or path)
        atomic_write_text(self.reference_fit_path(model), json.dumps(
            reference_fit(samples, threshold=self.cfg.tau, sensitive_kinds=CUSET_KINDS)))

    def confidence(self) -> None:
        """Section 3 of the paper on the vanilla model: confidence of CUDA-sensitive vs neutral
        tokens of the held-out reference programs."""
        from cuset.analysis.confidence_report import analyze_confidence, save_scores
        from cuset.spans import ALL_KINDS, CUSET_KINDS

        samples, skipped, messages = self._score(self.eval_tasks, limit=SCORED_REFERENCES)
        out = self.out / "confidence"
        save_scores(out / "scores.jsonl", samples)
        analyze_confidence(samples, out, window=self.cfg.confidence_window, sensitive_kinds=CUSET_KINDS,
                           categories=ALL_KINDS, model_label="vanilla demo base model",
                           data_label=str(self.eval_tasks), skipped=dict(skipped), skipped_messages=messages)


    def attribution(self) -> None:
        """Where each failing sample left the correct programs of its task (cuset.demo.attribute)."""
        from cuset.demo.attribute import attribute_demo

        attribute_demo(self)


def base_mechanism(samples, *, tau: float) -> dict:
    """The paper's premise measured on a base, teacher-forced on fine-tuning references: the share
    of target tokens at p <= tau (what the confidence mask drops), overall and among CUDA-sensitive
    and neutral tokens; the mean confidence of each group and the two-sample KS test between them
    (Fig. 1: sensitive tokens less confident than neutral ones, on a base that finds most likely)."""
    from cuset.analysis.confidence import ks_test, reference_fit, split_by_sensitivity
    from cuset.spans import CUSET_KINDS

    fit = reference_fit(samples, threshold=tau, sensitive_kinds=CUSET_KINDS)
    sens, neut = split_by_sensitivity(samples, CUSET_KINDS)
    out = {"fit": fit, "mean_conf_sensitive": float(sens.mean()) if sens.size else None,
           "mean_conf_neutral": float(neut.mean()) if neut.size else None, "ks": None}
    if sens.size and neut.size:
        ks = ks_test(sens, neut)
        out["ks"] = {"statistic": ks.statistic, "pvalue": ks.pvalue, "n_sensitive": ks.n_sensitive,
                     "n_neutral": ks.n_neutral}
    return out


SET_NAMES = {"train": "fine-tuning", "eval": "evaluation", "warmup": "warm-up"}


def check_warmup_disjoint(points: dict[str, list[tuple[str, str, str]]], tasks: dict[str, list]) -> None:
    """Raise when the warm-up set shares a (family, variant, size) point (as recorded when the sets
    were drawn) or a level-1 prompt (the tasks as saved) with the fine-tuning or evaluation set."""
    from cuset.curation.synth import SynthError, check_disjoint

    check_disjoint("warm-up", points["warmup"], {SET_NAMES[k]: points[k] for k in ("train", "eval")})
    prompts = {t.level1_prompt: t.task_name for t in tasks["warmup"]}
    for key in ("train", "eval"):
        shared = [t.task_name for t in tasks[key] if t.level1_prompt in prompts]
        if shared:
            raise SynthError(f"the warm-up set shares {len(shared)} prompt(s) with the {SET_NAMES[key]} set, "
                             f"e.g. {shared[0]}: its tasks are not the points recorded in data/points.json")


def _copy_pretrained(source: Path, staging: Path, cfg: DemoConfig) -> None:
    """Copy a pretrained base (config `pretrained`) after checking it is the shape this config asks for."""
    import shutil

    config = source / "config.json"
    if not config.is_file():
        raise MissingPath(f"pretrained: {source} holds no config.json; name a model directory such as "
                                "<demo run>/models/vanilla")
    got = json.loads(config.read_text())
    want = {"hidden_size": cfg.hidden, "num_hidden_layers": cfg.layers}
    wrong = {k: got.get(k) for k, v in want.items() if got.get(k) != v}
    if wrong:
        raise ValueError(f"pretrained: {source} has {wrong}, this config asks for {want}; set hidden/layers to match "
                         "or pretrain a new base")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source, staging)


def run_demo(cfg: DemoConfig) -> Path:
    """Run (or resume) the demo; returns the path of report.md."""
    out = Path(cfg.out) if cfg.out else Path("runs") / time.strftime("demo-%Y%m%d-%H%M%S")
    return DemoRun(cfg, out).run()
