"""The CPU backend's differential fuzzer, long run: do the fast paths ever change a verdict?

    nice -n 15 python bench/cpu_fuzz.py [--seed 1] [--kernels 10000] [--jobs 2] [--state DIR]

Generates `--kernels` random CUDA kernels from `--seed` (cuset/execute/cpu/fuzz), runs each
on the default CPU backend (block loops, barrier regions, warp regions, region lanes, the
order proof) and on the fibers under every thread order, and compares per kernel the verdict
and the output bytes under forward and random (`cuset cpu-fuzz` is the same run from the
CLI). Every disagreement is minimised into a reproducer under `<state>/repro/`.

The run resumes: its state lives in `--state` (default `$CUSET_CACHE/cpu-fuzz/seed-<seed>`,
saved after every batch of programs), so it can be stopped and started again, e.g. in the
background under `nice`; each start is a segment with its commit in the record. A state
checked by other backend code (its `code_hash.compile_hash()`) is refused, never resumed. When the
run is done (or with `--partial`, at any point) it writes bench/results/cpu_fuzz.json:
kernels generated, features covered (kernels per feature), the default side's paths, the
verdicts on both sides, disagreements (each with its reproducer), seconds, kernels per
second, and whether all `--kernels` were checked (`complete`). A record with disagreements
says so; it is never a pass. Exit status 1 when there is a disagreement.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's cuset

from _record import start_record  # noqa: E402

from cuset.cachedir import cache_root  # noqa: E402
from cuset.execute.cpu.fuzz.campaign import load_tally, run_campaign  # noqa: E402
from cuset.io import atomic_write_json  # noqa: E402

MEASURES = ("cuset/execute/cpu",)   # the backend under test and the fuzzer (cuset/execute/cpu/fuzz)
SEGMENTS = "segments.json"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kernels", type=int, default=10_000)
    ap.add_argument("--per-program", type=int, default=25)
    ap.add_argument("--jobs", type=int, default=2, help="programs checked at a time")
    ap.add_argument("--minimise-budget", type=int, default=40)
    ap.add_argument("--state", type=Path, default=None, help="run directory (resumed when it exists)")
    ap.add_argument("--partial", action="store_true", help="write the record now, from the state so far "
                    "(complete: false unless every kernel is checked), checking no more kernels")
    args = ap.parse_args(argv)
    state = args.state or cache_root() / "cpu-fuzz" / f"seed-{args.seed}"
    segments = json.loads((state / SEGMENTS).read_text()) if (state / SEGMENTS).exists() else []
    # a partial record names the command of the run it reports (its last segment's), not `--partial`
    ran = next((seg["argv"] for seg in reversed(segments) if "argv" in seg), None) if args.partial else None
    record = start_record(argv=[sys.argv[0], *ran] if ran else None)
    run = ap.parse_args(ran) if ran else args   # the run's own --kernels and --jobs

    def progress(tally) -> None:
        print(f"{tally.kernels}/{args.kernels} kernels, {len(tally.disagreements)} disagreement(s), "
              f"{tally.seconds:.0f} s", flush=True)
        segments[-1]["to_kernel"] = tally.kernels   # saved with the state: a stopped run keeps its segment
        segments[-1]["wall_s"] = round(time.perf_counter() - started, 1)
        atomic_write_json(state / SEGMENTS, segments, indent=1)

    started = time.perf_counter()
    if not args.partial:
        state.mkdir(parents=True, exist_ok=True)
        before = _kernels_done(state)
        segments.append({"commit": record.git.get("commit"), "dirty": record.git.get("dirty"),
                         "date_utc": record.date_utc, "argv": list(argv), "from_kernel": before,
                         "to_kernel": before})
    if args.partial:
        tally = load_tally(state, args.seed, args.per_program)
    else:
        tally = run_campaign(args.seed, args.kernels, state, per_program=args.per_program, jobs=args.jobs,
                             minimise_budget=args.minimise_budget, progress=progress)
    summary = tally.summary()
    wall = sum(seg.get("wall_s", 0.0) for seg in segments)
    # `seconds`: the segments' wall time; the tally's own sums each program's time (jobs overlap)
    complete = tally.kernels >= run.kernels
    summary.update(kernels_requested=run.kernels, complete=complete, segments=segments, state=str(state),
                   written_by="--partial" if args.partial else "the run", seconds=round(wall, 1),
                   program_seconds_summed=summary["seconds"],
                   kernels_per_s=round(tally.kernels / wall, 3) if wall else None, jobs=run.jobs,
                   verdict=(f"{summary['disagreements']} disagreement(s) in {tally.kernels:,} kernels"
                            + ("" if complete else f" (incomplete: {tally.kernels:,} of {run.kernels:,} checked)")),
                   meets_target=complete and summary["disagreements"] == 0)
    record.write(summary)
    return 1 if summary["disagreements"] else 0


def _kernels_done(state: Path) -> int:
    path = state / "state.json"
    return json.loads(path.read_text())["kernels"] if path.exists() else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
