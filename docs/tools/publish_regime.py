"""Copy a finished base-strength map (`cuset demo --regime --out RUN`) into docs/: the files a
reader needs and a test needs to recompute the map, nothing a run could regenerate at will
(models, generations with logs, caches).

    python docs/tools/publish_regime.py RUN docs/regime-2026-11-26 [--calibration CAL_RUN]
    python docs/tools/publish_regime.py --demo DEMO_RUN docs/demo-2026-11-26-premise

Per level: report.md/json, base_nll.json, results/*.jsonl (the compact per-sample records
`cuset demo --report-from` recomputes from), confidence/ (the report's figures) and every
arm's train_log.jsonl (the map's dropped_frac); the map's regime.md/json/png; and, with
--calibration, the calibration's calibration.md/json. tests/demo/test_regime_docs.py checks
that the committed map is what the code writes from these files.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

LEVEL_FILES = ("report.md", "report.json", "base_nll.json", "demo_config.json")
LEVEL_DIRS = ("results", "confidence")
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


def publish(run: Path, dest: Path, calibration: Path | None = None, allow_dropped: bool = False) -> list[Path]:
    from cuset.demo.regime import levels_under

    levels = levels_under(run)
    if not levels or not (run / "regime.json").is_file():
        raise SystemExit(f"{run}: no finished map (regime.json and base-k*/report.json); run cuset demo --regime")
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
    args = parser.parse_args(argv)
    copied = (publish_demo(args.run, args.dest) if args.demo
              else publish(args.run, args.dest, args.calibration, args.allow_dropped))
    print(f"{len(copied)} files, {sum(f.stat().st_size for f in copied) / 2**20:.1f} MiB -> {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
