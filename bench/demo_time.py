"""How long `make demo` takes on a first run, and what its report says.

Runs the README's demo command exactly as the Makefile spells it (`make demo`, with the run
directory given through DEMO_ARGS) under an empty cache root (CUSET_CACHE: no compiled
programs, precompiled headers or cached base from an earlier run, as on a fresh clone), then
records the wall time, the CPU seconds of the demo and everything it started, each step's
seconds and the report's headline: every model's compilation and function Pass@1, the base's
competence and regime lines, and the paired comparison.

    .venv/bin/python bench/demo_time.py [--keep DIR] [-- DEMO_ARGS...]   # -> bench/results/demo_time.json

Run it on an otherwise idle machine (the demo is CPU-bound on 2 cores; the record keeps the
load average before and after, and the share of the machine's CPU time the demo got).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What this record measures (docs/tools/perf_table.py marks it stale when these change).
MEASURES = ("cuset/demo", "cuset/train", "cuset/losses", "cuset/generate", "cuset/execute", "cuset/evaluate",
            "cuset/experiment/cell.py", "cuset/experiment/scoring.py")  # the demo's cells and its scoring


def machine_cpu_seconds() -> float:
    """CPU seconds every process on the machine has used since boot (user + system, /proc/stat)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = os.sysconf("SC_CLK_TCK")
    user, nice, system = (int(x) for x in fields[:3])
    return (user + nice + system) / ticks


def headline(report: dict) -> dict:
    """What the record keeps of a demo report.json."""
    from cuset.demo.report import competence_sentence, regime_sentence, row_label

    pct = lambda x: None if x is None else round(100 * x, 1)  # noqa: E731
    return {
        "models": {r: {"method": info["method"], "compile@1": pct(report["metrics"][r].get("compile@1")),
                       "function@1": pct(report["metrics"][r].get("function@1")),
                       "function@3": pct(report["metrics"][r].get("function@3"))}
                   for r, info in report["runs"].items()},
        "base_competence": competence_sentence(report["methods"]["vanilla"]),
        "regime": regime_sentence(report["base_nll"], report["config"]["tau"]),
        "paired": [{"comparison": f"{row_label(p['b'])} - {row_label(p['a'])}", "metric": p["metric"],
                    "delta_points": pct(p["delta"]), "low": pct(p["low"]), "high": pct(p["high"]),
                    "p_holm": p.get("p_holm")} for p in report["paired"]],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep", type=Path, help="run directory to keep (default: a temporary one)")
    ap.add_argument("demo_args", nargs="*", help="extra DEMO_ARGS (key=value overrides)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from _record import start_record

    record = start_record()
    with tempfile.TemporaryDirectory(prefix="cuset-demo-time-") as tmp:
        out = (args.keep or Path(tmp) / "run").resolve()
        if out.exists():
            sys.exit(f"{out} exists: the record measures a run from scratch, give a new --keep directory")
        env = {**os.environ, "CUSET_CACHE": str(Path(tmp) / "cache")}
        demo_args = shlex.join(["--out", str(out), *args.demo_args])
        cpu_before, machine_before = resource.getrusage(resource.RUSAGE_CHILDREN), machine_cpu_seconds()
        start = time.perf_counter()
        # -o: the installation is not part of the demo's time, and a checkout whose pyproject.toml is newer
        # than the install stamp would otherwise re-install into the (possibly shared) .venv first
        proc = subprocess.run(["make", "-o", ".venv/.installed-stamp", "demo", f"DEMO_ARGS={demo_args}"], cwd=ROOT,
                              env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        cpu_after, machine_after = resource.getrusage(resource.RUSAGE_CHILDREN), machine_cpu_seconds()
        log_tail = (proc.stdout + proc.stderr)[-6000:]
        if proc.returncode != 0 or not (out / "report.json").is_file():
            sys.stderr.write(log_tail)
            sys.exit(f"make demo failed (exit {proc.returncode})")
        report = json.loads((out / "report.json").read_text())
        progress_lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "elapsed" in ln]
        announced = [ln for ln in (proc.stderr + proc.stdout).splitlines() if "expected" in ln]
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    machine = machine_after - machine_before
    print(f"make demo: {wall:.0f} s wall ({wall / 60:.1f} min), {cpu:.0f} CPU s ({cpu / wall:.2f} cores busy), "
          f"the machine's CPU: {machine:.0f} s ({machine / wall:.2f} cores), the demo's share {cpu / max(machine, 1):.0%}")
    record.write({"exit_code": proc.returncode, "wall_s": round(wall, 1), "wall_min": round(wall / 60, 2),
                  "cpu_s": round(cpu, 1), "machine_cpu_s": round(machine, 1),
                  "demo_share_of_machine_cpu": round(cpu / max(machine, 1), 3),
                  "demo_args": demo_args, "steps_s": report["timings_s"], "report_time": report["time"],
                  "config": report["config"], **headline(report),
                  "progress_lines": len(progress_lines), "announcements": announced})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
