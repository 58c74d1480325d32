"""ConCuR difficulty analysis: hand-computed tables and Spearman correlations, loaders,
markdown/PNG writers, and the `cuset data stats` / `cuset report` integrations."""

import json
import math
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cuset.analysis.difficulty import (
    Attempt, DifficultyResult, ReasoningManifestError, attempts_from_reasoning_manifest, attempts_from_samples,
    correlation_sentence, difficulty_markdown, difficulty_table, plot_difficulty, spearman,
)
from cuset.cli.main import app
from cuset.evaluate.records import SampleResult, save_results
from cuset.execute.result import Status

runner = CliRunner()
TASKS_FILE = Path(__file__).resolve().parents[1] / "fixtures" / "data" / "eval_tasks.jsonl"


def A(task, family, tokens, passed):
    return Attempt(task, family, tokens, passed)


# Five tasks in three families. Mean passing reasoning rises exactly as the pass rate
# falls for t1..t4 (150, 300, 500, 800 vs 1, 3/4, 1/2, 1/3): rho = -1. t5 never passes.
INVERSE = [
    A("t1", "a", 100, True), A("t1", "a", 200, True),
    A("t2", "a", 200, True), A("t2", "a", 400, True), A("t2", "a", 300, True), A("t2", "a", 1000, False),
    A("t3", "b", 500, True), A("t3", "b", None, True), A("t3", "b", 50, False), A("t3", "b", None, False),
    A("t4", "c", 800, True), A("t4", "c", 10, False), A("t4", "c", 20, False),
    A("t5", "c", 700, False), A("t5", "c", 900, False),
]


def test_task_rows_by_hand():
    r = difficulty_table(INVERSE)
    rows = {t.task: t for t in r.tasks}
    assert [t.task for t in r.tasks] == ["t1", "t2", "t3", "t4", "t5"]
    assert (rows["t1"].attempts, rows["t1"].passed, rows["t1"].pass_rate) == (2, 2, 1.0)
    assert rows["t1"].mean_passing_tokens == 150.0 and rows["t1"].mean_tokens == 150.0
    assert (rows["t2"].pass_rate, rows["t2"].mean_passing_tokens, rows["t2"].mean_tokens) == (0.75, 300.0, 475.0)
    # None lengths count in the pass rate (2 of 4) but not in either mean
    assert (rows["t3"].passed, rows["t3"].pass_rate, rows["t3"].uncounted) == (2, 0.5, 2)
    assert (rows["t3"].mean_passing_tokens, rows["t3"].mean_tokens) == (500.0, 275.0)
    assert rows["t4"].pass_rate == 1 / 3 and rows["t4"].mean_passing_tokens == 800.0
    assert rows["t4"].mean_tokens == 830 / 3
    assert (rows["t5"].pass_rate, rows["t5"].mean_passing_tokens, rows["t5"].mean_tokens) == (0.0, None, 800.0)
    assert (r.n_attempts, r.uncounted) == (15, 2)
    assert [t.task for t in r.hardest()] == ["t5", "t4", "t3", "t2", "t1"]
    assert [t.task for t in r.hardest(2)] == ["t5", "t4"]


def test_family_rows_pool_attempts():
    fams = {f.family: f for f in difficulty_table(INVERSE).families}
    a, b, c = fams["a"], fams["b"], fams["c"]
    assert (a.tasks, a.attempts, a.passed, a.pass_rate) == (2, 6, 5, 5 / 6)
    assert a.mean_passing_tokens == (100 + 200 + 200 + 400 + 300) / 5 == 240.0
    assert (b.tasks, b.attempts, b.passed, b.pass_rate, b.mean_passing_tokens, b.uncounted) == (1, 4, 2, 0.5, 500.0, 2)
    assert (c.tasks, c.attempts, c.passed, c.pass_rate, c.mean_passing_tokens) == (2, 5, 1, 0.2, 800.0)


