"""Run a generated program on the CPU backend's default paths and on the reference, and
compare every kernel's verdict and output bytes.

- *Default*: `CpuBackend()` as the evaluation pipeline uses it (block loops, barrier
  regions, warp regions, region lanes, and the order proof: its forward run carries the
  proof, and a kernel whose launches the runtime proved order-independent is judged on
  that run alone, as the pipeline judges a program whose every launch is proven).
- *Reference*: the same executable with every kernel on the fibers
  (`CpuBackend(block_loops=False, skip_independent_orders=False)`: CUSET_CPU_BLOCK_LOOP=0,
  no proof) and every order run.

A kernel's verdict is the pipeline's (cuset/evaluate/cudabench.py `_run_case`) for a
program running that kernel alone: the first order whose run fails gives the failure's
status; outputs that differ between the orders run give `race`; else `passed`, or
`wrong` when the default's outputs are not the reference's forward outputs (the
reference is the expected output: never a hand-computed value). The kernels of one
program use separate buffers, so a kernel's outputs do not depend on the others.

A disagreement is: verdicts that differ over the deterministic orders (forward and
random), a kernel the proof let skip orders whose reference outputs differ in any order
(parallel included: a proven launch has no data race), or output bytes that differ under
forward or random (the fast paths reproduce the fibers' interleaving exactly there).
`parallel` runs blocks concurrently and is not reproducible: where both sides ran it and
only it makes the verdicts differ, the kernel is counted as `parallel_only`, not as a
disagreement.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from cuset.execute.cpu.backend import CpuBackend
from cuset.execute.cpu.diagnostics import kernel_paths
from cuset.execute.cpu.fuzz.generator import N_BUFFERS, Kernel, Program
from cuset.execute.process import clean_env, run_step
from cuset.execute.result import StepResult

RUN_TIMEOUT_S = 120.0
FALLBACK_NOTE = "all fibers, no order proofs"   # backend.compile's log when the variants did not build
# What the compile log says of a kernel's plan (block_loop.KernelPlan.describe), counted per kernel.
PLAN_MARKERS = ("block loop", "threads innermost", "barrier regions", "warp operation(s)",
                "loop(s) with barriers hoisted", "helpers with barriers inlined", "threads side by side", "fibers")
COMPILE_TIMEOUT_S = 300.0
_PROVEN_RE = re.compile(r"^CUSET-CPU: order-proof: kernel '([^']*)': (\d+) of (\d+) launch(?:es)? independent$", re.M)


@dataclass(frozen=True)
class OrderRun:
    """One thread order of one side: each kernel's outputs, or why its run failed."""

    order: str
    outputs: dict[str, bytes]
    failures: dict[str, str]           # kernel -> status value ("runtime_error", ...) of its failed run
    proven: frozenset[str]             # kernels whose every launch the forward run proved (default side)
    program_skip: bool                 # backend.orders_to_skip skipped the other orders for the whole program
    paths: dict[str, str]              # kernel -> the path it took (diagnostics.kernel_paths)


@dataclass(frozen=True)
class KernelVerdict:
    verdict: str                       # passed | race | wrong | <status of a failed run>
    orders: tuple[str, ...]            # the orders that decided it
    detail: str = ""


@dataclass(frozen=True)
class Disagreement:
    kernel: str
    seed: str
    strict: bool
    what: str                          # "verdict", "proof", "bytes under forward", ...
    default: str                       # the default side's verdict
    reference: str                     # the reference's verdict (all orders)
    detail: str
    features: tuple[str, ...]


@dataclass(frozen=True)
class ProgramCheck:
    kernels: int
    reference: dict[str, str]          # kernel -> reference verdict
    default: dict[str, str]            # kernel -> default verdict
    disagreements: tuple[Disagreement, ...]
    parallel_only: tuple[str, ...]     # kernels whose verdicts differ only through the parallel order
    compile_error: str = ""            # the program did not build (a generator bug: reported, never hidden)
    proven: tuple[str, ...] = ()
    paths: dict[str, str] = dataclasses.field(default_factory=dict)   # default side, forward: kernel -> path
    plans: dict[str, str] = dataclasses.field(default_factory=dict)   # kernel -> its plan in the compile log
    seconds: float = 0.0


