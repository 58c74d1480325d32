"""Evaluation throughput: `cuset eval`'s pipeline next to an official-harness-style loop.

Workload: 10 tasks (y = a*x + b over 4,096 floats, a and b per task) and 100 distinct
CUDA programs (10 per task: different block sizes and formulations, about one in
five wrong), each submitted once: distinct programs, so no cache can skip work the
harness-style loop does. `--repeats 3` submits each program three times (duplicates
exist when a model repeats itself; cuset compiles and judges them once).

Compared, in one run, on the same machine, with the same execution backend
(default: the CPU backend, since nothing CUDA runs without a GPU here), in two pairs
that do the same compile work on both sides: compilation judged by the backend's own
compiler (g++ on the CPU backend), and judged by nvcc as in the official harness
(`nvcc kernel.cu -o kernel`, no flags; without a GPU the backend's build then runs the
program). nvcc judging is what `cuset eval` does by default wherever nvcc is installed.
- harness-style: sequential and uncached, like the official CUDABench evaluator:
  per sample, exec() gen.py in-process in a fresh work dir, compile the program
  (no cache), run it once with a 60 s timeout (no sandbox), exec() compare.py
  in-process, functional iff its output has no `F`;
- cuset cold: `evaluate_file` with empty compile and data caches, one worker per core,
  sandboxed runs (every thread order of the backend), gen.py/compare.py as subprocesses;
- cuset warm: the same again into a new results file, caches now warm.
Targets on 2 cores: cold >= 1.8x and warm >= 10x faster than harness-style.

`--executor ray` instead times `cuset eval` with executor=local and executor=ray side by
side (cold caches each, then warm), on a local Ray cluster started before the clock
(its start-up is printed apart): Ray's overhead, target within 15% of local on 2 cores.

`--task-scripts` instead times `cuset eval` with the tasks' gen.py and compare.py in the
sandbox (the default: a fresh interpreter in its own dir per script) and trusted
(`execution.sandbox.trust_task_scripts=true`: forks of a warm interpreter, unsandboxed)
side by side, cold caches each then warm, compilation judged by the backend: what
sandboxing a third-party benchmark's scripts costs per honest sample (issue 59's budget:
10% of the evaluation's time per honest sample).

    .venv/bin/python bench/eval_throughput.py [--distinct 100] [--repeats 1] [--backend cpu] [--executor ray | --task-scripts]
"""

from __future__ import annotations

# What this script measures (`cuset eval`'s pipeline: compile cache, runner, sandbox, CPU backend): a record in bench/results is stale once a commit
# after its own touches one of these paths (docs/tools/perf_table.py).
MEASURES = ("cuset/execute", "cuset/evaluate")

import argparse
import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

TARGET_COLD, TARGET_WARM = 1.8, 10.0
N = 4096

GEN_PY = """\
import os
import numpy as np
rng = np.random.default_rng({seed} + int(os.environ.get("CUSET_CASE", "0")))
x = rng.standard_normal({n}).astype(np.float32)
os.makedirs("data", exist_ok=True)
x.tofile("data/x.bin")
({a} * x + {b}).astype(np.float32).tofile("data/y_ref.bin")
"""

COMPARE_PY = """\
import numpy as np
y = np.fromfile("data/y.bin", dtype=np.float32)
ref = np.fromfile("data/y_ref.bin", dtype=np.float32)
print("T" if y.shape == ref.shape and np.allclose(y, ref, atol=1e-4) else "F")
"""

PROGRAM = r"""#include <cstdio>
#include <cuda_runtime.h>
// variant {variant}
__global__ void affine(const float* __restrict__ x, float* __restrict__ y, int n) {{
    {loop}
}}
int main() {{
    const int n = {n};
    static float hx[n], hy[n];
    FILE* f = fopen("data/x.bin", "rb");
    if (!f || fread(hx, sizeof(float), n, f) != n) {{ fprintf(stderr, "cannot read input\n"); return 1; }}
    fclose(f);
    float *dx, *dy;
    cudaMalloc(&dx, n * sizeof(float));
    cudaMalloc(&dy, n * sizeof(float));
    cudaMemcpy(dx, hx, n * sizeof(float), cudaMemcpyHostToDevice);
    const int block = {block};
    affine<<<{grid}, block>>>(dx, dy, n);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {{ fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(e)); return 1; }}
    cudaMemcpy(hy, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
    FILE* g = fopen("data/y.bin", "wb");
    fwrite(hy, sizeof(float), n, g);
    fclose(g);
    cudaFree(dx); cudaFree(dy);
    return 0;
}}
"""

