"""`cuset sweep`: train and evaluate every cell of a grid, resumably, then report.

A cell is one setting of the grid keys. Keys name what they change:
- `method`: vanilla (no training: evaluate the base model) or an objective name
  (sft, dft, eaft, asft, profit, cuset), i.e. `loss.name`;
- `generate.<key>` / `eval.<key>`: the generation / evaluation config;
- anything else (optionally prefixed `train.`): the training config, e.g. `loss.tau`.

Each cell runs in `<out_dir>/cells/<cell_id>/` as a `cuset.experiment.Cell` (its own
steps.json resumes train, generate and evaluate); its id is a readable slug plus a
hash of the *resolved* settings, so the default cell shared by several axes runs
once, and changing the base config gives new cells instead of reusing stale ones.
A finished cell is a step of the sweep's own `StepLog` (`<out_dir>/steps.json`, cell
id -> seconds): re-running skips it. Failures are recorded in the cell's `failed.json`
and retried on the next run. The end is a report over all finished cells
(`cuset.analysis.report`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from cuset.config import option
from cuset.errors import CusetError
from cuset.experiment.cell import EVAL_DIR, Cell, StepLog, run_cell
from cuset.io import atomic_write_json
from cuset.progress import track

log = logging.getLogger(__name__)

STAGES = ("train", "generate", "eval")
VANILLA = "vanilla"
CUSET_LABELS = ("tau", "lam", "window", "conf_mask", "cuda_mask", "region_weight")


class SweepError(CusetError, ValueError):
    """A sweep that cannot run as configured; the message says what to change."""


@dataclass
class SweepConfig:
    train_config: str = option(help="Base training YAML (TrainConfig) every trained cell starts from.")
    tasks: str = option(help="Evaluation tasks: a CUDABench-format JSONL (or a dataset name `cuset eval` accepts).")
    name: str = option("sweep", help="Name shown in the report title.")
    out_dir: str = option("runs/sweep", help="Sweep directory: cells/<cell_id>/ per cell, sweep.json, report/.")
    train_overrides: list[str] = option(default_factory=list, help="key=value overrides applied to every trained cell.")
    generate_config: str | None = option(None, help="Generation YAML for every cell (the model path is filled in per cell).")
    generate_overrides: list[str] = option(default_factory=list, help="key=value overrides of the generation config.")
    eval_config: str | None = option(None, help="Evaluation YAML (EvalConfig) for every cell.")
    eval_overrides: list[str] = option(default_factory=list, help="key=value overrides of the evaluation config, e.g. execution.backend=cpu.")
    grid: dict = option(default_factory=dict, help="key: [values]; every combination is a cell, e.g. {loss.tau: [0.1, 0.3]}.")
    axes: list[dict] = option(default_factory=list, help="More grids, each expanded on its own and added (Figure 4: one axis per "
                              "hyper-parameter around the default setting).")
    cells: list[dict] = option(default_factory=list, help="Explicit cells ({key: value, ...}) added to the grids' cells "
                               "(Table 5: chosen switch combinations).")
    labels: dict = option(default_factory=dict, help="Labels for every cell's report row, e.g. {model: Qwen2.5-Coder-7B-Instruct, "
                          "type: Code, params: 7B} (model defaults to the base model's name).")
    fail_fast: bool = option(False, help="Stop at the first failed cell instead of going on with the others.")
    report: bool = option(True, help="Write a report over all finished cells at the end.")
    progress: bool = option(True, help="Progress bar over the cells (each stage's own bars follow its config's progress key).")
    published: str = option("matched", help="Published reference rows in the report: matched, all, none.",
                            choices=("matched", "all", "none"))

    def __post_init__(self):
        for name, grid in [("grid", self.grid)] + [(f"axes[{i}]", g) for i, g in enumerate(self.axes)]:
            if not isinstance(grid, dict):
                raise ValueError(f"{name} must be a mapping of key: [values]")
            for key, values in grid.items():
                if not isinstance(values, list) or not values:
                    raise ValueError(f"{name}.{key} must be a non-empty list of values, got {values!r}")
        for i, cell in enumerate(self.cells):
            if not isinstance(cell, dict):
                raise ValueError(f"cells[{i}] must be a mapping of key: value")


@dataclass(frozen=True)
class SweepCell:
    """One grid point: its overrides per stage, its identity and its report labels (it runs
    as a `cuset.experiment.Cell` built from these)."""

    cell_id: str
    settings: tuple[tuple[str, Any], ...]                 # the grid keys and values, as written
    overrides: dict[str, tuple[str, ...]] = field(hash=False)  # stage -> key=value strings
    vanilla: bool = False
    labels: dict = field(default_factory=dict, hash=False, compare=False)
    resolved: dict = field(default_factory=dict, hash=False, compare=False)  # resolved train config (trained cells)

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.settings) or "(base settings)"


# ---- grid expansion (pure) ---------------------------------------------------------------

def expand_grid(grid: dict) -> list[dict]:
    """Every combination of the grid's values, keys in the order written."""
    if not grid:
        return [{}]
    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]


