"""Verify one KernelBench candidate against its reference, in the sandbox.

    verdict = verify(reference_src, candidate_src, plain_checks(5), options=VerifyOptions(backend="cpu"))
    verdict.status, verdict.detail      # Status.PASSED, ""

How to verify (backend, tolerances, timeouts, sandbox, limits, environment, eval mode,
reference store) is one record, `options.VerifyOptions`; what varies per call beside it
are the checks and what the verifications of one sample share (the extension cache, the
directory of the run dirs, the build budget).

CPU backend: the candidate's `load_inline` calls are found in its source (string
constants; `extract_specs`) and built by the parent through the compile cache
(`build.ExtensionBuilder`: compiles sandboxed, content-addressed); the harness
(harness.py) runs sandboxed with copies of the built extensions. Any other
`load_inline` call the candidate makes (sources computed at run time, calls in
`__init__` or `forward`) ends its process at once with `need_extensions` (no
exception it could catch): the parent builds it, within the sample's BuildBudget,
and runs the candidate again. The parent decides what a request it cannot serve
means: a build it refuses (features the CPU cannot run, pybind11 bindings) is
`unsupported`, one over the budget `compile_error`, whatever the candidate would
have done next; a refused build of a call found in the source decides before any
run (a request is made in the candidate's process, which can keep it from ending
the run: a replaced exit hook). A build that failed (the compiler rejected the sources) is raised
in the candidate's next run as torch's own error, as on a GPU: a candidate that
falls back to torch and passes is a pass without its own kernels
(`KernelEvidence.without_kernel` = "build_failed"); one that fails anyway fails
with the build's `compile_error`.
GPU backend: the calls found in the source that torch's build would make exactly
(`extract_specs(strict=True)`) are built by the parent the way torch builds them
(torch_build.TorchExtensionBuilder: torch's build.ninja, nvcc, in the compile sandbox),
through the same compile cache and budget; the harness loads those builds and calls the
real `load_inline` (nvcc, inside the candidate's sandbox, kept nowhere) for any other
call, and for a call whose parent build failed (its own build decides, as it always
did). The comparisons are the same code. Either backend's run gets private copies of the
builds, checked against the sha256 the cache recorded (extension_cache.place_extensions).

Isolation: the reference and the candidate never share a process. A reference
run (sandboxed) writes the seeded inputs and the expected outputs/gradients
(safetensors + JSON, no pickle); the parent reads the expected ones into memory
and deletes the reference's run dir; each candidate run (sandboxed, its own run
dir) gets copies of the inputs only and writes its outputs the same way; the
parent compares (compare.judge: size limits, strict parsing, the first trial that
differs decides). A candidate cannot forge the comparison or read the answers;
it can only fail on its own: its run may report any failure, never a pass, a skip,
an infrastructure error or a missing answer (claims.py checks every record against
a schema). Every file a run leaves is read through the careful reader
(cuset.execute.untrusted_files: no links, regular files only, size checked before
reading, never blocking on a fifo); run dirs are removed iteratively (any depth).
Cost: one more sandboxed torch import per verify (the reference run), paid once per
reference and checks: the values are kept in this process's memory (_ReferenceCache)
and on disk under the cache root (reference_store.ReferenceStore), which every process
of the machine reads (verdict timings `reference_cached`, `reference_disk_cached`).

Per step (import, model construction, each forward and backward) the harness
has its own timeout (`VerifyOptions.step_timeout`); the sandbox's wall-clock limit is only a
backstop. A failed run of the harness process is classified like a CPU program
(the runtime's own reports, signals).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import json
import logging
import math
import os
import shutil
import stat
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from cuset.execute.compile_cache import CompileCache
from cuset.execute.cpu.diagnostics import classify_run
from cuset.execute.kernelbench import claims
from cuset.execute.kernelbench.build import FLAG_FIELDS, HARMLESS_ARGS, KEYED_ARGS, ExtensionSpec
from cuset.execute.kernelbench.extension_cache import extension_builder, place_extensions
from cuset.execute.kernelbench.budget import MAX_STATIC_BUILDS, BuildBudget
from cuset.execute.kernelbench.compare import BadOutput, judge, read_files, tensor_bytes
from cuset.execute.kernelbench.options import VerifyOptions
from cuset.execute.kernelbench.reference_store import ReferenceStore
from cuset.execute.process import clean_env
from cuset.execute.result import KernelEvidence, Status, StepResult, printable, truncate_log
from cuset.execute import disk_quota
from cuset.execute.sandbox import SandboxPolicy, run_sandboxed, warn_once
from cuset.execute.untrusted_files import UnsafeOutput, copy_output, read_bounded, remove_tree

log = logging.getLogger(__name__)
HARNESS = Path(__file__).resolve().parent / "harness.py"
DIAG_FD_ENV = "CUSET_CPU_DIAG_FD"   # the CPU runtime's diagnostics channel (runtime/src/diag.cpp)
DIAGNOSTICS_LIMIT = 64 << 10
DETAIL_LIMIT = 2000                 # characters of a verdict's detail kept
MAX_SOURCE_CHARS = 1 << 20          # a candidate longer than this is refused before the parent parses it
RUN_DISK_SLACK = 256 << 20          # a candidate run dir's quota beyond twice the reference's outputs
# The reference's run dir: its own tmpfs too (a third-party task's reference is not ours either;
# `cuset tasks check` runs every one of them). Far above any KernelBench problem's tensors.
REFERENCE_RUN_DISK_BYTES = 4 << 30
DEFAULT_SEED = 42
DEFAULT_TRIALS = 5                  # KernelBench's own number of correctness trials
VALUE_VARIANTS = ("negative", "zeros", "large")
REFERENCE_CACHE_BYTES = 256 << 20  # reference runs kept in memory (see _ReferenceCache)


@dataclass(frozen=True)
class Check:
    """One group of trials: models built once (seed `model_seed`), one trial per input seed."""

    name: str
    seeds: tuple[int, ...]
    model_seed: int = DEFAULT_SEED
    overrides: dict = field(default_factory=dict)   # module constants of the reference, e.g. {"dim": 1023}
    value: str | None = None                        # "negative" | "zeros" | "large" input transform
    backward: bool = False

    def __post_init__(self):
        if self.value is not None and self.value not in VALUE_VARIANTS:
            raise ValueError(f"check {self.name}: value variant {self.value!r} is not one of {VALUE_VARIANTS}")
        if not self.seeds:
            raise ValueError(f"check {self.name}: no seeds")

    def to_json(self) -> dict:
        return {"name": self.name, "seeds": list(self.seeds), "model_seed": self.model_seed,
                "overrides": dict(self.overrides), "value": self.value, "backward": self.backward}


@dataclass(frozen=True)
class KbVerdict:
    """The outcome of verifying one candidate."""

    status: Status
    detail: str = ""
    check: str = ""                    # the check that decided a failure
    trial: int | None = None
    seed: int | None = None
    max_abs_err: float | None = None
    log: str = ""                      # compiler log or traceback
    steps: tuple[StepResult, ...] = ()
    timings: dict = field(default_factory=dict)
    kernel: KernelEvidence | None = None   # None when no candidate ran to its end (no code, the reference failed)

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED


def plain_checks(n_trials: int, seed: int = DEFAULT_SEED, overrides: dict | None = None, value: str | None = None,
                 backward: bool = False, name: str = "trials") -> list[Check]:
    """KernelBench's own check: `n_trials` input seeds `seed, seed+1, ...` on one pair of models."""
    if n_trials < 1:
        raise ValueError(f"n_trials={n_trials}: at least one trial")
    return [Check(name, tuple(seed + t for t in range(n_trials)), seed, dict(overrides or {}), value, backward)]


