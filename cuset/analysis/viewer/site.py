"""`build_site`: the static viewer of one or more evaluation runs.

    index.html            headline numbers, pass rates by family and level, the sample table
                          (filters and search run in the page, over data embedded as JSON)
    compare.html          (several runs) each task's outcome per run, "A passed, B failed"
    s/<run>/<page>.html   one page per sample: record, failure facts, program, response, logs
    assets/               the stylesheet (pygments' token colours included), the script, and the
                          table library's files with THIRD-PARTY.txt naming them (vendor.py)

Everything a run's files hold is untrusted (a candidate program writes its logs and
outputs, a model writes its response): the templates autoescape, the code view escapes
every piece it wraps, and JSON inside <script> has `<`, `>`, `&`, U+2028 and U+2029
written as \\u escapes, so no text can close the element or start markup.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from cuset.analysis.viewer.failure import failure_facts
from cuset.analysis.viewer.highlight import program_view, span_counts, token_css
from cuset.analysis.viewer.model import SampleRow, ViewModel, build_model
from cuset.analysis.viewer.sources import (MAX_SKIPPED_LISTED, LoadedRun, load_records, locate_runs,
                                           unique_names)
from cuset.analysis.viewer.texts import RunTexts, load_texts
from cuset.analysis.viewer.vendor import vendor_assets
from cuset.io import atomic_write_text
from cuset.spans import KIND_HELP

HEADLINE_KEYS = ("compile@1", "function@1", "compile@3", "function@3")
_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


@dataclass(frozen=True)
class SiteSummary:
    out: Path
    runs: tuple[str, ...]
    n_samples: int
    n_pages: int
    n_skipped_lines: int
    index_bytes: int
    total_bytes: int
    seconds: float


def script_json(value: Any) -> Markup:
    """`value` as JSON that is safe inside a <script> element."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    for char, escaped in _JSON_ESCAPES.items():
        text = text.replace(char, escaped)
    return Markup(text)


