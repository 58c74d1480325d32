"""The trusted side of KernelBench verification: the candidate run's outputs
against the reference run's, in the parent process (never in a process that ran
the candidate).

Both harness runs write, per check `c` and trial `t`, `c{c}_t{t}.json` (the
structure of the values, scalars inline) next to `c{c}_t{t}.safetensors` (the
tensors; never pickle). The candidate's files are untrusted: size-limited,
parsed strictly, and anything malformed is the candidate's `runtime_error`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from cuset.execute.result import printable
from cuset.execute.untrusted_files import UnsafeOutput, read_bounded

JSON_LIMIT = 1 << 20         # bytes of a candidate's JSON description
TENSOR_SLACK = 1 << 20       # bytes a candidate's tensor file may exceed twice the reference's


class BadOutput(ValueError):
    """A candidate's output file that is missing, too large or malformed."""


def read_files(directory: Path, stem: str, size_limit: int | None = None) -> tuple[dict, dict] | None:
    """(meta, tensors) of `stem`, None when the run did not write it. Read through the
    careful reader (no links, regular files only, sizes checked before a byte is read);
    `size_limit` (bytes of the tensor file) marks an untrusted writer, whose JSON is also
    held to JSON_LIMIT. BadOutput for anything else."""
    from safetensors.torch import load as load_tensors

    parent, name = directory.parent, directory.name
    json_limit = JSON_LIMIT if size_limit is not None else 1 << 40
    try:
        raw_meta = read_bounded(parent, f"{name}/{stem}.json", json_limit)
        if raw_meta is None:
            return None
        raw_tensors = read_bounded(parent, f"{name}/{stem}.safetensors", size_limit if size_limit is not None
                                   else 1 << 40)
        if raw_tensors is None:
            raise BadOutput(f"{stem}.safetensors is missing")
    except UnsafeOutput as e:
        raise BadOutput(str(e)) from e
    except OSError as e:
        raise BadOutput(f"{stem}: unreadable ({e.strerror})") from e
    meta = parse_json(raw_meta, f"{stem}.json")
    try:
        tensors = load_tensors(raw_tensors)
    except Exception as e:  # safetensors' own SafetensorError on a garbled file, and whatever else it raises
        raise BadOutput(f"{stem}: unreadable ({type(e).__name__}: {printable(str(e))[:200]})") from e
    if not isinstance(meta, dict):
        raise BadOutput(f"{stem}.json: not a JSON object")
    return meta, tensors


def parse_json(data: bytes, what: str):
    """JSON from untrusted bytes: every failure (bad UTF-8 or JSON, nesting too deep for the
    parser, memory) is BadOutput naming `what`."""
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError, MemoryError) as e:  # ValueError covers JSON and UTF-8 errors
        reason = "nested too deeply" if isinstance(e, RecursionError) else printable(str(e))[:200]
        raise BadOutput(f"{what}: unreadable ({type(e).__name__}: {reason})") from None


def decode(e, tensors: dict):
    """A value written by `harness.encode`, strictly."""
    if not isinstance(e, dict):
        raise BadOutput(f"a value description is a {type(e).__name__}, not an object")
    if "t" in e:
        if not isinstance(e["t"], str) or e["t"] not in tensors:
            raise BadOutput(f"tensor {str(e['t'])[:80]!r} is not in the tensor file")
        return tensors[e["t"]]
    if "l" in e and isinstance(e["l"], list):
        return [decode(v, tensors) for v in e["l"]]
    if "v" in e and (e["v"] is None or isinstance(e["v"], (bool, int, float, str))):
        return e["v"]
    if "repr" in e and isinstance(e["repr"], str):
        return _Repr(e["repr"])
    raise BadOutput(f"a value description with keys {sorted(e)[:5]} is not understood")


class _Repr(str):
    """A non-tensor, non-scalar output, compared by its repr."""

    def __repr__(self):
        return printable(str(self))


def tensor_bytes(tensors: dict) -> int:
    return sum(t.numel() * t.element_size() for t in tensors.values())


def compare(ref, new, atol, rtol, what):
    """None when `new` (a flat list) matches `ref`, else (detail, max_abs_err)."""
    import torch

    refs, news = list(ref), list(new)
    if len(refs) != len(news):
        return f"{what}: {len(news)} outputs, the reference returns {len(refs)}", None
    for k, (r, n) in enumerate(zip(refs, news)):
        name = what if len(refs) == 1 else f"{what}[{k}]"
        if not isinstance(r, torch.Tensor):
            if isinstance(n, torch.Tensor) or r != n:
                return f"{name}: {n!r}, the reference returns {r!r}", None
            continue
        if not isinstance(n, torch.Tensor):
            return f"{name}: a {type(n).__name__}, the reference returns a tensor", None
        if tuple(n.shape) != tuple(r.shape):
            return f"{name}: shape {tuple(n.shape)}, expected {tuple(r.shape)}", None
        if n.dtype != r.dtype:
            return f"{name}: dtype {n.dtype}, expected {r.dtype}", None
        if not (r.is_floating_point() or r.is_complex()):
            if not torch.equal(r, n):
                bad = (r != n).nonzero()[0].tolist()
                return f"{name}: differs at {bad}: {n[tuple(bad)].item()} vs {r[tuple(bad)].item()}", None
            continue
        if r.is_complex():   # both parts compared: .double() would keep the real part alone
            r64, n64 = torch.view_as_real(r.to(torch.complex128)), torch.view_as_real(n.to(torch.complex128))
        else:
            r64, n64 = r.double(), n.double()
        bad_special = (~torch.isfinite(n64)) & torch.isfinite(r64)
        if bad_special.any():
            idx = bad_special.nonzero()[0].tolist()
            return f"{name}: {n64[tuple(idx)].item()} at {idx} where the reference is finite", math.inf
        close = torch.isclose(n64, r64, atol=atol, rtol=rtol, equal_nan=True)
        if not close.all():
            finite = torch.isfinite(r64) & torch.isfinite(n64)
            err = (n64 - r64).abs().where(finite, torch.zeros_like(r64))
            max_err = float(err.max())
            idx = (~close).nonzero()[0].tolist()
            count = int((~close).sum())
            return (f"{name}: {count} of {r.numel()} elements differ beyond atol={atol:g}, rtol={rtol:g} "
                    f"(max abs error {max_err:.4g}; first at {idx}: {n64[tuple(idx)].item():.6g} vs "
                    f"{r64[tuple(idx)].item():.6g})"), max_err
    return None


