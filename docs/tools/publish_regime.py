"""Copy a finished base-strength map (`cuset demo --regime --out RUN`) into docs/: the files a
reader needs and a test needs to recompute the map, nothing a run could regenerate at will
(models, generations with logs, caches).

    python docs/tools/publish_regime.py RUN docs/regime-2026-11-26 [--calibration CAL_RUN] [--carry-arms]
    python docs/tools/publish_regime.py --demo DEMO_RUN docs/demo-2026-11-26-premise

Per level: report.md/json, base_nll.json, results/*.jsonl (the compact per-sample records
`cuset demo --report-from` recomputes from), generations/*.jsonl.gz and data/eval.jsonl.gz
(each sample's program and prompt, compressed), attribution/ (where each failing sample left
the correct programs), low_tokens.json, confidence/ (the report's figures) and every
arm's train_log.jsonl (the map's dropped_frac); the map's regime.md/json/png; and, with
--calibration, the calibration's calibration.md/json. tests/demo/test_regime_docs.py checks
that the committed map is what the code writes from these files.

A level re-run with fewer arms (more seeds of sft and cuset after a one-run `cuset:wnorm`)
would drop the arms only the committed report holds: publishing refuses (--allow-dropped
publishes anyway), and --carry-arms first adds those runs from the committed level to the
run's report (its per-sample results and training log, its training, reference-fit and
timing entries), provided the level's base is the same (its NLL on the fine-tuning set
identical to the last digit), recomputes that report's statistics and rewrites the map.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

LEVEL_FILES = ("report.md", "report.json", "base_nll.json", "demo_config.json")
# generations/ and data/eval.jsonl.gz (compressed): what the viewer shows of each sample;
# attribution/: where each failing sample left the correct programs
LEVEL_DIRS = ("results", "confidence", "generations", "attribution")
LEVEL_OPTIONAL = ("data/eval.jsonl.gz", "low_tokens.json")
SKIPPED = {"scores.jsonl"}  # per-token confidences (1.6 MB a level): the figures and confidence.json summarise them


def _copy(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    return dst


def publish_demo(run: Path, dest: Path) -> list[Path]:
    """One demo run (a map's level, or `cuset demo` itself): its report, base statistics, config,
    compact per-sample results, confidence figures and training logs."""
    if not (run / "report.json").is_file():
        raise SystemExit(f"{run}: no report.json; the demo run has not finished")
    copied = [_copy(run / name, dest / name) for name in LEVEL_FILES]
    copied += [_copy(run / name, dest / name) for name in LEVEL_OPTIONAL if (run / name).is_file()]
    for sub in LEVEL_DIRS:
        copied += [_copy(f, dest / f.relative_to(run)) for f in sorted((run / sub).rglob("*"))
                   if f.is_file() and f.name not in SKIPPED]
    copied += [_copy(log, dest / log.relative_to(run)) for log in sorted(run.glob("cells/*/train/train_log.jsonl"))]
    return copied


def dropped_arms(run_level: Path, dest_level: Path) -> list[str]:
    """Arms the level's report already under docs/ holds and the run's report does not: a level
    re-run with fewer methods (say `methods=sft,cuset seeds=4` after a one-run `cuset:wnorm`)
    writes a report without the arms it did not run, and copying it would drop them unseen."""
    def methods(level: Path) -> list[str]:
        path = level / "report.json"
        return json.loads(path.read_text()).get("method_order", []) if path.is_file() else []

    new = set(methods(run_level))
    return [m for m in methods(dest_level) if m not in new]


def carry_arms(run_level: Path, dest_level: Path) -> list[str]:
    """Add to the run's report the runs of the arms only the committed report holds (see the
    module's docstring); returns the runs added. Refuses when the two bases differ."""
    arms = dropped_arms(run_level, dest_level)
    if not arms:
        return []
    bases = [json.loads((level / "base_nll.json").read_text()) for level in (run_level, dest_level)]
    if (bases[0]["nll"], bases[0]["n_tokens"]) != (bases[1]["nll"], bases[1]["n_tokens"]):
        raise SystemExit(f"{run_level.name}: cannot carry {', '.join(arms)} from {dest_level}: its base is not this "
                         f"run's (NLL {bases[1]['nll']!r} on {bases[1]['n_tokens']} tokens, here {bases[0]['nll']!r} "
                         f"on {bases[0]['n_tokens']}); re-run those arms")
    new = json.loads((run_level / "report.json").read_text())
    old = json.loads((dest_level / "report.json").read_text())
    carried = [r for r, info in old["runs"].items() if info["method"] in arms]
    for r in carried:
        info = old["runs"][r]
        new["runs"][r] = info
        _copy(dest_level / info["results"], run_level / info["results"])
        log = Path("cells") / r / "train" / "train_log.jsonl"
        if (dest_level / log).is_file():
            _copy(dest_level / log, run_level / log)
        for key in ("training", "reference_fit"):
            if r in old.get(key, {}):
                new.setdefault(key, {})[r] = old[key][r]
        steps = {k: v for k, v in old.get("timings_s", {}).items() if k.endswith(f"_{r}")}
        new.setdefault("timings_s", {}).update(steps)
        if "time" in new:  # spent by the earlier run: reused, as a resumed run's steps are
            new["time"]["steps_s"] = round(new["time"]["steps_s"] + sum(steps.values()), 1)
            new["time"]["reused_steps"] += list(steps)
    new["method_order"] += arms
    new["carried_runs"] = {**new.get("carried_runs", {}), **{
        r: f"trained and evaluated by an earlier run of this level on the same base (the report committed at "
           f"{old.get('provenance', {}).get('commit', 'an earlier commit')[:10]})" for r in carried}}
    (run_level / "report.json").write_text(json.dumps(new, indent=1))
    from cuset.demo.report import report_from

    report_from(run_level / "report.json")
    return carried


def publish(run: Path, dest: Path, calibration: Path | None = None, allow_dropped: bool = False,
            carry: bool = False) -> list[Path]:
    from cuset.demo.regime import levels_under, map_from_levels

    levels = levels_under(run)
    if not levels or not (run / "regime.json").is_file():
        raise SystemExit(f"{run}: no finished map (regime.json and base-k*/report.json); run cuset demo --regime")
    if carry:
        carried = {level.name: runs for _, level in levels
                   if (dest / level.name / "report.json").is_file() and (runs := carry_arms(level, dest / level.name))}
        if carried:
            map_from_levels(run)
            print("carried from the committed reports: "
                  + "; ".join(f"{name}: {', '.join(runs)}" for name, runs in carried.items()))
    dropped = {level.name: arms for _, level in levels if (arms := dropped_arms(level, dest / level.name))}
    if dropped and not allow_dropped:
        raise SystemExit("publishing would drop arms the committed reports hold: "
                         + "; ".join(f"{name}: {', '.join(arms)}" for name, arms in dropped.items())
                         + ". Re-run the level with those methods too, or pass --allow-dropped")
    copied = []

    def copy(src: Path, dst: Path) -> None:
        copied.append(_copy(src, dst))

    for name in ("regime.md", "regime.json", "regime.png"):
        if (run / name).is_file():
            copy(run / name, dest / name)
    for _, level in levels:
        copied += publish_demo(level, dest / level.name)
    if calibration is not None:
        for name in ("calibration.md", "calibration.json"):
            copy(calibration / name, dest / "calibration" / name)
    return copied


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the map's run directory (cuset demo --regime --out RUN)")
    parser.add_argument("dest", type=Path, help="where under docs/ to copy it")
    parser.add_argument("--calibration", type=Path, help="a calibration run (cuset demo --calibrate --out DIR)")
    parser.add_argument("--demo", action="store_true", help="RUN is one demo run (cuset demo), not a map")
    parser.add_argument("--allow-dropped", action="store_true",
                        help="publish even where a level's new report lacks arms its committed report holds")
    parser.add_argument("--carry-arms", action="store_true",
                        help="add those arms' runs from the committed level to the run's report first (same base "
                             "only), then recompute the report and the map")
    args = parser.parse_args(argv)
    copied = (publish_demo(args.run, args.dest) if args.demo
              else publish(args.run, args.dest, args.calibration, args.allow_dropped, args.carry_arms))
    print(f"{len(copied)} files, {sum(f.stat().st_size for f in copied) / 2**20:.1f} MiB -> {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
