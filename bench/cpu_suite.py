"""Every reference program of the bundled suite at the LARGEST size of its
family, through the real evaluation pipeline on the CPU backend (gen.py,
sandboxed runs under every thread order, output checks, compare.py), under
the backend's default data budget (a quarter of physical memory). Prints the
status of each task, the slowest five runs (seconds per thread order, the
limit is 60 s per run), the slowest five samples (the sum of a sample's runs: what a
user waits for, the issue-41 target being 60 s) with the orders the order proof let
the pipeline skip, and the load average; exits 1 if a task does not pass.

    .venv/bin/python bench/cpu_suite.py [--suite suites/cuset-bench.jsonl] [--workers N] [--json out.json]
"""

from __future__ import annotations

# What this script measures (the evaluation pipeline on the CPU backend, over the bundled suite): a record in bench/results is stale once a commit
# after its own touches one of these paths (docs/tools/perf_table.py).
MEASURES = ("cuset/execute", "cuset/evaluate", "suites/cuset-bench.jsonl")

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def largest_per_family(path: Path):
    from cuset.tasks import load_tasks

    tasks, _ = load_tasks(path)
    chosen = {}
    for task in tasks:
        family = task.family or task.task_name
        if family not in chosen or task.data_bytes > chosen[family].data_bytes:
            chosen[family] = task
    return list(chosen.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", type=Path, default=ROOT / "suites" / "cuset-bench.jsonl")
    ap.add_argument("--workers", type=int, default=None, help="worker OS threads per run (default: the cores)")
    ap.add_argument("--json", type=Path, help="also write every task's status and run times here")
    args = ap.parse_args(argv)
    from _record import start_record

    default_suite = args.suite.resolve() == (ROOT / "suites" / "cuset-bench.jsonl").resolve()
    # Another suite (a subset, say) is another record: it must not replace the bundled suite's.
    record = start_record(variant="" if default_suite else f"suite-{args.suite.stem}",
                          argv=None if argv is None else [__file__, *argv])

    from cuset.evaluate import evaluate_program
    from cuset.evaluate.workspace import Workspace
    from cuset.execute.compile_cache import CompileCache
    from cuset.execute.cpu import CpuBackend
    from cuset.execute.result import Status

    backend = CpuBackend(workers=args.workers)
    tasks = largest_per_family(args.suite)
    print(f"{len(tasks)} tasks (largest size per family), orders {backend.run_orders}, "
          f"budget {backend.max_data_bytes / 1e9:.1f} GB, load {os.getloadavg()}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="cuset-cpu-suite-") as tmp:
        cache = CompileCache(backend, root=Path(tmp) / "cache", timeout=300)
        ws = Workspace(parent=Path(tmp) / "ws", gen_timeout=600)
        try:
            for task in tasks:
                cache.submit(task.bench_cu)
            for task in tasks:
                t = time.perf_counter()
                r = evaluate_program(task, task.bench_cu, backend=backend, cache=cache, workspace=ws)
                runs = {s.name: round(s.seconds, 2) for s in r.steps if s.name.startswith("run[")}
                skipped = [s.stdout for s in r.steps if s.name.startswith("orders[")]
                rows.append({"task": f"{task.id} {task.task_name}", "mb": round(task.data_bytes / 1e6, 1),
                             "status": r.status.value, "detail": r.detail[:300], "runs": runs,
                             "run_total_s": round(sum(runs.values()), 2), "orders_skipped": skipped,
                             "total_s": round(time.perf_counter() - t, 1)})
                print(f"{r.status.value:<14}{task.data_bytes / 1e6:>8.1f} MB  max run "
                      f"{max(runs.values(), default=0):>6.2f} s  {task.task_name}"
                      + (f"  ({r.detail[:200]})" if r.status is not Status.PASSED else ""), flush=True)
        finally:
            cache.close()
            ws.close()
    slowest = sorted(((max(r["runs"].values(), default=0.0), r) for r in rows), key=lambda x: -x[0])[:5]
    print("\nslowest five (seconds per thread order):")
    for _, r in slowest:
        print(f"  {r['task']} ({r['mb']} MB): {r['runs']}")
    slowest_samples = sorted(rows, key=lambda r: -r["run_total_s"])[:5]
    print("\nslowest five samples (seconds of run time over every order and case; whole sample incl. "
          "gen.py and checks):")
    for r in slowest_samples:
        print(f"  {r['task']} ({r['mb']} MB): {r['run_total_s']} s of runs, {r['total_s']} s in all"
              + (f"; {'; '.join(r['orders_skipped'])}" if r["orders_skipped"] else ""))
    proven = sum(bool(r["orders_skipped"]) for r in rows)
    print(f"order proof: {proven} of {len(rows)} samples ran the forward order alone")
    failed = [r for r in rows if r["status"] != Status.PASSED.value]
    print(f"\n{len(rows) - len(failed)}/{len(rows)} passed; load {os.getloadavg()}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    record.write({"suite": os.path.relpath(args.suite, ROOT), "tasks": len(rows), "passed": len(rows) - len(failed),
                  "run_orders": list(backend.run_orders), "workers": args.workers,
                  "data_budget_gb": backend.max_data_bytes / 1e9, "limit_s": 60,
                  "slowest": [r for _, r in slowest], "slowest_samples": slowest_samples,
                  "samples_forward_only": proven, "rows": rows})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
