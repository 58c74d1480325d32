"""The demo report's statistics on constructed results: per-method rows over seeds with
intervals, and paired differences against the first method."""

import json

import pytest

from cuset.analysis.results import load_run
from cuset.demo.report import method_row, paired_rows, row_label
from cuset.evaluate.records import SampleResult, save_results
from cuset.execute.result import Status

N_TASKS = 20


def _run(tmp_path, name, passing: set[int]):
    d = tmp_path / name
    d.mkdir()
    save_results(d / "results.jsonl", [
        SampleResult(task_id=t, task_name=f"t{t}", family="f", sample=0, compiled=True, ran_ok=True,
                     status=Status.PASSED if t in passing else Status.WRONG, passed=t in passing, n_tokens=100 + t)
        for t in range(N_TASKS)])
    (d / "summary.json").write_text(json.dumps({"overall": {}, "meta": {}}))
    return load_run(d).task_metrics


def test_rows_average_seeds_with_an_interval_and_pairs_differ_by_hand(tmp_path):
    from cuset.demo.report import model_metrics

    runs = {"sft": _run(tmp_path, "sft", set(range(4))), "sft-seed1": _run(tmp_path, "sft-seed1", set(range(2))),
            "cuset": _run(tmp_path, "cuset", set(range(14))), "cuset-seed1": _run(tmp_path, "cuset-seed1", set(range(16)))}
    by_method = {"sft": ["sft", "sft-seed1"], "cuset": ["cuset", "cuset-seed1"]}
    metrics = {r: model_metrics(tmp_path / r / "results.jsonl") for r in runs}
    row = method_row([runs[r] for r in by_method["sft"]], [metrics[r] for r in by_method["sft"]])
    f1 = row["function@1"]
    assert f1["mean"] == pytest.approx((4 + 2) / 2 / N_TASKS) and f1["n_seeds"] == 2 and f1["n_tasks"] == N_TASKS
    assert 0 <= f1["low"] < f1["mean"] < f1["high"] <= 1 and f1["run_variance"] == "estimated"
    # every run compiles every task: no variation, so no interval is claimed
    assert row["compile@1"] == {**row["compile@1"], "mean": 1.0, "low": None, "high": None}
    assert row["function@3"] is None          # one sample per task: no Pass@3
    assert row["avg_tokens"] == pytest.approx(100 + (N_TASKS - 1) / 2) and row["n_samples"] == 2 * N_TASKS
    (d,) = [p for p in paired_rows(runs, by_method, "sft", ["cuset"]) if p["metric"] == "function@1"]
    assert d["delta"] == pytest.approx((15 - 3) / N_TASKS) and d["significant"] and d["low"] > 0
    assert d["sentence"].startswith("function@1: CuSeT - SFT = +60.0 points")
    assert row_label("vanilla").startswith("Vanilla") and row_label("asft") == "ASFT"


def test_no_difference_is_not_significant(tmp_path):
    runs = {"sft": _run(tmp_path, "sft", set(range(0, N_TASKS, 2))), "dft": _run(tmp_path, "dft", set(range(1, N_TASKS, 2)))}
    (d,) = [p for p in paired_rows(runs, {"sft": ["sft"], "dft": ["dft"]}, "sft", ["dft"]) if p["metric"] == "function@1"]
    assert d["delta"] == 0 and not d["significant"] and "cannot tell them apart" in d["sentence"]


def test_time_section_keeps_wall_time_apart_from_reused_step_times():
    """A resumed demo: two steps were reused from an earlier invocation. Wall time is this
    invocation's clock; the step sums are labelled as such, reused steps named."""
    from cuset.demo.report import run_time, time_lines

    timings = {"data": 10.0, "base_model": 50.0, "train_sft": 120.0, "generate_sft": 30.0}
    doc = {"timings_s": timings, "time": run_time(timings, frozenset({"data", "base_model"}), 155.04)}
    assert doc["time"] == {"wall_s": 155.0, "steps_s": 210.0, "steps_run_now_s": 150.0,
                           "reused_steps": ["data", "base_model"]}
    text = "\n".join(time_lines(doc))
    assert ("Wall time of this invocation: 2.6 minutes. Sum of the step times, including steps reused from earlier "
            "runs: 3.5 minutes; of the steps run this time: 2.5 minutes (2 of 4 steps reused).") in text
    assert "| data | 10.0 | earlier run (reused) |" in text and "| train_sft | 120.0 | this run |" in text
    assert "Wall time: 3.5" not in text  # the old label: the sum of every step, reused or not


