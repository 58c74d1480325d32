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

# The levels of the base-strength maps and the runs published beside them (the powered run at
# the weak level): the same checks, minus the README's summary tables, which quote studies.
LEVELS = sorted(p for p in (ROOT / "docs").glob("regime-*/*/report.json"))


def test_there_is_a_recomputable_study():
    assert RECOMPUTABLE, "no docs/study-*/report.json with committed per-sample results"


@pytest.mark.parametrize("report", RECOMPUTABLE + LEVELS, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
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


@pytest.mark.parametrize("report", RECOMPUTABLE + LEVELS, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_the_committed_report_md_is_what_the_code_writes_from_its_json(report):
    from cuset.demo.report import _markdown

    doc = add_statistics(json.loads(report.read_text()), report.parent)
    assert _markdown(doc) == (report.parent / "report.md").read_text()


VIEWED = ROOT / "docs" / "demo-2026-12-06-study-budget"


def test_the_committed_viewer_is_what_cuset_view_writes_from_the_committed_results(tmp_path, monkeypatch):
    """docs/demo-2026-12-06-study-budget/view (linked from the README) is rebuilt byte for byte;
    after a change to the viewer, `python docs/tools/viewer_docs.py --site-only` refreshes it."""
    from cuset.analysis.viewer.site import build_site

    monkeypatch.chdir(ROOT)                     # the site names its results files by the path given
    build_site([VIEWED.relative_to(ROOT)], tmp_path / "view")
    committed = {p.relative_to(VIEWED / "view"): p for p in (VIEWED / "view").rglob("*") if p.is_file()}
    built = {p.relative_to(tmp_path / "view"): p for p in (tmp_path / "view").rglob("*") if p.is_file()}
    assert sorted(committed) == sorted(built)
    # the stylesheet ends with the installed pygments' token colours: compared without them
    own_css = (ROOT / "cuset" / "analysis" / "viewer" / "assets" / "viewer.css").read_text()
    assert (VIEWED / "view" / "assets" / "viewer.css").read_text().startswith(own_css)
    stale = [str(k) for k, p in built.items()
             if k.as_posix() != "assets/viewer.css" and p.read_bytes() != committed[k].read_bytes()]
    assert not stale, f"{len(stale)} committed viewer file(s) differ, e.g. {stale[:3]}: run " \
                      "`python docs/tools/viewer_docs.py --site-only` and commit docs/demo-2026-12-06-study-budget/view"


def test_every_page_of_the_committed_viewer_shows_its_program_and_prompt():
    """The example site is built from a run whose generations and tasks were published beside its
    results: no sample page says its program or prompt is not available, and each shows the
    program its generations record holds."""
    import gzip
    import html
    import re

    pages = sorted((VIEWED / "view" / "s").rglob("*.html"))
    assert len(pages) == 180                                       # 20 tasks x 3 samples x 3 runs
    missing = [p.name for p in pages if "Not available" in p.read_text()]
    assert not missing, f"pages without a program or prompt: {missing[:5]}"
    with gzip.open(VIEWED / "generations" / "sft.jsonl.gz", "rt") as fh:
        first = json.loads(fh.readline())
    page = VIEWED / "view" / "s" / "1" / f'{first["task_id"]}-s{first["sample"]}.html'   # runs: vanilla, sft, cuset
    text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))
    assert first["task_name"] in text and "sft" in text
    lines = [ln.strip() for ln in first["code"].splitlines() if ln.strip()]
    assert all(ln in text for ln in lines[:20]), "the sample page does not show its generated program"
