"""What not believing a model answer's order proof costs (issue 59): every task's reference
of a suite through the real evaluation pipeline on the CPU backend twice, side by side,

- as a reference (`EvalOptions.trusted_programs`, the backend building the order proof):
  a run whose every kernel launch the runtime proves order-independent skips the random
  and parallel orders, as `cuset tasks check` and curation's validation evaluate;
- as a model answer (trusted_programs off, the backend built without proofs, as
  `cuset eval` builds it): every order runs, since a proof written from inside the
  program's process could be forged.

Per task the two variants run alternately (which goes first alternates too, so load
drifts hit both alike), each with a cold compile cache of its own (an evaluation
compiles every answer: the compile is part of a sample's time) and then once more with
the cache warm (a sample's time without its compile); gen.py's data are made before the
clock starts. Prints and records the seconds per sample of both variants, their ratio,
the same over the samples the proof let skip orders, and the load.

    nice -n 10 .venv/bin/python bench/proof_trust.py [--suite suites/cuset-bench-cpu.jsonl] [--limit N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What this record measures (docs/tools/perf_table.py marks it stale when these change).
MEASURES = ("cuset/execute", "cuset/evaluate")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", type=Path, default=ROOT / "suites" / "cuset-bench-cpu.jsonl")
    ap.add_argument("--limit", type=int, default=0, help="the first N tasks only (0: all)")
    ap.add_argument("--workers", type=int, default=2, help="worker OS threads per run (the parallel order)")
    args = ap.parse_args(argv)
    from _record import start_record

    record = start_record(argv=None if argv is None else [__file__, *argv])

    from cuset.evaluate import evaluate_program
    from cuset.evaluate.options import EvalOptions
    from cuset.evaluate.workspace import Workspace
    from cuset.execute.compile_cache import CompileCache
    from cuset.execute.cpu import CpuBackend
    from cuset.execute.result import Status
    from cuset.tasks import load_tasks

    tasks, _ = load_tasks(args.suite)
    tasks = tasks[:args.limit] if args.limit else tasks
    variants = {"reference": (CpuBackend(workers=args.workers), EvalOptions(trusted_programs=True)),
                "answer": (CpuBackend(workers=args.workers, skip_independent_orders=False), EvalOptions())}
    print(f"{len(tasks)} tasks of {args.suite.name}, orders {variants['answer'][0].run_orders}, "
          f"load {os.getloadavg()}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="cuset-proof-trust-") as tmp:
        caches = {name: CompileCache(b, root=Path(tmp) / f"cache-{name}", timeout=300)
                  for name, (b, _) in variants.items()}
        ws = Workspace(parent=Path(tmp) / "ws", gen_timeout=600)
        try:
            for i, task in enumerate(tasks):
                ws.prepare(task, 0)   # gen.py before the clock: both variants read the same data
                names = list(variants) if i % 2 == 0 else list(reversed(variants))
                row = {"task": f"{task.id} {task.task_name}"}
                for warm in (False, True):
                    for name in names:
                        backend, opts = variants[name]
                        t = time.perf_counter()
                        r = evaluate_program(task, task.bench_cu, backend=backend, cache=caches[name], workspace=ws,
                                             options=opts)
                        seconds = time.perf_counter() - t
                        key = f"{name}_{'warm' if warm else 'cold'}"
                        row[f"{key}_s"] = round(seconds, 3)
                        row[f"{key}_runs"] = sum(s.name.startswith("run[") for s in r.steps)
                        row[f"{key}_status"] = r.status.value
                row["proven"] = row["reference_cold_runs"] == 1
                rows.append(row)
                print(f"{row['task']:<40} reference {row['reference_cold_s']:6.2f} s ({row['reference_cold_runs']} "
                      f"runs), answer {row['answer_cold_s']:6.2f} s; warm {row['reference_warm_s']:6.2f} / "
                      f"{row['answer_warm_s']:6.2f} s", flush=True)
        finally:
            for c in caches.values():
                c.close()
            ws.close()

    def totals(subset: list[dict]) -> dict:
        out = {"samples": len(subset)}
        for when in ("cold", "warm"):
            ref = sum(r[f"reference_{when}_s"] for r in subset)
            ans = sum(r[f"answer_{when}_s"] for r in subset)
            out[when] = {"reference_s": round(ref, 2), "answer_s": round(ans, 2),
                         "answer_over_reference": round(ans / ref, 4) if ref else None,
                         "median_ratio": round(statistics.median(r[f"answer_{when}_s"] / r[f"reference_{when}_s"]
                                                                 for r in subset), 4) if subset else None}
        return out

    summary = {"all": totals(rows), "proven": totals([r for r in rows if r["proven"]])}
    bad = [r["task"] for r in rows if any(r[f"{v}_{w}_status"] != Status.PASSED.value
                                          for v in variants for w in ("cold", "warm"))]
    for label, t in summary.items():
        print(f"{label}: {t['samples']} samples; with compile: reference {t['cold']['reference_s']} s, answer "
              f"{t['cold']['answer_s']} s (x{t['cold']['answer_over_reference']}); compile cached: reference "
              f"{t['warm']['reference_s']} s, answer {t['warm']['answer_s']} s (x{t['warm']['answer_over_reference']})")
    print(f"not passed: {bad or 'none'}; load {os.getloadavg()}")
    record.write({"suite": os.path.relpath(args.suite, ROOT), "workers": args.workers, "summary": summary,
                  "not_passed": bad, "rows": rows})
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
