"""The viewer site and pictures the docs link: `cuset view` of the committed demo run.

    .venv/bin/python docs/tools/viewer_docs.py [--site-only]

1. Builds the viewer of docs/demo-2026-12-06-study-budget (its compact results/*.jsonl and the
   generations and evaluation tasks published beside them, compressed: every sample's record,
   program, prompt and attribution) into docs/demo-2026-12-06-study-budget/view/.
2. Opens it from file:// in the headless Chromium of the viewer's browser test
   (cuset.analysis.viewer.browser: network blocked, requests recorded) and saves PNGs in
   docs/viewer/: run.png (headline, pass rates by family and level), samples.png (the sample
   table narrowed to one run's wrong samples, as the link behind a number opens it),
   compare.png (each task per run, "A passed, B failed"), sample.png (a `wrong` sample's page)
   and sample-program.png (a compile error's page: the program highlighted, its CUDA-sensitive
   spans marked and the line the compiler named). It fails if any page requested anything but
   its own files.

Run from the repository root (the site names its results files by the paths given).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = Path("docs/demo-2026-12-06-study-budget")
PICTURES = Path("docs/viewer")
WIDTH = 1280


def _first(model, run_name: str | None, status: str, want=lambda row: True):
    names = [r.source.name for r in model.runs]
    for row in model.rows:
        if (run_name is None or names[row.run] == run_name) and row.status == status and want(row):
            return row
    raise SystemExit(f"no {status} sample{' in ' + run_name if run_name else ''} to picture")


def _run_index(model, run_name: str) -> int:
    names = [r.source.name for r in model.runs]
    if run_name not in names:
        raise SystemExit(f"no run named {run_name} (runs: {', '.join(names)})")
    return names.index(run_name)


def _check_local(browser, site: Path, since: int = 0) -> None:
    """Every request from the `since`-th on was for a file of `site`."""
    root = site.resolve().as_uri() + "/"
    foreign = [u for u in browser.requested_urls()[since:] if not u.startswith(root)]
    if foreign:
        raise SystemExit(f"the viewer requested {len(foreign)} URL(s) outside {site}: {foreign[:5]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site-only", action="store_true", help="rebuild the site, take no pictures (no browser)")
    parser.add_argument("--sample-run", default="sft", help="the run whose first wrong sample is pictured")
    parser.add_argument("--compare", nargs=2, default=("sft", "vanilla"), metavar=("A", "B"),
                        help="the runs compare.png sets side by side (tasks A passed and B failed)")
    args = parser.parse_args(argv)

    from cuset.analysis.viewer.browser import headless_chromium
    from cuset.analysis.viewer.failure import failure_facts
    from cuset.analysis.viewer.model import build_model
    from cuset.analysis.viewer.site import build_site
    from cuset.analysis.viewer.sources import load_records, locate_runs

    site = EXAMPLE / "view"
    summary = build_site([EXAMPLE], site, jobs=1)
    print(f"{site}: {summary.n_samples} samples of {len(summary.runs)} runs, {summary.n_pages} pages, "
          f"{summary.total_bytes / 1e6:.1f} MB ({summary.index_bytes / 1e6:.2f} MB index.html), "
          f"built in {summary.seconds:.1f} s")
    if args.site_only:
        return 0
    runs = [load_records(s) for s in locate_runs(EXAMPLE)]
    model = build_model(runs)
    wrong = _first(model, args.sample_run, "wrong")
    from selenium.webdriver.support.ui import Select, WebDriverWait

    def built(element_id: str) -> None:
        """Wait for the table library to build the page's table (the glue then writes its count)."""
        WebDriverWait(browser.driver, 30).until(lambda d: d.find_element("id", element_id).text)

    with headless_chromium(width=WIDTH) as browser:
        browser.open(site / "index.html")
        built("count")
        browser.screenshot(PICTURES / "run.png", WIDTH, 1500)
        # the sample table (the table library's), as a link behind a number leaves it: sft's wrong samples
        browser.open(site / "index.html", f"run={_run_index(model, args.sample_run)}&status=wrong")
        built("count")
        browser.driver.set_window_size(WIDTH, 1100)
        browser.driver.execute_script("document.getElementById('samples').scrollIntoView()")
        if not browser.driver.save_screenshot(str(PICTURES / "samples.png")):
            raise SystemExit("Chromium could not write samples.png")
        browser.open(site / "compare.html")
        built("pair-counts")

        Select(browser.driver.find_element("name", "a")).select_by_visible_text(args.compare[0])
        Select(browser.driver.find_element("name", "b")).select_by_visible_text(args.compare[1])
        browser.driver.find_element("name", "only").click()   # only the tasks A passed and B failed
        browser.screenshot(PICTURES / "compare.png", WIDTH, 1000)
        browser.open(site / wrong.href)
        browser.screenshot(PICTURES / "sample.png", WIDTH)
        _check_local(browser, site)
        by_key = {(i, str(r.task_id), r.sample): r for i, run in enumerate(runs) for r in run.records}
        failed = _first(model, None, "compile_error",
                        lambda row: bool(failure_facts(by_key[(row.run, row.task_id, row.sample)]).marked_lines()))
        browser.open(site / failed.href)
        browser.screenshot(PICTURES / "sample-program.png", WIDTH, 2000)
        _check_local(browser, site)
    for name in ("run", "samples", "compare", "sample", "sample-program"):
        path = PICTURES / f"{name}.png"
        if path.exists():
            print(f"{path}: {path.stat().st_size / 1e3:.0f} kB")
    print(f"pictured: {wrong.href} ({args.sample_run}, task {wrong.task_id} sample {wrong.sample})")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
