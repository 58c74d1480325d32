"""Time the bundled KernelBench answers on a GPU, KernelBench's way (perf=true): each
task's correct answer is verified on the GPU backend, then timed against PyTorch eager and
torch.compile (warm-up, trials, L2 flushed before each trial, CUDA events; reference and
answer in separate sandboxed runs), with the static reward-hack rules on every answer.
Prints one line per task and the run's speedups and fast_p; writes
bench/results/kernel_perf.json.

    .venv/bin/python bench/kernel_perf.py [--trials 100] [--warmup 3] [--budget-s 420] [--no-compile]

Needs an NVIDIA GPU (the timing is GPU time): on a machine without one it refuses and
exits 2 rather than report a CPU time. A task that would start after --budget-s seconds
is skipped (default 420: the run ends within 8 minutes on one GPU). CUDABench programs are
not timed here: their Nsight Compute profiling is not wired into the evaluation yet
(the roofline arithmetic is cuset.execute.perf.ncu), and this script says so.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / "benchmarks" / "kernelbench"
NO_GPU = ("bench/kernel_perf.py times kernels on a GPU and none answers here (`nvidia-smi -L` fails or is "
          "missing): no timing is taken on the CPU; run it on a machine with an NVIDIA GPU")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=100, help="timed forward calls per side")
    ap.add_argument("--warmup", type=int, default=3, help="untimed forward calls before the trials")
    ap.add_argument("--no-compile", action="store_true", help="do not time torch.compile(Model)")
    ap.add_argument("--budget-s", type=float, default=420.0, help="no task starts after this many seconds")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from cuset.execute.registry import gpu_available

    if not gpu_available():
        print(NO_GPU, file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT / "bench"))
    from _record import start_record

    record = start_record()
    from cuset.evaluate.kernelbench_hacks import check_answer
    from cuset.evaluate.perf.measure import measure
    from cuset.evaluate.perf.options import PerfOptions
    from cuset.evaluate.perf.summary import perf_summary
    from cuset.evaluate.pipeline import EvalOptions, Timeouts, evaluate_program
    from cuset.evaluate.records import SampleResult
    from cuset.execute.registry import get_backend
    from cuset.tasks import load_tasks

    tasks, _ = load_tasks(BUNDLE, strict=True)
    backend = get_backend("gpu")
    opts = EvalOptions(timeouts=Timeouts(compile=600, run=120))
    perf_opts = PerfOptions(warmup=args.warmup, trials=args.trials, compile_baseline=not args.no_compile)
    t0 = time.perf_counter()
    by_task, rows, skipped = {}, [], []
    for task in tasks:
        if time.perf_counter() - t0 > args.budget_s:
            skipped.append(task.id)
            continue
        code = (BUNDLE / "solutions" / f"{task.id}.correct.py").read_text()
        r = evaluate_program(task, code, backend=backend, options=opts)
        r = dataclasses.replace(r, perf=measure(task, code, r, backend.name, perf_opts))
        s = SampleResult.from_exec(r, task_id=task.id, task_name=task.task_name, family=task.family_name, sample=0,
                                   compiled=True, ran_ok=r.passed, n_tokens=None, code_sha256=None)
        by_task[task.id] = [s]
        p = r.perf or {}
        speed = (f"{p['candidate_ms']['mean']:.4f} ms, eager {p['eager_ms']['mean']:.4f} ms, "
                 f"{p['speedup_eager']:.2f}x" + (f", vs compile {p['speedup_compile']:.2f}x"
                                                 if p.get("speedup_compile") else "")
                 if p.get("status") == "measured" else f"{p.get('status')}: {p.get('reason', '')}")
        hacks = [str(f) for f in check_answer(code, task.reference_src)]
        print(f"{task.id:<26} {r.status.value:<8} {speed}" + (f"  hack {hacks}" if hacks else ""), flush=True)
        rows.append({"task": task.id, "status": r.status.value, "hack": hacks, "perf": r.perf})
    summary = perf_summary(by_task, perf_opts.suspect_speedup) or {}
    kb = summary.get("kernelbench", {})
    if kb:
        print(f"\nspeedup over eager: median {kb['speedup_eager']['median']}, geomean {kb['speedup_eager']['geomean']}"
              f"; fast_p {kb['fast_p']}; vs torch.compile fast_p {kb['fast_p_compile']}")
    if skipped:
        print(f"skipped after the {args.budget_s:g} s budget: {', '.join(skipped)}")
    print("CUDABench: not timed (Nsight Compute profiling is not wired into the evaluation yet)")
    record.write({"trials": args.trials, "warmup": args.warmup, "compile_baseline": not args.no_compile,
                  "seconds": time.perf_counter() - t0, "skipped": skipped, "summary": summary, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