def test_perfect_inverse_ranking_has_rho_minus_one_and_an_exact_p():
    r = difficulty_table(INVERSE)
    c = r.correlation
    assert r.correlation_reason is None
    assert c.rho == pytest.approx(-1.0) and c.n == 4  # t5 has no passing answer: not a point
    # exact two-sided permutation p: 1 of 4! pairings reaches rho = -1 and 1 reaches +1
    assert c.p_value == pytest.approx(2 / 24) and "exact" in c.p_method and not c.significant
    f = r.family_correlation  # (240, 5/6), (500, 1/2), (800, 1/5): rho = -1 over 3! pairings
    assert f.rho == pytest.approx(-1.0) and f.n == 3 and f.p_value == pytest.approx(2 / 6)


def test_ties_take_average_ranks():
    attempts = [A("tA", "f", 100, True),
                A("tB", "f", 200, True), A("tB", "f", 9, False),
                *[A("tC", "f", 200, True)] * 3, A("tC", "f", 9, False),
                A("tD", "f", 400, True), *[A("tD", "f", 9, False)] * 3]
    c = difficulty_table(attempts).correlation
    # x = (100, 200, 200, 400) -> ranks (1, 2.5, 2.5, 4); y = (1, .5, .75, .25) -> ranks (4, 2, 3, 1).
    # Pearson of the ranks: sum dx*dy = -4.5, sum dx^2 = 4.5, sum dy^2 = 5 -> rho = -4.5 / sqrt(22.5)
    assert c.rho == pytest.approx(-4.5 / math.sqrt(22.5)) == pytest.approx(-math.sqrt(0.9))
    # pairings at least this extreme: y ranks (4,2,3,1), (4,3,2,1) and their mirrors -> 4 of 24
    assert c.p_value == pytest.approx(4 / 24)


def test_larger_n_uses_scipy_t_approximation():
    from scipy.stats import t as student_t

    y_ranks = [1, 3, 2, 5, 4, 7, 6, 9, 8]
    attempts = []
    for i, yr in enumerate(y_ranks):  # task i: mean passing length 100*(i+1), pass rate yr/10
        attempts += [A(f"t{i}", f"f{i % 3}", 100 * (i + 1), True)] * yr + [A(f"t{i}", f"f{i % 3}", 5, False)] * (10 - yr)
    c = difficulty_table(attempts).correlation
    rho = 1 - 6 * 8 / (9 * (81 - 1))  # no ties: 1 - 6 sum d^2 / (n (n^2 - 1)), sum d^2 = 8
    assert c.rho == pytest.approx(rho) and c.n == 9 and "t approximation" in c.p_method
    tstat = rho * math.sqrt(7 / (1 - rho ** 2))
    assert c.p_value == pytest.approx(2 * student_t.sf(tstat, 7)) and c.significant
    s = correlation_sentence(c, None, "tokens")
    assert "+0.933" in s and "n = 9" in s and "significant at the 0.05 level" in s and "pass more often" in s


@pytest.mark.filterwarnings("error")  # no ConstantInputWarning, no NaN
def test_correlation_none_with_reason():
    two = difficulty_table([A("x", "f", 10, True), A("y", "g", 20, True), A("y", "g", 1, False), A("z", "h", 5, False)])
    assert two.correlation is None
    assert two.correlation_reason == ("only 2 tasks have a passing answer with a counted reasoning trace; "
                                      "a rank correlation needs at least 3")
    assert two.family_correlation is None and "only 2 families" in two.family_correlation_reason
    same_rate = difficulty_table([A(t, "f", n, True) for t, n in (("x", 1), ("y", 2), ("z", 3))])
    assert same_rate.correlation is None and "same pass rate (1)" in same_rate.correlation_reason
    assert same_rate.family_correlation_reason == "only 1 family; a family-level correlation needs at least 3"
    same_len = difficulty_table([A("x", "f", 7, True), A("y", "g", 7, True), A("y", "g", 7, False),
                                 A("z", "h", 7, True), *[A("z", "h", None, False)] * 2])
    assert same_len.correlation is None and "same mean passing reasoning length (7)" in same_len.correlation_reason
    assert same_len.family_correlation is None and "same mean passing reasoning length" in same_len.family_correlation_reason
    uncounted = difficulty_table([A(t, "f", None, True) for t in "xyz"])
    assert uncounted.correlation_reason.startswith("only 0 tasks") and uncounted.uncounted == 3
    assert uncounted.tasks[0].mean_passing_tokens is None and uncounted.tasks[0].pass_rate == 1.0
    empty = difficulty_table([])
    assert (empty.tasks, empty.n_attempts, empty.correlation) == ((), 0, None)
    assert "No task-level rank correlation: only 2 tasks" in correlation_sentence(None, two.correlation_reason, "tokens")
    json.dumps(two.to_json(), allow_nan=False)