def judge(checks: list[dict], expected: dict, out_dir: Path, candidate: dict, atol: float, rtol: float) -> dict:
    """The verdict record: the first trial whose outputs (then gradients) differ,
    else the candidate run's own failure where it stopped, else passed.
    `expected`: stem -> (meta, tensors) from the reference run."""
    for ci, check in enumerate(checks):
        for trial, seed in enumerate(check["seeds"]):
            where = {"check": check["name"], "trial": trial, "seed": seed}
            suffix = f"(check {check['name']}, trial {trial}, seed {seed})"
            stem = f"c{ci}_t{trial}"
            exp_meta, exp_tensors = expected[stem]
            limit = 2 * tensor_bytes(exp_tensors) + TENSOR_SLACK
            try:
                got = read_files(out_dir, stem, limit)
                if got is None:
                    return _stopped(candidate, f"outputs of check {check['name']}, trial {trial}")
                meta, tensors = got
                refs = [decode(e, exp_tensors) for e in exp_meta["outputs"]]
                outs = meta.get("outputs")
                if not isinstance(outs, list):
                    raise BadOutput(f"{stem}.json has no list of outputs")
                news = [decode(e, tensors) for e in outs]
                bad = compare(refs, news, atol, rtol, "output")
                if bad is not None:
                    return {"status": "wrong", "detail": f"{bad[0]} {suffix}", "max_abs_err": bad[1], **where}
                if "input_grads" not in exp_meta:
                    continue
                flags = meta.get("requires_grad")
                if not isinstance(flags, list) or len(flags) != len(news):
                    raise BadOutput(f"{stem}.json does not say which outputs are differentiable")
                for j, k in enumerate(exp_meta.get("pairs", [])):
                    if flags[k] is not True:
                        return {"status": "wrong", "detail": f"backward: output {j} is not differentiable (no "
                                                             f"grad_fn) where the reference's is {suffix}", **where}
                grads = read_files(out_dir, stem + "_grad", limit)
                if grads is None:
                    return _stopped(candidate, f"gradients of check {check['name']}, trial {trial}")
                verdict = _compare_grads(exp_meta, exp_tensors, *grads, atol, rtol, suffix, where)
                if verdict is not None:
                    return verdict
            except (BadOutput, KeyError, TypeError, ValueError, IndexError, RecursionError) as e:
                return {"status": "runtime_error", "detail": f"the candidate's outputs {suffix} are malformed: "
                                                             f"{e}", **where}
    if candidate.get("status") != "ran":
        return candidate
    return {"status": "passed", "detail": ""}


def _compare_grads(exp_meta, exp_tensors, meta, tensors, atol, rtol, suffix, where):
    in_grads, param_grads = meta.get("input_grads"), meta.get("param_grads")
    if not isinstance(in_grads, dict) or not isinstance(param_grads, dict):
        raise BadOutput("the gradient description is not two objects")
    for k, e in exp_meta["input_grads"].items():
        if in_grads.get(k) is None:
            return {"status": "wrong", "detail": f"backward: no gradient for input {k} {suffix}", **where}
        bad = compare([decode(e, exp_tensors)], [decode(in_grads[k], tensors)], atol, rtol, f"gradient of input {k}")
        if bad is not None:
            return {"status": "wrong", "detail": f"backward: {bad[0]} {suffix}", "max_abs_err": bad[1], **where}
    for name, theirs in _paired_params(exp_meta["param_grads"], param_grads).items():
        if theirs is None:
            return {"status": "wrong", "detail": f"backward: the reference's parameter {name} has no gradient among "
                                                 f"the candidate's parameters (none of its name, none left in order) "
                                                 f"{suffix}", **where}
        if param_grads[theirs] is None:
            return {"status": "wrong", "detail": f"backward: no gradient for parameter {theirs} {suffix}", **where}
        label = name if theirs == name else f"{theirs} (the reference's {name})"
        bad = compare([decode(exp_meta["param_grads"][name], exp_tensors)], [decode(param_grads[theirs], tensors)],
                      atol, rtol, f"gradient of parameter {label}")
        if bad is not None:
            return {"status": "wrong", "detail": f"backward: {bad[0]} {suffix}", "max_abs_err": bad[1], **where}
    return None


def _paired_params(reference: dict, candidate: dict) -> dict:
    """Each reference parameter -> the candidate parameter whose gradient it is checked against:
    the one of the same name, else the next unpaired one in order (a candidate may rename its
    modules). Every reference parameter is checked: the names are the candidate's to report,
    so one it leaves out (or renames past the others) is None, a failure, never a skip."""
    pairs = {name: name for name in reference if name in candidate}
    rest = iter(name for name in candidate if name not in reference)
    return {name: pairs.get(name) or next(rest, None) for name in reference}


def _stopped(candidate: dict, what: str) -> dict:
    if candidate.get("status") != "ran":
        return candidate
    return {"status": "runtime_error", "detail": f"the candidate's run ended without writing the {what}"}
