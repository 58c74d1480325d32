"""Every bundled KernelBench task (suites/kernelbench) with its correct and its wrong
answer through `evaluate_program` on one backend: the correct answer must pass (plain and,
with --robust, robust), the wrong one must fail. Prints one line per answer and the
failures, exits 1 if any answer is judged the wrong way. The same check as
tests/evaluate/test_kernelbench_bundled.py, for the GPU backend too.

    .venv/bin/python bench/kernelbench_bundle.py [--backend cpu|gpu] [--robust] [--trials 5] [--workers 2]
                                                 [--json out.json]
"""

from __future__ import annotations

# What this script measures (the KernelBench path over the bundled answers): a record in bench/results is stale once a commit
# after its own touches one of these paths (docs/tools/perf_table.py).
MEASURES = ("cuset/execute", "cuset/evaluate", "suites/kernelbench")

import argparse
import dataclasses
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / "suites" / "kernelbench"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="cpu", choices=("cpu", "gpu"))
    ap.add_argument("--robust", action="store_true", help="robust verification of the correct answers")
    ap.add_argument("--trials", type=int, default=5, help="seeded trials per task (n_trials)")
    ap.add_argument("--workers", type=int, default=2, help="answers verified side by side")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from _record import start_record

    record = start_record(variant="" if args.backend == "cpu" else args.backend,
                          argv=None if argv is None else [__file__, *argv])
    from cuset.evaluate.pipeline import evaluate_program
    from cuset.evaluate.options import EvalOptions, Timeouts
    from cuset.execute.registry import get_backend
    from cuset.execute.compile_cache import CompileCache
    from cuset.execute.kernelbench.build import ExtensionBuilder
    from cuset.tasks import load_tasks

    tasks, _ = load_tasks(BUNDLE, strict=True)
    backend = get_backend(args.backend)
    jobs = [(t, which) for t in tasks for which in ("correct", "wrong")]
    t0 = time.perf_counter()
    with CompileCache(ExtensionBuilder(), timeout=600) as cache:
        def one(job):
            task, which = job
            code = (BUNDLE / "solutions" / f"{task.id}.{which}.py").read_text()
            opts = EvalOptions(timeouts=Timeouts(compile=600, run=120), robust=args.robust and which == "correct")
            t = time.perf_counter()
            r = evaluate_program(dataclasses.replace(task, n_trials=args.trials), code, backend=backend,
                                 options=opts, cache=cache)
            return task, which, r, time.perf_counter() - t

        with ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool:
            rows = list(pool.map(one, jobs))
    bad = []
    for task, which, r, secs in rows:
        ok = (r.passed and (not args.robust or r.robust_passed)) if which == "correct" else not r.passed
        robust = f" robust {r.robust_status.value:<8} {r.robust_check or '-':<9}" if r.robust_status else ""
        print(f"{'ok  ' if ok else 'BAD '} {task.id:<34} {which:<8} {r.status.value:<14}{robust} {secs:6.1f} s",
              flush=True)
        if not ok:
            bad.append((task, which, r))
    for task, which, r in bad:
        print(f"\n{task.id} ({which}): {r.status.value} {r.detail[:400]}\n  robust {r.robust_detail[:400]}")
    seconds = time.perf_counter() - t0
    print(f"\n{len(rows) - len(bad)}/{len(rows)} answers judged as expected on the {args.backend} backend "
          f"({len(tasks)} tasks, {args.trials} trials{', robust' if args.robust else ''}) in "
          f"{seconds:.0f} s")
    answers = [{"task": t.id, "answer": w, **r.to_json(), "seconds": s} for t, w, r, s in rows]
    if args.json:
        args.json.write_text(json.dumps(answers, indent=1, default=str))
    record.write({"backend": args.backend, "robust": args.robust, "trials": args.trials, "workers": args.workers,
                  "tasks": len(tasks), "answers": len(rows), "judged_as_expected": len(rows) - len(bad),
                  "seconds": seconds, "rows": answers})
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
