"""`cuset view` in a real browser: the site of a small run opened from file:// in headless
Chromium (Debian's chromium + chromium-driver, driven by selenium). The table's rows and
filters are made by the page's script, so only a browser can check them; the same goes
for "no script of a sample runs" and "nothing is fetched from the network".

Skips only when no Chromium binary is installed (`make install` and .ci/run install it
as root with apt).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuset.analysis.viewer.browser import find_chromium, headless_chromium
from cuset.analysis.viewer.model import page_name
from cuset.analysis.viewer.site import build_site
from cuset.execute.result import Status
from viewer_runs import EVIL_CODE, PAYLOAD, eval_run, sample_result, write_eval_dir

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(find_chromium() is None,
                                 reason="no Chromium binary (chromium on PATH or $CUSET_CHROMIUM): "
                                        "apt-get install chromium chromium-driver")]

# (task, sample, status) of eval_run's records, in the table's order
SAMPLES = [("0", "s0", "passed"), ("0", "s1", "compile_error"), ("1", "s0", "wrong"), ("1", "s1", "race"),
           ("2", "s0", "runtime_error")]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("viewer-browser")
    build_site([eval_run(root)], root / "site")
    return root / "site"


@pytest.fixture(scope="module")
def browser():
    with headless_chromium() as b:
        yield b


ROWS = "#sample-table .tabulator-row"      # the table library's (Tabulator's) rows and cells
CELLS = ".tabulator-cell"


def _open_table(browser, page: Path, fragment: str = "") -> None:
    """Open index.html and wait for the table library to build the table and the glue to count it."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser.open(page, fragment)
    WebDriverWait(browser.driver, 10).until(lambda d: d.find_element("id", "count").text)


def _rows(browser) -> list[tuple[str, str, str]]:
    out = []
    for tr in browser.driver.find_elements("css selector", ROWS):
        cells = [td.text for td in tr.find_elements("css selector", CELLS)]
        out.append((cells[1], cells[5], cells[6]))
    return out


def _text(browser, css: str) -> str:
    return browser.driver.execute_script("return document.querySelector(arguments[0]).textContent", css)


def test_the_table_lists_every_sample_and_filters_narrow_it(site, browser):
    from selenium.webdriver.support.ui import Select

    _open_table(browser, site / "index.html")
    assert _rows(browser) == SAMPLES
    assert browser.driver.find_element("id", "count").text == "5 of 5 samples"
    Select(browser.driver.find_element("name", "status")).select_by_value("wrong")
    assert _rows(browser) == [("1", "s0", "wrong")]
    assert browser.driver.find_element("id", "count").text == "1 of 5 samples"
    browser.driver.find_element("css selector", "#filters button[type=reset]").click()
    browser.driver.find_element("name", "q").send_keys("thread orders")    # search: the race's detail
    assert _rows(browser) == [("1", "s1", "race")]
    _open_table(browser, site / "index.html", "family=reduce")                       # the links behind the numbers
    assert _rows(browser) == [("1", "s0", "wrong"), ("1", "s1", "race")]


def test_a_click_on_a_column_header_sorts_the_table(site, browser):
    _open_table(browser, site / "index.html")
    header = browser.driver.find_element("css selector", "#sample-table .tabulator-col[tabulator-field=t]")
    header.click()                                     # ascending: the order the samples came in
    assert [r[0] for r in _rows(browser)] == ["0", "0", "1", "1", "2"]
    header.click()                                     # descending
    assert [r[0] for r in _rows(browser)] == ["2", "1", "1", "0", "0"]
    assert browser.driver.find_element("id", "count").text == "5 of 5 samples"


