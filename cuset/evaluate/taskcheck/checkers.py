"""Checker strength: a task's checker on corrupted copies of its reference's outputs.

CUDABench format: the reference program (bench.cu) runs once more on case 0 (the
sandboxed run of the evaluation, `pipeline.run_once`); compare.py must accept its
outputs again (the control), then judges each corrupted copy, run exactly as every
evaluation runs it (`pipeline.compare_outputs`: a fresh compare dir, the same script
runner). Next to it, cuset's strict element check (`robust=true`, cuset.evaluate.strict)
judges the same corrupted output against gen.py's reference file.

KernelBench format: the checker is cuset's own comparison (every element of every
output, shape and dtype exactly, the task's atol/rtol; cuset.execute.kernelbench.compare).
Its strength depends only on the task: tolerances beyond the outputs' magnitude, or
outputs that do not depend on the inputs, make it accept wrong answers. So the same
corruptions, applied to the reference's outputs of every plain trial, go through that
comparison (accepted when every trial accepts, as a candidate must pass every trial),
plus `constant_answer`: the first trial's outputs given for every trial (accepted when
every trial's outputs agree with them, so a model ignoring its inputs passes). The strict check
is not a separate, stronger check there: its column is left empty (None).
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import numpy as np

from cuset.evaluate.cudabench import Evaluation, compare_outputs, run_once
from cuset.evaluate.strict import compare_arrays, decode, encode, find_reference, read_output
from cuset.evaluate.taskcheck.corrupt import CORRUPTIONS, corrupt
from cuset.evaluate.taskcheck.record import CorruptionResult

NOT_MEASURED = "not measured: "
# Bumped whenever what the corruptions are or how they are judged changes: records of an
# older battery are tried again (the references' verdicts stay).
BATTERY_VERSION = 2
KB_STRICT_NOTE = ("the checker is cuset's own comparison of every element (robust=true adds other seeds, shapes and "
                  "values, not a stricter element check), so there is no separate strict column")


def compare_py_strength(task, ctx) -> tuple[str, str, tuple[CorruptionResult, ...]]:
    """(checker, note, results) of a CUDABench-format task; `ctx` an evaluate.runner.EvalContext."""
    checker = "compare.py"
    ws, opts = ctx.workspace, ctx.options
    prepared = ws.prepare(task, 0)
    if prepared.problem:
        return checker, f"{NOT_MEASURED}the task's data: {prepared.problem}", ()
    outcome = ctx.cache.submit(task.bench_cu).result()
    try:
        if not outcome.ok:
            return checker, f"{NOT_MEASURED}the reference did not compile again: {outcome.detail}", ()
        run_dir, why = run_once(Evaluation(task, ctx.backend, ws, opts), 0, prepared, outcome.executable)
    finally:
        ctx.cache.release(task.bench_cu)   # pinned while its executable was copied
    if run_dir is None:
        return checker, f"{NOT_MEASURED}the reference's run failed this time: {why}", ()
    try:
        baseline = {s.name: read_output(run_dir, s) for s in task.outputs}
    finally:
        ws.discard(run_dir)
    seen: dict[str, tuple[bool, str]] = {}

    def judge(outputs: dict[str, np.ndarray], label: str) -> tuple[bool, str]:
        raw = {s.name: encode(outputs[s.name], s.dtype) for s in task.outputs}
        digest = hashlib.sha256(b"".join(hashlib.sha256(b).digest() for b in raw.values())).hexdigest()
        if digest not in seen:   # e.g. one_element, suffix and every_element of a 1-element output
            seen[digest] = _compare_py(task, prepared, raw, ws, opts, label)
        return seen[digest]

    accepted, why = judge(baseline, "control")
    if not accepted:
        return checker, f"{NOT_MEASURED}compare.py rejects the reference's own outputs run again ({why})", ()
    results = []
    reference_dir = prepared.data_dir / "data"
    for spec in task.outputs:
        for name in CORRUPTIONS:
            bad = corrupt(baseline[spec.name], name)
            if bad is None:
                continue
            accepted, why = judge({**baseline, spec.name: bad}, f"{spec.name}:{name}")
            caught, strict_why = _strict(task, spec, baseline[spec.name], bad, reference_dir)
            results.append(CorruptionResult(spec.name, name, accepted, caught,
                                            "; ".join(w for w in (why, strict_why) if w)[:400]))
    return checker, "", tuple(results)


def _compare_py(task, prepared, raw: dict[str, bytes], ws, opts, label: str) -> tuple[bool, str]:
    """compare.py's verdict on outputs with these bytes, in a scratch run dir of the workspace."""
    run_dir = Path(tempfile.mkdtemp(prefix="check-", dir=ws.root / "runs"))
    try:
        (run_dir / "data").mkdir()
        for name, data in raw.items():
            (run_dir / "data" / f"{name}.bin").write_bytes(data)
        accepted, why, _ = compare_outputs(task, 0, prepared, run_dir, ws, opts, f"compare[{label}]")
        return accepted, why
    finally:
        ws.discard(run_dir)