def test_resumed_demo_marks_steps_finished_earlier_as_reused(tmp_path, monkeypatch):
    """DemoRun.run on a run directory whose steps.json files record every step but one:
    only that one runs, the others are reused, and the report gets both apart."""
    from cuset.demo.config import DemoConfig
    from cuset.demo.run import DemoRun

    run = DemoRun(DemoConfig(out=str(tmp_path), methods="sft", warmup_steps=0), tmp_path)
    (tmp_path / "steps.json").write_text(json.dumps({"data": 10.0, "base_model": 50.0, "base_nll": 2.0}))
    cells = {"vanilla": {"generate": 30.0, "evaluate": 40.0, "reference_fit": 1.0},
             "sft": {"train": 120.0, "generate": 30.0, "evaluate": 40.0, "reference_fit": 1.0}}
    for model, steps in cells.items():
        run.cell_dir(model).mkdir(parents=True)
        (run.cell_dir(model) / "steps.json").write_text(json.dumps(steps))
    ran = []
    monkeypatch.setattr(DemoRun, "confidence", lambda self: ran.append("confidence"))
    monkeypatch.setattr(DemoRun, "attribution", lambda self: ran.append("attribution"))
    monkeypatch.setattr("cuset.demo.report.write_report", lambda r: tmp_path / "report.md")
    run.run()
    assert ran == ["confidence", "attribution"]
    assert list(run.timings) == ["data", "base_model", "base_nll", "generate_vanilla", "evaluate_vanilla",
                                 "reference_fit_vanilla", "train_sft", "generate_sft", "evaluate_sft",
                                 "reference_fit_sft", "confidence", "attribution"]
    assert run.reused == set(run.timings) - {"confidence", "attribution"}
    assert run.started is not None


def test_the_report_says_the_bases_competence_in_plain_words():
    """Issue 60/63: the untuned base's compile@1 and function@1 beside the paper's bases (69-80 / 35-42)."""
    from cuset.demo.report import competence_sentence

    cell = lambda mean: {"mean": mean, "low": None, "high": None}  # noqa: E731
    weak = competence_sentence({"compile@1": cell(0.552), "function@1": cell(0.0)})
    assert weak == ("**Base competence: the untuned base compiles 55.2% and passes 0.0%** of its samples "
                    "(compile@1, function@1); the paper's bases compile 69-80% and pass 35-42% of CUDABench Level 1 "
                    "before fine-tuning (its Table 2): this base is far below that, so this demo cannot test the "
                    "paper's claim, only run its pipeline.")
    assert competence_sentence({"compile@1": cell(0.75), "function@1": cell(0.38)}).endswith(
        "this base is as competent as theirs.")
    assert competence_sentence({"compile@1": cell(0.40), "function@1": cell(0.20)}).endswith("this base is below that.")
    assert competence_sentence({"compile@1": cell(0.9), "function@1": cell(0.1)}).endswith("far below that, so this "
                                                                                         "demo cannot test the paper's "
                                                                                         "claim, only run its pipeline.")
    assert competence_sentence({"compile@1": None, "function@1": None}).startswith("**Base competence: not measured**")


