"""Speedup and fast_p aggregation on constructed results (hand-computed values)."""

import math

import pytest

from cuset.evaluate.metrics import summarize
from cuset.evaluate.perf.records import NOT_ON_CPU, cudabench_measured, kernelbench_measured, not_measured
from cuset.evaluate.perf.summary import perf_summary, task_perf
from cuset.evaluate.records import SampleResult
from cuset.execute.result import Status


def ms(mean):
    return {"mean": mean, "median": mean, "std": 0.0, "min": mean, "max": mean, "n": 10}


def kb(task, sample, status=Status.PASSED, candidate=None, eager=1.0, compiled=None, hack=(), perf=None):
    if perf is None and candidate is not None:
        perf = kernelbench_measured(ms(candidate), ms(eager), ms(compiled) if compiled else None, device="H100",
                                    warmup=3, trials=10)
    if perf is None:
        perf = not_measured("kernelbench", "not timed: the program did not pass")
    return SampleResult(task, task, "fam", sample, status, passed=status is Status.PASSED, hack=tuple(hack), perf=perf)


def by_task(results):
    out = {}
    for r in results:
        out.setdefault(r.task_id, []).append(r)
    return out


def test_kernelbench_speedups_fast_p_and_suspects():
    # eager 1.0 ms everywhere; speedups: a 4.0 (suspect), b 1.25, c 0.5, d fails, e flagged (2.0, not believed)
    results = [kb("a", 0, candidate=0.25, compiled=0.5), kb("b", 0, candidate=0.8, compiled=0.4),
               kb("c", 0, candidate=2.0, compiled=1.0), kb("d", 0, Status.WRONG),
               kb("e", 0, candidate=0.5, compiled=0.5, hack=("no_custom_kernel:3",))]
    s = perf_summary(by_task(results))["kernelbench"]
    assert (s["n_tasks"], s["n_passed"], s["n_measured"], s["n_flagged"]) == (5, 4, 3 + 1, 1)
    # fast_0: a, b, c correct and believed = 3/5; fast_1: a, b = 2/5; fast_1.5: a; fast_2: a
    assert s["fast_p"] == {"0": 0.6, "1": 0.4, "1.5": 0.2, "2": 0.2}
    # vs torch.compile: a 2.0, b 0.5, c 0.5 -> > 0: 3/5, > 1: 1/5, > 1.5: 1/5, > 2: 0
    assert s["fast_p_compile"] == {"0": 0.6, "1": 0.2, "1.5": 0.2, "2": 0.0}
    assert s["speedup_eager"]["n"] == 3 and s["speedup_eager"]["median"] == 1.25
    assert s["speedup_eager"]["geomean"] == pytest.approx((4.0 * 1.25 * 0.5) ** (1 / 3))   # 2.5 ** (1/3)
    assert s["speedup_compile"]["geomean"] == pytest.approx(0.5 ** (1 / 3) * 1.0)         # (2 * .5 * .5) ** (1/3)
    assert s["suspect"] == [{"task_id": "a", "task_name": "a", "sample": 0, "speedup_eager": 4.0}]


def test_several_samples_per_task_score_their_share():
    rows = [kb("a", 0, candidate=0.5), kb("a", 1, Status.WRONG), kb("a", 2, candidate=2.0), kb("a", 3, candidate=0.9)]
    # speedups 2.0, -, 0.5, 1.11: > 0 in 3 of 4, > 1 in 2 of 4, > 1.5 in 1, > 2 in none
    assert task_perf(rows) == {"fast_0": 0.75, "fast_1": 0.5, "fast_1.5": 0.25, "fast_2": 0.0,
                               "fast_0_compile": 0.0, "fast_1_compile": 0.0, "fast_1.5_compile": 0.0,
                               "fast_2_compile": 0.0}


def test_unbelievable_and_unmeasured_passes_are_not_fast():
    results = [kb("a", 0, perf={"status": "unbelievable", "kind": "kernelbench", "reason": "forged"}),
               kb("b", 0, candidate=0.5)]
    s = perf_summary(by_task(results))["kernelbench"]
    assert s["fast_p"]["0"] == 0.5 and s["n_unbelievable"] == 1 and s["n_passed_unmeasured"] == 1