def verify(reference_src: str, candidate_src: str | None, checks: list[Check] | None = None, *,
           options: VerifyOptions = VerifyOptions(), cache: CompileCache | None = None,
           workdir: str | Path | None = None, build_budget: BuildBudget | None = None) -> KbVerdict:
    """Verify `candidate_src` (defines ModelNew) against `reference_src` (Model,
    get_inputs, get_init_inputs) on `checks` (default: KernelBench's DEFAULT_TRIALS seeded
    trials, `plain_checks`), as `options` says.

    Limits besides the sandbox's: each candidate run dir is a tmpfs of
    `options.run_disk_bytes` beyond what the parent puts there (default: RUN_DISK_SLACK +
    twice the reference's outputs; `disk_limit` when full), mounted where mounting works
    (put `workdir` under a private mount, see cuset.execute.disk_quota.isolate); the
    sample's extension builds share one budget (budget.BuildBudget: MAX_EXTENSIONS builds,
    `options.build_budget_seconds`, default `options.compile_timeout`, of wall and of CPU
    time over all builds, each build stopped where it runs out, and `options.build_rounds`
    request rounds; pass `build_budget` to share one between the verifications of a
    sample, else its spending is in this verdict's timings). `cache`: the compile cache of
    the extensions (CPU; default: one of this call's own). The reference's values come
    from this process's memory, else from `options.reference_store` (on disk, shared by
    the machine's processes; None: not used), else from a run of the reference (then kept
    in both). `options.candidate_env`: variables of the candidate's runs only (the
    reference's values stay the ones every other verify shares)."""
    t0 = time.perf_counter()
    backend = options.backend
    if candidate_src is None or not candidate_src.strip():
        return KbVerdict(Status.NO_CODE, "no code was extracted from the response")
    if len(candidate_src) > MAX_SOURCE_CHARS:   # bounds the parent's own parse of it
        return KbVerdict(Status.COMPILE_ERROR, f"the candidate is {len(candidate_src)} characters long, more than "
                                               f"the {MAX_SOURCE_CHARS} a KernelBench answer may have")
    problem = _static_problem(candidate_src)
    if problem is not None:
        return KbVerdict(*problem)
    if backend == "gpu" and not shutil.which("ninja", path=clean_env().get("PATH")):
        # decided here: the candidate's run could claim anything, so its word on the machine is not taken
        return KbVerdict(Status.INFRA_ERROR, "load_inline needs ninja on the evaluating machine's PATH "
                                             "(pip install ninja, or apt-get install ninja-build)")
    checks = checks or plain_checks(DEFAULT_TRIALS)
    own_budget = build_budget is None
    budget = build_budget or BuildBudget(options.compile_timeout if options.build_budget_seconds is None
                                         else options.build_budget_seconds, options.build_rounds)
    own_cache = cache is None
    if own_cache:
        cache = CompileCache(extension_builder(backend, options.sandbox.mode), timeout=options.compile_timeout)
    steps: list[StepResult] = []
    timings: dict[str, float] = {}
    run_root = Path(tempfile.mkdtemp(prefix="kb-", dir=workdir))
    # traversable, not listable: each sandbox uid reaches its own run dir (without bwrap only
    # file permissions protect it) and finds no other
    os.chmod(run_root, 0o711)
    evidence = None
    try:
        # 1. The reference alone: inputs (shared) and expected outputs (read into this process, then deleted).
        inputs = run_root / "inputs"
        expected, failure = _reference(reference_src, checks, run_root, options, timings)
        if failure is not None:
            steps.append(failure[1])
            timings["total"] = time.perf_counter() - t0
            return _verdict(failure[0], tuple(steps), timings)
        manifest: dict[str, dict] = {}
        asked_failed: dict[str, dict] = {}   # failed builds the candidate asked for: raised in its next runs
        over = refusal = None
        if backend == "cpu":   # the calls found in the source (up to MAX_STATIC_BUILDS) and those it asked
            # for in this sample's earlier verifications, before any run
            static = extract_specs(candidate_src)[:MAX_STATIC_BUILDS]
            asked = [s for k, s in budget.requested.items() if k not in {t.key() for t in static}]
            over = budget.build(cache, static + asked, manifest, steps, timings)
            asked_failed.update({s.key(): manifest[s.key()] for s in asked
                                 if manifest.get(s.key(), {}).get("status") == Status.COMPILE_ERROR.value})
            refusal = _static_refusal(manifest)
        else:   # the GPU: the calls torch's build makes exactly, built once for every run of every sample
            over = budget.build(cache, extract_specs(candidate_src, strict=True)[:MAX_STATIC_BUILDS], manifest,
                                steps, timings)
        quota = options.run_disk_bytes if options.run_disk_bytes is not None else \
            RUN_DISK_SLACK + 2 * sum(tensor_bytes(t) for _, t in expected.values())
        # 2. The candidate alone, on copies of the inputs; 3. the comparison, here.
        while over is None and refusal is None:
            # a failed GPU build is not shown: the run's own build of the call decides, as it always did
            shown = _shown(manifest, asked_failed)
            run_dir = _candidate_dir(run_root, candidate_src, inputs, shown, quota)
            record = _preload_missing(options)
            if record is not None:
                break
            record, step = _run_harness("candidate", run_dir, shown, checks, options, timings)
            steps.append(step)
            record = _preload_missing(options) or record   # removed while it ran: the run proves nothing
            if record.get("status") == Status.INFRA_ERROR.value:
                break
            if disk_quota.is_mounted(run_dir) and disk_quota.is_full(run_dir):  # whatever it did after ENOSPC
                record = {"status": "disk_limit", "detail": f"the candidate filled its {quota / (1 << 20):.0f} MiB "
                                                            "disk quota"}
                break
            if record.get("status") != "need_extensions":
                evidence = _evidence(record, backend, manifest, asked_failed)
                tc = time.perf_counter()
                record = judge([c.to_json() for c in checks], expected, run_dir / "outputs", record, options.atol,
                               options.rtol)
                timings["compare"] = time.perf_counter() - tc
                record = _after_failed_build(record, asked_failed, evidence)
                break
            _discard(run_dir)
            over = budget.next_round()
            if over is None:
                record = _serve(record, backend, manifest, asked_failed, budget, cache, steps, timings)
                if record is not None:
                    break
        if over is not None:   # the parent's decision, whatever the candidate would have done next
            record = {"status": "compile_error", "detail": over}
        elif refusal is not None:
            record = refusal
    finally:
        if own_cache:
            cache.close()
        _discard(run_root, run_root=True)
    if own_budget:
        timings.update(budget.report())
    timings["total"] = time.perf_counter() - t0
    return dataclasses.replace(_verdict(record, tuple(steps), timings), kernel=evidence)


