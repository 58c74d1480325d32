"""Build time and size of `cuset view` for one model's evaluation: 1,500 samples (issue 42).

Writes a synthetic eval dir the way `cuset eval` does (results.jsonl, generations.jsonl,
the tasks file and summary.json naming them): 500 tasks x 3 samples, every sample
distinct: its own response of about 2,500 characters (the span benchmark's CUDA
generator: kernels, host code, launches, prose), its own logs, and a status mix like the
study's runs (wrong 40%, compile error 25%, passed 20%, runtime error 8%, timeout 4%,
race 3%). A compile error names a line of its program; a `wrong` sample carries a
mismatch record made by cuset.evaluate.strict.element_mismatch on arrays that differ.
Writing these inputs is not timed.

Then times `build_site` with one process and with one per core, and reports the size of
the site (all of it, index.html, the largest sample page). Where a Chromium is installed
(cuset.analysis.viewer.browser), it also opens index.html and the largest sample page
from file:// and reports the load time the browser measured (navigation start to the
end of the load event) and, for index.html, the time until the table library has built the
sample table (Tabulator builds it asynchronously, not before its tableBuilt event).

    .venv/bin/python bench/viewer_build.py [--tasks 500] [--samples 3] [--seed 0]
"""

from __future__ import annotations

# What this script measures (`cuset view`'s site builder): a record in bench/results is stale once a commit
# after its own touches one of these paths (docs/tools/perf_table.py).
MEASURES = ("cuset/analysis/viewer",)

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

TARGET_BUILD_S = 30.0   # the bound for a 1,500-sample run

STATUSES = [("wrong", 0.40), ("compile_error", 0.25), ("passed", 0.20), ("runtime_error", 0.08), ("timeout", 0.04),
            ("race", 0.03)]
FAMILIES = ["vector_binary", "saxpy", "relu", "sigmoid", "polynomial", "row_reduce", "softmax", "gemv", "transpose",
            "heat_1d"]
COMPILE_ERRORS = ['identifier "idx" is undefined', 'expected a ";"', "too few arguments in function call",
                  'no instance of overloaded function "atomicAdd" matches the argument list']


def _task(i: int, rng: random.Random) -> dict:
    family = FAMILIES[i % len(FAMILIES)]
    n = rng.choice([1024, 4096, 65536])
    return {"id": i, "task_name": f"{family.title()}_{i}", "family": family,
            "task_description": f"Compute the {family} kernel on GPU using CUDA.",
            "inputs": [{"name": "x", "dtype": "float32", "shape": f"({n},)"}],
            "outputs": [{"name": "y", "dtype": "float32", "shape": f"({n},)"}], "gpu": "unknown",
            "bench.cu": "__global__ void k(const float* x, float* y, int n) {}\nint main() { return 0; }\n",
            "gen.py": "import numpy as np\n", "compare.py": "print('T')\n",
            "level1_prompt": f"Apply {family} to the {n} float32 values of x and write y; read data/x.bin, "
                             f"write data/y.bin.",
            "level2_prompt": f"{family} over x into y.", "level3_prompt": f"Compute the {family} kernel on GPU."}


