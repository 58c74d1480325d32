"""Point bench records at their commit's rewritten twin after a history rewrite.

    .venv/bin/python docs/tools/rebased_records.py          # rewrite the records that need it
    .venv/bin/python docs/tools/rebased_records.py --check  # exit 1 when one needs it

A rebase that only rewords messages (a commit subject over 72 characters, say) gives every commit
after it a new hash and the same tree. A record names the commit it measured, so its commit left
HEAD's history and docs/tools/perf_table.py rightly refuses it. The tree the record measured is
still in HEAD's history, under another hash: this tool finds the commit of HEAD's history whose
tree is byte for byte the record's commit's tree, sets the record's `commit` to it and keeps the
old hash in `rebased_from`. Nothing else of the record changes. A record whose commit this clone
does not hold, or whose tree no commit of HEAD's history has, is left alone and reported: such a
record must be re-measured.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)


def twin(root: Path, commit: str, trees: dict[str, str]) -> str | None:
    """The commit of HEAD's history with `commit`'s tree (None: unknown commit, or no such tree)."""
    tree = _git(root, "rev-parse", f"{commit}^{{tree}}")
    if tree.returncode:
        return None
    return trees.get(tree.stdout.strip())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a record needs it")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose bench/results to fix (default: this one)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    trees = {}
    for line in _git(root, "log", "--format=%H %T", "HEAD").stdout.splitlines():
        commit, tree = line.split()
        trees.setdefault(tree, commit)                  # the newest commit with that tree
    needs, unresolved = [], []
    for path in sorted((root / "bench" / "results").glob("*.json")):
        record = json.loads(path.read_text())
        commit = record.get("commit")
        if not commit or _git(root, "merge-base", "--is-ancestor", commit, "HEAD").returncode == 0:
            continue
        found = twin(root, commit, trees)
        if found is None:
            unresolved.append(f"{path.relative_to(root)}: commit {commit[:10]} has no twin in HEAD's history: re-measure it")
            continue
        needs.append(path.relative_to(root))
        if not args.check:
            record = {k2: v2 for k, v in record.items()
                      for k2, v2 in ((("commit", found), ("rebased_from", commit)) if k == "commit" else ((k, v),))}
            path.write_text(json.dumps(record, indent=1))   # as bench/_record.py writes it
            print(f"{path.relative_to(root)}: {commit[:10]} -> {found[:10]} (the same tree)")
    for line in unresolved:
        print(line, file=sys.stderr)
    if args.check and needs:
        print("records naming rewritten commits: " + ", ".join(map(str, needs)), file=sys.stderr)
    return 1 if unresolved or (args.check and needs) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