def _serve(record: dict, backend: str, manifest: dict, asked_failed: dict, budget: "BuildBudget",
           cache: CompileCache | None, steps: list, timings: dict) -> dict | None:
    """A run ended asking for extensions: build them (None: run the candidate again), or
    the verdict the parent decides (a refusal, the budget, a request that makes no sense)."""
    specs = [ExtensionSpec.from_json(s) for s in record["specs"]]
    shown = _shown(manifest, asked_failed)
    if backend != "cpu" or any(s.key() in shown for s in specs):
        return {"status": "runtime_error", "detail": "load_inline asked again for extensions already built "
                                                     "(sources that change between runs?)"}
    new = [s for s in specs if s.key() not in manifest]
    if new:
        over = budget.refuses(new, manifest) or budget.build(cache, new, manifest, steps, timings)
        if over is not None:
            return {"status": "compile_error", "detail": over}
        budget.requested.update((s.key(), s) for s in new)
    for spec in specs:
        entry = manifest[spec.key()]
        if "path" in entry:
            continue
        if entry["status"] != Status.COMPILE_ERROR.value:   # refused (unsupported): decided here
            return {**entry, "detail": f"{entry['detail']} (asked for by the candidate: a refusal decides the "
                                       "verdict, whatever its code does next)"}
        asked_failed[spec.key()] = entry
    return None


def _shown(manifest: dict, asked_failed: dict) -> dict:
    """The extensions a candidate run is shown: those built, and the failed builds it asked for."""
    return {k: e for k, e in manifest.items() if "path" in e or k in asked_failed}


