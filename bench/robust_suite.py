"""Every reference program of the bundled suite through robust verification on the CPU
(or, with --backend gpu, the GPU) backend: the plain verdict, then input cases 0..robust_cases-1 and the strict
every-element check. A reference must pass both; prints one line per task and the
failures, exits 1 if any.

    .venv/bin/python bench/robust_suite.py [--suite suites/cuset-bench-cpu.jsonl] [--cases 3] [--backend cpu|gpu]
                                           [--samples N] [--workers 2] [--json out.json]
"""

from __future__ import annotations

# What this script measures (robust verification over the bundled CPU suite): a record in bench/results is stale once a commit
# after its own touches one of these paths (docs/tools/perf_table.py).
MEASURES = ("cuset/execute", "cuset/evaluate", "suites/cuset-bench-cpu.jsonl")

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_suite(tasks, *, robust_cases: int = 3, workers: int = 2, root: Path, backend_name: str = "cpu",
              cache_root: Path | None = None, data_root: Path | None = None):
    """(task, ExecResult, seconds) per task, in order. Compiled programs go to `cache_root`
    (default `root`/cache) and gen.py's data to `data_root` (default under `root`/ws), which
    the tests share with the other runs of the same programs."""
    from cuset.evaluate import EvalOptions, evaluate_program
    from cuset.evaluate.workspace import Workspace
    from cuset.execute.registry import get_backend
    from cuset.execute.compile_cache import CompileCache

    backend = get_backend(backend_name, **({"workers": 1} if backend_name == "cpu" else {}))
    options = EvalOptions(robust=True, robust_cases=robust_cases)
    with CompileCache(backend, cache_root or root / "cache", workers=workers, timeout=300) as cache, \
            Workspace(parent=root / "ws", data_root=data_root) as ws:
        def one(task):
            t = time.perf_counter()
            r = evaluate_program(task, task.bench_cu, backend=backend, cache=cache, workspace=ws, options=options)
            return task, r, time.perf_counter() - t

        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            return list(pool.map(one, tasks))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", type=Path, default=ROOT / "suites" / "cuset-bench-cpu.jsonl")
    ap.add_argument("--cases", type=int, default=3, help="robust_cases")
    ap.add_argument("--samples", type=int, default=0, help="only every n-th task (0: all)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--backend", default="cpu", choices=("cpu", "gpu"))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from _record import start_record

    record = start_record(variant="" if args.backend == "cpu" else args.backend,
                          argv=None if argv is None else [__file__, *argv])
    from cuset.tasks import load_tasks

    tasks, _ = load_tasks(args.suite, strict=True)
    if args.samples:
        tasks = tasks[::args.samples]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cuset-robust-suite-") as tmp:
        rows = run_suite(tasks, robust_cases=args.cases, workers=args.workers, root=Path(tmp), backend_name=args.backend)
    failed = []
    for task, r, secs in rows:
        ok = r.passed and r.robust_passed
        print(f"{'ok  ' if ok else 'FAIL'} {task.id:>3} {task.task_name:<40} plain {r.status.value:<8} robust "
              f"{r.robust_status.value:<8} {r.robust_check or '-':<18} {secs:6.1f} s", flush=True)
        if not ok:
            failed.append((task, r))
    for task, r in failed:
        print(f"\n{task.id} {task.task_name}: plain {r.status.value} {r.detail[:300]}\n  robust "
              f"{r.robust_status.value} [{r.robust_check}] {r.robust_detail[:500]}")
    seconds = time.perf_counter() - t0
    print(f"\n{len(rows) - len(failed)}/{len(rows)} references pass plain and robust ({args.cases} cases, "
          f"{args.backend} backend) "
          f"in {seconds:.0f} s")
    per_task = [{"id": t.id, "task": t.task_name, **r.to_json(), "seconds": s} for t, r, s in rows]
    if args.json:
        args.json.write_text(json.dumps(per_task, indent=1))
    record.write({"suite": os.path.relpath(args.suite, ROOT), "backend": args.backend, "cases": args.cases,
                  "workers": args.workers, "tasks": len(rows), "passed_plain_and_robust": len(rows) - len(failed),
                  "seconds": seconds, "rows": per_task})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
