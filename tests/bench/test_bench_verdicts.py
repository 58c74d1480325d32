"""bench/verdicts_match.py: two evaluations of the same generations compared sample by sample."""

import json
import sys
from pathlib import Path

from .scripts import load_bench_script

ROOT = Path(__file__).resolve().parents[2]


def _module(monkeypatch):
    monkeypatch.delitem(sys.modules, "verdicts_match", raising=False)  # restored after the test
    return load_bench_script("verdicts_match")


def _results(path: Path, rows):
    path.write_text("".join(json.dumps({"task_id": t, "sample": s, "status": st, "detail": ""}) + "\n"
                            for t, s, st in rows))
    return str(path)


def test_a_changed_verdict_and_a_missing_sample_are_reported(tmp_path, monkeypatch):
    compare = _module(monkeypatch).compare
    before = _results(tmp_path / "a.jsonl", [(0, 0, "passed"), (0, 1, "wrong"), (1, 0, "compile_error"), (2, 0, "passed")])
    after = _results(tmp_path / "b.jsonl", [(0, 1, "wrong"), (0, 0, "passed"), (1, 0, "timeout")])
    got = compare(before, after)
    assert (got["samples"], got["same"], got["only_before"], got["only_after"]) == (3, 2, 1, 0)
    assert got["first_differences"] == [{"task_id": 1, "sample": 0, "before": "compile_error", "after": "timeout"}]
    assert got["statuses_before"] == {"passed": 1, "wrong": 1, "compile_error": 1}
    same = compare(before, before)
    assert same["same"] == same["samples"] == 4 and not same["first_differences"]
