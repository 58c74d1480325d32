"""The CPU backend's speed at an older commit and at this one, side by side in one run.

Runs one bench script twice on this machine, back to back: first in a temporary worktree of
the old commit (its own code, imported from there), then in this checkout, each with an
empty cache root of its own, and prints the new-over-old ratio per sample and in all:

    suite   bench/cpu_suite.py: every family's largest reference through the pipeline
            (the per-sample time a user waits for, gen.py to compare.py)
    proof   bench/cpu_backend.py --proof --repeats 3: a whole sample every order vs with the
            order proof (median seconds)

    .venv/bin/python bench/speed_vs_commit.py --old 4cd721f suite   # -> bench/results/speed_vs_commit.suite.json

The run in this checkout writes its own script's record as well (bench/results/cpu_suite.json
or cpu_backend.proof.json), so the re-measured record and the ratio come from the same run.
Run it on an idle machine: the two sides are minutes apart, and the record keeps the load.
"""

from __future__ import annotations

# The code both sides run (docs/tools/perf_table.py marks the record stale when these change).
MEASURES = ("cuset/execute", "cuset/evaluate", "suites/cuset-bench.jsonl")

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "suite": ["bench/cpu_suite.py"],
    "proof": ["bench/cpu_backend.py", "--proof", "--repeats", "3"],
}
# where each script leaves its rows: --json (suite) or only its own record (proof)
RECORDS = {"proof": "bench/results/cpu_backend.proof.json"}


def run_side(checkout: Path, what: str, cache: Path, out: Path) -> list[dict]:
    """Run the script of `what` in `checkout`, importing that checkout's cuset; return its --json rows."""
    env = {**os.environ, "CUSET_CACHE": str(cache), "PYTHONPATH": str(checkout)}
    where = subprocess.run([sys.executable, "-c", "import cuset; print(cuset.__file__)"], cwd=checkout, env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    if not Path(where).resolve().is_relative_to(checkout.resolve()):
        sys.exit(f"{checkout}: imports cuset from {where}, not from the checkout it should measure")
    argv = COMMANDS[what] if what in RECORDS else [*COMMANDS[what], "--json", str(out)]
    proc = subprocess.run([sys.executable, *argv], cwd=checkout, env=env)
    if proc.returncode != 0:
        sys.exit(f"{checkout}: {' '.join(argv)} exited {proc.returncode}")
    if what in RECORDS:   # the script's own record in that checkout, written by this run
        return json.loads((checkout / RECORDS[what]).read_text())["results"]
    return json.loads(out.read_text())


def per_sample(what: str, rows) -> dict[str, float]:
    """Seconds per sample: a task's whole evaluation (suite), or a case's median per mode (proof)."""
    if what == "suite":
        return {r["task"]: r["total_s"] for r in rows}
    found = {}
    for r in rows["proof"]:
        found[f"{r['label']}, every order"] = r["all_orders_sample_s"]
        found[f"{r['label']}, with the proof"] = sum(r[f"proof_{o}_s"] for o in r["proof_orders"])
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True, help="the commit to compare with (e.g. the records' own)")
    ap.add_argument("what", choices=sorted(COMMANDS))
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from _record import start_record

    old = subprocess.run(["git", "rev-parse", "--verify", f"{args.old}^{{commit}}"], cwd=ROOT, capture_output=True,
                         text=True)
    if old.returncode != 0:
        sys.exit(f"--old {args.old}: not a commit of this repository")
    record = start_record(variant=args.what)
    with tempfile.TemporaryDirectory(prefix="cuset-speed-vs-") as tmp:
        tree = Path(tmp) / "old"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), old.stdout.strip()], cwd=ROOT,
                       check=True)
        try:
            before = per_sample(args.what, run_side(tree, args.what, Path(tmp) / "cache-old", Path(tmp) / "old.json"))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)
        after = per_sample(args.what, run_side(ROOT, args.what, Path(tmp) / "cache-new", Path(tmp) / "new.json"))
    common = [k for k in before if k in after]
    ratios = {k: round(after[k] / before[k], 3) for k in common if before[k] > 0}
    total_old, total_new = sum(before[k] for k in common), sum(after[k] for k in common)
    worst = sorted(ratios.items(), key=lambda kv: -kv[1])[:5]
    summary = {"old_commit": old.stdout.strip(), "what": args.what, "command": " ".join(COMMANDS[args.what]),
               "samples": len(common), "only_old": sorted(set(before) - set(after)),
               "only_new": sorted(set(after) - set(before)),
               "old_s": round(total_old, 2), "new_s": round(total_new, 2),
               "new_over_old": round(total_new / total_old, 3), "median_ratio": round(statistics.median(ratios.values()), 3),
               "worst": [{"sample": k, "ratio": v, "old_s": round(before[k], 2), "new_s": round(after[k], 2)}
                         for k, v in worst],
               "within_15_percent": total_new <= 1.15 * total_old,
               "rows": [{"sample": k, "old_s": round(before[k], 3), "new_s": round(after[k], 3),
                         "ratio": ratios.get(k)} for k in common]}
    for row in summary["rows"]:
        print(f"{row['sample']:<48} old {row['old_s']:8.2f} s  new {row['new_s']:8.2f} s  x{row['ratio']}")
    print(f"{args.what}: {len(common)} samples, old {total_old:.1f} s, new {total_new:.1f} s "
          f"(x{summary['new_over_old']}, median x{summary['median_ratio']}); within 15%: "
          f"{'yes' if summary['within_15_percent'] else 'no'}")
    record.write(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