def test_cpu_backend_says_not_measured_and_never_reports_a_time():
    results = [kb("a", 0, perf=not_measured("kernelbench", NOT_ON_CPU)), kb("b", 0, Status.WRONG)]
    s = summarize(results)
    assert s.overall["perf"] == {"measured": False, "reason": NOT_ON_CPU,
                                 "statuses": {"not_measured": 2}}
    assert summarize([kb("a", 0, perf=None)]).overall.get("perf") is not None   # a not_measured record
    assert "perf" not in summarize([SampleResult("a", "a", "f", 0, Status.PASSED, passed=True)]).overall


def test_cudabench_means_over_measured_and_official_mean_with_failures_as_zero():
    def cb(task, sample, score=None, bu=0.0, ce=0.0):
        perf = cudabench_measured({"kernel": "k", "score": score, "bandwidth_utilisation": bu,
                                   "compute_efficiency": ce, "kernels": []}, device="H100", launches=1) if score is not None \
            else not_measured("cudabench", "not timed: the program did not pass")
        return SampleResult(task, str(task), "fam", sample, Status.PASSED if score is not None else Status.WRONG,
                            passed=score is not None, perf=perf)

    results = [cb(1, 0, 0.5, 0.5, 0.25), cb(1, 1), cb(2, 0, 0.9, 0.9, 0.0)]
    s = summarize(results)
    c = s.overall["perf"]["cudabench"]
    assert (c["n_tasks"], c["n_samples"], c["n_measured"]) == (2, 3, 2)
    assert c["mean_score"] == pytest.approx(0.7) and c["mean_bandwidth_utilisation"] == pytest.approx(0.7)
    assert c["mean_compute_efficiency"] == pytest.approx(0.125)
    assert c["mean_score_all"] == pytest.approx((0.5 + 0 + 0.9) / 3)
    assert s.tasks[1]["perf"] == {"roofline_score": 0.25} and s.tasks[2]["perf"] == {"roofline_score": 0.9}
    assert math.isclose(s.overall["perf"]["cudabench"]["mean_score"], 0.7)


def test_report_md_has_the_performance_section():
    from cuset.evaluate.report import render_markdown

    results = [kb("a", 0, candidate=0.25, compiled=0.5), kb("b", 0, Status.WRONG)]
    md = render_markdown(summarize(results))
    assert "## Performance" in md and "Timed on: H100" in md
    # a: 4x eager, 2x compile; b fails: fast_0 = fast_1 = fast_1.5 = fast_2 = 50% (vs eager)
    assert "| PyTorch eager | 1 | 4.00x | 4.00x | 50.0 | 50.0 | 50.0 | 50.0 |" in md
    assert "| torch.compile | 1 | 2.00x | 2.00x | 50.0 | 50.0 | 50.0 | 0.0 |" in md
    assert "- a sample 0: 4.00x" in md
    cpu = render_markdown(summarize([kb("a", 0, perf=not_measured("kernelbench", NOT_ON_CPU))]))
    assert "Kernel speed: not measured on the CPU backend." in cpu and "x |" not in cpu


def test_cudabench_passes_without_a_score_are_counted_by_reason():
    from cuset.evaluate.perf.records import NCU_NOT_INSTALLED
    from cuset.evaluate.report import render_markdown

    def cb(sample, perf):
        return SampleResult(5, "5", "fam", sample, Status.PASSED, passed=True, perf=perf)

    measured = cudabench_measured({"kernel": "k", "score": 0.4, "bandwidth_utilisation": 0.4,
                                   "compute_efficiency": 0.1, "kernels": []}, device="H100", launches=2)
    unreadable = {"status": "unreadable", "kind": "cudabench", "reason": "ncu.csv:9: bad"}
    results = [cb(0, measured), cb(1, not_measured("cudabench", NCU_NOT_INSTALLED)),
               cb(2, not_measured("cudabench", NCU_NOT_INSTALLED)), cb(3, unreadable)]
    s = summarize(results)
    c = s.overall["perf"]["cudabench"]
    assert c["unmeasured"] == {NCU_NOT_INSTALLED: 2, "unreadable: ncu.csv:9: bad": 1}
    assert c["mean_score"] == pytest.approx(0.4) and c["mean_score_all"] == pytest.approx(0.1)
    md = render_markdown(s)
    assert "| 1 of 4 | 0.400 | 0.400 | 0.100 | 0.100 |" in md
    assert "Passes without a roofline score (3):" in md and f"- 2 x {NCU_NOT_INSTALLED}" in md
    only_missing = render_markdown(summarize(results[1:3]))
    assert f"Kernel speed: {NCU_NOT_INSTALLED}. No time is reported." in only_missing