def test_a_task_in_two_families_is_an_error():
    with pytest.raises(ValueError, match="task 'x' appears under two families, 'f' and 'g'"):
        difficulty_table([A("x", "f", 1, True), A("x", "g", 1, True)])


def test_json_round_trip_and_markdown():
    r = difficulty_table(INVERSE)
    doc = json.loads(json.dumps(r.to_json(), allow_nan=False))
    assert doc["correlation"]["n"] == 4 and doc["tasks"][4]["mean_passing_tokens"] is None
    assert DifficultyResult.from_json(doc) == r
    md = difficulty_markdown(r, "Qwen tokens", figure="d.png")
    assert "15 attempts at 5 tasks in 3 families; reasoning lengths in Qwen tokens; 2 attempts had no counted trace" in md
    assert ("Across 4 tasks, Spearman rho between the mean reasoning length of passing answers (Qwen tokens) and the "
            "pass rate is -1.000 (p = 0.0833, n = 4, exact permutation test (all 24 pairings)): not significant at "
            "the 0.05 level") in md
    assert "tasks whose passing answers reason longer pass less often" in md
    assert "Across 3 families" in md and "![Reasoning length vs pass rate](d.png)" in md
    assert "| a | 2 | 6 | 5 | 83.3% | 240 |" in md
    assert "| c | 2 | 5 | 1 | 20.0% | 800 |" in md
    hard = md.split("Hardest tasks by pass rate (top 5)")[1]
    assert hard.index("| t5 | c | 2 | 0 | 0.0% | n/a | 800 |") < hard.index("| t4 | c | 3 | 1 | 33.3% | 800 | 277 |")


def test_plot_is_written(tmp_path, assert_png):
    path = plot_difficulty(difficulty_table(INVERSE), tmp_path / "sub" / "difficulty.png", "tokens")
    assert path == tmp_path / "sub" / "difficulty.png"
    assert_png(path)
    # no correlation (and nothing to draw) still writes a figure that says why
    none = plot_difficulty(difficulty_table([A("x", "f", None, False)]), tmp_path / "none.png", "tokens")
    assert none.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---- loaders ------------------------------------------------------------------------

def manifest_record(key, name, family, cands, unit="Qwen3 tokens"):
    cands = [{"index": i, "status": s, "reasoning_tokens": n, "code": "..."} for i, (s, n) in enumerate(cands)]
    return json.dumps({"key": key, "task_name": name, "family": family, "token_unit": unit, "candidates": cands,
                       "n_passed": sum(c["status"] == "passed" for c in cands),
                       "kept": [c["index"] for c in cands if c["status"] == "passed"]})


def write_manifest(path, records):
    path.write_text("\n".join(records) + "\n", encoding="utf-8")
    return path


INVERSE_MANIFEST = [
    manifest_record("k1", "t1", "a", [("passed", 100), ("passed", 200)]),
    manifest_record("k2", "t2", "a", [("passed", 200), ("passed", 400), ("passed", 300), ("wrong", 1000)]),
    manifest_record("k3", "t3", "b", [("passed", 500), ("passed", None), ("compile_error", 50), ("no_code", None)]),
    manifest_record("k4", "t4", "c", [("passed", 800), ("wrong", 10), ("runtime_error", 20)]),
    manifest_record("k5", "t5", "c", [("wrong", 700), ("timeout", 900)]),
]


