"""bench/_record.py: the result file every bench script writes (commit, machine, load, command, numbers)."""

import json
import os
import subprocess
import sys
from pathlib import Path

from .scripts import load_bench_script

ROOT = Path(__file__).resolve().parents[2]


def _record_module(monkeypatch):
    monkeypatch.delitem(sys.modules, "_record", raising=False)  # restored after the test
    return load_bench_script("_record")


def test_result_file_holds_commit_machine_load_command_and_the_numbers(tmp_path, monkeypatch):
    record_module = _record_module(monkeypatch)
    record = record_module.start_record(argv=[str(ROOT / "bench" / "spans_throughput.py"), "--n", "200"])
    assert record.path == ROOT / "bench" / "results" / "spans_throughput.json"  # one file per script
    assert record_module.start_record(variant="ray", argv=["bench/eval_throughput.py"]).path.name == \
        "eval_throughput.ray.json"
    path = record.write({"samples_per_s": 612.5, "rows": [{"x": 1}]}, path=tmp_path / "out.json")
    doc = json.loads(path.read_text())
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert doc["commit"] == head and isinstance(doc["dirty"], bool)
    assert doc["command"] == "python bench/spans_throughput.py --n 200" and doc["argv"] == ["--n", "200"]
    assert doc["script"] == "bench/spans_throughput.py" and doc["variant"] is None
    assert doc["results"] == {"samples_per_s": 612.5, "rows": [{"x": 1}]}
    assert doc["machine"]["cores"] == os.cpu_count() and doc["machine"]["memory_gib"] > 0
    assert doc["machine"]["python"].count(".") == 2 and "torch" in doc["machine"]["packages"]
    for key in ("load_before", "load_after"):
        assert set(doc[key]) == {"1min", "5min", "15min"} and doc[key]["1min"] >= 0
    assert doc["date_utc"].endswith("+00:00") and doc["wall_s"] >= 0


def test_results_folder_does_not_mark_the_tree_dirty(monkeypatch):
    """A fresh result file of an earlier run is not a change to the code the next run measures."""
    record_module = _record_module(monkeypatch)
    probe = record_module.RESULTS_DIR / f"probe-{os.getpid()}.json"
    before = record_module.git_state()
    probe.parent.mkdir(exist_ok=True)
    probe.write_text("{}")
    try:
        after = record_module.git_state()
    finally:
        probe.unlink()
    assert after == before and not any("bench/results" in p for p in after["changed_paths"])
