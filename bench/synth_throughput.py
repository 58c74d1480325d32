"""Validate the task factory at scale, and measure how fast that goes.

Synthesises N tasks (`cuset.curation.synth.synthesize`) and runs every reference
program end to end through the evaluation pipeline on the CPU backend: gen.py for
each input case, compile (g++ through the CPU backend's rewriter, cold compile
cache), run under the backend's thread orders, compare.py. Prints, in one run:
synthesis throughput, validation throughput in tasks per minute with --workers
parallel tasks, pass counts by status and family, and the median seconds per
pipeline step. Results stream to OUT/results.jsonl (a re-run resumes; throughput
counts only the tasks validated by this run); OUT/summary.json and OUT/summary.md
hold the figures.

    .venv/bin/python bench/synth_throughput.py                    # the full 2,000
    .venv/bin/python bench/synth_throughput.py --n 100 --out /tmp/synth100
"""

from __future__ import annotations

# What this script measures (the task factory and the validation it runs on the CPU backend): a record in bench/results is stale once a commit
# after its own touches one of these paths (docs/tools/perf_table.py).
MEASURES = ("cuset/curation", "cuset/execute", "cuset/evaluate")

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2000, help="tasks to synthesise and validate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="tasks validated in parallel")
    parser.add_argument("--cases", type=int, nargs="+", default=[0, 1], help="input cases per task (CUSET_CASE)")
    parser.add_argument("--out", default="runs/synth-validate", help="directory for results.jsonl and the summary")
    parser.add_argument("--cache-dir", default="", help="compile cache (default: a fresh temporary dir = cold)")
    args = parser.parse_args(argv)
    from _record import start_record

    record = start_record(argv=None if argv is None else [__file__, *argv])

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from cuset.curation.synth import synthesize
    from cuset.curation.validation import task_key, validate_references
    from cuset.evaluate.config import ExecutionConfig
    from cuset.execute.registry import get_backend
    from cuset.io import read_jsonl

    console = Console()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    tasks = synthesize(args.n, args.seed)
    synth_seconds = time.perf_counter() - t0

    results_path = out / "results.jsonl"
    recorded = {r["key"] for r in read_jsonl(results_path)}
    before = sum(task_key(t) in recorded for t in tasks)  # a changed task counts as not yet validated
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="cuset-synth-cache-")
    backend = get_backend("cpu")
    new = []
    columns = (TextColumn("validating"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[bad]} failed"),
               TimeElapsedColumn(), TimeRemainingColumn())
    t1 = time.perf_counter()
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task("validate", total=len(tasks), completed=before, bad=0)

        def on_result(v):
            new.append(v)
            progress.update(bar, advance=1, bad=sum(not r.passed for r in new))

        results = validate_references(tasks, backend=backend, cases=tuple(args.cases),
                                      execution=ExecutionConfig(workers=args.workers),
                                      results_path=results_path, cache_dir=cache_dir, on_result=on_result)
    wall = time.perf_counter() - t1

    statuses = Counter(r.status for r in results)
    by_family = defaultdict(Counter)
    for r in results:
        by_family[r.family][r.status] += 1
    steps = defaultdict(list)
    for r in new:
        for name, secs in r.timings.items():
            steps[name].append(secs)
    summary = {
        "n": len(tasks), "seed": args.seed, "workers": args.workers, "cores": os.cpu_count(), "cases": args.cases,
        "synthesis_seconds": round(synth_seconds, 3),
        "synthesis_tasks_per_second": round(len(tasks) / synth_seconds, 1),
        "validated_this_run": len(new), "validation_wall_seconds": round(wall, 1),
        "tasks_validated_per_minute": round(60 * len(new) / wall, 1) if new and wall > 0 else None,
        "statuses": dict(statuses), "passed": statuses.get("passed", 0),
        "median_step_seconds": {k: round(statistics.median(v), 3) for k, v in sorted(steps.items())},
        "failures": [{"task_id": r.task_id, "task_name": r.task_name, "family": r.family, "status": r.status,
                      "detail": r.detail[:500]} for r in results if not r.passed],
        "families": {f: dict(c) for f, c in sorted(by_family.items())},
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "summary.md").write_text(render_markdown(summary))
    console.print(render_markdown(summary))
    record.write(summary)
    return 0 if summary["passed"] == len(tasks) else 1


def render_markdown(s: dict) -> str:
    lines = [
        f"# Task factory validation: {s['n']} tasks (seed {s['seed']})",
        "",
        "| measure | value |",
        "|---|---|",
        f"| synthesis | {s['synthesis_seconds']} s ({s['synthesis_tasks_per_second']} tasks/s) |",
        f"| validated this run | {s['validated_this_run']} in {s['validation_wall_seconds']} s "
        f"with {s['workers']} workers on {s['cores']} cores |",
        f"| **tasks validated per minute** | **{s['tasks_validated_per_minute']}** |",
        f"| passed | {s['passed']} / {s['n']} |",
        "",
        "| step | median seconds per task |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in s["median_step_seconds"].items()),
        "",
        "| status | tasks |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in sorted(s["statuses"].items())),
    ]
    if s["failures"]:
        lines += ["", "## Failures", "", "| id | task | family | status | detail |", "|---|---|---|---|---|"]
        lines += [f"| {f['task_id']} | {f['task_name']} | {f['family']} | {f['status']} | "
                  f"{f['detail'][:120].replace('|', '/').replace(chr(10), ' ')} |" for f in s["failures"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