STRIDED = "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = {expr};"
ONE_PER_THREAD = "int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = {expr};"


def make_tasks_and_programs(distinct: int):
    from cuset.tasks import Task, TensorSpec

    n_tasks = max(1, distinct // 10)
    tasks, programs = [], []
    for t in range(n_tasks):
        a, b = 1.5 + t, -0.25 * t
        tasks.append(Task(
            id=t, task_name=f"Affine_{t}", task_description=f"Compute the Affine_{t} kernel on GPU using CUDA.",
            inputs=(TensorSpec("x", "float32", f"({N},)"),), outputs=(TensorSpec("y", "float32", f"({N},)"),),
            gpu="unknown", bench_cu="", gen_py=GEN_PY.format(seed=t, n=N, a=a, b=b), compare_py=COMPARE_PY,
            level1_prompt=f"y = {a} * x + {b}", level2_prompt="affine", level3_prompt=f"Affine_{t}", family="affine"))
    for v in range(distinct):
        t = v % n_tasks
        a, b = 1.5 + t, -0.25 * t
        wrong = v % 5 == 4
        expr = f"{a}f * x[i] + {b + (1.0 if wrong else 0.0)}f"
        block = (32, 64, 128, 256, 512)[v % 5]
        if v % 2:
            loop, grid = STRIDED.format(expr=expr), f"{1 + v % 7}"
        else:
            loop, grid = ONE_PER_THREAD.format(expr=expr), "(n + block - 1) / block"
        programs.append((t, PROGRAM.format(variant=v, loop=loop, n=N, block=block, grid=grid)))
    return tasks, programs


def harness_style(tasks, samples, backend, workdir: Path) -> tuple[float, int]:
    """Sequential, uncached, in-process gen/compare, as the official evaluator does."""
    by_id = {t.id: t for t in tasks}
    passed = 0
    cwd = os.getcwd()
    start = time.perf_counter()
    for k, (task_id, code) in enumerate(samples):
        task = by_id[task_id]
        work = workdir / f"s{k}"
        (work / "data").mkdir(parents=True)
        try:
            os.chdir(work)
            exec(compile(task.gen_py, "gen.py", "exec"), {"__name__": "__main__"})
            outcome = backend.compile(code, work, 60.0)
            if not outcome.ok:
                continue
            inv = backend.invocation(outcome.executable, backend.run_orders[0])
            try:
                run = subprocess.run(inv.argv, cwd=work, env={**os.environ, **inv.env}, capture_output=True, timeout=60)
            except subprocess.TimeoutExpired:
                continue
            if run.returncode != 0:
                continue
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                exec(compile(task.compare_py, "compare.py", "exec"), {"__name__": "__main__"})
            passed += "F" not in buf.getvalue()
        finally:
            os.chdir(cwd)
            shutil.rmtree(work, ignore_errors=True)
    return time.perf_counter() - start, passed


def cuset_run(tasks, gens_path: Path, out: Path, cache: Path, backend, executor: str = "local",
              compile_judge: str = "auto", trust_task_scripts: bool = False) -> tuple[float, int, dict]:
    from cuset.evaluate import EvalConfig, evaluate_file
    from cuset.evaluate.config import ExecutionConfig, SandboxConfig

    cfg = EvalConfig(ExecutionConfig(backend=backend.name, executor=executor, compile_judge=compile_judge,
                                     sandbox=SandboxConfig(trust_task_scripts=trust_task_scripts)),
                     cache_dir=str(cache), progress=True)
    start = time.perf_counter()
    summary = evaluate_file(tasks, gens_path, out, cfg, backend=backend)
    seconds = time.perf_counter() - start
    return seconds, summary.overall["statuses"].get("passed", 0), summary.meta["compile_cache"]


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from cuset.evaluate.config import ExecutionConfig
    from cuset.evaluate.runner import compile_judge_of
    from cuset.execute.nvcc_checked import NvccCheckedBackend
    from cuset.generate.records import GenerationRecord, save_generations

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--distinct", type=int, default=100, help="distinct programs")
    ap.add_argument("--repeats", type=int, default=1, help="times each program is submitted (default: once)")
    ap.add_argument("--backend", default="cpu", help="execution backend: cpu, gpu or auto")
    ap.add_argument("--skip-harness", action="store_true", help="only time cuset (no side-by-side ratio)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--executor", choices=("local", "ray"), default="local",
                      help="ray: time executor=ray next to executor=local instead of the harness comparison")
    mode.add_argument("--task-scripts", action="store_true",
                      help="time the tasks' scripts sandboxed vs trusted instead of the harness comparison")
    args = ap.parse_args()
    from _record import start_record

    record = start_record(variant="ray" if args.executor == "ray" else "task-scripts" if args.task_scripts else "")
    if args.executor == "ray":
        return ray_overhead(args, record)
    if args.task_scripts:
        return task_script_overhead(args, record)

    # Two pairs, each doing the same compile work on both sides: the backend's own
    # compiler (g++ on the CPU backend), and nvcc judging compilation as the official
    # harness does (`cuset eval`'s default wherever nvcc is installed).
    pairs = [("backend", ExecutionConfig(backend=args.backend, compile_judge="backend").make_backend())]
    if args.backend != "gpu" and shutil.which("nvcc"):
        pairs.append(("nvcc", ExecutionConfig(backend=args.backend, compile_judge="nvcc").make_backend(compat=True)))
    tasks, programs = make_tasks_and_programs(args.distinct)
    samples = [(t, code) for r in range(args.repeats) for t, code in programs]  # duplicates far apart
    root = Path(tempfile.mkdtemp(prefix="cuset-bench-eval-"))
    rows = []
    results = {"samples": len(samples), "distinct_programs": len(programs), "tasks": len(tasks),
               "cores": os.cpu_count(), "backend": args.backend, "pairs": []}
    try:
        gens = [GenerationRecord(t, f"Affine_{t}", k, "bench", 1, f"```cuda\n{code}```", code, len(code) // 4, "stop", 0.0)
                for k, (t, code) in enumerate(samples)]
        # One sample index per submission: task_id + running index keeps keys unique.
        save_generations(root / "gens.jsonl", gens)
        print(f"{len(samples)} samples, {len(programs)} distinct programs, {len(tasks)} tasks, {os.cpu_count()} cores, "
              f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        for judge, backend in pairs:
            # Freeze the compile-cache key for this run: in a shared working tree the CPU
            # runtime's sources may change during a long bench, which would (rightly) turn
            # every warm lookup into a miss and measure nothing.
            frozen = backend.fingerprint()
            backend.fingerprint = lambda frozen=frozen: frozen
            label = compile_judge_of(backend)
            print(f"\n== compilation judged by {label}: backend {backend.name} ({frozen})")
            cache, out = root / f"cache-{judge}", root / judge
            cold, cold_pass, cold_cache = cuset_run(tasks, root / "gens.jsonl", out / "cold.jsonl", cache, backend)
            print(f"cuset cold : {cold:8.1f} s  passed {cold_pass}  compile cache {cold_cache}")
            warm, warm_pass, warm_cache = cuset_run(tasks, root / "gens.jsonl", out / "warm.jsonl", cache, backend)
            print(f"cuset warm : {warm:8.1f} s  passed {warm_pass}  compile cache {warm_cache}")
            pair = {"compile_judge": label, "backend_fingerprint": frozen, "cold_s": cold, "cold_passed": cold_pass,
                    "cold_compile_cache": cold_cache, "warm_s": warm, "warm_passed": warm_pass,
                    "warm_compile_cache": warm_cache}
            results["pairs"].append(pair)
            if args.skip_harness:
                continue
            base, base_pass = harness_style(tasks, samples, backend, root / f"harness-{judge}")
            print(f"harness    : {base:8.1f} s  passed {base_pass}")
            if base_pass != cold_pass:
                print(f"note: verdicts differ (harness {base_pass} passed, cuset {cold_pass}); cuset also runs every "
                      f"thread order and checks outputs were written by the run")
            rows.append((label, base, cold, warm))
            pair.update({"harness_s": base, "harness_passed": base_pass, "cold_speedup": base / cold,
                         "warm_speedup": base / warm, "verdicts_agree": base_pass == cold_pass})
        if not rows:
            record.write(results)
            return
        print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"{'compilation judged by':34s}{'harness s':>10s}{'cold s':>8s}{'warm s':>8s}{'cold x':>8s}{'warm x':>8s}"
              f"   targets {TARGET_COLD:g}x / {TARGET_WARM:g}x")
        for label, base, cold, warm in rows:
            verdict = "ok" if base / cold >= TARGET_COLD and base / warm >= TARGET_WARM else "MISSED"
            print(f"{label:34s}{base:10.1f}{cold:8.1f}{warm:8.1f}{base / cold:8.2f}{base / warm:8.2f}   {verdict}")
            next(p for p in results["pairs"] if p["compile_judge"] == label)["verdict"] = verdict
        results["targets"] = {"cold_speedup": TARGET_COLD, "warm_speedup": TARGET_WARM}
        record.write(results)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _saved_samples(args, root: Path):
    """The workload's tasks and samples, the samples saved as root/gens.jsonl."""
    from cuset.generate.records import GenerationRecord, save_generations

    tasks, programs = make_tasks_and_programs(args.distinct)
    samples = [(t, code) for r in range(args.repeats) for t, code in programs]
    save_generations(root / "gens.jsonl", [
        GenerationRecord(t, f"Affine_{t}", k, "bench", 1, f"```cuda\n{code}```", code, len(code) // 4, "stop", 0.0)
        for k, (t, code) in enumerate(samples)])
    return tasks, programs, samples


def _side_by_side(args, prefix: str, key: str, sides: dict[str, dict], before: Callable[[], dict] = dict) -> dict:
    """`cuset eval` of the workload once per side (its cuset_run options, its own caches), cold then
    warm, compilation judged by the backend; `before()` runs once the samples are saved (its fields
    join the result). Returns {"samples", ..., "runs", "times": {(side, phase): s}}."""
    from cuset.evaluate.config import ExecutionConfig

    backend = ExecutionConfig(backend=args.backend, compile_judge="backend").make_backend()
    root = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        tasks, programs, samples = _saved_samples(args, root)
        print(f"{len(samples)} samples, {len(programs)} distinct programs, {os.cpu_count()} cores, compilation judged "
              f"by the backend, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        extra = before()
        times, runs = {}, []
        for side, options in sides.items():
            cache = root / f"cache-{side}"
            for phase in ("cold", "warm"):
                sec, passed, cc = cuset_run(tasks, root / "gens.jsonl", root / side / f"{phase}.jsonl", cache,
                                            backend, compile_judge="backend", **options)
                times[side, phase] = sec
                runs.append({key: side, "phase": phase, "seconds": sec, "passed": passed,
                             "per_sample_s": sec / len(samples), "compile_cache": cc})
                print(f"{side:9s} {phase}: {sec:7.1f} s  ({sec / len(samples):.3f} s a sample)  passed {passed}  "
                      f"compile cache {cc}")
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return {"samples": len(samples), "distinct_programs": len(programs), "tasks": len(tasks),
                "cores": os.cpu_count(), "backend": args.backend, **extra, "runs": runs, "times": times}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _ratios(times: dict, over: str, under: str, target: float) -> dict:
    """{phase: times[over] / times[under]} for cold and warm, each printed against `target`."""
    ratios = {}
    for phase in ("cold", "warm"):
        ratio = ratios[phase] = times[over, phase] / times[under, phase]
        print(f"{over} / {under}, {phase}: {ratio:.2f}x   target <= {target:.2f}x   "
              f"{'ok' if ratio <= target else 'MISSED'}")
    return ratios


def task_script_overhead(args, record) -> None:
    """cuset eval with the tasks' scripts sandboxed and trusted, cold then warm, on the same samples."""
    result = _side_by_side(args, "cuset-bench-scripts-", "scripts",
                           {"sandboxed": {"trust_task_scripts": False}, "trusted": {"trust_task_scripts": True}})
    times = result.pop("times")
    record.write({**result, "sandboxed_over_trusted": _ratios(times, "sandboxed", "trusted", 1.10),
                  "verdicts_agree": len({r["passed"] for r in result["runs"]}) == 1, "target_ratio": 1.10})


def ray_overhead(args, record) -> None:
    """cuset eval with executor=local and executor=ray, cold then warm, on the same samples."""
    import ray

    def start_ray() -> dict:
        t = time.perf_counter()
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
        startup = time.perf_counter() - t
        print(f"ray start-up (not in the times below): {startup:.1f} s")
        return {"ray_startup_s": startup}

    try:
        result = _side_by_side(args, "cuset-bench-ray-", "executor",
                               {"local": {"executor": "local"}, "ray": {"executor": "ray"}}, before=start_ray)
    finally:
        ray.shutdown()
    times = result.pop("times")
    record.write({**result, "ray_over_local": _ratios(times, "ray", "local", 1.15), "target_ratio": 1.15})

if __name__ == "__main__":
    main()
