"""`cuset view`: the static viewer built from small eval dirs written with the records module."""

from __future__ import annotations

import json
import re
import threading
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cuset.analysis.viewer.failure import failure_facts, parse_diagnostics, parse_mismatch
from cuset.analysis.viewer.model import build_model, page_name
from cuset.analysis.viewer.serve import make_server
from cuset.analysis.viewer.site import build_site, script_json
from cuset.analysis.viewer.sources import ViewSourceError, load_records, locate_runs
from cuset.cli.main import app
from cuset.execute.result import Status, StepResult
from viewer_runs import PAYLOAD, STRICT_DETAIL, eval_run, index_data, sample_result, write_eval_dir


def test_site_lists_every_sample_with_working_links(tmp_path):
    summary = build_site([eval_run(tmp_path)], tmp_path / "site")
    assert (summary.runs, summary.n_samples, summary.n_pages, summary.n_skipped_lines) == (("run",), 5, 5, 0)
    index = (tmp_path / "site" / "index.html").read_text()
    data = index_data(index)
    assert data["runs"] == ["run"]
    assert [(r["t"], r["s"], r["st"]) for r in data["rows"]] == [
        ("0", 0, "passed"), ("0", 1, "compile_error"), ("1", 0, "wrong"), ("1", 1, "race"), ("2", 0, "runtime_error")]
    assert {r["l"] for r in data["rows"]} == {2}            # the generations' level
    assert [r["rs"] for r in data["rows"]] == [None, None, "wrong", None, None]
    for row in data["rows"]:
        assert (tmp_path / "site" / row["u"]).is_file()
    # every number links to its samples: status counts, family pass counts and sample counts
    assert '<a href="#run=0&amp;status=compile_error">1</a>' in index
    assert '<a href="#run=0&amp;family=reduce&amp;status=passed">0</a> / <a href="#run=0&amp;family=reduce">2</a>' in index
    assert '<a href="#run=0&amp;family=vector&amp;status=passed">1</a> / <a href="#run=0&amp;family=vector">3</a> (33.3%)' in index
    # headline recomputed from the records (summary.json's overall is empty): 1 of 2 samples of task 0 passed
    assert "recomputed from the records" in index
    assert re.search(r'status=passed" title="samples that passed">16\.7<', index)   # function@1 = (1/2 + 0 + 0) / 3
    assert (tmp_path / "site" / "assets" / "viewer.js").stat().st_size > 1000
    assert ".code .k" in (tmp_path / "site" / "assets" / "viewer.css").read_text()   # pygments' token colours


def test_sample_pages_show_where_it_failed(tmp_path):
    build_site([eval_run(tmp_path)], tmp_path / "site")
    build_site([tmp_path / "run"], tmp_path / "site-forked", jobs=2)   # pages written by two processes: the same
    assert sorted(p.relative_to(tmp_path / "site") for p in (tmp_path / "site").rglob("*")) == \
        sorted(p.relative_to(tmp_path / "site-forked") for p in (tmp_path / "site-forked").rglob("*"))
    for page in (tmp_path / "site" / "s" / "0").iterdir():
        assert page.read_bytes() == (tmp_path / "site-forked" / "s" / "0" / page.name).read_bytes()
    pages = tmp_path / "site" / "s" / "0"
    compile_page = (pages / page_name(0, 1)).read_text()
    assert '<span id="L4" class="ln mark" title="error: identifier &quot;idx&quot; is undefined">' in compile_page
    assert '<a href="#L4">kernel.cu:4</a>' in compile_page
    assert '<span class="sp sp-launch_config">' in compile_page and '<span class="k">' in compile_page
    assert "Add two float32 vectors" not in compile_page and "Elementwise sum of two vectors." in compile_page  # level 2
    wrong = (pages / page_name(1, 0)).read_text()
    table = wrong[wrong.index('id="mismatch"'):].split("</table>")[0]
    rows = [re.findall(r"<td>(.*?)</td>", tr) for tr in re.findall(r"<tr>(.*?)</tr>", table)[1:]]
    rule = "float32, rtol=1e-05, atol=1e-08*2; max abs error 1.5"
    assert rows == [["c", "3 of 1024", "7", "2.0", "1.5", "0.5", "0.25", rule],      # the record's mismatch
                    ["c", "3 of 1024", "9", "0.5", "-1.0", "1.5", "3", rule],
                    ["c", "3 of 1024", "12", "4.0", "nan", "n/a", "n/a", rule]]
    assert "recorded at evaluation (plain verdict, case 0, order forward; outputs rejected by compare.py" in wrong
    race = (pages / page_name(1, 1)).read_text()
    assert 'rejected under <b>random:1</b>, passed under forward' in race
    assert '<td id="order">random:1</td>' in race