def _strict(task, spec, baseline: np.ndarray, bad: np.ndarray, reference_dir: Path) -> tuple[bool | None, str]:
    """Does the strict check reject `bad`? None where it cannot tell (no reference file, or the
    reference's own output already fails it)."""
    ref_path = find_reference(spec, reference_dir, task)
    if ref_path is None:
        return None, f"strict check: no reference file identified for {spec.name}"
    ref = decode(ref_path.read_bytes(), spec.dtype)
    own = compare_arrays(spec, baseline, ref, ref_path.name)
    if own is not None:
        return None, f"strict check: the reference's own output already fails it ({own})"
    written = decode(encode(bad, spec.dtype), spec.dtype)   # what the file says (bfloat16 narrowed)
    return compare_arrays(spec, written, ref, ref_path.name) is not None, ""


def allclose_strength(task, backend: str, opts,
                      workdir: str | None = None) -> tuple[str, str, tuple[CorruptionResult, ...]]:
    """(checker, note, results) of a KernelBench-format task; `opts` the EvalOptions,
    `workdir` where the reference's run dir goes (default the system temp dir)."""
    import torch

    from cuset.evaluate.kernelbench import verify_options
    from cuset.execute.kernelbench.compare import compare, decode as decode_value
    from cuset.execute.kernelbench.verify import plain_checks, reference_outputs

    checker = f"cuset's comparison (atol={task.atol:g}, rtol={task.rtol:g})"
    checks = plain_checks(task.n_trials)
    expected, failure = reference_outputs(task.reference_src, checks, options=verify_options(opts, backend),
                                          workdir=workdir)
    if failure is not None:
        return checker, f"{NOT_MEASURED}the reference's run failed this time: {failure.status.value}: " \
                        f"{failure.detail}", ()
    trials = [[decode_value(e, tensors) for e in meta["outputs"]]
              for meta, tensors in (expected[f"c0_t{t}"] for t in range(len(checks[0].seeds)))]
    results = []
    skipped = []
    for k, ref in enumerate(trials[0]):
        name = "output" if len(trials[0]) == 1 else f"output[{k}]"
        if not isinstance(ref, torch.Tensor) or ref.is_complex():
            skipped.append(name)
            continue
        for corruption in CORRUPTIONS:
            if _corrupt_tensor(ref, corruption) is None:
                continue
            # every trial's output k corrupted the same way: what a candidate wrong in that way returns
            verdicts = []
            for outs in trials:
                bad = _corrupt_tensor(outs[k], corruption)
                news = outs if bad is None else [*outs[:k], bad, *outs[k + 1:]]
                verdicts.append(compare(outs, news, task.atol, task.rtol, "output"))
            caught = [v[0] for v in verdicts if v is not None]
            results.append(CorruptionResult(name, corruption, not caught, None, caught[0][:400] if caught else ""))
    if len(trials) > 1:
        verdicts = [compare(outs, trials[0], task.atol, task.rtol, "output") for outs in trials[1:]]
        differ = [v[0] for v in verdicts if v is not None]
        results.append(CorruptionResult("*", "constant_answer", not differ, None,
                                        differ[0][:400] if differ else
                                        f"the reference's outputs of all {len(trials)} trials agree within tolerance"))
    note = KB_STRICT_NOTE + (f"; not corrupted (not tensors): {', '.join(skipped)}" if skipped else "")
    return checker, note, tuple(results)


def _corrupt_tensor(tensor, name: str):
    """`corrupt` on a tensor's values (bfloat16 through float32); None where it does not apply."""
    import torch

    values = tensor.detach().cpu()
    flat = (values.float() if values.dtype == torch.bfloat16 else values).numpy().reshape(-1)
    bad = corrupt(flat, name)
    return None if bad is None else torch.from_numpy(bad.reshape(tuple(values.shape))).to(values.dtype)
