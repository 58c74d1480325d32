"""Time and profile the bundled suites on a GPU (perf=true), within a hard time budget.

    .venv/bin/python bench/kernel_perf.py                     # both suites, 7.5 minutes at most
    .venv/bin/python bench/kernel_perf.py --suites kernelbench --trials 100 --budget-s 450

- KernelBench (suites/kernelbench): each task's correct answer is verified on the GPU
  backend, then timed KernelBench's way against PyTorch eager and torch.compile (warm-up,
  trials, L2 flushed before each trial, CUDA events; reference and answer in separate
  sandboxed runs), with the static reward-hack rules on every answer;
- CUDABench (suites/cuset-bench.jsonl): each task's reference program is verified,
  then profiled under Nsight Compute (`ncu --metrics ... --csv`) for the official
  roofline score, BU and CE; without `ncu` every row says "ncu not installed".

Prints one line per task and each suite's summary (speedups and fast_p; mean roofline
score, BU, CE); writes bench/results/kernel_perf.json.

Under 8 minutes by design: the suites run one after the other, each in a worker process
with its own share of `--budget-s` (default 450 s: KernelBench 60 %, CUDABench the rest,
what one leaves unused goes to the next). At the end of its share a worker is stopped
(SIGTERM, then SIGKILL 15 s later; its sandboxed steps die with it) and the tasks it did
not finish are listed as "not finished within the budget", never guessed. The per-step
timeouts are bounded too (--step-timeout), so one slow task cannot take a whole share.
Worst case: the budget + 2 x 15 s + start-up, i.e. under 8 minutes with the default.

Needs an NVIDIA GPU (the timing is GPU time): on a machine without one it says so and
exits 2 rather than report a CPU time (no traceback).
"""

from __future__ import annotations

# What this script measures (timing and profiling in the evaluation path): a record in bench/results is stale once a commit
# after its own touches one of these paths (docs/tools/perf_table.py).
MEASURES = ("cuset/execute", "cuset/evaluate")

import argparse
import json
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / "suites" / "kernelbench"
CUDABENCH = ROOT / "suites" / "cuset-bench.jsonl"
SUITES = ("kernelbench", "cudabench")
SHARE = {"kernelbench": 0.6, "cudabench": 1.0}   # of the budget left when the suite starts
STOP_GRACE_S = 15.0
NO_GPU = ("bench/kernel_perf.py times kernels on a GPU and none answers here (`nvidia-smi -L` fails or is "
          "missing): no timing is taken on the CPU; run it on a machine with an NVIDIA GPU")
ROW = "ROW "   # a worker's result lines start with this (anything else it prints is passed through)


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suites", default=",".join(SUITES), help="comma-separated: kernelbench, cudabench")
    ap.add_argument("--trials", type=int, default=100, help="KernelBench: timed forward calls per side")
    ap.add_argument("--warmup", type=int, default=3, help="KernelBench: untimed forward calls before the trials")
    ap.add_argument("--no-compile", action="store_true", help="KernelBench: do not time torch.compile(Model)")
    ap.add_argument("--budget-s", type=float, default=450.0, help="hard limit of the whole run's work (seconds)")
    ap.add_argument("--step-timeout", type=float, default=120.0,
                    help="seconds for any one step (a build, a run, a timing run, the run under ncu)")
    ap.add_argument("--cudabench-tasks", type=int, default=0,
                    help="CUDABench: profile only the first N tasks (0 = all that fit in the budget)")
    ap.add_argument("--worker", choices=SUITES, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    unknown = set(args.suites) - set(SUITES)
    if unknown:
        ap.error(f"--suites: unknown {', '.join(sorted(unknown))} (choose from {', '.join(SUITES)})")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    sys.path.insert(0, str(ROOT))
    if args.worker:
        return worker(args)
    from cuset.execute.registry import gpu_available

    if not gpu_available():
        print(NO_GPU, file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT / "bench"))
    from _record import start_record

    record = start_record()
    t0 = time.monotonic()
    deadline = t0 + args.budget_s
    rows, suites = [], {}
    for i, suite in enumerate(args.suites):
        left = deadline - time.monotonic()
        share = left * (SHARE[suite] if i < len(args.suites) - 1 else 1.0)
        got, not_reached, stopped = run_suite(worker_command(suite, argv), share)
        rows += got
        suites[suite] = {"seconds_allowed": share, "stopped_at_budget": stopped, "not_reached": not_reached,
                         "done": len(got)}
        if not_reached:
            print(f"{suite}: not finished within the budget ({len(not_reached)}): "
                  f"{', '.join(map(str, not_reached))}")
    summary = summarize(rows)
    for kind, s in summary.items():
        print(f"\n{kind}: {json.dumps(s)}")
    record.write({"trials": args.trials, "warmup": args.warmup, "compile_baseline": not args.no_compile,
                  "budget_s": args.budget_s, "seconds": time.monotonic() - t0, "suites": suites,
                  "summary": summary, "rows": rows})
    return 0