class Sides:
    """The two backends of the comparison (workers=2: `parallel` is one of the orders)."""

    def __init__(self, seed: int = 1, workers: int = 2):
        self.default = CpuBackend(seed=seed, workers=workers)
        self.reference = CpuBackend(seed=seed, workers=workers, block_loops=False, skip_independent_orders=False)


def check_program(program: Program, workdir: Path, sides: Sides | None = None) -> ProgramCheck:
    """Compile `program` once, run it on both sides in every order, compare per kernel."""
    started = time.perf_counter()
    sides = sides or Sides()
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    names = [k.name for k in program.kernels]
    compiled = sides.default.compile(program.source(), workdir / "build", COMPILE_TIMEOUT_S)
    if not compiled.ok or FALLBACK_NOTE in compiled.step.stdout:
        why = (f"{compiled.status}: {compiled.detail}" if not compiled.ok else
               "the block-loop variants or the proofs' checked pointers did not compile: every kernel on the fibers")
        return ProgramCheck(len(names), {}, {}, (), (), compile_error=why, seconds=time.perf_counter() - started)
    exe = compiled.executable
    for split in (False, True):
        # A failed run is run again kernel by kernel; then every run is, on both sides: the
        # random orders draw from one stream per process, so a kernel's random-order bytes
        # depend on the launches before it, which must be the same on both sides.
        ref_runs = [_run_order(sides.reference, exe, order, names, workdir / f"ref-{i}", split) for i, order in
                    enumerate(sides.reference.run_orders)]
        def_runs = [_run_order(sides.default, exe, order, names, workdir / f"def-{i}", split) for i, order in
                    enumerate(sides.default.run_orders)]
        if not any(run.failures for run in ref_runs + def_runs):
            break
    disagreements, parallel_only = [], []
    ref_verdicts, def_verdicts = {}, {}
    for k in program.kernels:
        expected = ref_runs[0].outputs.get(k.name)
        ref_all = kernel_verdict(k.name, ref_runs, False, expected)
        proven = k.name in def_runs[0].proven and k.name not in def_runs[0].failures
        def_all = kernel_verdict(k.name, def_runs, proven, expected)
        ref_verdicts[k.name], def_verdicts[k.name] = ref_all.verdict, def_all.verdict
        found = compare_kernel(k, ref_runs, def_runs, ref_all, def_all, proven, expected)
        if found is None and ref_all.verdict != def_all.verdict:
            parallel_only.append(k.name)
        disagreements += [found] if found else []
    shutil.rmtree(workdir / "build", ignore_errors=True)
    return ProgramCheck(len(names), ref_verdicts, def_verdicts, tuple(disagreements), tuple(parallel_only),
                        proven=tuple(n for n in names if n in def_runs[0].proven), paths=dict(def_runs[0].paths),
                        plans=compile_plans(compiled.step.stdout),
                        seconds=time.perf_counter() - started)


def compile_plans(log: str) -> dict[str, str]:
    """kernel -> its plan, from the compile step's `cuset-cpu: kernel paths: k: ...; m: ...` line."""
    line = next((ln for ln in log.splitlines() if ln.startswith("cuset-cpu: kernel paths: ")), "")
    plans = {}
    for part in line.removeprefix("cuset-cpu: kernel paths: ").split("; "):
        name, _, description = part.partition(": ")
        if description:
            plans[name] = description
    return plans


def compare_kernel(k: Kernel, ref_runs: list[OrderRun], def_runs: list[OrderRun], ref_all: KernelVerdict,
                   def_all: KernelVerdict, proven: bool, expected: bytes | None) -> Disagreement | None:
    def found(what: str, detail: str) -> Disagreement:
        return Disagreement(k.name, k.seed, k.strict, what, def_all.verdict, ref_all.verdict, detail,
                            tuple(sorted(k.features)))

    if proven and ref_all.verdict != "passed":
        return found("proof", f"the forward run proved every launch order-independent, but the fibers give "
                              f"{ref_all.verdict} over {', '.join(ref_all.orders)} {ref_all.detail}".strip())
    for ref, dflt in zip(ref_runs[:2], def_runs[:2]):   # forward, random: the same bytes
        r, d = ref.outputs.get(k.name), dflt.outputs.get(k.name)
        if (ref.failures.get(k.name), r) != (dflt.failures.get(k.name), d):
            why = (f"fibers: {ref.failures.get(k.name) or _describe(r)}, default: "
                   f"{dflt.failures.get(k.name) or _describe(d)}")
            if r is not None and d is not None:
                why += f", first differing byte {_first_difference(r, d)}"
            return found(f"bytes under {ref.order}", why)
    ref_det = kernel_verdict(k.name, ref_runs[:2], False, expected)
    def_det = kernel_verdict(k.name, def_runs[:2], proven, expected)
    if ref_det.verdict != def_det.verdict:
        return found("verdict", f"over forward and random: fibers {ref_det.verdict}, default {def_det.verdict}")
    return None