def _environment() -> Environment:
    folder = resources.files("cuset.analysis.viewer") / "templates"
    env = Environment(loader=FileSystemLoader(str(folder)), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["pct"] = lambda v: "n/a" if v is None else f"{100 * v:.1f}"
    env.filters["num"] = lambda v: "n/a" if v is None else (f"{v:.3g}" if isinstance(v, float) else str(v))
    return env


def _headline(run: LoadedRun, records_summary: dict) -> dict[str, Any]:
    """The run's headline numbers: as its summary.json / report.json has them, else recomputed."""
    source = run.source.headline or records_summary
    return {k: source.get(k) for k in (*HEADLINE_KEYS, "n_tasks", "n_samples", "avg_tokens")}


def _recomputed(run: LoadedRun) -> dict:
    from cuset.evaluate.metrics import summarize

    return summarize(run.records).overall


def default_out(run_dirs: Sequence[str | Path]) -> Path:
    first = Path(run_dirs[0])
    return (first if first.is_dir() else first.parent) / "view"


def build_site(run_dirs: Sequence[str | Path], out: str | Path | None = None, *, jobs: int = 1) -> SiteSummary:
    """Write the viewer of `run_dirs` into `out` (default: `<first RUN_DIR>/view`); the
    sample pages in `jobs` forked processes (where the platform forks; else in this one)."""
    started = time.perf_counter()
    if not run_dirs:
        raise ValueError("build_site needs at least one run directory")
    out = Path(out) if out is not None else default_out(run_dirs)
    sources = unique_names([src for d in run_dirs for src in locate_runs(d)])
    runs = [load_records(src) for src in sources]
    texts = [load_texts(src) for src in sources]
    model = build_model(runs, [t.levels() for t in texts])
    env = _environment()
    (out / "assets").mkdir(parents=True, exist_ok=True)
    asset_dir = resources.files("cuset.analysis.viewer") / "assets"
    atomic_write_text(out / "assets" / "viewer.css",
                      (asset_dir / "viewer.css").read_text(encoding="utf-8") + "\n" + token_css() + "\n")
    atomic_write_text(out / "assets" / "viewer.js", (asset_dir / "viewer.js").read_text(encoding="utf-8"))
    vendor_assets(out / "assets")
    run_info = [_run_info(i, run, text) for i, (run, text) in enumerate(zip(runs, texts))]
    index = env.get_template("index.html").render(
        runs=run_info, model=model, headline_keys=HEADLINE_KEYS, has_compare=len(runs) > 1,
        data=script_json({"runs": [r["name"] for r in run_info], "rows": [row.to_json() for row in model.rows]}))
    atomic_write_text(out / "index.html", index)
    if len(runs) > 1:
        compare = env.get_template("compare.html").render(
            runs=run_info, model=model,
            data=script_json({"runs": [r["name"] for r in run_info], "pairs": model.pairs(),
                              "tasks": [{"t": t, "n": model.tasks[t]["name"], "f": model.tasks[t]["family"],
                                         "o": {str(i): [o.passed, o.n, [list(h) for h in o.hrefs]]
                                               for i, o in per_run.items()}}
                                        for t, per_run in model.outcomes.items()]}))
        atomic_write_text(out / "compare.html", compare)
    for i in range(len(runs)):
        (out / "s" / str(i)).mkdir(parents=True, exist_ok=True)
    # task by task across the runs: the same task's programs, often repeated, come one after another
    work = sorted(((i, j) for i, run in enumerate(runs) for j in range(len(run.records))),
                  key=lambda w: (str(runs[w[0]].records[w[1]].task_id), w[0], w[1]))
    global _PAGES
    # compiled once here, before the workers fork, rather than once in each of them
    _PAGES = _PageJob(out, model, run_info, texts, env.get_template("sample.html"))
    try:
        n_pages = _write_pages(work, jobs)
    finally:
        _PAGES = None
    total = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    return SiteSummary(out, tuple(r["name"] for r in run_info), len(model.rows), n_pages,
                       sum(len(r.skipped) for r in runs), (out / "index.html").stat().st_size, total,
                       time.perf_counter() - started)


@dataclass(frozen=True)
class _PageJob:
    out: Path
    model: ViewModel
    run_info: list[dict[str, Any]]
    texts: list[RunTexts]
    template: Any     # the compiled sample.html


# The sample pages' inputs, set while `build_site` writes them: forked workers inherit it
# instead of receiving the whole model through a pipe.
_PAGES: _PageJob | None = None


def _write_chunk(items: list[tuple[int, int]]) -> int:
    job = _PAGES
    template = job.template
    for i, j in items:
        record = job.model.runs[i].records[j]
        row = job.model.row_of(i, record)
        atomic_write_text(job.out / row.href, _sample_page(template, job.model, job.run_info, i, record, row,
                                                             job.texts[i]))
    return len(items)


def _write_pages(work: list[tuple[int, int]], jobs: int) -> int:
    import multiprocessing

    if jobs <= 1 or len(work) < 2 * jobs or "fork" not in multiprocessing.get_all_start_methods():
        return _write_chunk(work)
    # contiguous chunks of the task-by-task order, so a task's samples (which often repeat a
    # program: see highlight._analysed) are written by one worker, its cache warm
    chunks = [work[k * len(work) // jobs:(k + 1) * len(work) // jobs] for k in range(jobs)]
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        return sum(pool.map(_write_chunk, chunks))


def _run_info(i: int, run: LoadedRun, text: RunTexts) -> dict[str, Any]:
    src = run.source
    models = sorted({g.model for g in text.generations.values() if g.model})
    labels = {k: v for k, v in src.labels.items() if v is not None}
    if models and "model" not in labels:
        labels["model"] = os.path.basename(models[0].rstrip("/")) + (f" (+{len(models) - 1})" if len(models) > 1 else "")
    return {"index": i, "name": src.name, "origin": src.origin, "results": str(src.results),
            "labels": labels, "headline": _headline(run, {} if src.headline else _recomputed(run)),
            "headline_from": src.headline_from or "recomputed from the records",
            "skipped": run.skipped[:MAX_SKIPPED_LISTED], "n_skipped": len(run.skipped),
            "skipped_by_reason": run.skipped_by_reason, "notes": text.notes,
            "generations": str(src.generations) if src.generations else None,
            "tasks": str(src.tasks) if src.tasks else None}


def _sample_page(template, model: ViewModel, run_info: list[dict], i: int, record, row: SampleRow,
                 text: RunTexts) -> str:
    gen = text.generations.get((row.task_id, record.sample))
    facts = failure_facts(record)
    code_html = spans = None
    if gen is not None and gen.code:
        code_html, spans = program_view(gen.code, facts.marked_lines())
    others = []
    for j, outcome in sorted(model.outcomes.get(row.task_id, {}).items()):
        others.append({"run": run_info[j]["name"], "current": j == i, "passed": outcome.passed, "n": outcome.n,
                       "samples": [{"sample": s, "status": st, "href": "../../" + h} for s, st, h in outcome.hrefs]})
    return template.render(
        run=run_info[i], record=record, row=row, facts=facts, gen=gen, code_html=code_html,
        span_counts=span_counts(spans) if spans else {}, kind_help=KIND_HELP,
        prompt=text.prompt(row.task_id, row.level), others=others, root="../../",
        attribution=text.attribution.get((row.task_id, record.sample)),
        index_href=f"../../index.html#run={i}&task={quote(row.task_id, safe='')}")
