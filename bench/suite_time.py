"""How long `make test` takes, and where the time goes.

Runs the README's test command exactly as the Makefile spells it (`make test`, with a
JUnit report added through PYTEST_ARGS), then records the wall time, pytest's counts and
the slowest tests and test files (setup + call + teardown, so a module fixture counts
in the file that builds it). The suite runs on one pytest-xdist worker per core, so the
per-file seconds add up to about the cores times the wall time.

    .venv/bin/python bench/suite_time.py            # -> bench/results/suite_time.json

Run it on an otherwise idle machine: the suite is CPU-bound on 2 cores, and any other job
lengthens it (the record keeps the load average before and after).
"""

from __future__ import annotations

# What this script measures (the whole test suite and what it tests): a record in bench/results is stale once a commit
# after its own touches one of these paths (docs/tools/perf_table.py).
MEASURES = ("cuset", "tests", "Makefile", "pyproject.toml")

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = re.compile(r"=+ (?P<body>.*?) in (?P<seconds>[\d.]+)s")


def read_junit(path: Path) -> tuple[list[dict], dict[str, int]]:
    """Every test case (file, name, seconds, outcome) and the outcome counts of a JUnit report."""
    cases, counts = [], defaultdict(int)
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        counts[outcome] += 1
        module = case.get("classname", "").split(".")
        # classname is the dotted module path (plus the class, for tests in a class)
        file = "/".join(p for p in module if not p[:1].isupper()) + ".py"
        cases.append({"file": file, "test": case.get("name", ""), "seconds": float(case.get("time", 0) or 0),
                      "outcome": outcome})
    return cases, dict(counts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--top", type=int, default=20, help="how many of the slowest tests and files to keep")
    args = ap.parse_args(argv)
    from _record import start_record

    record = start_record()
    with tempfile.TemporaryDirectory(prefix="cuset-suite-time-") as tmp:
        junit = Path(tmp) / "junit.xml"
        extra = " ".join(filter(None, [os.environ.get("PYTEST_ARGS", ""), f"--junitxml={junit}"]))
        start = time.perf_counter()
        proc = subprocess.run(["make", "test", f"PYTEST_ARGS={extra}"], cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if not junit.exists():
            sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
            sys.exit(f"make test wrote no JUnit report (exit {proc.returncode})")
        cases, counts = read_junit(junit)
    summary = [m for m in SUMMARY.finditer(proc.stdout)]
    per_file: dict[str, float] = defaultdict(float)
    for c in cases:
        per_file[c["file"]] += c["seconds"]
    slowest = sorted(cases, key=lambda c: -c["seconds"])[:args.top]
    files = sorted(per_file.items(), key=lambda kv: -kv[1])[:args.top]
    busy = sum(per_file.values())
    print(f"make test: exit {proc.returncode}, {wall:.0f} s wall ({wall / 60:.1f} min); "
          f"{summary[-1].group('body') if summary else counts}")
    print(f"test time summed over the workers: {busy:.0f} s ({busy / wall:.2f} workers busy on average)")
    print("\nslowest files (s):")
    for f, s in files:
        print(f"  {s:7.1f}  {f}")
    failed = [f"{c['file']}::{c['test']}" for c in cases if c["outcome"] in ("failure", "error")]
    for name in failed:
        print(f"FAILED {name}")
    print("\nslowest tests (s):")
    for c in slowest:
        print(f"  {c['seconds']:7.1f}  {c['file']}::{c['test']}")
    record.write({"exit_code": proc.returncode, "wall_s": wall, "wall_min": wall / 60,
                  "pytest_summary": summary[-1].group("body") if summary else None,
                  "pytest_seconds": float(summary[-1].group("seconds")) if summary else None,
                  "counts": counts, "failed": failed, "tests_seconds_summed": busy, "cores": os.cpu_count(),
                  "slowest_files": [{"file": f, "seconds": round(s, 2)} for f, s in files],
                  "slowest_tests": [{**c, "seconds": round(c["seconds"], 2)} for c in slowest]})
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
