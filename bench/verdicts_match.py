"""Do two evaluations of the same generations give the same verdict per sample?

A refactoring of the evaluation path (options, runners, task kinds) must not change a verdict.
Evaluate a run's generations again with the code under test (`cuset eval TASKS GENERATIONS
--out AFTER ...` with the run's settings), then

    python bench/verdicts_match.py BEFORE/results.jsonl AFTER/results.jsonl [BEFORE2 AFTER2 ...]

compares the two files sample by sample (task id, sample index -> status) and writes
bench/results/verdicts_match.json: per pair, the samples compared, how many got the same
status, the status counts on each side and the first differences. Exit status 1 when any
verdict differs or a sample is on one side only.
"""

from __future__ import annotations

# What this script measures (compares two evaluations named on the command line: no code of this tree): a record in bench/results is stale once a commit
# after its own touches one of these paths (docs/tools/perf_table.py).
MEASURES = ()

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's cuset

from _record import start_record  # noqa: E402

from cuset.io import iter_jsonl  # noqa: E402


def verdicts(path: str) -> dict[tuple[int, int], str]:
    return {(r["task_id"], r["sample"]): r["status"] for _, r in iter_jsonl(Path(path))}


def compare(before: str, after: str) -> dict:
    old, new = verdicts(before), verdicts(after)
    shared = sorted(old.keys() & new.keys())
    differ = [{"task_id": k[0], "sample": k[1], "before": old[k], "after": new[k]} for k in shared if old[k] != new[k]]
    return {"before": before, "after": after, "samples": len(shared), "same": len(shared) - len(differ),
            "only_before": len(old.keys() - new.keys()), "only_after": len(new.keys() - old.keys()),
            "statuses_before": dict(Counter(old[k] for k in shared)),
            "statuses_after": dict(Counter(new[k] for k in shared)), "first_differences": differ[:20]}


def main(argv: list[str]) -> int:
    if len(argv) < 2 or len(argv) % 2:
        print(__doc__)
        return 2
    record = start_record()
    pairs = [compare(argv[i], argv[i + 1]) for i in range(0, len(argv), 2)]
    for p in pairs:
        print(f"{p['after']}: {p['same']}/{p['samples']} samples with the same status "
              f"({p['only_before']} only before, {p['only_after']} only after) {p['statuses_after']}")
    identical = all(p["same"] == p["samples"] and not p["only_before"] and not p["only_after"] for p in pairs)
    record.write({"pairs": pairs, "all_identical": identical})
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