def test_compare_shows_each_task_per_run_and_narrows_to_a_passed_b_failed(tmp_path, browser):
    from selenium.webdriver.support.ui import Select, WebDriverWait

    s = Status
    a = [sample_result(0, 0, s.PASSED), sample_result(0, 1, s.WRONG), sample_result(1, 0, s.WRONG),
         sample_result(2, 0, s.PASSED)]
    b = [sample_result(0, 0, s.WRONG), sample_result(1, 0, s.PASSED), sample_result(2, 0, s.PASSED),
         sample_result(4, 0, s.WRONG)]
    site = tmp_path / "site"
    build_site([write_eval_dir(tmp_path / "a" / "eval", a), write_eval_dir(tmp_path / "b" / "eval", b)], site)
    browser.open(site / "compare.html")
    driver = browser.driver
    counts = lambda: driver.find_element("id", "pair-counts").text
    WebDriverWait(driver, 10).until(lambda d: counts())

    def rows():
        return [[c.text.strip() for c in tr.find_elements("css selector", CELLS)]
                for tr in driver.find_elements("css selector", "#compare-table .tabulator-row")]

    assert counts() == "1 task(s) a passed and b failed; 4 of 4 tasks shown"
    assert [r[0] for r in rows()] == ["0", "1", "2", "4"]
    assert rows()[0][3:] == ["1/2 s0 s1", "0/1 s0"] and rows()[3][3:] == ["not evaluated", "0/1 s0"]
    driver.find_element("name", "only").click()
    assert [r[0] for r in rows()] == ["0"]
    assert "a-not-b" in driver.find_element("css selector", "#compare-table .tabulator-row").get_attribute("class")
    assert counts() == "1 task(s) a passed and b failed; 1 of 4 tasks shown"
    Select(driver.find_element("name", "a")).select_by_visible_text("b")
    Select(driver.find_element("name", "b")).select_by_visible_text("a")
    assert [r[0] for r in rows()] == ["1"]
    Select(driver.find_element("name", "b")).select_by_visible_text("b")   # the same run twice: no pair
    assert rows() == [] and counts() == "pick two different runs; 0 of 4 tasks shown"
    driver.find_element("name", "only").click()
    links = driver.find_elements("css selector", "#compare-table .tabulator-row a")
    assert [x.text for x in links][:3] == ["s0", "s1", "s0"]               # task 0: a's two samples, b's one
    assert all(Path(x.get_attribute("href").removeprefix("file://")).is_file() for x in links)


def test_a_wrong_sample_page_shows_its_first_mismatching_elements(site, browser):
    from selenium.webdriver.support.ui import WebDriverWait

    _open_table(browser, site / "index.html", "status=wrong")
    browser.driver.find_element("css selector", f"{ROWS} {CELLS} a").click()
    WebDriverWait(browser.driver, 10).until(lambda d: d.find_elements("id", "mismatch"))
    assert browser.driver.current_url.endswith("/s/0/" + page_name(1, 0))
    header = [th.text for th in browser.driver.find_elements("css selector", "#mismatch thead th")]
    assert header[:7] == ["output", "differing", "first at", "expected", "got", "abs error", "rel error"]
    rows = [[td.text for td in tr.find_elements("tag name", "td")][:7]
            for tr in browser.driver.find_elements("css selector", "#mismatch tbody tr")]
    assert rows == [["c", "3 of 1024", "7", "2.0", "1.5", "0.5", "0.25"],       # viewer_runs.MISMATCH
                    ["c", "3 of 1024", "9", "0.5", "-1.0", "1.5", "3"],
                    ["c", "3 of 1024", "12", "4.0", "nan", "n/a", "n/a"]]
    assert browser.driver.find_element("id", "mismatch").is_displayed()


