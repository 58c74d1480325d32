"""Time one passing KernelBench answer on the GPU, KernelBench's way, inside the sandbox.

    perf = time_kernelbench(task, code, options=PerfOptions(), sandbox=policy)
    perf["speedup_eager"]

Two sandboxed runs of cuset/execute/perf/kb_timing_harness.py, each with the GPU
devices, its own run dir and its own timeout (`PerfOptions.run_timeout`):

1. the reference alone: inputs of seed `seed` (and of `seed + 1`) written for the
   candidate, its outputs kept for the parent, eager (and torch.compile) forward timed:
   warm-up, trials, the two input sets alternated in place and the L2 flushed before each
   trial, CUDA events (cuset.execute.perf.timing; kb_timing_harness.py says why);
2. the answer alone on copies of those inputs, timed the same way, the outputs of its
   last timed forward written. Its `load_inline` calls that the parent builds (those
   torch's build makes exactly) come from the extension cache, where its verification
   left them (extension_cache: checked copies), so the timing run compiles nothing it
   need not; any other call builds in the run, as torch does.

The parent then re-checks correctness on the timed inputs (compare.judge with the
task's tolerances: a forward that is fast because it computes something else is
`failed`) and reads the answer's times as claims (cuset.execute.perf.claims: exact
count, finite, >= 1 us each, their sum within the parent's own wall clock of the
run); what it cannot believe gives `unbelievable` and no speedup.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cuset.evaluate.perf.options import PerfOptions
from cuset.evaluate.perf.records import FAILED, UNBELIEVABLE, kernelbench_measured
from cuset.execute.compile_cache import CompileCache
from cuset.execute.kernelbench import claims as kb_claims
from cuset.execute.kernelbench.budget import MAX_STATIC_BUILDS, BuildBudget
from cuset.execute.kernelbench.extension_cache import builds_extensions, extension_builder, place_extensions
from cuset.execute.kernelbench.verify import extract_specs
from cuset.execute.kernelbench.compare import BadOutput, judge, read_files
from cuset.execute.perf import timing
from cuset.execute.perf.claims import UnbelievableTiming, checked_times
from cuset.execute.result import printable
from cuset.execute.sandbox import SandboxPolicy, run_sandboxed
from cuset.execute.untrusted_files import UnsafeOutput, remove_tree

PERF_DIR = Path(__file__).resolve().parents[2] / "execute" / "perf"
HARNESS_FILES = {"kb_timing_harness.py": PERF_DIR / "kb_timing_harness.py", "timing.py": PERF_DIR / "timing.py",
                 "harness.py": Path(__file__).resolve().parents[2] / "execute" / "kernelbench" / "harness.py"}
TIMING_FILE = "timing.json"
TIMING_LIMIT = 1 << 20


@dataclass(frozen=True)
class _Timing:
    """What both timing runs of one answer share: the options, the sandbox, the memory of
    each run's process tree, the extra environment, the device and the seed."""

    options: PerfOptions
    sandbox: SandboxPolicy
    memory: int | None
    env: dict
    device: str
    seed: int


