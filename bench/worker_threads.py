"""Why `make test` gives each pytest-xdist worker one torch thread (tests/conftest.py).

Two `cuset demo --fast` runs side by side, as two test workers run two torch-heavy tests on
a 2-core machine: first with torch's default intra-op threads (one per core in each process),
then with OMP_NUM_THREADS=1 in each. Prints each pair's wall time and their ratio, measured in
one run.

    .venv/bin/python bench/worker_threads.py
"""

from __future__ import annotations

# What this script measures (two `cuset demo --fast` runs, the work a test worker does): a record in bench/results is stale once a commit
# after its own touches one of these paths (docs/tools/perf_table.py).
MEASURES = ("cuset/demo", "cuset/train", "cuset/losses",
            "cuset/experiment/cell.py", "cuset/experiment/scoring.py")  # the demo's cells and its scoring

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pair(workdir: Path, threads: str | None) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    if threads:
        env.update(OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", "cuset.cli.main", "demo", "--fast", "--out",
                               str(workdir / f"{threads or 'default'}-{k}"), "progress=false"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for k in range(2)]
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            sys.exit(f"cuset demo --fast failed: {err[-2000:]}")
    return time.perf_counter() - start


def main() -> int:
    from _record import start_record

    record = start_record()
    with tempfile.TemporaryDirectory(prefix="cuset-worker-threads-") as tmp:
        default_s = pair(Path(tmp), None)
        one_s = pair(Path(tmp), "1")
    print(f"two `cuset demo --fast` side by side: torch's default threads {default_s:.1f} s, "
          f"one thread each {one_s:.1f} s ({default_s / one_s:.2f}x)")
    record.write({"cores": os.cpu_count(), "pair_default_threads_s": default_s, "pair_one_thread_s": one_s,
                  "ratio": default_s / one_s})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
