"""One model through train -> generate -> evaluate: the orchestration under both
`cuset demo` and `cuset sweep`.

    eval_dir = run_cell(Cell(dir, tasks, generate=gen_cfg, evaluate=eval_cfg, train=train_cfg))

A cell lives in one directory:

    <dir>/train/              the training run (absent when the cell evaluates a model as it is)
    <dir>/generations.jsonl   the samples
    <dir>/eval/               results.jsonl, summary, labels.json
    <dir>/steps.json          seconds of each finished step

Resuming has two levels and no others: a step recorded in steps.json is finished and
skipped; a step that was interrupted resumes inside its own stage (training from its
last checkpoint, generation skipping the samples already written, evaluation skipping
the samples already judged). Verdicts are the one cache among them: a finished
evaluation whose samples another judge wrote (other evaluation code, backend or
settings: cuset.evaluate.judge) runs again, so every cell of a study resumed over
several commits is judged alike; training and generation are never redone.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from cuset.errors import CusetError
from cuset.io import atomic_write_json

if TYPE_CHECKING:
    from cuset.evaluate.config import EvalConfig
    from cuset.generate.config import GenerateConfig
    from cuset.train.config import TrainConfig

log = logging.getLogger(__name__)

STEPS = ("train", "generate", "evaluate")
EVAL_DIR = "eval"  # a cell's evaluation: <dir>/eval (the sweep finds its cells' results there)


class CellError(CusetError, ValueError):
    """A cell whose steps cannot be chained (e.g. an adapter the generation backend cannot apply)."""


@dataclass(frozen=True)
class Cell:
    dir: Path
    tasks: str                        # the tasks generated for and evaluated on
    generate: GenerateConfig          # tasks, out and model are set here (model: from training when there is one)
    evaluate: EvalConfig
    train: TrainConfig | None = None  # None: evaluate `generate.model` as it is; output_dir is set here
    labels: dict | None = None        # report labels, written to eval/labels.json

    @property
    def train_dir(self) -> Path:
        return self.dir / "train"

    @property
    def generations(self) -> Path:
        return self.dir / "generations.jsonl"

    @property
    def eval_dir(self) -> Path:
        return self.dir / EVAL_DIR


class StepLog:
    """Finished steps of a run kept in `<dir>/steps.json` (key -> seconds): `run(key, fn)`
    skips a key recorded there and records one it runs. The one way to resume a step in
    cuset's orchestration (a cell's train/generate/evaluate, the demo's own steps)."""

    def __init__(self, directory: str | Path, label: str = ""):
        self.path = Path(directory) / "steps.json"
        self.label = label or Path(directory).name
        self.seconds: dict[str, float] = json.loads(self.path.read_text(encoding="utf-8")) if self.path.exists() else {}

    def forget(self, key: str) -> None:
        """Mark `key` unfinished: the next `run(key, ...)` runs it."""
        if self.seconds.pop(key, None) is not None:
            atomic_write_json(self.path, self.seconds, indent=1)

    def run(self, key: str, fn: Callable[[], None], about: str = "") -> None:
        """Run `fn` unless `key` finished earlier; `about` (what the step does, how long it should
        take) is announced before it starts."""
        if key in self.seconds:
            log.info("[%s] %s: done in an earlier run, skipped", self.label, key)
            return
        log.info("[%s] %s%s ...", self.label, key, f": {about}" if about else "")
        t0 = time.perf_counter()
        fn()
        self.seconds[key] = round(time.perf_counter() - t0, 1)
        atomic_write_json(self.path, self.seconds, indent=1)
        log.info("[%s] %s: %.1f s", self.label, key, self.seconds[key])


def step_seconds(cell_dir: str | Path) -> dict[str, float]:
    """Seconds of each finished step of the cell in `cell_dir` (empty before any)."""
    return dict(StepLog(cell_dir).seconds)


def run_cell(cell: Cell, *, backend=None, name: str = "", about: dict[str, str] | None = None) -> Path:
    """Run (or resume) every unfinished step of `cell`; returns its eval directory.
    `backend`: an execution backend to evaluate with (default: the eval config's);
    `name`: how log lines call this cell; `about`: per step, what it does and how long it should take."""
    cell.dir.mkdir(parents=True, exist_ok=True)
    steps = StepLog(cell.dir, name)
    about = about or {}
    if cell.train is not None:
        steps.run("train", lambda: _train(cell), about.get("train", ""))
    steps.run("generate", lambda: _generate(cell), about.get("generate", ""))
    if "evaluate" in steps.seconds:
        backend = backend or cell.evaluate.make_backend()
        if n := _judged_by_others(cell, backend):
            log.info("[%s] evaluate: %d sample(s) were judged by another evaluator (its code, backend or "
                     "settings changed since): judged again", steps.label, n)
            steps.forget("evaluate")
    steps.run("evaluate", lambda: _evaluate(cell, backend), about.get("evaluate", ""))
    return cell.eval_dir


def trained_model(cell: Cell) -> tuple[str, str]:
    """(model to generate with, LoRA adapter to apply or ''): the merged model when there is one."""
    if cell.train is None:
        return cell.generate.model, ""
    from cuset.train.run import SUMMARY_NAME

    outputs = json.loads((cell.train_dir / SUMMARY_NAME).read_text(encoding="utf-8"))["outputs"]
    # Training writes each output directly under its run directory, and the summary names it by the
    # path it had then; the name under this cell's train_dir finds it after the run was moved
    # (another --out, another machine: cuset.experiment.carry).
    outputs = {k: str(cell.train_dir / Path(v).name) for k, v in outputs.items()}
    if "merged" in outputs:
        return outputs["merged"], ""
    if "adapter" in outputs:
        return cell.train.model.name_or_path, outputs["adapter"]
    return outputs["model"], ""


def _train(cell: Cell) -> None:
    from cuset.train.run import SUMMARY_NAME, train

    if (cell.train_dir / SUMMARY_NAME).exists():  # trained by a run killed before it recorded the step
        return
    train(replace(cell.train, output_dir=str(cell.train_dir)), resume=True)


def _generate(cell: Cell) -> None:
    from cuset.generate.run import generate_file

    model, adapter = trained_model(cell)
    cfg = replace(cell.generate, tasks=str(cell.tasks), out=str(cell.generations), model=model)
    if adapter:
        if cfg.backend != "hf":
            raise CellError(f"generation backend {cfg.backend} cannot apply a LoRA adapter ({adapter}): "
                            "train with merge: true (train key `merge=true`) or generate with backend=hf")
        cfg = replace(cfg, hf=replace(cfg.hf, adapter=adapter))
    generate_file(cfg)


def _judged_by_others(cell: Cell, backend) -> int:
    from cuset.evaluate.judge import current_judge, judged_by_others

    return judged_by_others(cell.eval_dir / "results.jsonl", current_judge(cell.evaluate, backend))


def _evaluate(cell: Cell, backend) -> None:
    from cuset.evaluate import evaluate_file

    cell.eval_dir.mkdir(parents=True, exist_ok=True)
    if cell.labels is not None:
        atomic_write_json(cell.eval_dir / "labels.json", {"labels": cell.labels}, indent=1)
    evaluate_file(cell.tasks, cell.generations, cell.eval_dir / "results.jsonl", cell.evaluate, backend=backend)