def grid_settings(cfg: SweepConfig) -> list[dict]:
    """All cells' settings: the grid, each axis, and the explicit cells (duplicates kept; ids dedupe)."""
    settings: list[dict] = []
    if cfg.grid or not (cfg.axes or cfg.cells):
        settings += expand_grid(cfg.grid)
    for axis in cfg.axes:
        settings += expand_grid(axis)
    settings += [dict(c) for c in cfg.cells]
    return settings


def _yaml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def split_settings(settings: dict) -> tuple[dict[str, list[str]], bool]:
    """(stage -> key=value overrides, vanilla?) for one cell's settings."""
    stages: dict[str, list[str]] = {s: [] for s in STAGES}
    vanilla = False
    for key, value in settings.items():
        if key == "method":
            if str(value).lower() == VANILLA:
                vanilla = True
            else:
                stages["train"].append(f"loss.name={_yaml_value(value)}")
            continue
        stage, _, rest = key.partition(".")
        if stage in STAGES and rest:
            stages[stage].append(f"{rest}={_yaml_value(value)}")
        else:
            stages["train"].append(f"{key}={_yaml_value(value)}")
    return stages, vanilla


def _slug(settings: dict) -> str:
    if not settings:
        return "base"
    text = "_".join(f"{k.split('.')[-1]}={v}" for k, v in settings.items())
    safe = "".join(c if c.isalnum() or c in "=._-" else "-" for c in text)
    return safe[:80]


def _file_digest(path: str | None) -> str | None:
    if not path or not Path(path).is_file():
        return path
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def sweep_base(cfg: SweepConfig) -> dict:
    """What every cell shares besides training: tasks and the generation/evaluation settings."""
    return {"tasks": cfg.tasks, "tasks_file": _file_digest(cfg.tasks),
            "generate_config": _file_digest(cfg.generate_config), "generate_overrides": list(cfg.generate_overrides),
            "eval_config": _file_digest(cfg.eval_config), "eval_overrides": list(cfg.eval_overrides)}


def cell_identity(resolved: dict, stages: dict[str, list[str]], vanilla: bool, base: dict | None = None) -> str:
    """Hash of everything that decides a cell's result (not where it is written)."""
    train = {k: v for k, v in resolved.items() if k != "output_dir"}
    if vanilla:  # no training: only the base model matters
        train = {"model": resolved.get("model")}
    doc = {"train": train, "generate": sorted(stages["generate"]), "eval": sorted(stages["eval"]), "vanilla": vanilla,
           "base": base or {}}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:10]


Resolver = Callable[[list[str]], dict]


def train_resolver(cfg: SweepConfig) -> Resolver:
    """Resolve a cell's training overrides into the full TrainConfig (as a dict); errors name the key."""
    from cuset.config import ConfigError, load_config, to_dict
    from cuset.train.config import TrainConfig

    def resolve(overrides: list[str]) -> dict:
        # output_dir is per cell (set when it runs) and not part of a cell's identity
        fixed = ["output_dir=(set per cell)"] + list(cfg.train_overrides) + list(overrides)
        try:
            return to_dict(load_config(TrainConfig, cfg.train_config, fixed))
        except ConfigError as e:
            raise SweepError(f"training config for overrides {overrides}: " + "; ".join(e.errors)) from None
    return resolve