def time_kernelbench(task, code: str, *, options: PerfOptions, sandbox: SandboxPolicy = SandboxPolicy(),
                     workdir=None, program_memory_bytes: int | None = None,
                     extra_env: dict[str, str] | None = None, device: str = "cuda",
                     cache: CompileCache | None = None) -> dict:
    """The perf record (cuset.evaluate.perf.records) of a passing answer on the GPU.
    `device="cpu"` is for tests only: the same sandboxed runs of the same harness on the CPU,
    with the host clock (the pipeline never passes it; the CPU backend times nothing).
    `cache`: where the answer's extensions are built (a CompileCache of the GPU's extension
    builder; any other: one of those under its root)."""
    root = Path(tempfile.mkdtemp(prefix="kbperf-", dir=workdir))
    os.chmod(root, 0o711)
    seed = options.seed if options.seed is not None else secrets.randbelow(2**31)
    timed = _Timing(options, sandbox, program_memory_bytes, extra_env or {}, device, seed)
    try:
        ref_dir = _run_dir(root, "reference.py", task.reference_src)
        ref, ref_step = _run("reference", ref_dir, timed, alternate=False)
        if ref.get("status") != "ran":
            return _failed(f"the reference's timing run failed: {ref.get('detail', '')}")
        expected = read_files(ref_dir / "expected", "c0_t0")
        if expected is None:
            return _failed("the reference's timing run wrote no outputs")
        built = _built_extensions(code, cache, sandbox, options.run_timeout)
        cand_dir = _run_dir(root, "candidate.py", code)
        shutil.copytree(ref_dir / "inputs", cand_dir / "inputs")
        remove_tree(ref_dir)   # the reference's source and outputs are gone before the answer runs
        alternate = ref.get("inputs_alternate") is True
        cand, cand_step = _run("candidate", cand_dir, timed, alternate=alternate,
                               extensions=place_extensions(built, cand_dir / "ext"))
        if cand_step.timed_out:
            return _failed(f"the answer's timing run still ran after {options.run_timeout:g} s; killed")
        check = [{"name": "timed", "seeds": [seed]}]
        said = {"status": "ran"} if cand.get("status") == "ran" else \
            {"status": "runtime_error", "detail": printable(str(cand.get("detail", "")))[:500]}   # its only word
        verdict = judge(check, {"c0_t0": expected}, cand_dir / "outputs", said, task.atol, task.rtol)
        if verdict.get("status") != "passed":
            return _failed(f"on the timed inputs: {verdict.get('status')}: {printable(str(verdict.get('detail')))[:500]}")
        if cand.get("inputs_alternate") is not alternate:
            return _failed("the answer's timing run did not alternate the input sets as the reference's did")
        wrong = trial_mismatch(ref.get("trial_sums"), cand.get("trial_sums"), options.trials, task.atol, task.rtol)
        if wrong:
            return _failed(f"on the timed inputs: {wrong}")
        try:
            times = checked_times(cand, "candidate_ms", options.trials, cand_step.seconds)
            eager = checked_times(ref, "eager_ms", options.trials, ref_step.seconds)
            compiled = checked_times(ref, "compile_ms", options.trials, ref_step.seconds) \
                if options.compile_baseline else None
        except UnbelievableTiming as e:
            return {"status": UNBELIEVABLE, "kind": "kernelbench", "reason": printable(str(e))[:500]}
        device = printable(str(ref.get("device", "")))[:100]
        return kernelbench_measured(timing.stats(times), timing.stats(eager),
                                    timing.stats(compiled) if compiled else None, device=device,
                                    warmup=options.warmup, trials=options.trials, seed=seed,
                                    inputs_alternate=alternate)
    except (BadOutput, UnsafeOutput, OSError) as e:
        return _failed(f"unusable timing files: {printable(str(e))[:300]}")
    finally:
        remove_tree(root)


def trial_mismatch(ref_sums, cand_sums, trials: int, atol: float, rtol: float) -> str | None:
    """Why the answer's per-trial output checksums ([sum, sum |x|, numel] per tensor output, None
    for any other) do not match the reference's, or None. Outputs that pass the element check
    (|c - r| <= atol + rtol |r| everywhere) always pass: each sum then differs by at most
    atol * numel + rtol * sum |r|. Both records come from sandboxed runs: read as hostile."""
    if not _trial_sums(ref_sums, trials):
        return "the reference's run gave no checksum per trial"
    if not _trial_sums(cand_sums, trials):
        return f"the answer's run did not give one checksum per output for each of its {trials} trials"
    for k, (ref, cand) in enumerate(zip(ref_sums, cand_sums)):
        if len(cand) != len(ref):
            return f"trial {k}: {len(cand)} outputs, not {len(ref)}"
        for j, (r, c) in enumerate(zip(ref, cand)):
            if r is None or not all(math.isfinite(v) for v in r[:2]):
                continue   # not a tensor, or the reference's own sums are not finite: the element check decides
            if c is None or c[2] != r[2]:
                return f"trial {k}, output {j}: no checksum of {r[2]} elements"
            bound = atol * r[2] + rtol * r[1]
            if not (abs(c[0] - r[0]) <= bound and abs(c[1] - r[1]) <= bound):
                return (f"trial {k}, output {j}: its sums ({c[0]:.6g}, |x| {c[1]:.6g}) are not the reference's "
                        f"({r[0]:.6g}, |x| {r[1]:.6g}) within atol * numel + rtol * sum |r| = {bound:.3g}")
    return None


def _trial_sums(sums, trials: int) -> bool:
    """`trials` lists, each of None or [number, number, count] entries."""
    def checksum(c):
        return c is None or (isinstance(c, list) and len(c) == 3 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in c))
    return isinstance(sums, list) and len(sums) == trials and all(
        isinstance(t, list) and all(checksum(c) for c in t) for t in sums)


