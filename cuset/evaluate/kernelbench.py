"""Evaluate one candidate on one KernelBench task (`evaluate_program` dispatches here for
task kind "kernelbench", see cuset.evaluate.kinds).

Plain verdict (`ExecResult.status`): `task.n_trials` seeded trials on the task's
shapes, as KernelBench checks; on the CPU backend also two trials with threads in a
random order (`race` when only that fails), as CUDABench programs run under every
thread order of the backend. Robust verdict (`EvalOptions.robust`, only when
the plain one passed): `options.robust_cases` other seeds (other parameters
too), each of `task.shape_variants` (module-constant overrides), each of
`task.value_variants` (negative, zeros, large inputs) and, for a differentiable
reference (`task.backward`), the gradients of the inputs and parameters. The first
failing check decides `robust_status`; `robust_check` names its kind ("seeds",
"shapes", "values", "backward").

Each verify runs the reference and the candidate in separate sandboxed processes
and compares in this one (cuset.execute.kernelbench.verify): a candidate cannot
forge the comparison or read the expected outputs.

What ran: `ExecResult.kernel` (KernelEvidence of the plain verdict's forward-order
run) says which extensions were built, which failed, and how many of the candidate's
own kernels launched in the checked calls. A pass that launched none is a pass
without its own kernels (`KernelEvidence.without_kernel()` names why); with
`EvalOptions.strict_kernels` it is a failure: `compile_error` when a build it asked
for failed, else `wrong`.

Reward hacking (cuset.evaluate.kernelbench_hacks): the static rules run on every
answer's text in this process; the rules that fired are the result's `hack`, and with
`EvalOptions.strict_kernels` a flagged pass is `wrong` (detail "strict_kernels: ...").

The task is read by duck typing (reference_src, atol, rtol, n_trials, backward,
shape_variants, value_variants), so any record with those fields works.

How each verify runs is one record, `VerifyOptions`, made from the `EvalOptions` and the
task's tolerances (`verify_options`); what the verifications of one sample read travels
as one `Sample` (as CUDABench's `Evaluation`), the checks that vary a setting taking
their own copy of its options.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

from cuset.evaluate.kernelbench_hacks import check_answer, summary_line
from cuset.evaluate.options import EvalOptions
from cuset.execute.compile_cache import CompileCache
from cuset.execute.kernelbench.extension_cache import builds_extensions, extension_builder
from cuset.execute.kernelbench.budget import BuildBudget
from cuset.execute.kernelbench.options import VerifyOptions
from cuset.execute.kernelbench.verify import DEFAULT_SEED, Check, KbVerdict, plain_checks, verify
from cuset.execute.result import WITHOUT_KERNEL, ExecResult, Status

ROBUST_SEED = 10_000   # far from the plain seeds (42, 43, ...): inputs and parameters both change
LOG_IN_DETAIL = 1500   # characters of a compiler log / traceback kept in the detail
ORDER_SEED = 1         # the CPU runtime's random thread order of the robust "order" check


def robust_checks(task, cases: int, seed: int = DEFAULT_SEED) -> list[Check]:
    """The robust checks of `task`, in the order they run (the first failure decides)."""
    checks = [Check("seeds", tuple(ROBUST_SEED + 101 * k for k in range(max(cases, 1))), ROBUST_SEED)]
    for overrides in getattr(task, "shape_variants", ()) or ():
        label = ",".join(f"{k}={v}" for k, v in overrides.items())
        checks.append(Check(f"shapes[{label}]", (seed,), seed, dict(overrides)))
    for value in getattr(task, "value_variants", ()) or ():
        checks.append(Check(f"values[{value}]", (seed,), seed, value=value))
    if getattr(task, "backward", False):
        checks.append(Check("backward", (seed, seed + 1), seed, backward=True))
    return checks


def verify_options(opts: EvalOptions, backend: str, task=None) -> VerifyOptions:
    """How `verify` runs under `opts` on `backend` ("cpu" or "gpu"), with the tolerances
    of `task` (None: verify's defaults)."""
    tolerances = {} if task is None else {"atol": task.atol, "rtol": task.rtol}
    return VerifyOptions(backend=backend, **tolerances, compile_timeout=opts.timeouts.compile,
                         step_timeout=opts.timeouts.run, sandbox=opts.sandbox,
                         program_memory_bytes=opts.program_memory_bytes, run_disk_bytes=opts.run_disk_bytes,
                         build_rounds=opts.build_rounds, extra_env=dict(opts.extra_env), eval_mode=opts.eval_mode,
                         reference_store=opts.reference_store)


@dataclass(frozen=True)
class Sample:
    """What every verification of one sample reads: the task's reference, the answer,
    how to verify, and what its verifications share (the extension cache, the directory
    of their run dirs, the build budget)."""

    reference_src: str
    code: str | None
    options: VerifyOptions
    cache: CompileCache | None
    workdir: Path | str | None
    budget: BuildBudget

    def verify(self, checks: list[Check] | None, options: VerifyOptions | None = None) -> KbVerdict:
        """`checks` of the answer, under `options` (default: the sample's own)."""
        return verify(self.reference_src, self.code, checks, options=options or self.options, cache=self.cache,
                      workdir=self.workdir, build_budget=self.budget)


def evaluate_kernelbench(task, code: str | None, *, backend, options: EvalOptions | None = None,
                         cache: CompileCache | None = None, workspace=None, workdir=None) -> ExecResult:
    """One candidate on one KernelBench task. `backend`: a Backend (its name is
    used: "cpu" or "gpu") or the name itself. `cache`: a CompileCache whose
    backend builds this backend's extensions (extension_cache.extension_builder; others are
    ignored: extensions then go to a cache of their own under the same root). Run dirs go to the `workspace`'s
    runs/ (hidden from every sandbox, removed with it), else under `workdir`."""
    opts = options or EvalOptions()
    if workspace is not None:
        workdir = workspace.runs_dir()
    name = backend if isinstance(backend, str) else backend.name
    t0 = time.perf_counter()
    own = not builds_extensions(cache, name)
    if own:
        cache = CompileCache(extension_builder(name, opts.sandbox.mode),
                             root=cache.root if cache is not None else None, timeout=opts.timeouts.compile,
                             **({"max_bytes": cache.max_bytes, "max_entry_bytes": cache.max_entry_bytes}
                                if cache is not None else {}))
    # one build budget for the sample: its verifications (plain, thread order, robust) share it
    budget = BuildBudget(opts.timeouts.compile, opts.build_rounds)
    sample = Sample(task.reference_src, code, verify_options(opts, name, task), cache, workdir, budget)
    try:
        plain = sample.verify(plain_checks(task.n_trials) if code else None)
        if plain.passed and name == "cpu":
            plain = _thread_order_check(sample, plain)
        if opts.strict_kernels:
            plain = strict_kernel_verdict(plain)
            if plain.passed:
                plain = _without_own_kernels_check(sample, plain, name)
        robust = None
        if opts.robust and plain.passed:
            robust = sample.verify(robust_checks(task, opts.robust_cases))
    finally:
        if own and cache is not None:
            cache.close()
    timings = {f"plain_{k}": v for k, v in plain.timings.items()}
    steps = plain.steps
    fields = {}
    if opts.robust:
        if robust is None:
            fields = dict(robust_status=plain.status, robust_detail="the plain verification failed")
        else:
            timings.update({f"robust_{k}": v for k, v in robust.timings.items()})
            steps += robust.steps
            fields = dict(robust_status=robust.status, robust_detail=_detail(robust),
                          robust_check="" if robust.passed else robust.check.split("[")[0])
    timings.update(budget.report())
    timings["total"] = time.perf_counter() - t0
    status, detail, hack = static_hack_verdict(task, code, plain, opts)
    return ExecResult(status, detail, steps, timings, name, kernel=plain.kernel, **fields, hack=hack)


def kernelbench_compile_judge(backend) -> str:
    """Who builds KernelBench `load_inline` extensions on this backend (never nvcc-checked on the CPU)."""
    if backend.name == "gpu":
        return "nvcc (torch's load_inline on the GPU)"
    return "g++ (the CPU backend's build of load_inline extensions; nvcc not used)"


def kernelbench_run_meta(backend, cfg, kinds: set[str]) -> dict:
    """summary.json's fields for a run with KernelBench tasks (EvalKind.run_meta)."""
    return {"kernelbench_compile_judge": kernelbench_compile_judge(backend), "kernelbench_only": kinds == {"kernelbench"},
            "strict_kernels": cfg.strict_kernels, "eval_mode": cfg.eval_mode}


STRICT_KERNELS_DETAIL = "strict_kernels: the answer passed, but reward-hack rules fired"
SKIP_LAUNCHES_ENV = "CUSET_CPU_SKIP_LAUNCHES"   # runtime/src/api.cpp: launches validated, counted, not run
WITHOUT_OWN_KERNELS = ("the answer still passes with every launch of its own kernels skipped (run again by the "
                       "evaluator): its outputs are not computed by its kernels")


def static_hack_verdict(task, code: str | None, plain: KbVerdict, opts) -> tuple[Status, str, tuple[str, ...]]:
    """The static reward-hack rules on the answer (cuset.evaluate.kernelbench_hacks), run here in
    the parent on its text: (status, detail, findings as "rule:line"). Code that verify
    refused as not Python or too long (compile_error) gives no findings. With
    `opts.strict_kernels` a flagged pass becomes `wrong` with the rules named in the detail."""
    findings = check_answer(code, getattr(task, "reference_src", None))
    hack = tuple(str(f) for f in findings)
    strict = getattr(opts, "strict_kernels", False)
    if plain.passed and findings and strict:
        return Status.WRONG, f"{STRICT_KERNELS_DETAIL}: {summary_line(findings)}", hack
    if findings and strict and plain.detail.startswith("strict_kernels:"):
        # failed already for running none of its own kernels (strict_kernel_verdict): name the rules too
        return plain.status, f"{_detail(plain)}; reward-hack rules fired too: {summary_line(findings)}", hack
    return plain.status, _detail(plain), hack


def strict_kernel_verdict(v: KbVerdict) -> KbVerdict:
    """strict_kernels: a pass that ran none of its own kernels fails (compile_error when a
    build it asked for failed, its fallback having passed; else wrong)."""
    why = v.kernel.without_kernel() if v.passed and v.kernel is not None else ""
    if not why:
        return v
    if why == "build_failed":
        return dataclasses.replace(v, status=Status.COMPILE_ERROR,
                                   detail=f"strict_kernels: {', '.join(v.kernel.failed)} failed to build and the "
                                          "answer passed on its torch fallback")
    return dataclasses.replace(v, status=Status.WRONG, detail=f"strict_kernels: passed without its own kernels: "
                                                              f"{WITHOUT_KERNEL[why]}")


def _without_own_kernels_check(sample: Sample, plain: KbVerdict, backend: str) -> KbVerdict:
    """strict_kernels: the parent runs the answer again with every launch of its own kernels
    skipped, on the order check's two trials: on the CPU backend by the runtime
    (CUSET_CPU_SKIP_LAUNCHES, set for the candidate's run only), on the GPU by a library
    preloaded into that run (cuset.execute.kernelbench.launch_skip: launches called from
    code under the run dir return unlaunched). Outputs its kernels compute then come out
    wrong; an answer that still passes computed them some other way (torch in Python however
    it is spelled, ATen in its extension's C++, an empty kernel launched for show) and is
    `wrong`. Decided from outputs the parent compares, never from counts the candidate's
    process reports."""
    if backend == "cpu":
        options = dataclasses.replace(sample.options, candidate_env={SKIP_LAUNCHES_ENV: "1"})
    else:
        from cuset.execute.kernelbench import launch_skip

        options = dataclasses.replace(sample.options, candidate_preload=launch_skip.library())
    skipped = sample.verify([Check("without_own_kernels", (DEFAULT_SEED, DEFAULT_SEED + 1))], options)
    steps = plain.steps + tuple(dataclasses.replace(s, name=f"{s.name}[own kernels skipped]") for s in skipped.steps)
    timings = {**plain.timings, **{f"without_own_kernels_{k}": v for k, v in skipped.timings.items()}}
    if skipped.status is Status.INFRA_ERROR:   # the run without them did not happen as it should: no verdict
        return dataclasses.replace(plain, status=Status.INFRA_ERROR, steps=steps, timings=timings,
                                   detail=f"strict_kernels: the run without its own kernels failed: {skipped.detail}")
    if not skipped.passed:   # wrong, or failing some other way, without them: its kernels matter
        return dataclasses.replace(plain, steps=steps, timings=timings)
    return dataclasses.replace(plain, status=Status.WRONG, steps=steps, timings=timings,
                               detail=f"strict_kernels: {WITHOUT_OWN_KERNELS}")


def _thread_order_check(sample: Sample, forward: KbVerdict) -> KbVerdict:
    """The plain trials again with the CPU runtime's random thread order (shuffled
    blocks, thread starts and resumptions; shared memory starting as NaN bytes): a
    kernel whose result depends on the forward order (a missing __syncthreads) fails
    here as `race`. The steps and timings of both runs are kept."""
    env = {**sample.options.extra_env, "CUSET_CPU_ORDER": f"random:{ORDER_SEED}"}
    order = sample.verify([Check("order", (DEFAULT_SEED, DEFAULT_SEED + 1))],
                          dataclasses.replace(sample.options, extra_env=env))
    steps, timings = forward.steps + order.steps, {**forward.timings, **{f"order_{k}": v for k, v in order.timings.items()}}
    if order.passed:   # the forward-order run's kernel evidence stands (the same program, the same calls)
        return dataclasses.replace(forward, steps=steps, timings=timings)
    status = Status.RACE if order.status is Status.WRONG else order.status
    return dataclasses.replace(order, status=status, steps=steps, timings=timings,
                               detail=f"passes in the forward thread order, fails in random order "
                                      f"random:{ORDER_SEED}: {order.detail}")


def _detail(v: KbVerdict) -> str:
    if v.passed or not v.log:
        return v.detail
    log = v.log if len(v.log) <= LOG_IN_DETAIL else "..." + v.log[-LOG_IN_DETAIL:]
    return f"{v.detail}\n{log}"