def cell_labels(cfg: SweepConfig, resolved: dict, vanilla: bool, settings: dict) -> dict:
    """Report labels: the sweep's labels, model, method and (for CuSeT) its hyper-parameters."""
    from cuset.analysis.results import method_name

    from cuset.analysis.results import count_parameters

    labels = dict(cfg.labels)
    model_path = str((resolved.get("model") or {}).get("name_or_path") or "?")
    labels.setdefault("model", model_path.rstrip("/").split("/")[-1])
    if "params" not in labels and (n := count_parameters(model_path)):
        labels["params"] = n
    loss = resolved.get("loss") or {}
    labels["method"] = method_name(VANILLA if vanilla else loss.get("name", "?"))
    if labels["method"] == "CuSeT":
        labels.update({k: loss[k] for k in CUSET_LABELS if k in loss})
    for key, value in settings.items():  # generation/eval settings varied by the grid
        stage = key.partition(".")[0]
        if stage in ("generate", "eval"):
            labels[key] = value
    return labels


def build_cells(cfg: SweepConfig, resolver: Resolver | None = None) -> list[SweepCell]:
    """The sweep's distinct cells, in grid order."""
    resolver = resolver or train_resolver(cfg)
    base = sweep_base(cfg)
    cells: dict[str, SweepCell] = {}
    for settings in grid_settings(cfg):
        stages, vanilla = split_settings(settings)
        if vanilla and stages["train"]:
            raise SweepError(f"cell {settings}: method=vanilla trains nothing, so training keys "
                             f"({', '.join(stages['train'])}) make no sense there; put them in another axis")
        resolved = resolver(stages["train"])
        ident = cell_identity(resolved, stages, vanilla, base)
        if ident in cells:  # the same resolved settings written differently (e.g. the default cell of two axes)
            continue
        cells[ident] = SweepCell(f"{_slug(settings)}-{ident}", tuple(settings.items()), {k: tuple(v) for k, v in stages.items()},
                            vanilla, cell_labels(cfg, resolved, vanilla, settings), resolved)
    return list(cells.values())


# ---- running -------------------------------------------------------------------------------

# (cell, cell_dir): run the cell in cell_dir, leaving its evaluation in cell_dir / EVAL_DIR
# (the layout of a `cuset.experiment.Cell`). A runner may also have `judged_by_others(cell,
# cell_dir) -> int`: samples of a finished cell's evaluation that another evaluator judged
# (cuset.evaluate.judge); a finished cell with any runs again (PipelineRunner has it).
CellRunner = Callable[[SweepCell, Path], object]


def _write_json(path: Path, data: dict) -> None:
    atomic_write_json(path, data, indent=1)


def cell_state(finished: StepLog, cell_dir: Path) -> str:
    """done (a step of the sweep's StepLog), failed, partial (started) or todo."""
    if cell_dir.name in finished.seconds:
        return "done"
    if (cell_dir / "failed.json").exists():
        return "failed"
    if cell_dir.exists():
        return "partial"
    return "todo"


def plan_cells(cfg: SweepConfig, resolver: Resolver | None = None) -> list[tuple[SweepCell, str]]:
    finished = StepLog(cfg.out_dir, "sweep")
    root = Path(cfg.out_dir) / "cells"
    return [(c, cell_state(finished, root / c.cell_id)) for c in build_cells(cfg, resolver)]


def _run_one(runner: CellRunner, cell: SweepCell, cell_dir: Path) -> None:
    runner(cell, cell_dir)
    eval_dir = cell_dir / EVAL_DIR
    if not eval_dir.is_dir():
        raise SweepError(f"cell {cell.cell_id}: the runner left no evaluation in {eval_dir}")
    _write_json(eval_dir / "labels.json", {"labels": cell.labels})