def _static_refusal(manifest: dict) -> dict | None:
    """The verdict of a build the parent refused (features the CPU cannot run, pybind11
    bindings) for a load_inline call it found in the source, before any run: the request a
    run would make comes from the candidate's process, which can keep it from ending the run
    (a patched exit hook) and fall back to torch. None when every such build was served."""
    for entry in manifest.values():
        if "path" not in entry and entry["status"] != Status.COMPILE_ERROR.value:
            return {**entry, "detail": f"{entry['detail']} (a load_inline call of the answer's source: a refusal "
                                       "decides the verdict, whatever its code does next)"}
    return None


def _evidence(record: dict, backend: str, manifest: dict, asked_failed: dict) -> KernelEvidence:
    """The candidate's kernel work as the parent believes it. CPU: the builds are the
    parent's own facts, and the run's counts are taken only when it loaded an extension
    built here. GPU: the run built its extensions itself, so all of it is the run's word."""
    loaded = record.get("loaded", [])
    if backend == "cpu":
        built = len([k for k in set(loaded) if "path" in manifest.get(k, {})])
        failed = tuple(e["detail"].split(":")[0] for e in asked_failed.values())
    else:
        built = len(set(loaded))
        failed = tuple(f"load_inline({n!r})" for n in record.get("build_failed", []))
    # CPU: counted by the runtime of every extension (none reported: none believed); GPU: not counted
    launches = record.get("kernel_launches", 0) if backend == "cpu" else None
    return KernelEvidence(built=built, failed=failed,
                          launches=None if launches is None else (launches if built else 0),
                          calls=record.get("extension_calls", 0) if built else 0,
                          ran=record.get("status") == "ran")


def _after_failed_build(record: dict, asked_failed: dict, evidence: KernelEvidence) -> dict:
    """A run that failed after a build it asked for had failed (the build's error not caught,
    or a fallback that crashed) fails with that build's compile_error."""
    if record.get("status") != Status.RUNTIME_ERROR.value or not evidence.failed:
        return record
    first = next(iter(asked_failed.values()), {"status": Status.COMPILE_ERROR.value,
                                               "detail": f"{evidence.failed[0]} failed to build", "log": ""})
    return {**first, "detail": f"{first['detail']} (the candidate then failed: {record.get('detail', '')})"}


def _reference(reference_src: str, checks: list[Check], run_root: Path, options: VerifyOptions,
               timings: dict) -> tuple[dict | None, tuple[dict, StepResult] | None]:
    """The reference's expected values (from this process's cache, the disk store or a
    sandboxed run), its inputs placed in run_root/inputs: (expected, None), or (None,
    (failure record, step)). `timings` says where they came from: `reference_cached`
    (memory), `reference_disk_cached` (the store), else `reference` (the run's seconds)."""
    inputs = run_root / "inputs"
    key = _reference_key(reference_src, options.backend, checks, options.eval_mode)
    cached = _REFERENCES.get(key)
    if cached is not None:
        timings["reference_cached"] = 1.0
        return _placed(*cached, inputs), None
    run = _ReferenceRun(reference_src, checks, run_root, options, timings, key)
    store = options.reference_store
    if store is None:
        return _run_reference(run, None)
    try:
        disk_key = store.key(key, options.backend, options.env("reference"))   # what the reference's process sees
        store.directory()
    except OSError as e:   # e.g. a read-only cache root: slower, never a failed verdict
        warn_once(f"kernelbench: reference store unusable ({e}): each process runs every reference itself")
        return _run_reference(run, None)
    read = functools.partial(_read_stored, checks=checks)
    stored = store.load(disk_key, read)
    if stored is None:
        with store.lock(disk_key):          # another process may be running this reference
            stored = store.load(disk_key, read)
            if stored is None:
                return _run_reference(run, (store, disk_key))
    expected = _placed(*stored, inputs)
    _REFERENCES.put(key, inputs, expected)
    timings["reference_disk_cached"] = 1.0
    return expected, None


@dataclass(frozen=True)
class _ReferenceRun:
    """What a run of the reference reads: its source and checks, the verification's run
    root, options and timings, and its key in this process's cache (_reference_key)."""

    reference_src: str
    checks: list[Check]
    run_root: Path
    options: VerifyOptions
    timings: dict
    key: str


def _run_reference(run: _ReferenceRun, stored_as: tuple[ReferenceStore, str] | None):
    """The reference in its own sandboxed run: its values kept in memory and, with
    `stored_as` (the store, the entry's key), on disk. Only a run that ran and left
    readable files is kept: a failure depends on limits and load, and the next verify
    sees it again."""
    checks, run_root = run.checks, run.run_root
    inputs = run_root / "inputs"
    ref_dir = _run_dir(run_root, "reference.py", run.reference_src, REFERENCE_RUN_DISK_BYTES)
    record, step = _run_harness("reference", ref_dir, {}, checks, run.options, run.timings)
    if disk_quota.is_mounted(ref_dir) and disk_quota.is_full(ref_dir):
        record = {"status": "disk_limit", "detail": f"the task's reference filled its "
                                                    f"{REFERENCE_RUN_DISK_BYTES >> 20} MiB disk quota"}
    if record.get("status") != "ran":
        return None, (record, step)
    try:
        expected = _read_expected(ref_dir / "expected", checks)
        _copy_inputs(ref_dir, inputs)
    except (BadOutput, UnsafeOutput, OSError) as e:  # the task's own reference: its defect, not the sample's
        return None, ({"status": "skipped", "detail": f"the task's reference run left unusable files: {e}"}, step)
    if stored_as is not None:   # the files just read, from the run dir (expected) and this process's copies (inputs)
        files = {f"expected/{stem}{ext}": (ref_dir, f"expected/{stem}{ext}") for stem in expected
                 for ext in (".json", ".safetensors")}
        files.update({f"inputs/{f.name}": (run_root, f"inputs/{f.name}") for f in inputs.iterdir()})
        store, disk_key = stored_as
        store.save(disk_key, files)
    _discard(ref_dir)   # the reference's source and outputs are gone before the candidate starts
    _REFERENCES.put(run.key, inputs, expected)
    return expected, None