def test_the_2x2_gives_each_conditions_difference_and_the_interaction(tmp_path):
    """methods=2x2: SFT and CuSeT without and with replaceable tokens, one run each. SFT and CuSeT pass
    the same 10 tasks without them; with them SFT passes none and CuSeT 8: CuSeT - SFT is 0 without,
    +8 tasks of 20 with, and the interaction (with - without) is +40 points, significant. Per task the
    interaction is 1 on 8 tasks and 0 on 12: its variance (8/20 * 12/20 * 20/19) / 20, t with 19 df."""
    from scipy import stats

    from cuset.demo.report import two_by_two_lines, two_by_two_rows

    passing = {"sft": set(range(10)), "cuset:paper": set(range(10)), "sft:repl": set(), "cuset:paper:repl": set(range(8))}
    runs = {m: _run(tmp_path, m.replace(":", "-"), p) for m, p in passing.items()}
    by_method = {m: [m] for m in passing}
    rows = [r for r in two_by_two_rows(runs, by_method, "sft") if r["metric"] == "function@1"]
    parts = {r["part"]: r for r in rows}
    assert set(parts) == {"without", "with", "interaction"} and {r["method"] for r in rows} == {"cuset:paper"}
    assert parts["without"]["estimate"] == 0 and parts["without"]["low"] is None   # no task differs
    assert parts["with"]["estimate"] == pytest.approx(0.4)
    inter = parts["interaction"]
    se = (0.4 * 0.6 * 20 / 19 / 20) ** 0.5
    assert inter["estimate"] == pytest.approx(0.4) and inter["df"] == pytest.approx(19)
    assert inter["low"] == pytest.approx(0.4 - stats.t.ppf(0.975, 19) * se) and inter["significant"]
    assert inter["terms"] == (("sft", 1.0), ("cuset:paper", -1.0), ("sft:repl", -1.0), ("cuset:paper:repl", 1.0))
    assert inter["sentence"].startswith("function@1: (CuSeT (paper spans) - SFT with replaceable tokens) - "
                                        "(CuSeT (paper spans) - SFT without) = +40.0 points")
    table = two_by_two_lines({"two_by_two": two_by_two_rows(runs, by_method, "sft")})
    assert table[1] == "## Replaceable tokens: the 2x2"
    assert any(line.startswith("| interaction (with - without) | ") and "+40.0 [" in line for line in table)
    # without a twin of the reference there is no 2x2
    assert two_by_two_rows(runs, {m: [m] for m in ("sft", "cuset:paper", "cuset:paper:repl")}, "sft") == []


def test_the_report_says_whether_one_evaluator_judged_every_run(tmp_path):
    from cuset.demo.regime import _judge_lines
    from cuset.demo.report import judge_sentence, judges_of

    def results(name, judges):
        path = tmp_path / f"{name}.jsonl"
        save_results(path, [SampleResult(task_id=t, task_name="t", family="f", sample=0, status=Status.WRONG,
                                         judge=j) for t, j in enumerate(judges)])
        return path

    one = judges_of({"vanilla": results("a", ["j1", "j1"]), "sft": results("b", ["j1"])})
    assert one == {"j1": ["sft", "vanilla"]}
    assert judge_sentence({"judges": one}) == " Every sample of every run was judged by one evaluator (judge `j1`)."
    mixed = judges_of({"vanilla": results("c", ["j1", ""]), "sft": results("d", ["j2"])})
    assert mixed == {"": ["vanilla"], "j1": ["vanilla"], "j2": ["sft"]}
    assert judge_sentence({"judges": mixed}).startswith(" **The samples were judged by 3 different evaluators** "
                                                         "(`unstamped`: vanilla; `j1`: vanilla; `j2`: sft)")
    assert judge_sentence({"judges": {"": ["vanilla", "sft"]}}) == ""   # a report from before judges
    assert judge_sentence({}) == ""
    rows = [{"warmup_steps": 0, "judges": one}, {"warmup_steps": 1600, "judges": mixed}, {"warmup_steps": 2}]
    lines = _judge_lines(rows)
    assert len(lines) == 2 and lines[0].startswith("**k = 1600: its runs were judged by 3 different evaluators** "
                                                   "(`unstamped`: 1 run(s); `j1`: 1 run(s); `j2`: 1 run(s))")
    assert _judge_lines(rows[:1]) == []
