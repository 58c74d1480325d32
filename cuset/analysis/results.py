"""Load evaluation runs for reports: per-sample results -> metrics + labels.

A RESULTS argument is a run directory (holding a results JSONL and usually
summary.json), a results JSONL, or a summary.json. Metrics are recomputed from
the per-sample records with `cuset.evaluate.metrics.summarize` whenever they are
present, so a report always matches the records it links; a bare summary.json is
used as written.

Labels (model, method, hyper-parameters, #params, ...) come from, in increasing
priority: the summary's `meta`, a `labels.json` / `cell.json` next to the results
(written by `cuset sweep`), and `--label key=value,...` on the command line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Collection, Iterable, Sequence

import yaml

from cuset.errors import CusetError
from cuset.io import JsonlError, iter_jsonl
from cuset.losses.config import OBJECTIVE_DISPLAY_NAMES

if TYPE_CHECKING:
    from cuset.analysis.difficulty import Attempt

# Label keys reports understand, with the aliases found in run metadata.
LABEL_ALIASES: dict[str, tuple[str, ...]] = {
    "model": ("model", "model_name", "base_model", "model_name_or_path"),
    "method": ("method", "objective", "loss_name"),
    "type": ("type", "model_type_label"),
    "params": ("params", "n_params", "num_parameters", "parameters"),
    "tau": ("tau",),
    "lam": ("lam", "lambda", "lambda_"),
    "window": ("window", "window_size"),
    "conf_mask": ("conf_mask",),
    "cuda_mask": ("cuda_mask",),
    "region_weight": ("region_weight",),
}
RESULT_NAMES = ("results.jsonl", "eval_results.jsonl")
SIDECAR_LABELS = ("labels.json", "cell.json")

# Display names of the base model (no training) and of the training objectives, in the order
# Table 2 lists them (the objectives' own order in cuset.losses.config).
METHOD_NAMES = {"vanilla": "Vanilla", "base": "Vanilla", "none": "Vanilla", **OBJECTIVE_DISPLAY_NAMES}
METHOD_ORDER = ("Vanilla", *OBJECTIVE_DISPLAY_NAMES.values())

DEFINITIONS = ("unbiased", "compat", "compat_quirk")
METRIC_KEYS = ("compile@1", "function@1", "compile@3", "function@3")
# perf=true runs (cuset.evaluate.perf.summary.task_perf): per-task fractions, compared like pass@k
PERF_METRIC_KEYS = ("fast_0", "fast_1", "fast_1.5", "fast_2", "fast_1_compile", "roofline_score")


class ResultsError(CusetError, ValueError):
    """A RESULTS argument that cannot be read; the message names the file and the fix."""


@dataclass(frozen=True)
class RunResults:
    """One evaluated run: where it came from, its labels and its overall metrics."""

    source: str
    labels: dict[str, Any]
    metrics: dict[str, float | None]          # METRIC_KEYS as fractions, plus avg_tokens
    counts: dict[str, Any] = field(default_factory=dict)  # n_tasks, n_samples, statuses, skipped
    task_metrics: dict[str, dict[str, float | None]] = field(default_factory=dict)  # per task id: METRIC_KEYS
    # per-sample outcomes with reasoning lengths, for the difficulty analysis; empty unless
    # some sample of the run counted a reasoning trace
    attempts: tuple["Attempt", ...] = ()

    def label(self, key: str, default=None):
        return self.labels.get(key, default)


def method_name(raw: Any) -> str:
    """`cuset`, `CuSeT`, `cuset-loss` -> CuSeT; unknown names are kept as written."""
    text = str(raw)
    return METHOD_NAMES.get(text.strip().lower(), text)


def parse_label_arg(text: str) -> dict[str, Any]:
    """`model=Qwen,method=cuset,tau=0.3` -> {"model": "Qwen", "method": "cuset", "tau": 0.3}."""
    out: dict[str, Any] = {}
    for part in (p for p in text.split(",") if p.strip()):
        if "=" not in part:
            raise ResultsError(f"--label {text!r}: {part!r} is not key=value (e.g. --label model=Qwen2.5-7B,method=CuSeT)")
        key, value = part.split("=", 1)
        key = key.strip()
        try:
            parsed = yaml.safe_load(value) if value.strip() else ""
        except yaml.YAMLError:
            parsed = value
        out[key] = parsed if isinstance(parsed, (bool, int, float)) else value.strip()
    return out


def _flatten(d: dict, prefix: str = "") -> Iterable[tuple[str, Any]]:
    for k, v in d.items():
        if isinstance(v, dict):
            yield from _flatten(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def labels_from_meta(meta: dict) -> dict[str, Any]:
    """Known labels found anywhere in a (nested) metadata dict, matched by key name.

    A shallower key wins over a deeper one (meta.model over meta.train.model), and a
    `labels` sub-dict wins over everything else.
    """
    found: dict[str, tuple[int, Any]] = {}
    for path, value in _flatten(meta or {}):
        parts = path.split(".")
        depth = -1 if parts[0] == "labels" else len(parts)
        for label, aliases in LABEL_ALIASES.items():
            if parts[-1] in aliases and (label not in found or depth < found[label][0]) and value is not None:
                found[label] = (depth, value)
    return {k: v for k, (_, v) in found.items()}


def count_parameters(model_dir: str | Path) -> int | None:
    """Parameters of a local model directory, read from its safetensors headers (no weights loaded).

    None when the directory has no safetensors files (a hub name, or another format).
    """
    import struct
    from math import prod

    files = sorted(Path(model_dir).glob("*.safetensors")) if Path(model_dir).is_dir() else []
    if not files:
        return None
    total = 0
    for f in files:
        with open(f, "rb") as fh:
            (size,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(size))
        total += sum(prod(t["shape"]) for k, t in header.items() if k != "__metadata__")
    return total


def _model_from_generations(meta: dict) -> str | None:
    """The model named in the first record of the generations file an eval run points at."""
    path = meta.get("generations")
    if not isinstance(path, str) or not Path(path).is_file():
        return None
    try:
        for _, record in iter_jsonl(path):
            model = record.get("model") if isinstance(record, dict) else None
            return model if isinstance(model, str) and model else None
    except JsonlError:  # only a label here: the commands that read the generations report a bad line
        return None
    return None


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ResultsError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
    if not isinstance(data, dict):
        raise ResultsError(f"{path}: expected a JSON object")
    return data


def _locate(path: Path) -> tuple[Path | None, Path | None]:
    """(results JSONL, summary JSON) for a RESULTS argument."""
    if not path.exists():
        raise ResultsError(f"{path}: no such file or directory (pass an eval run directory, its results JSONL or its summary.json)")
    if path.is_dir():
        results = next((path / n for n in RESULT_NAMES if (path / n).exists()), None)
        if results is None:
            candidates = sorted(p for p in path.glob("*.jsonl") if "result" in p.name)
            results = candidates[0] if len(candidates) == 1 else None
        summary = path / "summary.json" if (path / "summary.json").exists() else None
        if results is None and summary is None:
            raise ResultsError(f"{path}: holds neither {' nor '.join(RESULT_NAMES)} nor summary.json; "
                               "is it an eval run directory (`cuset eval ... --out DIR`)?")
        return results, summary
    if path.suffix == ".jsonl":
        summary = path.with_name("summary.json")
        return path, summary if summary.exists() else None
    if path.suffix == ".json":
        results = next((path.with_name(n) for n in RESULT_NAMES if path.with_name(n).exists()), None)
        return results, path
    raise ResultsError(f"{path}: expected a directory, a .jsonl results file or a summary .json")


def _overall_from_records(results_path: Path, meta: dict, exclude: Collection[str] = ()) -> tuple[dict, list, list]:
    """(the summary recomputed from the per-sample records, the records, the ids of the
    tasks in `exclude` (ids as strings) that the run had: their records are left out)."""
    from cuset.evaluate.metrics import summarize
    from cuset.evaluate.records import load_results

    try:
        records = load_results(results_path)
    except ValueError as e:  # messages already name file:line
        raise ResultsError(str(e)) from None
    except TypeError as e:  # a record lacking fields the dataclass needs
        raise ResultsError(f"{results_path}: a record is incomplete ({e}); is it a `cuset eval` results file?") from None
    if not records:
        raise ResultsError(f"{results_path}: no results in the file (has the evaluation run yet?)")
    excluded = sorted({str(r.task_id) for r in records} & set(exclude))
    records = [r for r in records if str(r.task_id) not in exclude]
    if not records:
        raise ResultsError(f"{results_path}: every task of the run is excluded as defective; nothing is left to report")
    return summarize(records, meta=meta).to_json(), records, excluded


def _pick_metrics(overall: dict, definition: str, where: str) -> dict[str, float | None]:
    if definition not in DEFINITIONS:
        raise ResultsError(f"unknown metric definition {definition!r}; one of {', '.join(DEFINITIONS)}")
    src = overall if definition == "unbiased" else overall.get(definition)
    if not isinstance(src, dict):
        raise ResultsError(f"{where}: no {definition!r} metrics in the summary")
    missing = [k for k in METRIC_KEYS if k not in src]
    if missing:
        raise ResultsError(f"{where}: summary lacks {', '.join(missing)} (not a `cuset eval` summary?)")
    out = {k: src[k] for k in METRIC_KEYS}
    out["avg_tokens"] = overall.get("avg_tokens")
    return out


def load_run(arg: str | Path, *, labels: dict | None = None, definition: str = "unbiased",
             exclude_tasks: Collection[str] = ()) -> RunResults:
    """One RESULTS argument -> RunResults (metrics as fractions). `exclude_tasks`: task ids
    (as strings) whose samples are left out of every number (needs the results JSONL)."""
    path = Path(arg)
    results_path, summary_path = _locate(path)
    summary = _read_json(summary_path) if summary_path else {}
    meta = summary.get("meta") if isinstance(summary.get("meta"), dict) else {}
    attempts: tuple = ()
    excluded: list[str] = []
    if exclude_tasks and results_path is None:
        raise ResultsError(f"{summary_path}: tasks cannot be excluded from a bare summary.json; pass the run "
                           "directory or its results JSONL")
    if results_path is not None:
        summary, records, excluded = _overall_from_records(results_path, meta, frozenset(exclude_tasks))
        if any(r.reasoning_tokens is not None for r in records):
            from cuset.analysis.difficulty import attempts_from_samples

            attempts = tuple(attempts_from_samples(records))
    if "overall" not in summary:
        raise ResultsError(f"{summary_path}: no 'overall' section (not a `cuset eval` summary.json?)")
    where = str(results_path or summary_path)
    run_labels = labels_from_meta(meta)
    base = results_path.parent if results_path else summary_path.parent
    for name in SIDECAR_LABELS:
        if (base / name).exists():
            run_labels.update(labels_from_meta(_read_json(base / name)))
    run_labels.update(labels or {})
    if "method" in run_labels:
        run_labels["method"] = method_name(run_labels["method"])
    if "model" not in run_labels:
        model_path = _model_from_generations(meta)
        if model_path:
            run_labels["model"] = model_path.rstrip("/").split("/")[-1]
            if "params" not in run_labels and (n := count_parameters(model_path)):
                run_labels["params"] = n
    run_labels.setdefault("model", base.name)
    overall = summary["overall"]
    counts = {"n_tasks": overall.get("n_tasks"), "n_samples": overall.get("n_samples"),
              "statuses": overall.get("statuses", {}), "n_skipped_tasks": len(summary.get("skipped_tasks", [])),
              "excluded_tasks": excluded, "perf": overall.get("perf")}
    per_task = {}
    for tid, t in (summary.get("tasks") or {}).items():
        src = t if definition == "unbiased" else t.get(definition, {})
        per_task[str(tid)] = {k: src.get(k) for k in METRIC_KEYS}   # ids as summary.json keys them (KernelBench ids are names)
        per_task[str(tid)].update({k: v for k, v in (t.get("perf") or {}).items() if k in PERF_METRIC_KEYS})
    return RunResults(str(path), run_labels, _pick_metrics(overall, definition, where), counts, per_task, attempts)


def load_runs(args: Sequence[str | Path], label_args: Sequence[str] = (), *, definition: str = "unbiased",
              exclude_tasks: Collection[str] = ()) -> list[RunResults]:
    """All RESULTS arguments; `label_args[i]` labels `args[i]` (none, or one per RESULTS)."""
    if label_args and len(label_args) != len(args):
        raise ResultsError(f"got {len(label_args)} --label option(s) for {len(args)} RESULTS: give one --label per "
                           "RESULTS argument, in the same order, or none")
    return [load_run(a, labels=parse_label_arg(label_args[i]) if label_args else None, definition=definition,
                     exclude_tasks=exclude_tasks)
            for i, a in enumerate(args)]