def _read_stored(entry: Path, sizes: dict[str, int], checks: list[Check]) -> tuple[dict, dict]:
    """A store entry's (input files' bytes, expected values), read with the parser of the
    reference's own run dir (compare.read_files); BadOutput when the checks' files are not
    all there (ReferenceStore.load then drops the entry)."""
    needed = {f"inputs/c{ci}{trial}{ext}" for ci, check in enumerate(checks)
              for trial in ("", *(f"_t{t}" for t in range(len(check.seeds)))) for ext in (".json", ".safetensors")}
    missing = sorted(needed - set(sizes))
    if missing:
        raise BadOutput(f"the entry has no {missing[0]}")
    files = {}
    for name, size in sizes.items():
        if name.startswith("inputs/"):
            data = read_bounded(entry, name, size)
            if data is None or len(data) != size:
                raise BadOutput(f"{name} is gone or changed")
            files[name.split("/", 1)[1]] = data
    return files, _read_expected(entry / "expected", checks)


def _placed(files: dict[str, bytes], expected: dict, inputs: Path) -> dict:
    """`expected`, once the input files are written to `inputs` (the candidate's copies come from there)."""
    inputs.mkdir()
    for name, data in files.items():
        (inputs / name).write_bytes(data)
    return expected


def reference_outputs(reference_src: str, checks: list[Check], *, options: VerifyOptions = VerifyOptions(),
                      workdir: str | Path | None = None) -> tuple[dict | None, KbVerdict | None]:
    """What `verify` compares candidates with: the reference's values per trial, as
    {"c<check>_t<trial>": (meta, tensors)} (decode a meta's "outputs" with
    `compare.decode`), from this process's cache, `options.reference_store` (on disk) or
    a sandboxed run of the reference (its run root under `workdir`).
    (expected, None), or (None, the verdict of a reference that did not run)."""
    timings: dict[str, float] = {}
    run_root = Path(tempfile.mkdtemp(prefix="kb-", dir=workdir))
    os.chmod(run_root, 0o711)
    try:
        expected, failure = _reference(reference_src, checks, run_root, options, timings)
    finally:
        _discard(run_root, run_root=True)
    if failure is not None:
        return None, _verdict(failure[0], (failure[1],), timings)
    return expected, None


