"""`cuset report` end to end on synthetic eval runs: files, numbers, figures, errors."""

import json

from typer.testing import CliRunner

from cuset.cli.main import app

runner = CliRunner()


def pattern(n_pass_first: int, n_tasks: int = 4):
    """Tasks 0..n_pass_first-1 pass on every sample; the others compile and fail."""
    return {t: [(True, t < n_pass_first)] * 3 for t in range(n_tasks)}


def test_report_writes_tables_json_and_figures(tmp_path, make_run, assert_png):
    specs = [("sft", "", pattern(1)), ("cuset", "", pattern(3)), ("vanilla", "", pattern(0)),
             ("cuset", ",tau=0.5", pattern(2)), ("cuset", ",tau=0.9", pattern(1))]
    args, labels = [], []
    for i, (method, extra, outcomes) in enumerate(specs):
        args.append(str(make_run(f"run{i}", outcomes)))
        labels += ["--label", f"model=Qwen2.5-Coder-7B-Instruct,method={method},tau=0.1{extra}".replace("tau=0.1,tau", "tau")]
    out = tmp_path / "report"
    res = runner.invoke(app, ["report", *args, *labels, "--out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "report.json").read_text())
    ours = {(r["method"], r["setting"]): r for r in doc["table2"] if r["source"] == "this run"}
    assert set(ours) == {("Vanilla", ""), ("SFT", ""), ("CuSeT", "tau=0.1"), ("CuSeT", "tau=0.5"), ("CuSeT", "tau=0.9")}
    ours = {k[0] if k[1] in ("", "tau=0.1") else k: r for k, r in ours.items()}
    assert ours["CuSeT"]["function@1"] == 75.0 and ours["SFT"]["function@3"] == 25.0
    assert ours[("CuSeT", "tau=0.5")]["function@1"] == 50.0
    assert ours["Vanilla"]["compile@1"] == 100.0
    assert doc["figure4"]["tau"][0]["x"] == [0.1, 0.5, 0.9]
    assert doc["figure4"]["tau"][0]["metrics"]["function@1"] == [75.0, 50.0, 25.0]
    md = (out / "report.md").read_text()
    assert "| Qwen2.5-Coder-7B-Instruct | CuSeT | tau=0.1 | this run (#2) | 100.0 | **75.0** | 100.0 | **75.0** |" in md
    assert "| Qwen2.5-Coder-7B-Instruct | CuSeT |  | published (paper) | 93.6 | 65.6 | 98.8 | 74.8 |" in md
    assert "| 0.5 | model=Qwen2.5-Coder-7B-Instruct, method=CuSeT | this run | 100.0 | 50.0 | 100.0 | 50.0 |" in md
    assert set(doc["figures"]) == {"table2", "figure4"}
    for name in doc["figures"].values():
        assert_png(out / name)
    assert "SFT" in res.output and "75.0" in res.output  # the rich table on stdout


def test_report_compat_definition_and_published_none(tmp_path, make_run):
    run = make_run("r", {0: [(True, False), (True, True), (True, True)]})
    out = tmp_path / "o"
    res = runner.invoke(app, ["report", str(run), "--label", "model=m,method=sft", "--out", str(out),
                              "--definition", "compat", "--published", "none"])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "report.json").read_text())
    assert doc["metric_definition"]["name"] == "compat"
    assert [r["function@1"] for r in doc["table2"]] == [0.0]  # the first sample failed
    assert doc["table2"][0]["function@3"] == 100.0