def test_hostile_strings_render_as_text(tmp_path):
    build_site([eval_run(tmp_path)], tmp_path / "site")
    site = tmp_path / "site"
    for page in site.rglob("*.html"):
        text = page.read_text()
        assert "<script>window" not in text and "<img src=x" not in text, page
        # the only script elements are ours: the JSON data, the table library's file and the viewer's own
        for tag in re.findall(r"<script[^>]*>", text):
            assert tag in ('<script type="application/json" id="viewer-data">', '<script src="assets/tabulator.min.js">',
                           '<script src="assets/viewer.js">'), tag
    evil = (site / "s" / "0" / page_name(2, 0)).read_text()
    assert evil.count("&lt;/script&gt;&lt;script&gt;window.__cuset_pwned=1;document.title=") >= 5   # title, detail, code, response, logs
    assert "&lt;img src=x onerror=" in evil
    index = (site / "index.html").read_text()
    raw_json = re.search(r'id="viewer-data">(.*?)</script>', index, re.S).group(1)
    assert "<" not in raw_json and ">" not in raw_json and "&" not in raw_json
    rows = index_data(index)["rows"]
    assert rows[-1]["n"] == f"evil{PAYLOAD}" and rows[-1]["d"].endswith(PAYLOAD)   # the data survives, as text


def test_script_json_escapes_what_could_end_a_script():
    text = script_json({"a": "</script>&\u2028\u2029<!--"})
    assert not re.search("[<>&\u2028\u2029]", text)
    assert json.loads(text) == {"a": "</script>&\u2028\u2029<!--"}


def test_a_record_without_mismatch_falls_back_to_its_detail_and_bad_ones_are_ignored():
    old = sample_result(1, 0, Status.WRONG, detail=STRICT_DETAIL)           # a results file from before `mismatch`
    facts = failure_facts(old)
    assert facts.mismatch_source.startswith("parsed from the detail")
    assert [(m.output, m.n_bad, m.index, m.got, m.expected, m.abs_error, m.rel_error) for m in facts.mismatches] == \
        [("c", 3, "7", "np.float32(1.5)", "np.float32(2.0)", 0.5, 0.25)]
    broken = {"outputs": [{"output": "c", "n_bad": "three"}, "junk", {"output": "d", "n_bad": 0, "n_total": 8}],
              "not_compared": ["e: no reference file identified", 5]}
    facts = failure_facts(sample_result(1, 0, Status.WRONG, detail="compare.py rejected", mismatch=broken))
    assert [(m.output, m.n_bad, m.n_total, m.elements) for m in facts.mismatches] == [("d", 0, 8, ())]
    assert facts.not_compared == ("e: no reference file identified",)


def test_failure_facts_parsers():
    m = parse_mismatch("out: 7 of 100 elements differ beyond atol=0.01, rtol=0.01 (max abs error 0.5; "
                       "first at [0, 3]: 1.5 vs 2)")
    assert (m.output, m.n_bad, m.n_total, m.index, m.got, m.expected, m.abs_error, m.rel_error, m.max_abs_error) == \
        ("out", 7, 100, "[0, 3]", "1.5", "2", 0.5, 0.25, "0.5")
    assert parse_mismatch("case 0: compare.py rejected the outputs (printed 'F')") is None
    diags = parse_diagnostics("kernel.cu:12:5: error: expected ';'\n/usr/include/x.h(3): warning: w\n"
                              "CUSET-CPU: note: in kernel 'k': lane 0 read lane 16 at kernel.cu:9, undefined\n")
    assert [(d.file, d.line, d.severity, d.in_program) for d in diags] == [
        ("kernel.cu", 12, "error", True), ("/usr/include/x.h", 3, "warning", False), ("kernel.cu", 9, "note", True)]
    passed = sample_result(0, 0, Status.PASSED)
    assert failure_facts(passed).failed_step is None and failure_facts(passed).marked_lines() == {}
    timeout = sample_result(0, 0, Status.TIMEOUT, detail="case 2, order forward: still running after 60 s; killed",
                      steps=[StepResult("compile", 0, 1.0), StepResult("run[case=2,order=forward]", None, 60, timed_out=True)])
    facts = failure_facts(timeout)
    assert (facts.failed_step, facts.case, facts.order) == ("run[case=2,order=forward]", 2, "forward")