def _mismatch(rng: random.Random, n: int) -> dict:
    import numpy as np

    from cuset.evaluate.strict import element_mismatch
    from cuset.tasks.schema import TensorSpec

    data = np.random.default_rng(rng.randrange(1 << 30))
    ref = data.standard_normal(n).astype(np.float32)
    out = ref.copy()
    bad = data.choice(n, size=int(rng.choice([1, 7, n // 3, n])), replace=False)
    out[bad] += data.standard_normal(bad.size).astype(np.float32)
    record = element_mismatch(TensorSpec("y", "float32", f"({n},)"), out, ref, "y_ref.bin")
    return {"case": 0, "order": "forward", "verdict": "plain", "check": "compare.py", "not_compared": [],
            "outputs": [record]}


def _sample(task: dict, s: int, code: str, rng: random.Random):
    from cuset.evaluate.records import SampleResult
    from cuset.execute.result import Status, StepResult, truncate_log

    status = Status(rng.choices([st for st, _ in STATUSES], [w for _, w in STATUSES])[0])
    n = int(task["outputs"][0]["shape"].strip("(,)"))
    lines = code.count("\n") + 1
    compile_log = "".join(f"kernel.cu({rng.randrange(1, lines)}): warning #177-D: variable \"t{k}\" was declared "
                          f"but never referenced\n" for k in range(rng.randrange(0, 4)))
    steps = [StepResult("gen[case=0]", 0, 0.4, stdout="", stderr="")]
    detail, mismatch = "", None
    if status is Status.COMPILE_ERROR:
        line, message = rng.randrange(1, lines), rng.choice(COMPILE_ERRORS)
        compile_log += f"kernel.cu({line}): error: {message}\n1 error detected in the compilation of \"kernel.cu\".\n"
        steps.append(StepResult("compile", 2, 3.1, stderr=truncate_log(compile_log)))
        detail = f"nvcc: kernel.cu({line}): error: {message}"
    else:
        steps.append(StepResult("compile", 0, 3.1, stderr=truncate_log(compile_log)))
        run_out = "".join(f"launch {k}: grid ({rng.randrange(1, 256)}, 1, 1) block (256, 1, 1)\n" for k in range(20))
        orders = ["forward", "reverse", "random:1"] if status is Status.RACE else ["forward"]
        for order in orders:
            timed_out = status is Status.TIMEOUT
            code_ = 1 if status is Status.RUNTIME_ERROR else (None if timed_out else 0)
            err = "CUDA error an illegal memory access was encountered at kernel.cu:%d\n" % rng.randrange(1, lines) \
                if status is Status.RUNTIME_ERROR else ""
            steps.append(StepResult(f"run[case=0,order={order}]", code_, 60.0 if timed_out else 0.8,
                                    stdout=truncate_log(run_out * rng.randrange(1, 8)), stderr=err, timed_out=timed_out))
        if status is Status.RUNTIME_ERROR:
            detail = f"case 0, order forward: exit code 1: {err.strip()}"
        elif status is Status.TIMEOUT:
            detail = "case 0, order forward: still running after 60 s; killed"
        else:
            steps.append(StepResult("compare[case=0]", 0, 0.3, stdout="T\n" if status is Status.PASSED else "F\n"))
            if status is Status.WRONG:
                detail = "case 0: compare.py rejected the outputs (printed 'F')"
                mismatch = _mismatch(rng, n)
            elif status is Status.RACE:
                detail = ("case 0: outputs differ between thread orders forward, reverse, random:1; order random:1: "
                          "compare.py rejected the outputs (printed 'F') (passes under forward, reverse)")
                mismatch = _mismatch(rng, n) | {"order": "random:1"}
    passed = status is Status.PASSED
    timings = {"gen": 0.4, "compile": 3.1, "total": round(sum(st.seconds for st in steps), 3)}
    return SampleResult(task_id=task["id"], task_name=task["task_name"], family=task["family"], sample=s,
                        status=status, detail=detail, compiled=status.compiled, ran_ok=passed or status is Status.WRONG,
                        passed=passed, n_tokens=len(code) // 4, timings=timings, backend="cpu", steps=tuple(steps),
                        mismatch=mismatch)


def write_run(out: Path, n_tasks: int, n_samples: int, seed: int) -> Path:
    """A synthetic eval dir of n_tasks x n_samples distinct samples (see the module doc)."""
    from spans_throughput import synthetic_response

    from cuset.evaluate.records import save_results
    from cuset.generate.extract import extract_code
    from cuset.generate.records import GenerationRecord, save_generations

    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    tasks = [_task(i, rng) for i in range(n_tasks)]
    (out / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    results, generations = [], []
    for task in tasks:
        for s in range(n_samples):
            response = synthetic_response(rng, 2_500)
            code = extract_code(response) or response
            results.append(_sample(task, s, code, rng))
            generations.append(GenerationRecord(task_id=task["id"], task_name=task["task_name"], sample=s,
                                                model="models/synthetic-7b", level=rng.choice([1, 2, 3]),
                                                response=response, code=code, n_tokens=len(response) // 4,
                                                finish_reason="stop", seconds=1.0))
    save_results(out / "results.jsonl", results)
    save_generations(out / "generations.jsonl", generations)
    (out / "summary.json").write_text(json.dumps({"overall": {}, "meta": {
        "generations": str(out / "generations.jsonl"), "tasks": str(out / "tasks.jsonl")}}))
    return out


def _browser_load_ms(site: Path, largest: Path) -> dict | None:
    from cuset.analysis.viewer.browser import BrowserUnavailable, headless_chromium

    timing = "const e = performance.getEntriesByType('navigation')[0]; return e.loadEventEnd - e.startTime;"
    try:
        with headless_chromium() as browser:
            out = {}
            for name, page in (("index_html", site / "index.html"), ("largest_sample_page", largest)):
                runs = []
                for _ in range(3):
                    browser.open(page)
                    runs.append(round(browser.driver.execute_script(timing), 1))
                out[name] = {"ms": runs, "median_ms": sorted(runs)[1]}
            # the table library builds the sample table asynchronously: time until its rows
            # are counted (the glue writes #count then), polled every 20 ms
            from selenium.webdriver.support.ui import WebDriverWait

            ready = []
            for _ in range(3):
                browser.open(site / "index.html")
                WebDriverWait(browser.driver, 60, poll_frequency=0.02).until(
                    lambda d: d.find_element("id", "count").text)
                ready.append(round(browser.driver.execute_script("return performance.now();"), 1))
            out["index_table_ready"] = {"ms": ready, "median_ms": sorted(ready)[1]}
            out["table_count_text"] = browser.driver.find_element("id", "count").text
            # the table library pages the rows: the first page's rows are all the DOM holds
            out["rows_on_first_page"] = len(browser.driver.find_elements("css selector", "#sample-table .tabulator-row"))
            root = site.resolve().as_uri() + "/"
            out["requests_outside_site"] = [u for u in browser.requested_urls() if not u.startswith(root)]
            return out
    except BrowserUnavailable as e:
        print(f"browser load time not measured: {e}")
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--samples", type=int, default=3, help="samples per task")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    # measure this checkout's viewer, not whichever cuset the interpreter has installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _record import start_record

    record = start_record()
    from cuset.analysis.viewer.site import build_site

    with tempfile.TemporaryDirectory(prefix="cuset-viewer-bench-") as tmp:
        t0 = time.perf_counter()
        run = write_run(Path(tmp) / "run", args.tasks, args.samples, args.seed)
        inputs_s = time.perf_counter() - t0
        input_bytes = {p.name: p.stat().st_size for p in run.iterdir()}
        print(f"synthetic run: {args.tasks} tasks x {args.samples} samples in {inputs_s:.1f} s (not timed): "
              + ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in input_bytes.items()))
        builds = []
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        for jobs in sorted({1, min(cores, 8)}):
            site = Path(tmp) / f"site-{jobs}"
            cpu0 = os.times()
            summary = build_site([run], site, jobs=jobs)
            cpu1 = os.times()
            cpu_s = (cpu1.user - cpu0.user) + (cpu1.children_user - cpu0.children_user) + \
                    (cpu1.system - cpu0.system) + (cpu1.children_system - cpu0.children_system)
            pages = sorted((site / "s").rglob("*.html"), key=lambda p: p.stat().st_size)
            builds.append({"jobs": jobs, "seconds": round(summary.seconds, 2), "cpu_seconds": round(cpu_s, 2),
                           "n_samples": summary.n_samples, "n_pages": summary.n_pages,
                           "total_mb": round(summary.total_bytes / 1e6, 2),
                           "index_html_mb": round(summary.index_bytes / 1e6, 3),
                           "sample_page_kb": {"median": round(pages[len(pages) // 2].stat().st_size / 1e3, 1),
                                              "largest": round(pages[-1].stat().st_size / 1e3, 1)},
                           "files": sum(1 for p in site.rglob("*") if p.is_file())})
            b = builds[-1]
            print(f"build, {jobs} process(es): {b['seconds']:.1f} s wall ({b['cpu_seconds']:.1f} s CPU), "
                  f"{b['n_pages']} pages, {b['total_mb']:.1f} MB in all, index.html {b['index_html_mb']:.2f} MB, "
                  f"sample page median {b['sample_page_kb']['median']} kB, largest {b['sample_page_kb']['largest']} kB "
                  f"(target <= {TARGET_BUILD_S:.0f} s)")
        site = Path(tmp) / f"site-{builds[-1]['jobs']}"
        largest = max((site / "s").rglob("*.html"), key=lambda p: p.stat().st_size)
        browser = _browser_load_ms(site, largest)
        if browser:
            print(f"headless Chromium load (file://, median of 3): index.html {browser['index_html']['median_ms']} ms "
                  f"(its table ready at {browser['index_table_ready']['median_ms']} ms), "
                  f"largest sample page {browser['largest_sample_page']['median_ms']} ms; "
                  f"table says '{browser['table_count_text']}', {browser['rows_on_first_page']} rows on its first page; "
                  f"requests outside the site: "
                  f"{len(browser['requests_outside_site'])}")
        shutil.rmtree(Path(tmp) / "run", ignore_errors=True)
    record.write({"tasks": args.tasks, "samples_per_task": args.samples, "seed": args.seed,
                  "input_mb": {k: round(v / 1e6, 2) for k, v in input_bytes.items()},
                  "builds": builds, "target_build_s": TARGET_BUILD_S,
                  "meets_target": all(b["seconds"] <= TARGET_BUILD_S for b in builds),
                  "browser_load": browser})


if __name__ == "__main__":
    main()