def test_report_errors_are_clear(tmp_path, make_run):
    run = str(make_run("r", pattern(1)))
    res = runner.invoke(app, ["report", run, run, "--label", "model=a", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "got 1 --label option(s) for 2 RESULTS" in res.output
    res = runner.invoke(app, ["report", str(tmp_path / "nowhere"), "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "no such file or directory" in res.output
    res = runner.invoke(app, ["report", run, "--published", "some", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "--published must be one of matched, all, none" in res.output


def _check_file(path, defective_ids):
    """A task check file (as `cuset tasks check` writes it) where the given tasks' checkers
    accept a one-element corruption and the others are sound."""
    from cuset.evaluate.taskcheck import CorruptionResult, TaskCheck

    checks = [TaskCheck(t, f"task{t}", "cudabench", f"k{t}", "passed", robust_status="passed", checker="compare.py",
                        corruptions=(CorruptionResult("y", "one_element", t in defective_ids, True),))
              for t in range(4)]
    path.write_text(json.dumps({"tasks_file": "tasks.jsonl", "tasks": [c.to_json() for c in checks]}))
    return path


def test_report_excludes_or_flags_the_tasks_a_check_lists_as_defective(tmp_path, make_run):
    run = str(make_run("r", pattern(2)))            # tasks 0 and 1 pass: function@1 50.0 over 4 tasks
    check = _check_file(tmp_path / "task_check.json", {1})
    res = runner.invoke(app, ["report", run, "--label", "model=m,method=sft", "--out", str(tmp_path / "ex"),
                              "--task-check", str(check)])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "ex" / "report.json").read_text())
    assert doc["table2"][0]["function@1"] == 33.3333   # task 1 left out: 1 of 3
    assert doc["runs"][0]["counts"]["n_tasks"] == 3 and doc["task_check"]["runs"] == [{"run": 1, "excluded": ["1"]}]
    md = (tmp_path / "ex" / "report.md").read_text()
    assert "## Benchmark defects (1 task(s) of `tasks.jsonl`, excluded)" in md
    # texts from the check file escaped for Markdown (underscores could open emphasis)
    assert "| 1 | task1 | checker\\_cannot\\_fail | compare.py accepts y:one\\_element (cuset's strict check" in md
    assert "- run 1: excluded 1 task(s) (1)" in md and "1 defective task(s)" in res.output

    res = runner.invoke(app, ["report", run, "--label", "model=m,method=sft", "--out", str(tmp_path / "fl"),
                              "--task-check", str(tmp_path), "--defective", "flag"])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "fl" / "report.json").read_text())
    assert doc["table2"][0]["function@1"] == 50.0   # counted as they are
    md = (tmp_path / "fl" / "report.md").read_text()
    assert "- run 1: scores 1 flagged task(s) (1); they carry 25.0 points of its function@1" in md

    res = runner.invoke(app, ["report", run, "--out", str(tmp_path / "x"), "--task-check", str(check),
                              "--defective", "drop"])
    assert res.exit_code == 2 and "--defective must be one of exclude, flag" in res.output
    res = runner.invoke(app, ["report", run, "--out", str(tmp_path / "x"), "--task-check", str(tmp_path / "none")])
    assert res.exit_code == 2 and "no such task check file" in " ".join(res.output.split())


def test_texts_from_records_come_out_inert(tmp_path, make_run):
    """Issue 59: a generation record's model name holding HTML and Markdown markup is written
    as its characters: rendered (markdown-it, CommonMark with tables), no element comes of it."""
    from markdown_it import MarkdownIt

    hostile = "<img src=x onerror=alert(1)>[click](javascript:alert(1))![i](x.png)*em*`code`|cell~~s~~"
    gens = tmp_path / "gens.jsonl"
    gens.write_text(json.dumps({"model": hostile}) + "\n")
    run = make_run("hostile", pattern(1), meta={"generations": str(gens)})
    res = runner.invoke(app, ["report", str(run), "--out", str(tmp_path / "rep"), "--published", "none"])
    assert res.exit_code == 0, res.output
    md = (tmp_path / "rep" / "report.md").read_text()
    assert ("| &lt;img src=x onerror=alert(1)&gt;\\[click\\](javascript:alert(1))!\\[i\\](x.png)\\*em\\*\\`code\\`"
            "\\|cell\\~\\~s\\~\\~ |") in md
    html = MarkdownIt("commonmark").enable("table").render(md)
    assert "<img src=x" not in html and "<em>" not in html and "<code>code" not in html and "<del>" not in html
    assert "javascript:" not in " ".join(a for a in html.split("<a ")[1:])   # no link made of it
    assert "&lt;img src=x onerror=alert(1)&gt;[click](javascript:alert(1))![i](x.png)*em*`code`|cell~~s~~" in html
