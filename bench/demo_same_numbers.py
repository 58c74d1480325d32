"""Do two demo runs of the same config report the same numbers?

A refactoring must not change what the demo measures. Run `cuset demo` with the same config
(and the same key=value overrides) on the code before and after the change, then

    python bench/demo_same_numbers.py BEFORE/report.json AFTER/report.json

walks both report.json files field by field and writes bench/results/demo_same_numbers.json:
the fields compared, and every field that differs, each classed as a *result* (a score, a
loss, a count, a generation's statistics: anything the report concludes from) or as
*bookkeeping* (wall-clock and throughput timings, the run directory, the provenance block,
a config default that the run did not use, listed with --unused-config KEY). Exit status 1
when any result differs or a field is on one side only outside the bookkeeping.
"""

from __future__ import annotations

# What this script measures (compares two demo reports named on the command line: no code of this tree): a record in bench/results is stale once a commit
# after its own touches one of these paths (docs/tools/perf_table.py).
MEASURES = ()

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's cuset

from _record import start_record  # noqa: E402

# what changes from one run to the next of identical code: where and when it ran, how long it took
BOOKKEEPING_ROOTS = ("/time", "/timings_s", "/provenance", "/config/out")
BOOKKEEPING_LEAVES = ("tokens_per_s", "seconds", "wall_s", "elapsed_s")


def bookkeeping(path: str, unused_config: tuple[str, ...]) -> bool:
    if any(path == root or path.startswith(root + "/") for root in BOOKKEEPING_ROOTS):
        return True
    if path.rsplit("/", 1)[-1] in BOOKKEEPING_LEAVES:
        return True
    return any(path == f"/config/{key}" for key in unused_config)


def walk(before, after, path: str, out: list, counter: list) -> None:
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after)):
            sub = f"{path}/{key}"
            if key not in before or key not in after:
                out.append({"field": sub, "before": before.get(key, "<absent>"), "after": after.get(key, "<absent>")})
            else:
                walk(before[key], after[key], sub, out, counter)
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for i, (b, a) in enumerate(zip(before, after)):
            walk(b, a, f"{path}[{i}]", out, counter)
    else:
        counter[0] += 1
        if before != after:
            out.append({"field": path, "before": before, "after": after})


def compare(before: Path, after: Path, unused_config: tuple[str, ...]) -> dict:
    differences: list[dict] = []
    counter = [0]
    walk(json.loads(before.read_text()), json.loads(after.read_text()), "", differences, counter)
    results = [d for d in differences if not bookkeeping(d["field"].split("[")[0], unused_config)]
    kept = [d for d in differences if d not in results]
    return {"before": str(before), "after": str(after), "fields_compared": counter[0],
            "result_differences": results, "bookkeeping_differences": [d["field"] for d in kept]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--unused-config", default="", help="comma-separated config keys whose defaults changed but "
                                                         "that this kind of run does not use (e.g. regime_levels)")
    ap.add_argument("--before-code", default="", help="the commit (and command) that produced BEFORE, for the record")
    ap.add_argument("--after-code", default="", help="the commit (and command) that produced AFTER, for the record")
    ap.add_argument("--out", type=Path, default=None, help="result file (default bench/results/demo_same_numbers.json)")
    args = ap.parse_args(argv)
    for p in (args.before, args.after):
        if not p.is_file():
            ap.error(f"{p}: no such report.json (a finished `cuset demo` run writes one)")
    record = start_record()
    unused = tuple(k for k in args.unused_config.split(",") if k)
    result = compare(args.before, args.after, unused)
    same = not result["result_differences"]
    print(f"{result['fields_compared']} fields compared: "
          + ("every result identical" if same else f"{len(result['result_differences'])} result(s) differ"))
    for d in result["result_differences"][:20]:
        print(f"  {d['field']}: {str(d['before'])[:80]} -> {str(d['after'])[:80]}")
    print(f"bookkeeping that differs (ignored): {', '.join(result['bookkeeping_differences']) or 'none'}")
    record.write({**result, "identical_results": same, "before_code": args.before_code,
                  "after_code": args.after_code}, path=args.out)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