def kernel_verdict(name: str, runs: list[OrderRun], proven: bool, expected: bytes | None) -> KernelVerdict:
    """The pipeline's verdict on one kernel over `runs` (in the backend's order): only the
    first order when the kernel was proven order-independent."""
    used, seen = [], []
    for run in runs[:1] if proven else runs:
        used.append(run.order)
        if name in run.failures:
            return KernelVerdict(run.failures[name], tuple(used), f"(order {run.order})")
        seen.append(run.outputs.get(name))
    if len(set(seen)) > 1:
        return KernelVerdict("race", tuple(used))
    if expected is not None and seen and seen[0] != expected:
        return KernelVerdict("wrong", tuple(used))
    return KernelVerdict("passed", tuple(used))


def _run_order(backend: CpuBackend, exe: Path, order: str, names: list[str], run_dir: Path,
               split: bool = False) -> OrderRun:
    """The whole program in one order; when it fails (or with `split`), each kernel on its
    own (one run per kernel) so that a failure is charged to the kernel that caused it."""
    inv = backend.invocation(exe, order)
    step = _run(inv, run_dir / "all", []) if not split else None
    outputs, failures, diagnostics = {}, {}, []
    if step is not None and _ok(step):
        outputs = {n: _read(run_dir / "all" / f"out_{n}.bin") for n in names}
    else:
        for n in names:
            one = _run(inv, run_dir / n, [n])
            if _ok(one):
                outputs[n] = _read(run_dir / n / f"out_{n}.bin")
            else:
                classified = backend.classify_failure(one)
                failures[n] = ("timeout" if one.timed_out else classified[0].value if classified
                               else "runtime_error")
            diagnostics.append(one.diagnostics or "")
    if step is not None and _ok(step):
        diagnostics.append(step.diagnostics or "")
    skip, _ = backend.orders_to_skip(step, inv) if step is not None and _ok(step) else ((), "")
    said = "\n".join(diagnostics)
    proven = frozenset(m.group(1) for m in _PROVEN_RE.finditer(said)
                       if m.group(2) == m.group(3) and int(m.group(3)) > 0) if inv.secret else frozenset()
    shutil.rmtree(run_dir, ignore_errors=True)
    return OrderRun(order, {n: o for n, o in outputs.items() if o is not None}, failures, proven, bool(skip),
                    kernel_paths(said))


def _run(inv, run_dir: Path, args: list[str]) -> StepResult:
    """One run with the runtime's diagnostics channel, as the pipeline opens it
    (cuset/evaluate/cudabench.py `_run_program`; generated code is ours: no sandbox)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile() as channel:
        fd = channel.fileno()
        env = clean_env({**inv.env, inv.diagnostics_env: str(fd)})
        step = run_step("run", [*inv.argv, *args], cwd=run_dir, timeout=RUN_TIMEOUT_S, env=env, pass_fds=(fd,))
        channel.seek(0)
        said = channel.read()
    return dataclasses.replace(step, diagnostics=said.decode("utf-8", "replace"))


def _ok(step: StepResult) -> bool:
    return step.returncode == 0 and not step.timed_out


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _describe(data: bytes | None) -> str:
    return "no output" if data is None else f"{len(data)} bytes sha256 {hashlib.sha256(data).hexdigest()[:12]}"


def _first_difference(a: bytes, b: bytes) -> str:
    i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    words = max(1, len(a) // 4 // N_BUFFERS)   # the file holds the kernel's buffers a, b, c, acc in turn
    return f"{i}: {'abcd'[min(i // 4 // words, N_BUFFERS - 1)].replace('d', 'acc')}[{i // 4 % words}]"