def test_compare_lists_tasks_a_passed_and_b_failed(tmp_path):
    s = Status
    a = [sample_result(0, 0, s.PASSED), sample_result(0, 1, s.WRONG), sample_result(1, 0, s.WRONG), sample_result(2, 0, s.PASSED),
         sample_result(3, 0, s.PASSED), sample_result(5, 0, s.PASSED)]
    b = [sample_result(0, 0, s.WRONG), sample_result(0, 1, s.COMPILE_ERROR), sample_result(1, 0, s.PASSED), sample_result(2, 0, s.PASSED),
         sample_result(3, 0, s.WRONG), sample_result(3, 1, s.PASSED), sample_result(4, 0, s.WRONG)]
    run_a = write_eval_dir(tmp_path / "a" / "eval", a)
    run_b = write_eval_dir(tmp_path / "b" / "eval", b)
    model = build_model([load_records(locate_runs(run_a)[0]), load_records(locate_runs(run_b)[0])])
    # task 0: A 1/2, B 0/2; task 3: B passed one of two; task 5: only A ran it; task 4: only B
    assert model.passed_failed(0, 1) == ["0"]
    assert model.passed_failed(1, 0) == ["1"]
    summary = build_site([run_a, run_b], tmp_path / "site")
    assert summary.runs == ("a", "b")                       # eval/ dirs are named by their parent
    data = index_data((tmp_path / "site" / "compare.html").read_text())
    assert data["pairs"] == {"0|1": ["0"], "1|0": ["1"]}
    task0 = next(t for t in data["tasks"] if t["t"] == "0")
    assert task0["o"]["0"][:2] == [1, 2] and task0["o"]["1"][:2] == [0, 2]
    for _, _, href in task0["o"]["0"][2] + task0["o"]["1"][2]:
        assert (tmp_path / "site" / href).is_file()
    assert "4" not in [t["t"] for t in data["tasks"] if "0" in t["o"]]
    # one click from a sample page to the same task's samples in the other run
    page = (tmp_path / "site" / "s" / "0" / page_name(0, 0)).read_text()
    assert 'href="../../s/1/0-s0.html"' in page and 'href="../../s/1/0-s1.html"' in page


def test_demo_layout_gives_one_run_per_cell(tmp_path):
    for cell in ("vanilla", "sft"):
        write_eval_dir(tmp_path / "study" / "cells" / cell / "eval", [sample_result(0, 0, Status.PASSED)])
    (tmp_path / "study" / "cells" / "unfinished").mkdir()     # a cell still training: no eval yet
    assert [s.name for s in locate_runs(tmp_path / "study")] == ["sft", "vanilla"]


def test_a_dir_without_results_names_what_was_looked_for(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ViewSourceError) as e:
        build_site([tmp_path / "empty"], tmp_path / "site")
    message = str(e.value)
    assert str(tmp_path / "empty") in message
    assert "results.jsonl" in message and "cells/*/eval/results.jsonl" in message and "report.json" in message
    result = CliRunner().invoke(app, ["view", str(tmp_path / "empty"), "--out", str(tmp_path / "site")])
    assert result.exit_code == 2 and "found no results" in result.output


def test_malformed_results_lines_are_skipped_and_counted(tmp_path):
    run = write_eval_dir(tmp_path / "run", [sample_result(0, 0, Status.PASSED), sample_result(1, 0, Status.WRONG)])
    lines = (run / "results.jsonl").read_text().splitlines()
    bad_status = json.loads(lines[1]) | {"status": "exploded"}
    (run / "results.jsonl").write_text("\n".join([lines[0], "{not json", json.dumps(bad_status), lines[1]]) + "\n")
    summary = build_site([run], tmp_path / "site")
    assert (summary.n_samples, summary.n_skipped_lines) == (2, 2)
    index = (tmp_path / "site" / "index.html").read_text()
    assert "2 results line(s) skipped (bad_json: 1, bad_record: 1)" in index
    assert f"{run / 'results.jsonl'}:2</code> [bad_json]" in index
    assert f"{run / 'results.jsonl'}:3</code> [bad_record] unknown status &#39;exploded&#39;" in index
    (run / "results.jsonl").write_text("{not json\n")
    with pytest.raises(ViewSourceError, match=r"results\.jsonl: no valid results record \(1 bad_json line\(s\) "
                                              r"skipped, first: .*results\.jsonl:1"):
        build_site([run], tmp_path / "site2")


def test_cli_builds_and_the_server_listens_on_loopback_only(tmp_path):
    run = write_eval_dir(tmp_path / "run", [sample_result(0, 0, Status.PASSED)])
    result = CliRunner().invoke(app, ["view", str(run)])
    assert result.exit_code == 0, result.output
    assert "1 samples of 1 run(s) (run): 1 sample pages" in result.output
    assert (run / "view" / "index.html").is_file()            # default: written into the run dir
    server = make_server(run / "view", 0)
    assert server.server_address[0] == "127.0.0.1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/index.html", timeout=10) as response:
            assert b'id="viewer-data"' in response.read()
    finally:
        server.shutdown()
        server.server_close()
