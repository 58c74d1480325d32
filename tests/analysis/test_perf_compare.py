"""`cuset report --compare` over perf=true runs: per-task fast_p compared like pass@k, and a
performance table per run."""

from cuset.analysis.report import build_report
from cuset.analysis.results import load_runs
from cuset.evaluate.perf.records import kernelbench_measured
from cuset.evaluate.records import SampleResult, save_results
from cuset.execute.result import Status


def ms(mean):
    return {"mean": mean, "median": mean, "std": 0.0, "min": mean, "max": mean, "n": 10}


def run_dir(tmp_path, name, candidate_ms):
    """Four tasks, one sample each, all correct; eager 1.0 ms, the answer `candidate_ms[i]`."""
    results = [SampleResult(f"t{i}", f"t{i}", "f", 0, Status.PASSED, compiled=True, ran_ok=True, passed=True,
                            perf=kernelbench_measured(ms(c), ms(1.0), ms(1.0), device="H100", warmup=3, trials=10))
               for i, c in enumerate(candidate_ms)]
    d = tmp_path / name
    d.mkdir()
    save_results(d / "results.jsonl", results)
    return d


def test_compare_covers_fast_p_and_the_report_lists_perf_per_run(tmp_path):
    a = run_dir(tmp_path, "a", [2.0, 2.0, 0.5, 2.0])    # speedups 0.5, 0.5, 2, 0.5: fast_1 = 1/4
    b = run_dir(tmp_path, "b", [0.5, 0.5, 0.5, 2.0])    # 2, 2, 2, 0.5: fast_1 = 3/4
    runs = load_runs([a, b], ["model=m,method=SFT", "model=m,method=CuSeT"])
    assert runs[0].task_metrics["t2"]["fast_1"] == 1.0 and runs[0].task_metrics["t0"]["fast_1"] == 0.0
    doc = build_report(runs, tmp_path / "report", published_mode="none")
    rows = {r["metric"]: r for r in doc["paired"][0]["rows"]}
    assert rows["fast_1"]["mean_a"] == 0.25 and rows["fast_1"]["mean_b"] == 0.75
    assert rows["fast_1"]["delta"] == 0.5
    assert "roofline_score" not in rows   # no CUDABench task in either run
    md = (tmp_path / "report" / "report.md").read_text()
    assert "## Performance per run" in md
    assert "| 1 | on H100 | 0.50 | 0.71 | 25.0% | 25.0% | n/a | n/a | n/a |" in md   # (0.5^3 x 2)^(1/4) = 0.25^(1/4)
    assert "| 2 | on H100 | 2.00 | 1.41 | 75.0% | 75.0% | n/a | n/a | n/a |" in md   # (2^3 x 0.5)^(1/4) = 2^(1/2)
