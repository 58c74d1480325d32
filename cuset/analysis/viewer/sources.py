"""Where a viewer's runs come from: RUN_DIR arguments -> runs with their records.

Layouts read (the ones cuset writes):

- an eval output dir (`cuset eval ... --out DIR`, a sweep or demo cell's `eval/`):
  results.jsonl, usually summary.json (its `meta.generations` and `meta.tasks` name
  the generations and tasks files) and labels.json;
- a demo/study dir: one run per `cells/<model>/eval/results.jsonl`; without cells,
  the compact `results/<run>.jsonl` files its report.json lists (no logs), with the
  compressed generations and evaluation tasks a report keeps beside them
  (`generations/<run>.jsonl.gz`, `data/eval.jsonl.gz`); either way the attribution of
  its failing samples (`attribution/<run>.jsonl`) when the demo wrote one.

Results lines are read one by one: a line that is not JSON or not a valid record is
skipped and counted by reason, with `file:line` kept for the page that lists them.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuset.errors import CusetError
from cuset.evaluate.records import ResultRecordError, SampleResult
from cuset.io import JsonlError, iter_jsonl

RESULT_NAMES = ("results.jsonl", "eval_results.jsonl")
MAX_SKIPPED_LISTED = 20


class ViewSourceError(CusetError, ValueError):
    """A RUN_DIR the viewer cannot read; the message names the path and what it looked for."""


@dataclass(frozen=True)
class SkippedLine:
    where: str      # path:line
    reason: str     # bad_json | bad_record
    message: str


@dataclass(frozen=True)
class RunSource:
    """One run: its results file, the files beside it, and the labels it carries."""

    name: str
    results: Path
    summary: dict[str, Any] = field(default_factory=dict)   # summary.json, {} when absent
    headline: dict[str, Any] = field(default_factory=dict)  # overall numbers of summary.json / report.json
    headline_from: str = ""                                  # the file `headline` was read from ("": none)
    labels: dict[str, Any] = field(default_factory=dict)
    generations: Path | None = None
    tasks: Path | None = None
    origin: str = "eval"   # eval | demo cell | demo compact
    attribution: Path | None = None   # a demo's attribution/<run>.jsonl (cuset.analysis.attribution)


@dataclass(frozen=True)
class LoadedRun:
    source: RunSource
    records: tuple[SampleResult, ...]
    skipped: tuple[SkippedLine, ...] = ()

    @property
    def skipped_by_reason(self) -> dict[str, int]:
        return dict(Counter(s.reason for s in self.skipped))


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise ViewSourceError(f"{path}: cannot read it ({e})") from None
    except json.JSONDecodeError as e:
        raise ViewSourceError(f"{path}:{e.lineno}: invalid JSON: {e.msg}; fix or delete the file") from None
    if not isinstance(data, dict):
        raise ViewSourceError(f"{path}: expected a JSON object")
    return data


def _existing(value: Any, *fallbacks: Path) -> Path | None:
    candidates = ([Path(value)] if isinstance(value, str) and value else []) + list(fallbacks)
    return next((p for p in candidates if p.exists()), None)


def _eval_dir_source(directory: Path, name: str, origin: str = "eval",
                     headline: dict | None = None) -> RunSource | None:
    results = next((directory / n for n in RESULT_NAMES if (directory / n).is_file()), None)
    if results is None:
        return None
    summary = _read_json(directory / "summary.json") if (directory / "summary.json").is_file() else {}
    meta = summary.get("meta") if isinstance(summary.get("meta"), dict) else {}
    labels: dict[str, Any] = {}
    if (directory / "labels.json").is_file():
        raw = _read_json(directory / "labels.json")
        labels = raw.get("labels") if isinstance(raw.get("labels"), dict) else raw
    overall = summary.get("overall") if isinstance(summary.get("overall"), dict) else {}
    headline_from = "report.json" if headline else ("summary.json" if overall else "")
    return RunSource(
        name=name, results=results, summary=summary, headline=headline or overall, headline_from=headline_from,
        labels=dict(labels),
        generations=_existing(meta.get("generations"), directory / "generations.jsonl",
                              directory.parent / "generations.jsonl"),
        tasks=_existing(meta.get("tasks")), origin=origin)


def _demo_sources(directory: Path) -> list[RunSource]:
    report = _read_json(directory / "report.json") if (directory / "report.json").is_file() else {}
    metrics = report.get("metrics") if isinstance(report.get("metrics"), dict) else {}
    # the run's own tasks file, or the compressed copy a committed report keeps
    tasks = _existing(None, directory / "data" / "eval.jsonl", directory / "data" / "eval.jsonl.gz")
    attribution = lambda run: _existing(None, directory / "attribution" / f"{run}.jsonl")  # noqa: E731
    out = []
    for cell in sorted(p for p in (directory / "cells").glob("*") if p.is_dir()):
        src = _eval_dir_source(cell / "eval", cell.name, "demo cell", metrics.get(cell.name))
        if src is not None:
            out.append(_with(src, tasks=src.tasks or tasks, attribution=attribution(cell.name)))
    if out or not report:
        return out
    for run, info in (report.get("runs") or {}).items():   # a committed report: compact results only
        path = directory / str(info.get("results", ""))
        if path.is_file():
            named = info.get("generations")
            gens = _existing(None, *([directory / named] if isinstance(named, str) and named else []),
                             directory / "cells" / run / "generations.jsonl")
            out.append(RunSource(name=run, results=path, headline=metrics.get(run) or {},
                                 headline_from="report.json" if metrics.get(run) else "",
                                 labels={"method": info.get("method"), "seed": info.get("seed")},
                                 generations=gens, tasks=tasks, origin="demo compact",
                                 attribution=attribution(run)))
    return out


def _with(src: RunSource, **changes) -> RunSource:
    from dataclasses import replace

    return replace(src, **changes)


def locate_runs(run_dir: str | Path) -> list[RunSource]:
    """The runs of one RUN_DIR argument (an eval dir, a demo/study dir or a results JSONL)."""
    path = Path(run_dir)
    if not path.exists():
        raise ViewSourceError(f"{path}: no such file or directory (pass an eval output dir, a demo/study dir "
                              "or a results JSONL)")
    if path.is_file():
        if path.suffix != ".jsonl":
            raise ViewSourceError(f"{path}: not a results JSONL; pass the eval output dir or its results.jsonl")
        src = _eval_dir_source(path.parent, _run_name(path.parent))
        if src is not None and src.results == path:
            return [src]
        return [RunSource(name=path.stem, results=path)]
    src = _eval_dir_source(path, _run_name(path))
    if src is not None:
        return [src]
    found = _demo_sources(path)
    if found:
        return found
    raise ViewSourceError(
        f"{path}: found no results: looked for {' or '.join(RESULT_NAMES)} in it (an eval output dir), "
        f"cells/*/eval/results.jsonl (a demo or study dir) and the results/<run>.jsonl files of a demo "
        f"report.json; run `cuset eval ... --out {path}` first or pass the directory that holds them")


def _run_name(directory: Path) -> str:
    directory = directory.resolve()
    return directory.parent.name if directory.name == "eval" and directory.parent.name else directory.name


def unique_names(sources: list[RunSource]) -> list[RunSource]:
    """Runs renamed `name`, `name#2`, ... where two RUN_DIRs give the same name."""
    seen: Counter = Counter()
    out = []
    for src in sources:
        seen[src.name] += 1
        out.append(src if seen[src.name] == 1 else _with(src, name=f"{src.name}#{seen[src.name]}"))
    return out


def load_records(source: RunSource) -> LoadedRun:
    """Every valid record of the run (later lines win for a repeated (task, sample)); bad
    lines skipped and counted. A file with no valid record at all is an error."""
    by_key: dict[tuple[str, int], SampleResult] = {}
    skipped: list[SkippedLine] = []
    for lineno, value in iter_jsonl(source.results, errors="yield"):
        where = f"{source.results}:{lineno}"
        if isinstance(value, JsonlError):
            skipped.append(SkippedLine(where, "bad_json", value.detail))
            continue
        if not isinstance(value, dict):
            skipped.append(SkippedLine(where, "bad_record", f"expected a JSON object, got {type(value).__name__}"))
            continue
        try:
            record = SampleResult.from_json(value, where)
        except ResultRecordError as e:
            skipped.append(SkippedLine(where, "bad_record", str(e).removeprefix(f"{where}: ")))
            continue
        except (TypeError, ValueError, AttributeError) as e:   # a missing, unknown or wrongly typed field
            skipped.append(SkippedLine(where, "bad_record", f"not a `cuset eval` results record ({e})"))
            continue
        by_key[(str(record.task_id), record.sample)] = record
    if not by_key:
        reasons = ", ".join(f"{n} {r}" for r, n in Counter(s.reason for s in skipped).items())
        raise ViewSourceError(f"{source.results}: no valid results record"
                              + (f" ({reasons} line(s) skipped, first: {skipped[0].where}: {skipped[0].message})"
                                 if skipped else " (the file is empty)")
                              + "; has the evaluation run yet?")
    return LoadedRun(source, tuple(by_key.values()), tuple(skipped))
