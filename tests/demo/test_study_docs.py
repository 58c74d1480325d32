"""The committed study reports are evidence: their numbers come back from the committed
per-sample files, and the README and docs/demo-and-studies.md quote their summary table as the code writes it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from cuset.demo.report import add_statistics, summary_table

ROOT = Path(__file__).resolve().parents[2]
RECOMPUTABLE = sorted(p for p in (ROOT / "docs").glob("study-*/report.json")
                      if "method_order" in (doc := json.loads(p.read_text()))
                      and all("results" in r for r in doc.get("runs", {}).values()))


def test_there_is_a_recomputable_study():
    assert RECOMPUTABLE, "no docs/study-*/report.json with committed per-sample results"


@pytest.mark.parametrize("report", RECOMPUTABLE, ids=lambda p: p.parent.name)
def test_committed_numbers_come_back_from_the_committed_results(report):
    committed = json.loads(report.read_text())
    recomputed = add_statistics(copy.deepcopy(committed), report.parent)
    for key in ("metrics", "methods", "paired"):
        assert json.loads(json.dumps(recomputed[key], default=str)) == committed[key], key


@pytest.mark.parametrize("report", RECOMPUTABLE, ids=lambda p: p.parent.name)
def test_the_readme_quotes_the_summary_table_as_written(report):
    doc = add_statistics(json.loads(report.read_text()), report.parent)
    table = "\n".join(summary_table(doc))
    for page in ("README.md", "docs/demo-and-studies.md"):
        assert table in (ROOT / page).read_text(), f"{page}'s table for {report.parent.name} differs:\n{table}"
    assert table in (report.parent / "report.md").read_text()


@pytest.mark.parametrize("report", RECOMPUTABLE, ids=lambda p: p.parent.name)
def test_the_committed_report_md_is_what_the_code_writes_from_its_json(report):
    from cuset.demo.report import _markdown

    doc = add_statistics(json.loads(report.read_text()), report.parent)
    assert _markdown(doc) == (report.parent / "report.md").read_text()