def _static_problem(candidate_src: str) -> tuple[Status, str] | None:
    """Code that cannot be a KernelBench answer, decided before running anything."""
    tree = _parse(candidate_src)
    if isinstance(tree, str):
        return Status.COMPILE_ERROR, tree
    names = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    names |= {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    names |= {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    if "ModelNew" not in names:
        return Status.NO_CODE, "the code defines no ModelNew (the class KernelBench evaluates)"
    return None


# ---------------------------------------------------------------- static extension discovery
def extract_specs(candidate_src: str, strict: bool = False) -> list[ExtensionSpec]:
    """The load_inline calls whose arguments are string constants (module-level
    names bound to literals, concatenations, lists of them): built before the
    harness runs, so most candidates run once. Others are found at run time.
    `strict` (the GPU): only the calls whose every argument is in the build record."""
    tree = _parse(candidate_src)
    if isinstance(tree, str):
        return []
    try:
        return _specs_of(tree, strict)
    except RecursionError:  # constants nested beyond the stack: left to the run-time discovery
        return []


def _parse(source: str) -> ast.Module | str:
    """The candidate's syntax tree, or why there is none. Every failure of the parser is an
    answer here: a syntax error, a null byte (ValueError), an expression nested deeper than
    the parser's stack (RecursionError, MemoryError)."""
    try:
        return ast.parse(source)
    except SyntaxError as e:
        where = f"line {e.lineno}: " if e.lineno else ""
        return f"the candidate is not valid Python: {where}{printable(str(e.msg))}"
    except (RecursionError, MemoryError):
        return "the candidate nests expressions too deeply for Python's parser"
    except ValueError as e:
        return f"the candidate is not valid Python: {printable(str(e))[:200]}"


def _specs_of(tree: ast.Module, strict: bool = False) -> list[ExtensionSpec]:
    env: dict[str, object] = {}
    dicts: set[str] = set()   # names bound to dict literals (functions= with docstrings)
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _const(node.value, env)
            if value is not None:
                env[node.targets[0].id] = value
                if isinstance(node.value, ast.Dict):
                    dicts.add(node.targets[0].id)
    specs = []
    params = _load_inline_params()
    listed = ("name", "cpp_sources", "cuda_sources", "functions", *FLAG_FIELDS)
    flags = ("with_cuda", "with_pytorch_error_handling")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fname = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        if fname != "load_inline" or any(isinstance(a, ast.Starred) for a in node.args) or \
                any(k.arg is None for k in node.keywords):
            continue
        args = dict(zip(params, node.args))
        args.update({k.arg: k.value for k in node.keywords})
        args = {p: v for p, v in args.items() if not (isinstance(v, ast.Constant) and v.value is None)}   # = default
        values = {p: _const(args[p], env) if p in args else None for p in listed}
        bools = {p: _literal(args[p]) if p in args else None for p in flags}
        if values["name"] is None or values["cpp_sources"] is None or any(
                p in args and values[p] is None for p in listed) or any(
                p in args and not isinstance(bools[p], (bool, type(None))) for p in flags):
            continue
        if strict and not _exact_call(args, params, values, dicts):
            continue
        specs.append(ExtensionSpec.from_call(
            values["name"], values["cpp_sources"], values["cuda_sources"], values["functions"],
            **{f: values[f] for f in FLAG_FIELDS}, with_cuda=bools["with_cuda"],
            with_pytorch_error_handling=True if bools["with_pytorch_error_handling"] is None
            else bools["with_pytorch_error_handling"]))
    return specs


def _exact_call(args: dict, params: tuple[str, ...], values: dict, dicts: set[str]) -> bool:
    """Whether the GPU harness will look this call up by its build record (harness._exact):
    the parent builds only what a run will load."""
    defaults = _load_inline_defaults()
    for arg, node in args.items():
        if arg not in KEYED_ARGS and arg not in HARMLESS_ARGS and (
                arg not in params or not isinstance(node, ast.Constant) or _literal(node) != defaults.get(arg)):
            return False    # sycl_sources, use_pch, is_python_module=False, ...
    functions = args.get("functions")
    if isinstance(functions, ast.Dict) or (isinstance(functions, ast.Name) and functions.id in dicts) or \
            values.get("functions") == []:
        return False
    return not values.get("extra_include_paths")


def _literal(node):
    """True, False, None, a number or a string from a constant node, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (bool, int, float, str, type(None))):
        return node.value
    return None


@functools.lru_cache(maxsize=1)
def _load_inline_params() -> tuple[str, ...]:
    """load_inline's parameters in torch's order (the harness binds calls by the same signature)."""
    return tuple(_load_inline_signature().parameters)


@functools.lru_cache(maxsize=1)
def _load_inline_defaults() -> dict:
    return {k: p.default for k, p in _load_inline_signature().parameters.items()}


def _load_inline_signature():
    import inspect

    from torch.utils import cpp_extension

    return inspect.signature(cpp_extension.load_inline)


def _const(node, env):
    """str / list of str / dict keys from a literal expression, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.JoinedStr):
        parts = [_const(v, env) if not isinstance(v, ast.FormattedValue) else None for v in node.values]
        return "".join(parts) if all(isinstance(p, str) for p in parts) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = _const(node.left, env), _const(node.right, env)
        if isinstance(a, str) and isinstance(b, str):
            return a + b
        if isinstance(a, list) and isinstance(b, list):
            return a + b
        return None
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_const(e, env) for e in node.elts]
        return items if all(isinstance(i, str) for i in items) else None
    if isinstance(node, ast.Dict):
        keys = [_const(k, env) if k is not None else None for k in node.keys]
        return keys if all(isinstance(k, str) for k in keys) else None
    return None


# ---------------------------------------------------------------- build + run
def _policy(base: SandboxPolicy, backend: str, timeout: float, program_memory_bytes: int | None) -> SandboxPolicy:
    # No RLIMIT_AS: torch and the CPU runtime reserve large address ranges; the
    # process tree's memory is bounded by the cgroup instead.
    return SandboxPolicy(mode=base.mode, cpu_seconds=math.ceil(timeout) + 5, file_size_bytes=base.file_size_bytes,
                         processes=base.processes, memory_bytes=None, open_files=max(base.open_files or 0, 1024),
                         gpu_devices=backend == "gpu", hide=base.hide, program_memory_bytes=program_memory_bytes)


def _reference_key(reference_src: str, backend: str, checks: list[Check], eval_mode: str = "train") -> str:
    # Check names only label the messages: the same seeds under another name share the run.
    spec = [reference_src, backend, HARNESS.read_text(), [{**c.to_json(), "name": ""} for c in checks], eval_mode]
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


class _ReferenceCache:
    """The reference runs of this process (inputs' file bytes, expected tensors) by
    (reference, backend, checks): the samples of one task run it once. Bounded
    in bytes, least recently used out; a larger run is not kept."""

    def __init__(self, limit_bytes: int):
        self.limit = limit_bytes
        self.entries: OrderedDict[str, tuple[dict, dict, int]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: str) -> tuple[dict, dict] | None:
        with self.lock:
            entry = self.entries.get(key)
            if entry is None:
                return None
            self.entries.move_to_end(key)
            return entry[0], entry[1]

    def put(self, key: str, inputs: Path, expected: dict) -> None:
        size = sum(f.stat().st_size for f in inputs.iterdir()) + sum(tensor_bytes(t) for _, t in expected.values())
        if size > self.limit:
            return
        files = {f.name: f.read_bytes() for f in inputs.iterdir()}
        with self.lock:
            self.entries[key] = (files, expected, size)
            while sum(e[2] for e in self.entries.values()) > self.limit:
                self.entries.popitem(last=False)


_REFERENCES = _ReferenceCache(REFERENCE_CACHE_BYTES)