def run_sweep(cfg: SweepConfig, runner: CellRunner | None = None, resolver: Resolver | None = None) -> dict:
    """Run every unfinished cell, then report. Returns the manifest (also in sweep.json)."""
    out = Path(cfg.out_dir)
    cells = build_cells(cfg, resolver)
    runner = runner or PipelineRunner(cfg)
    finished = StepLog(out, "sweep")
    entries = []
    counts = {"done": 0, "cached": 0, "failed": 0}
    for i, cell in enumerate(track(cells, "sweep cells", enabled=cfg.progress)):
        cell_dir = out / "cells" / cell.cell_id
        entry = {"cell_id": cell.cell_id, "settings": dict(cell.settings), "labels": cell.labels}
        cached = cell.cell_id in finished.seconds
        if cached and (stale := _judged_by_others(runner, cell, cell_dir)):
            log.info("cell %s: %d sample(s) were judged by another evaluator (its code, backend or settings "
                     "changed since): evaluated again", cell.cell_id, stale)
            finished.forget(cell.cell_id)
            cached = False
        if not cached:
            log.info("cell %d/%d %s: %s", i + 1, len(cells), cell.cell_id, cell.describe())
            (cell_dir / "failed.json").unlink(missing_ok=True)
            _write_json(cell_dir / "cell.json", {"cell_id": cell.cell_id, "settings": dict(cell.settings),
                                                 "overrides": {k: list(v) for k, v in cell.overrides.items()},
                                                 "vanilla": cell.vanilla, "labels": cell.labels})
            try:
                finished.run(cell.cell_id, lambda: _run_one(runner, cell, cell_dir))
            except Exception as e:  # one bad cell must not lose the others' results
                if cfg.fail_fast:
                    raise
                _write_json(cell_dir / "failed.json", {"error": f"{type(e).__name__}: {e}",
                                                       "traceback": traceback.format_exc()[-4000:]})
                entry.update(status="failed", error=f"{type(e).__name__}: {e}")
                counts["failed"] += 1
                entries.append(entry)
                log.error("cell %s failed: %s", cell.cell_id, e)
                _write_json(out / "sweep.json", _manifest(cfg, entries, counts))
                continue
        entry.update(status="done", cached=cached, eval_dir=str(cell_dir / EVAL_DIR))
        counts["done"] += 1
        counts["cached"] += cached
        entries.append(entry)
        if not cached:
            _write_json(out / "sweep.json", _manifest(cfg, entries, counts))
    manifest = _manifest(cfg, entries, counts)
    if cfg.report and counts["done"]:
        manifest["report"] = str(_report(cfg, [e for e in entries if e["status"] == "done"]) / "report.md")
    _write_json(out / "sweep.json", manifest)
    return manifest


def _judged_by_others(runner: CellRunner, cell: SweepCell, cell_dir: Path) -> int:
    check = getattr(runner, "judged_by_others", None)
    return check(cell, cell_dir) if check is not None else 0


def _manifest(cfg: SweepConfig, entries: list[dict], counts: dict) -> dict:
    return {"name": cfg.name, "counts": dict(counts), "cells": list(entries),
            "failed": [{"cell_id": e["cell_id"], "error": e["error"]} for e in entries if e["status"] == "failed"]}


def _report(cfg: SweepConfig, done: list[dict]) -> Path:
    from cuset.analysis.report import build_report
    from cuset.analysis.results import load_run

    runs = [load_run(e["eval_dir"], labels=e["labels"]) for e in done]
    out = Path(cfg.out_dir) / "report"
    build_report(runs, out, published_mode=cfg.published, title=f"Sweep {cfg.name}")
    return out


# ---- the real pipeline: train -> generate -> eval ------------------------------------------

class PipelineRunner:
    """Runs one sweep cell as a `cuset.experiment.Cell` (train unless vanilla -> generate ->
    evaluate, each step resumable) from the sweep's stage configs and the cell's overrides."""

    def __init__(self, cfg: SweepConfig):
        self.cfg = cfg

    def __call__(self, cell: SweepCell, cell_dir: Path) -> Path:
        from cuset.config import load_config
        from cuset.generate.config import GenerateConfig
        from cuset.train.config import TrainConfig

        cfg = self.cfg
        train = None
        if not cell.vanilla:
            train = load_config(TrainConfig, cfg.train_config,
                                list(cfg.train_overrides) + list(cell.overrides["train"]) + [f"output_dir={cell_dir / 'train'}"])
        generate = load_config(GenerateConfig, cfg.generate_config,
                               list(cfg.generate_overrides) + list(cell.overrides["generate"])
                               + [f"tasks={cfg.tasks}", f"out={cell_dir / 'generations.jsonl'}",
                                  f"model={cell.resolved['model']['name_or_path']}"])
        return run_cell(Cell(cell_dir, str(cfg.tasks), generate=generate, evaluate=self.eval_config(cell), train=train),
                        name=f"cell {cell.cell_id}")

    def eval_config(self, cell: SweepCell):
        from cuset.config import load_config
        from cuset.evaluate import EvalConfig

        return load_config(EvalConfig, self.cfg.eval_config, list(self.cfg.eval_overrides) + list(cell.overrides["eval"]))

    def judged_by_others(self, cell: SweepCell, cell_dir: Path) -> int:
        """Samples of the cell's evaluation that another evaluator judged (run_cell judges them again)."""
        from cuset.evaluate.judge import current_judge, judged_by_others

        return judged_by_others(cell_dir / EVAL_DIR / "results.jsonl", current_judge(self.eval_config(cell)))