def _failed(reason: str) -> dict:
    return {"status": FAILED, "kind": "kernelbench", "reason": reason}


def time_answer(task, code: str, *, backend, perf: PerfOptions, options, cache=None, workspace=None) -> dict:
    """`time_kernelbench` with the arguments every kind's timer takes (cuset.evaluate.kinds):
    the evaluation's options give the sandbox and limits; run dirs go to the workspace's runs/."""
    return time_kernelbench(task, code, options=perf, sandbox=options.sandbox,
                            workdir=workspace.runs_dir() if workspace is not None else None,
                            program_memory_bytes=options.program_memory_bytes, extra_env=dict(options.extra_env),
                            cache=cache)


def _built_extensions(code: str, cache: CompileCache | None, sandbox: SandboxPolicy, seconds: float) -> dict:
    """The builds of the answer's load_inline calls found in its source (those torch's build
    makes exactly), from the extension cache (built now, within `seconds`, when its
    verification used another cache): {key: entry} of those that built."""
    specs = extract_specs(code, strict=True)[:MAX_STATIC_BUILDS]
    if not specs:
        return {}
    own = not builds_extensions(cache, "gpu")
    ext_cache = CompileCache(extension_builder("gpu", sandbox.mode), root=cache.root if cache is not None else None,
                             timeout=seconds) if own else cache
    manifest: dict = {}
    try:
        BuildBudget(seconds).build(ext_cache, specs, manifest, [], {})
    finally:
        if own:
            ext_cache.close()
    return {k: e for k, e in manifest.items() if "path" in e}   # a failed one builds in the run, as torch does


def _run_dir(root: Path, name: str, source: str) -> Path:
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=root))
    (run_dir / name).write_text(source)
    for target, src in HARNESS_FILES.items():
        shutil.copy2(src, run_dir / target)
    return run_dir


def _run(role: str, run_dir: Path, timed: _Timing, *, alternate: bool,
         extensions: dict | None = None) -> tuple[dict, object]:
    options, sandbox, device = timed.options, timed.sandbox, timed.device
    cfg = {"role": role, "device": device, "alternate": alternate, "seed": timed.seed, "warmup": options.warmup, "trials": options.trials,
           "compile": options.compile_baseline, "step_timeout": options.step_timeout,
           "import_timeout": options.step_timeout, "compile_timeout": options.step_timeout,
           "reference_path": str(run_dir / "reference.py"), "candidate_path": str(run_dir / "candidate.py"),
           "inputs_dir": str(run_dir / "inputs"), "expected_dir": str(run_dir / "expected"),
           "outputs_dir": str(run_dir / "outputs"), "build_dir": str(run_dir / "build"),
           "timing_path": str(run_dir / TIMING_FILE), "progress_path": str(run_dir / "progress.json"),
           "timeout_path": str(run_dir / "timeout.txt"), "extensions": extensions or {}}
    (run_dir / "config.json").write_text(json.dumps(cfg))
    policy = SandboxPolicy(mode=sandbox.mode, cpu_seconds=math.ceil(options.run_timeout) + 5,
                           file_size_bytes=sandbox.file_size_bytes, processes=sandbox.processes, memory_bytes=None,
                           open_files=max(sandbox.open_files or 0, 1024), gpu_devices=device == "cuda", hide=sandbox.hide,
                           program_memory_bytes=timed.memory)
    step = run_sandboxed(f"kernelbench-perf[{role}]", [sys.executable, "-I", "kb_timing_harness.py", "config.json"],
                         run_dir=run_dir, timeout=options.run_timeout, policy=policy,
                         env={"TORCH_EXTENSIONS_DIR": str(run_dir / "build"), **timed.env})
    try:
        record = kb_claims.read_json(run_dir, TIMING_FILE, TIMING_LIMIT)
    except kb_claims.Unbelievable as e:
        record = {"status": "runtime_error", "detail": f"the {role}'s timing record is not believed: {e}"}
    if not isinstance(record, dict):
        tail = (step.stderr or step.stdout).strip().splitlines()[-1:] or [""]
        record = {"status": "runtime_error", "detail": f"the {role}'s timing run left no record (exit "
                                                       f"{step.returncode}): {printable(tail[0])[:300]}"}
    return record, step