def worker_command(suite: str, argv: list[str]) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), *argv, "--worker", suite]


def run_suite(command: list[str], seconds: float) -> tuple[list[dict], list, bool]:
    """Run one suite's worker for at most `seconds`: (its rows, the tasks it did not finish,
    whether the budget stopped it). The worker prints `ROW {"planned": [...]}` first, then
    one `ROW {...}` per finished task (with a printable "line")."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, bufsize=1)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout] + [lines.put(None)], daemon=True).start()
    end = time.monotonic() + seconds
    rows, planned, stopped = [], [], False
    while True:
        try:
            line = lines.get(timeout=max(0.0, end - time.monotonic()))
        except queue.Empty:
            stopped = True
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            break
        if line is None:
            break
        if line.startswith(ROW):
            row = json.loads(line[len(ROW):])
            if "planned" in row:
                planned = row["planned"]
                continue
            rows.append(row)
            print(row["line"], flush=True)
        else:
            print(line, end="", flush=True)
    proc.wait()
    done = {r["task"] for r in rows}
    return rows, [t for t in planned if t not in done], stopped


def emit(obj: dict) -> None:
    print(ROW + json.dumps(obj), flush=True)


def worker(args) -> int:
    """One suite, one JSON row per task on stdout. SIGTERM (the budget) ends it cleanly."""
    def stop(*_):
        raise SystemExit(3)

    signal.signal(signal.SIGTERM, stop)
    return (kernelbench_worker if args.worker == "kernelbench" else cudabench_worker)(args)


def perf_options(args):
    from cuset.evaluate.perf.options import PerfOptions

    return PerfOptions(warmup=args.warmup, trials=args.trials, compile_baseline=not args.no_compile,
                       run_timeout=args.step_timeout, step_timeout=args.step_timeout,
                       profile_timeout=args.step_timeout)


def eval_options(args):
    from cuset.evaluate.options import EvalOptions, Timeouts

    t = args.step_timeout
    return EvalOptions(timeouts=Timeouts(gen=t, compile=t, run=t, compare=t))


def kernelbench_worker(args) -> int:
    from cuset.evaluate.kernelbench_hacks import check_answer
    from cuset.evaluate.perf.measure import measure
    from cuset.evaluate.pipeline import evaluate_program
    from cuset.execute.registry import get_backend
    from cuset.tasks import load_tasks

    tasks, _ = load_tasks(BUNDLE, strict=True)
    emit({"planned": [t.id for t in tasks]})
    backend, opts, perf_opts = get_backend("gpu"), eval_options(args), perf_options(args)
    codes = {t.id: (BUNDLE / "solutions" / f"{t.id}.correct.py").read_text() for t in tasks}
    ext_cache = prebuild_extensions(codes, args.step_timeout)
    for task in tasks:
        code = codes[task.id]
        started = time.monotonic()
        r = evaluate_program(task, code, backend=backend, options=opts, cache=ext_cache)
        verified = time.monotonic()
        perf = measure(task, code, r, backend, perf_opts, eval_options=opts, cache=ext_cache)
        seconds = _seconds(started, verified)
        hacks = [str(f) for f in check_answer(code, task.reference_src)]
        speed = (f"{perf['candidate_ms']['mean']:.4f} ms, eager {perf['eager_ms']['mean']:.4f} ms, "
                 f"{perf['speedup_eager']:.2f}x" + (f", vs compile {perf['speedup_compile']:.2f}x"
                                                    if perf.get("speedup_compile") else "")
                 if perf.get("status") == "measured" else f"{perf.get('status')}: {perf.get('reason', '')}")
        emit({"task": task.id, "task_name": task.task_name, "kind": "kernelbench", "status": r.status.value,
              "detail": r.detail[:300], "hack": hacks, "perf": perf, "seconds": seconds,
              "line": f"{task.id:<26} {r.status.value:<8} {speed}" + (f"  hack {hacks}" if hacks else "")
                      + f"  [{seconds['verify']:.0f} + {seconds['perf']:.0f} s]"})
    return 0


def prebuild_extensions(codes: dict[str, str], seconds: float):
    """Every answer's load_inline extensions built side by side on every core, before any
    answer is verified or timed (each answer within `seconds`); the verifications and timing
    runs then load them from the extension cache (cuset.execute.kernelbench.extension_cache).
    Returns that cache (open for the worker's life)."""
    from cuset.execute.compile_cache import CompileCache
    from cuset.execute.kernelbench.budget import MAX_STATIC_BUILDS
    from cuset.execute.kernelbench.extension_cache import extension_builder, prebuild
    from cuset.execute.kernelbench.verify import extract_specs

    cache = CompileCache(extension_builder("gpu"), timeout=seconds)
    specs = [extract_specs(code, strict=True)[:MAX_STATIC_BUILDS] for code in codes.values()]
    t0 = time.monotonic()
    over = prebuild(cache, specs, seconds)
    print(f"kernelbench: {sum(map(len, specs))} extensions of {len(codes)} answers built side by side in "
          f"{time.monotonic() - t0:.0f} s ({cache.misses} built, {cache.hits} cached)"
          + "".join(f"\n  {task}: {why}" for task, why in zip(codes, over) if why), flush=True)
    return cache


def _seconds(started: float, verified: float) -> dict:
    """A task's wall seconds: its verification (builds and runs), then its timing or profiling.
    The first GPU runs could not tell which of the two spent a KernelBench answer's minute."""
    return {"verify": verified - started, "perf": time.monotonic() - verified}


def cudabench_worker(args) -> int:
    from cuset.evaluate.perf.measure import measure
    from cuset.evaluate.pipeline import evaluate_program
    from cuset.evaluate.workspace import Workspace
    from cuset.execute.compile_cache import CompileCache
    from cuset.execute.registry import get_backend
    from cuset.tasks import load_tasks

    tasks, _ = load_tasks(CUDABENCH, strict=True)
    if args.cudabench_tasks:
        tasks = tasks[:args.cudabench_tasks]
    emit({"planned": [t.id for t in tasks]})
    backend, opts, perf_opts = get_backend("gpu"), eval_options(args), perf_options(args)
    with Workspace(gen_timeout=args.step_timeout) as ws, CompileCache(backend, timeout=args.step_timeout) as cache:
        for task in tasks:
            started = time.monotonic()
            r = evaluate_program(task, task.bench_cu, backend=backend, cache=cache, workspace=ws, options=opts)
            verified = time.monotonic()
            perf = measure(task, task.bench_cu, r, backend, perf_opts, eval_options=opts, cache=cache, workspace=ws)
            seconds = _seconds(started, verified)
            roof = perf.get("roofline") or {}
            what = (f"score {roof['score']:.3f}, BU {roof['bandwidth_utilisation']:.3f}, "
                    f"CE {roof['compute_efficiency']:.3f} ({perf['launches']} launches)"
                    if perf.get("status") == "measured" else f"{perf.get('status')}: {perf.get('reason', '')}")
            emit({"task": task.id, "task_name": task.task_name, "kind": "cudabench", "status": r.status.value,
                  "detail": r.detail[:300], "hack": [], "perf": perf, "seconds": seconds,
                  "line": f"{task.id:<4} {task.task_name[:30]:<30} {r.status.value:<8} {what}"
                          f"  [{seconds['verify']:.0f} + {seconds['perf']:.0f} s]"})
    return 0


def summarize(rows: list[dict]) -> dict:
    """The perf section of the rows (cuset.evaluate.perf.summary), per benchmark."""
    from cuset.evaluate.perf.summary import perf_summary
    from cuset.evaluate.records import SampleResult
    from cuset.execute.result import Status

    by_task = {r["task"]: [SampleResult(r["task"], r["task_name"], r["kind"], 0, Status(r["status"]),
                                        passed=r["status"] == "passed", hack=tuple(r["hack"]), perf=r["perf"])]
               for r in rows}
    s = perf_summary(by_task) or {}
    return {k: s[k] for k in ("kernelbench", "cudabench") if k in s} or {"measured": False,
                                                                        "reason": s.get("reason", "")}


if __name__ == "__main__":
    sys.exit(main())