def test_reasoning_manifest_loader(tmp_path):
    path = write_manifest(tmp_path / "5_reasoning.jsonl", INVERSE_MANIFEST[:2] + [""] + INVERSE_MANIFEST[2:])
    attempts, unit = attempts_from_reasoning_manifest(path)
    assert unit == "Qwen3 tokens"
    assert attempts == INVERSE
    # two tasks sharing a name stay two rows, told apart by their key
    dup = write_manifest(tmp_path / "dup.jsonl", [manifest_record("k1", "relu", "f", [("passed", 5)]),
                                                  manifest_record("k2", "relu", "f", [("wrong", 6)])])
    assert [a.task for a in attempts_from_reasoning_manifest(dup)[0]] == ["relu (k1)", "relu (k2)"]
    empty = write_manifest(tmp_path / "empty.jsonl", [])
    assert attempts_from_reasoning_manifest(empty) == ([], "tokens")


@pytest.mark.parametrize("line, problem", [
    ("{not json", "invalid JSON"),
    ("[1, 2]", "expected a JSON object (one task per line), got list"),
    (json.dumps({"key": "k", "family": "f", "token_unit": "Qwen3 tokens", "candidates": []}), "field 'task_name' must be a non-empty string"),
    (json.dumps({"key": "k", "task_name": "t", "family": "f", "token_unit": "Qwen3 tokens", "candidates": {}}), "field 'candidates' must be a list"),
    (manifest_record("k", "t", "f", [("passed", "12")]), "candidates[0].reasoning_tokens must be a non-negative integer or null, got '12'"),
    (manifest_record("k", "t", "f", [("passed", 1), ("wrong", -3)]), "candidates[1].reasoning_tokens"),
    (json.dumps({"key": "k", "task_name": "t", "family": "f", "token_unit": "Qwen3 tokens", "candidates": [{"index": 0}]}), "candidates[0] needs a string 'status'"),
    (manifest_record("k", "t", "f", [("passed", 1)], unit="chars"), "token_unit 'chars' differs from 'Qwen3 tokens' (line 1)"),
])
def test_reasoning_manifest_bad_line_names_file_and_line(tmp_path, line, problem):
    path = write_manifest(tmp_path / "m.jsonl", [INVERSE_MANIFEST[0], "", line])
    with pytest.raises(ReasoningManifestError) as e:
        attempts_from_reasoning_manifest(path)
    assert str(e.value).startswith(f"{path}:3: ") and problem in str(e.value)
    assert isinstance(e.value, ValueError)


def test_missing_manifest_is_a_clear_error(tmp_path):
    with pytest.raises(ReasoningManifestError, match="cannot read the reasoning manifest"):
        attempts_from_reasoning_manifest(tmp_path / "nope.jsonl")


def sample(tid, name, family, s, status, tokens):
    return SampleResult(task_id=tid, task_name=name, family=family, sample=s, status=status,
                        passed=status is Status.PASSED, reasoning_tokens=tokens)


def test_attempts_from_samples_skips_infra_errors():
    samples = [sample(0, "relu", "act", 0, Status.PASSED, 120), sample(0, "relu", "act", 1, Status.INFRA_ERROR, 50),
               sample(0, "relu", "act", 2, Status.WRONG, None), sample(7, "", "misc", 0, Status.COMPILE_ERROR, 30)]
    assert attempts_from_samples(samples) == [A("relu", "act", 120, True), A("relu", "act", None, False),
                                              A("7", "misc", 30, False)]
    twins = [sample(1, "gemm", "la", 0, Status.PASSED, 1), sample(2, "gemm", "la", 0, Status.WRONG, 2)]
    assert [a.task for a in attempts_from_samples(twins)] == ["gemm (1)", "gemm (2)"]


# ---- integrations ----------------------------------------------------------------------