def test_a_script_payload_renders_as_text_and_never_runs(site, browser):
    page = site / "s" / "0" / page_name(2, 0)
    browser.open(page)
    driver = browser.driver
    assert driver.execute_script("return typeof window.__cuset_pwned") == "undefined"
    assert driver.title == f"2 evil{PAYLOAD} s0 (run) - cuset view"   # the payload's text, not "pwned"
    assert driver.execute_script("return document.querySelectorAll('img').length") == 0
    scripts = driver.execute_script("return Array.from(document.scripts, s => s.src || s.type)")
    assert scripts == []                                                  # a sample page has no script at all
    assert PAYLOAD in _text(browser, "#detail")
    assert _text(browser, "#program pre.code") == EVIL_CODE               # the program's text, line for line
    tops = driver.execute_script("return Array.from(document.querySelectorAll('#program .ln'), "
                                 "l => [l.getBoundingClientRect().top, l.getBoundingClientRect().bottom])")
    assert len(tops) == 2 and tops[1][0] == tops[0][1]                   # one line under the other, no blank between
    assert PAYLOAD in _text(browser, "#response")
    assert PAYLOAD in _text(browser, "#steps")
    _open_table(browser, site / "index.html", "task=2")                  # the table builds its rows in JS
    assert driver.execute_script("return typeof window.__cuset_pwned") == "undefined"
    assert driver.title != "pwned"
    cells = [td.text for td in driver.find_elements("css selector", f"{ROWS} {CELLS}")]
    assert cells[2] == f"evil{PAYLOAD}" and cells[-1].endswith(PAYLOAD)
    assert driver.execute_script("return document.querySelectorAll('#sample-table img, #sample-table script')"
                                 ".length") == 0


def test_nothing_is_fetched_from_the_network(site, browser):
    seen = len(browser.requested_urls())
    pages = [site / "index.html", *sorted((site / "s" / "0").glob("*.html"))]
    for page in pages:
        browser.open(page)
    urls = browser.requested_urls()[seen:]
    root = site.resolve().as_uri() + "/"
    assert urls and all(u.startswith(root) for u in urls), [u for u in urls if not u.startswith(root)]
    fetched = {u.removeprefix(root) for u in urls}
    # the recorder saw the pages, their stylesheets and scripts (the table library's too): it was listening
    assert {"index.html", "assets/viewer.css", "assets/viewer.js", "assets/tabulator.min.js",
            "assets/tabulator.min.css"} <= fetched
    assert {p.relative_to(site).as_posix() for p in pages} <= fetched


def test_the_checks_see_a_request_leave_and_a_script_run(tmp_path, browser):
    """A control: a page that does what the viewer must not is caught by the same checks."""
    page = tmp_path / "control.html"
    page.write_text('<!doctype html><title>t</title><img src="http://192.0.2.1/x.png">'
                    '<script>window.__cuset_pwned = 1; document.title = "pwned";</script>')
    seen = len(browser.requested_urls())
    browser.open(page)
    assert browser.driver.execute_script("return window.__cuset_pwned") == 1
    assert browser.driver.title == "pwned"
    urls = browser.requested_urls()[seen:]
    assert "http://192.0.2.1/x.png" in urls           # recorded, and refused: http://* is in BLOCKED_URLS
    assert browser.refused()["http://192.0.2.1/x.png"] == "inspector"


def test_the_pages_policy_stops_markup_that_escaping_would_have_missed(site, browser, tmp_path):
    """Defence in depth: a viewer page with the payload spliced in raw (as if escaping had
    failed) still runs none of it: its Content-Security-Policy allows only the site's own
    script file (no inline script, no event handler attribute)."""
    page = (site / "index.html").read_text()
    assert "script-src 'self'" in page and "default-src 'none'" in page
    spliced = site / "spliced.html"
    spliced.write_text(page.replace("<main>", "<main>" + PAYLOAD + '<img src="http://192.0.2.1/y.png">', 1))
    seen = len(browser.requested_urls())
    try:
        _open_table(browser, spliced)
        driver = browser.driver
        assert driver.execute_script("return typeof window.__cuset_pwned") == "undefined"
        assert driver.title != "pwned"
        assert driver.find_element("id", "count").text == "5 of 5 samples"     # the site's own script ran
        assert "http://192.0.2.1/y.png" in browser.requested_urls()[seen:]
        # refused: by the test's block list, which Chromium applies before the page's img-src
        assert browser.refused()["http://192.0.2.1/y.png"] in ("inspector", "csp")
    finally:
        spliced.unlink()