def _run_dir(run_root: Path, name: str, source: str, quota_bytes: int | None = None) -> Path:
    """A fresh run dir holding `name` (the source) and the harness; with `quota_bytes`, its
    own tmpfs of that size (where mounting works) before anything is written."""
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=run_root))
    if quota_bytes is not None:
        if disk_quota.unavailable() is None:
            disk_quota.mount_tmpfs(run_dir, quota_bytes)
        else:
            warn_once(f"no disk quota for KernelBench run dirs ({disk_quota.unavailable()}): only RLIMIT_FSIZE "
                      "per file")
    (run_dir / name).write_text(source)
    shutil.copy2(HARNESS, run_dir / "harness.py")
    return run_dir


def _candidate_dir(run_root: Path, source: str, inputs: Path, manifest: dict, quota: int) -> Path:
    """The candidate's run dir: its own quota of `quota` bytes beyond what is placed in it
    (the source, the harness, copies of the inputs and of the built extensions)."""
    placed = [*inputs.iterdir(), HARNESS, *(Path(e["path"]) for e in manifest.values() if "path" in e)]
    run_dir = _run_dir(run_root, "candidate.py", source,
                       quota + len(source.encode()) + sum(p.stat().st_size for p in placed) + (1 << 20))
    shutil.copytree(inputs, run_dir / "inputs")
    return run_dir


def _copy_inputs(ref_dir: Path, target: Path) -> None:
    """The reference run's inputs/ to `target`, each a regular file reached without links
    (the careful reader: a sandboxed run wrote them)."""
    target.mkdir()
    if not stat.S_ISDIR(os.lstat(ref_dir / "inputs").st_mode):
        raise UnsafeOutput("the reference run's inputs/ is not a directory")
    for name in sorted(os.listdir(ref_dir / "inputs")):
        copy_output(ref_dir, f"inputs/{name}", None, target / name)


def _discard(path: Path, run_root: bool = False) -> None:
    """Remove a run dir, or the run root with the run dirs in it, unmounting their quotas
    first: iteratively (a 3000-level tree left by a candidate needs no recursion), never
    raising; what stays is logged. (Only the run root's own entries are looked at for
    mounts: the parent made them all, and no sandbox can write there.)"""
    for mounted in (path, *(_subdirs(path) if run_root else ())):
        if disk_quota.is_mounted(mounted):
            disk_quota.unmount(mounted)
    errors = remove_tree(path)
    if errors:
        log.warning("kernelbench: could not remove %s: %s", path, "; ".join(errors[:3]))