def test_data_stats_on_a_run_directory_writes_difficulty(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(TASKS_FILE, run / "train.jsonl")
    write_manifest(run / "5_reasoning.jsonl", INVERSE_MANIFEST)
    res = runner.invoke(app, ["data", "stats", str(run)], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "Difficulty by family (3 families, 5 tasks)" in res.output and "Hardest tasks by pass rate (top 5)" in res.output
    assert "is -1.000 (p = 0.0833, n = 4" in res.output
    out = run / "stats"
    assert {"difficulty.png", "difficulty.json", "difficulty.md", "token_lengths.png"} <= {p.name for p in out.iterdir()}
    doc = json.loads((out / "difficulty.json").read_text())
    assert doc["unit"] == "Qwen3 tokens" and doc["source"] == str(run / "5_reasoning.jsonl")
    assert doc["correlation"]["rho"] == pytest.approx(-1.0) and doc["n_attempts"] == 15
    assert DifficultyResult.from_json(doc) == difficulty_table(INVERSE)
    assert "![Reasoning length vs pass rate](difficulty.png)" in (out / "difficulty.md").read_text()
    assert (out / "difficulty.png").stat().st_size > 10_000


def test_data_stats_reasoning_option_and_errors(tmp_path):
    m = write_manifest(tmp_path / "elsewhere.jsonl", INVERSE_MANIFEST)
    res = runner.invoke(app, ["data", "stats", str(TASKS_FILE), "--reasoning", str(m), "--out", str(tmp_path / "st")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "st" / "difficulty.json").exists()
    # a task file without --reasoning: no difficulty section, as before
    res = runner.invoke(app, ["data", "stats", str(TASKS_FILE), "--out", str(tmp_path / "plain")])
    assert res.exit_code == 0 and "Difficulty" not in res.output
    assert not (tmp_path / "plain" / "difficulty.png").exists()
    res = runner.invoke(app, ["data", "stats", str(TASKS_FILE), "--reasoning", str(tmp_path / "no.jsonl")])
    assert res.exit_code == 2 and "no such reasoning manifest" in res.output
    bad = write_manifest(tmp_path / "bad.jsonl", [INVERSE_MANIFEST[0], "{oops"])
    res = runner.invoke(app, ["data", "stats", str(TASKS_FILE), "--reasoning", str(bad), "--out", str(tmp_path / "b")],
                        terminal_width=300)
    assert res.exit_code == 2 and f"{bad}:2: invalid JSON" in res.output


def test_report_adds_difficulty_for_runs_with_reasoning(tmp_path, make_run, assert_png):
    plain = make_run("plain", {0: [(True, True)], 1: [(True, False)]})
    reasoning = tmp_path / "runs" / "reasoning"
    reasoning.mkdir(parents=True)
    records, tid = [], {}
    for i, a in enumerate(INVERSE):  # the INVERSE attempts as evaluation samples
        t = tid.setdefault(a.task, len(tid))
        status = Status.PASSED if a.passed else Status.WRONG
        records.append(SampleResult(task_id=t, task_name=a.task, family=a.family, sample=i, status=status,
                                    compiled=True, ran_ok=True, passed=a.passed, n_tokens=2000,
                                    reasoning_tokens=a.reasoning_tokens))
    records.append(SampleResult(task_id=0, task_name="t1", family="a", sample=99, status=Status.INFRA_ERROR))
    save_results(reasoning / "results.jsonl", records)
    out = tmp_path / "report"
    res = runner.invoke(app, ["report", str(plain), str(reasoning), "--label", "model=m,method=sft",
                              "--label", "model=m,method=cuset", "--out", str(out)], terminal_width=300)
    assert res.exit_code == 0, res.output
    assert "Run 2 difficulty: Across 4 tasks" in res.output
    doc = json.loads((out / "report.json").read_text())
    [d] = doc["difficulty"]  # the plain run counted no reasoning: no section
    assert (d["run"], d["figure"], d["n_attempts"]) == (2, "difficulty_run2.png", 15)  # the infra error is left out
    assert DifficultyResult.from_json(d) == difficulty_table(INVERSE)
    assert doc["figures"]["difficulty_run2"] == "difficulty_run2.png"
    assert_png(out / "difficulty_run2.png")
    md = (out / "report.md").read_text()
    assert "## Task difficulty from reasoning length (ConCuR), run 2 (model=m, method=CuSeT)" in md
    assert "| a | 2 | 6 | 5 | 83.3% | 240 |" in md and "![Reasoning length vs pass rate](difficulty_run2.png)" in md
