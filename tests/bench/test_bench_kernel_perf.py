"""bench/kernel_perf.py refuses to time anything without a GPU (no CPU time as a GPU number)."""

import pytest

from .scripts import load_bench_script


def load():
    return load_bench_script("kernel_perf")


def test_without_a_gpu_it_refuses_with_the_reason(monkeypatch, capsys):
    import cuset.execute.registry as registry

    monkeypatch.setattr(registry, "gpu_available", lambda: False)
    assert load().main([]) == 2
    assert "no timing is taken on the CPU" in capsys.readouterr().err


def test_help_names_the_options(capsys):
    with pytest.raises(SystemExit) as done:
        load().main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "--trials" in out and "--budget-s" in out and "fast_p" in out


WORKER = r"""
import json, sys, time
print('ROW ' + json.dumps({"planned": ["a", "b", "c"]}), flush=True)
print("a worker's own output", flush=True)
print('ROW ' + json.dumps({"task": "a", "line": "a done"}), flush=True)
time.sleep(120)
"""


def test_a_suite_is_stopped_at_its_share_of_the_budget_and_says_what_it_did_not_finish(capsys):
    import sys

    rows, not_reached, stopped = load().run_suite([sys.executable, "-c", WORKER], 3.0)
    assert rows == [{"task": "a", "line": "a done"}]
    assert not_reached == ["b", "c"] and stopped
    out = capsys.readouterr().out
    assert "a done" in out and "a worker's own output" in out


def test_a_suite_that_finishes_is_not_stopped():
    import sys

    quick = WORKER.replace("time.sleep(120)", "print('ROW ' + json.dumps({'task': 'b', 'line': 'b'}))\n"
                                              "print('ROW ' + json.dumps({'task': 'c', 'line': 'c'}))")
    rows, not_reached, stopped = load().run_suite([sys.executable, "-c", quick], 60.0)
    assert [r["task"] for r in rows] == ["a", "b", "c"] and not_reached == [] and not stopped


def test_the_summary_of_rows_has_both_benchmarks():
    kb = {"task": "kb_relu", "task_name": "relu", "kind": "kernelbench", "status": "passed", "hack": [],
          "perf": {"status": "measured", "kind": "kernelbench", "device": "H100", "speedup_eager": 2.5,
                   "speedup_compile": 1.25}}
    cb = {"task": 3, "task_name": "t3", "kind": "cudabench", "status": "passed", "hack": [],
          "perf": {"status": "not_measured", "kind": "cudabench", "reason": "ncu not installed: not measured"}}
    s = load().summarize([kb, cb])
    assert s["kernelbench"]["speedup_eager"] == {"n": 1, "median": 2.5, "geomean": 2.5}
    assert s["kernelbench"]["fast_p"]["2"] == 1.0 and s["kernelbench"]["fast_p_compile"]["1.5"] == 0.0
    assert s["cudabench"]["n_measured"] == 0
    assert s["cudabench"]["unmeasured"] == {"ncu not installed: not measured": 1}


def test_unknown_suite_is_refused(capsys):
    with pytest.raises(SystemExit) as done:
        load().main(["--suites", "kernelbench,robust"])
    assert done.value.code == 2 and "unknown robust" in capsys.readouterr().err


def test_a_worker_row_says_where_the_task_s_seconds_went(monkeypatch, capsys):
    """The CUDABench worker on the first bundled task, with the CPU backend standing in for the
    GPU one: the row splits the task's wall seconds into verification and profiling (on the CPU,
    'not measured'), so a GPU run's record shows what a slow task spent its time on."""
    import json

    import cuset.execute.registry as registry

    real = registry.get_backend
    monkeypatch.setattr(registry, "get_backend", lambda name, **kw: real("cpu", **kw))
    assert load().main(["--worker", "cudabench", "--cudabench-tasks", "1"]) == 0
    rows = [json.loads(line[4:]) for line in capsys.readouterr().out.splitlines() if line.startswith("ROW ")]
    assert rows[0] == {"planned": [0]}
    row = rows[1]
    assert row["status"] == "passed" and row["perf"]["status"] == "not_measured"
    assert set(row["seconds"]) == {"verify", "perf"}
    assert row["seconds"]["verify"] > 0 and row["seconds"]["perf"] >= 0
    assert row["line"].endswith(f"[{row['seconds']['verify']:.0f} + {row['seconds']['perf']:.0f} s]")