def _subdirs(path: Path) -> list[Path]:
    try:
        return [path / e.name for e in os.scandir(path) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _read_expected(directory: Path, checks: list[Check]) -> dict:
    """The reference run's outputs, in memory: the files go before the candidate runs."""
    expected = {}
    for ci, check in enumerate(checks):
        for trial in range(len(check.seeds)):
            got = read_files(directory, f"c{ci}_t{trial}")
            if got is None:
                raise BadOutput(f"the reference run wrote no outputs for check {check.name}, trial {trial}")
            expected[f"c{ci}_t{trial}"] = got
    return expected


def _preload_missing(options: VerifyOptions) -> dict | None:
    """An infra_error record when the library to preload into the candidate's runs is not
    there. Checked by the parent before and after each run: a missing one fails the
    sandbox's bind or leaves ld.so to warn and run without it, and either run would be
    read as the answer's own doing."""
    preload = options.candidate_preload
    if preload is None or Path(preload).is_file():
        return None
    return {"status": Status.INFRA_ERROR.value,
            "detail": f"the library to preload into the candidate's run is missing: {preload} (removed from the "
                      "cache while the evaluation ran? evaluate the sample again)"}


def _run_harness(role: str, run_dir: Path, manifest: dict, checks: list[Check], options: VerifyOptions,
                 timings: dict) -> tuple[dict, StepResult]:
    """One sandboxed run of the harness as `role` ("reference" or "candidate") in `run_dir`,
    shown the extensions of `manifest`: (the record the parent believes, its step). Its
    seconds are added to `timings[role]`."""
    backend, step_timeout = options.backend, options.step_timeout
    extensions = place_extensions(manifest, run_dir / "ext")   # private copies, checked against their sha256
    # Importing torch (and, on the GPU, building the extensions) is one step.
    import_timeout = options.import_timeout or (options.compile_timeout + 60 if backend == "gpu" else 60.0)
    n_steps = sum(1 + len(c.seeds) * (2 if c.backward else 1) for c in checks)
    timeout = 2 * import_timeout + n_steps * step_timeout
    cfg = {"role": role, "backend": backend, "reference_path": str(run_dir / "reference.py"),
           "candidate_path": str(run_dir / "candidate.py"), "extensions": extensions,
           "checks": [c.to_json() for c in checks], "step_timeout": step_timeout, "eval_mode": options.eval_mode,
           "import_timeout": import_timeout, "progress_path": str(run_dir / "progress.json"),
           "verdict_path": str(run_dir / "verdict.json"), "timeout_path": str(run_dir / "timeout.txt"),
           "build_dir": str(run_dir / "build"), "inputs_dir": str(run_dir / "inputs"),
           "expected_dir": str(run_dir / "expected"), "outputs_dir": str(run_dir / "outputs")}
    for unused in (("candidate_path", "extensions", "build_dir", "outputs_dir") if role == "reference" else
                   ("reference_path", "expected_dir")):
        del cfg[unused]   # the candidate's run is not even told where the reference's files were
    (run_dir / "config.json").write_text(json.dumps(cfg))
    env = {"CUSET_CPU_ORDER": "forward", "CUSET_CPU_WORKERS": "1", "TORCH_EXTENSIONS_DIR": str(run_dir / "build"),
           **options.env(role)}
    preload = options.candidate_preload if role == "candidate" else None
    if preload is not None:
        env["LD_PRELOAD"] = str(preload)
    tr = time.perf_counter()
    # in the run dir: what the program writes to it counts against the run dir's disk quota
    # (the harness's file size limit alone would let every run fill the host's /tmp by a GiB)
    with tempfile.TemporaryFile(dir=run_dir) as channel:
        fd = channel.fileno()
        name = f"kernelbench[{backend}]" if role == "candidate" else f"kernelbench-reference[{backend}]"
        step = run_sandboxed(name, [sys.executable, "-I", "harness.py", "config.json"],
                             run_dir=run_dir, timeout=timeout, policy=_policy(options.sandbox, backend, timeout,
                                                                               options.program_memory_bytes),
                             env={**env, DIAG_FD_ENV: str(fd)}, pass_fds=(fd,),
                             readonly=(preload,) if preload is not None else ())
        channel.seek(0)
        said = channel.read(DIAGNOSTICS_LIMIT)
    # Classified on the full logs, stored truncated (a candidate may print megabytes).
    record = _read_record(run_dir, dataclasses.replace(step, diagnostics=truncate_log(said)), timeout, role)
    step = StepResult(step.name, step.returncode, step.seconds, step.timed_out, truncate_log(step.stdout),
                      truncate_log(step.stderr), step.limit, truncate_log(said))
    timings[role] = timings.get(role, 0.0) + time.perf_counter() - tr
    return record, step


def _read_record(run_dir: Path, step: StepResult, timeout: float, role: str) -> dict:
    """The harness's verdict if the parent can believe it (claims.checked_record), else
    what its death says. Every file is read as the candidate's (claims.read_json). A run
    whose process tree went over its memory budget gets `memory_limit` whatever it wrote
    (a child killed by the cgroup while the harness went on, as CUDABench runs)."""
    progress = claims.read_progress(run_dir)
    where = _where(progress)
    if step.limit == "memory_limit":
        return {"status": "memory_limit", "detail": f"the {role}'s processes together used more than their memory "
                                                    f"budget{where}; killed", **_trial(progress)}
    try:
        record = claims.read_json(run_dir, claims.VERDICT_FILE, claims.VERDICT_LIMIT)
        if record is not None:
            record = claims.checked_record(record, role)
    except claims.Unbelievable as e:
        if not step.timed_out:
            return {"status": "runtime_error", "detail": f"the {role}'s run left a verdict that is not believed: {e}"}
        record = None
    if record is not None and not step.timed_out:
        return record
    if claims.watchdog_fired(run_dir):
        return {"status": "timeout", "detail": f"{progress.get('step', 'a step')} still running after "
                                               f"{progress.get('timeout', 0):g} s{where}; killed",
                **_trial(progress)}
    if step.timed_out:
        return {"status": "timeout", "detail": f"the harness still running after {timeout:g} s{where}; killed",
                **_trial(progress)}
    classified = classify_run(step)
    if classified is not None:
        return {"status": classified[0].value, "detail": classified[1] + where, **_trial(progress)}
    if step.returncode is not None and step.returncode < 0:
        import signal

        try:
            name = signal.Signals(-step.returncode).name
        except ValueError:
            name = f"signal {-step.returncode}"
        return {"status": "runtime_error", "detail": f"terminated by {name}{where}", **_trial(progress),
                "log": truncate_log(step.stderr)}
    tail = (step.stderr or step.stdout).strip().splitlines()[-1:] or [""]
    return {"status": "runtime_error", "detail": f"the harness exited with code {step.returncode} without a verdict"
                                                 f"{where}: {tail[0][:300]}", **_trial(progress),
            "log": truncate_log(step.stderr)}


def _where(progress: dict) -> str:
    if not progress:
        return ""
    parts = [f"during {progress.get('step', '?')}"]
    if "check" in progress:
        parts.append(f"check {progress['check']}")
    if "trial" in progress:
        parts.append(f"trial {progress['trial']}, seed {progress.get('seed')}")
    return " (" + ", ".join(parts) + ")"


def _trial(progress: dict) -> dict:
    return {k: progress[k] for k in ("check", "trial", "seed") if k in progress}


def _verdict(record: dict, steps: tuple[StepResult, ...], timings: dict) -> KbVerdict:
    """The verdict of a record the parent made or checked (claims.checked_record)."""
    try:
        status = Status(record.get("status"))
    except ValueError:
        status, record = Status.RUNTIME_ERROR, {"detail": f"the harness reported {printable(str(record.get('status')))[:80]!r}"}
    err = record.get("max_abs_err")
    trial, seed = record.get("trial"), record.get("seed")
    return KbVerdict(status, truncate_log(printable(str(record.get("detail", ""))), DETAIL_LIMIT),
                     printable(str(record.get("check", ""))), trial if isinstance(trial, int) else None,
                     seed if isinstance(seed, int) else None, float(err) if isinstance(err, (int, float)) else None,
                     truncate_log(printable(str(record.get("log", "")))), steps, timings)
