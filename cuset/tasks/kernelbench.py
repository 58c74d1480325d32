"""The KernelBench task record: a PyTorch reference `Model` the model rewrites as `ModelNew`.

A reference is a Python module with `class Model(nn.Module)`, `get_inputs()` and
`get_init_inputs()`; sizes are module-level constants (`batch_size = 16`). The answer is
a module with `class ModelNew` of the same interface whose forward calls CUDA kernels
built with `torch.utils.cpp_extension.load_inline`; it is correct when its outputs match
the reference within atol/rtol over `n_trials` random inputs.

Everything here reads the reference with `ast`: validation never executes task code.

JSONL record (one per line; `kind` is what tells it from a CUDABench record):

    {"kind": "kernelbench", "id": "kb_relu", "task_name": "ReLU", "reference_src": "...",
     "family": "elementwise", "description": "", "atol": 0.01, "rtol": 0.01, "n_trials": 5,
     "backward": false, "shape_variants": [{"dim": 1000}], "value_variants": ["negative"]}

Only kind, id, task_name and reference_src are required.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

KIND = "kernelbench"
# Input value distributions robust verification may switch to (see cuset.execute.kernelbench).
VALUE_VARIANTS = ("negative", "zeros", "large")
# Optional record fields and their defaults, in serialisation order.
OPTIONAL_FIELDS: dict[str, object] = {
    "family": None, "description": "", "atol": 1e-2, "rtol": 1e-2, "n_trials": 5,
    "backward": False, "shape_variants": (), "value_variants": (),
}
REQUIRED_FIELDS = ("id", "task_name", "reference_src")
# The three names KernelBench's harness looks up in the reference module.
REQUIRED_NAMES = {"Model": "class", "get_inputs": "function", "get_init_inputs": "function"}


@dataclass(frozen=True)
class KernelBenchTask:
    id: str                      # unique, e.g. "kb_relu"
    task_name: str               # e.g. "ReLU"
    reference_src: str           # Python: class Model(nn.Module), get_inputs(), get_init_inputs()
    family: str | None = None    # elementwise | reduction | softmax | matmul | conv | normalization ...
    description: str = ""
    atol: float = 1e-2
    rtol: float = 1e-2
    n_trials: int = 5
    backward: bool = False       # reference differentiable: robust mode may check gradients
    shape_variants: tuple[dict[str, int | float], ...] = ()  # module-constant overrides robust mode may use
    value_variants: tuple[str, ...] = ()   # subset of VALUE_VARIANTS robust mode may use
    kind: ClassVar[str] = KIND

    @property
    def family_name(self) -> str:
        """The family for grouping: explicit, else the task name (as Task.family_name)."""
        return self.family or self.task_name

    @property
    def constants(self) -> dict[str, int | float]:
        """The reference's module-level int/float constants (its sizes), read without running it."""
        return module_constants(self.reference_src)

    def to_json(self) -> dict:
        out: dict = {"kind": KIND, "id": self.id, "task_name": self.task_name, "reference_src": self.reference_src}
        for key in OPTIONAL_FIELDS:
            value = getattr(self, key)
            if key == "family" and value is None:
                continue
            if key in ("shape_variants", "value_variants"):
                value = [dict(v) for v in value] if key == "shape_variants" else list(value)
            out[key] = value
        return out

    @classmethod
    def from_json(cls, record: dict) -> "KernelBenchTask":
        """Build from a record already checked by `validate_kernelbench_record`."""
        kwargs = {key: record[key] for key in REQUIRED_FIELDS}
        for key, default in OPTIONAL_FIELDS.items():
            kwargs[key] = record.get(key, default)
        kwargs["atol"], kwargs["rtol"] = float(kwargs["atol"]), float(kwargs["rtol"])
        kwargs["shape_variants"] = tuple(dict(v) for v in kwargs["shape_variants"])
        kwargs["value_variants"] = tuple(kwargs["value_variants"])
        return cls(**kwargs)


class SourceProblem(NamedTuple):
    """A problem inside a Python source: `line` is 1-based within that source."""

    line: int
    message: str
    reason: str


def _number(node: ast.expr) -> int | float | None:
    """The value of an int/float literal (a leading minus allowed), else None."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def _module_constants(tree: ast.Module) -> dict[str, int | float]:
    consts: dict[str, int | float] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            pairs = [pair for target in node.targets for pair in _bindings(target, node.value)]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            pairs = _bindings(node.target, node.value)
        else:
            continue
        for name, value in pairs:
            number = _number(value) if value is not None else None
            if number is None:
                consts.pop(name, None)  # rebound to something else: no longer a plain constant
            else:
                consts[name] = number
    return consts


def _bindings(target, value) -> list[tuple[str, ast.expr | None]]:
    """(name, value expression) of each name `target = value` binds: `dim = 4`, `a = b = 4`
    and `height, width = 32, 32` (a value that is not a literal tuple of the same length
    binds each name to None: not a constant)."""
    if isinstance(target, ast.Name):
        return [(target.id, value)]
    if isinstance(target, (ast.Tuple, ast.List)):
        parts = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) \
            else [None] * len(target.elts)
        return [pair for t, v in zip(target.elts, parts) for pair in _bindings(t, v)]
    return []


def module_constants(src: str) -> dict[str, int | float]:
    """Module-level `name = <int or float literal>` assignments, tuple assignments
    (`height, width = 32, 32`) included (the last binding wins)."""
    return _module_constants(ast.parse(src))


def check_reference(src: str) -> list[SourceProblem]:
    """Problems of a reference module: syntax, and Model / get_inputs / get_init_inputs at module level."""
    if not isinstance(src, str) or not src.strip():
        return [SourceProblem(1, "is empty: it must hold class Model, get_inputs() and get_init_inputs()",
                              "empty_field")]
    try:
        tree = ast.parse(src)
    except SyntaxError as e:
        return [SourceProblem(e.lineno or 1, f"Python syntax error: {e.msg} (column {e.offset}); "
                              "fix the reference so it parses", "bad_python")]
    defined: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            defined[node.name] = "class"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defined[node.name] = "function"
    problems = []
    last = len(src.splitlines()) or 1
    for name, what in REQUIRED_NAMES.items():
        if name not in defined:
            returns = "forward inputs" if name == "get_inputs" else "constructor arguments"
            fix = ("add `class Model(nn.Module)` with the forward to reproduce" if name == "Model"
                   else f"add `def {name}():` returning a list of the {returns}")
            problems.append(SourceProblem(last, f"no module-level {what} `{name}`: {fix}", f"missing_{name}"))
        elif defined[name] != what:
            problems.append(SourceProblem(last, f"`{name}` must be a {what}, not a {defined[name]}", f"missing_{name}"))
    return problems


def validate_kernelbench_record(record) -> list[tuple[str, str, str]]:
    """All problems of one decoded KernelBench record as (field, message, reason), like validate_record."""
    if not isinstance(record, dict):
        return [("<record>", f"must be a JSON object, got {type(record).__name__}", "bad_type")]
    errs: list[tuple[str, str, str]] = []
    for key in REQUIRED_FIELDS:
        if key not in record:
            errs.append((key, "missing (KernelBench records need id, task_name and reference_src)", "missing_field"))
        elif not isinstance(record[key], str):
            errs.append((key, f"must be a string, got {type(record[key]).__name__}", "bad_type"))
        elif not record[key].strip() and key != "reference_src":
            errs.append((key, "is empty", "empty_field"))
    if isinstance(record.get("reference_src"), str):
        for p in check_reference(record["reference_src"]):
            errs.append(("reference_src", f"line {p.line} of the source: {p.message}", p.reason))
    unknown = sorted(set(record) - set(REQUIRED_FIELDS) - set(OPTIONAL_FIELDS) - {"kind"})
    for key in unknown:
        errs.append((key, f"unknown field; KernelBench records take {', '.join([*REQUIRED_FIELDS, *OPTIONAL_FIELDS])}",
                     "unknown_field"))
    errs.extend(_check_options(record))
    return errs


def _check_options(record: dict) -> list[tuple[str, str, str]]:
    errs: list[tuple[str, str, str]] = []
    for key in ("family", "description"):
        if record.get(key) is not None and not isinstance(record[key], str):
            errs.append((key, f"must be a string, got {type(record[key]).__name__}", "bad_type"))
    for key in ("atol", "rtol"):
        if key in record:
            v = record[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                errs.append((key, f"must be a positive number, got {v!r} (KernelBench uses 1e-2)", "bad_tolerance"))
    if "n_trials" in record:
        v = record["n_trials"]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            errs.append(("n_trials", f"must be an integer >= 1, got {v!r}", "bad_type"))
    if "backward" in record and not isinstance(record["backward"], bool):
        errs.append(("backward", f"must be true or false, got {record['backward']!r}", "bad_type"))
    if "value_variants" in record:
        v = record["value_variants"]
        if not isinstance(v, list):
            errs.append(("value_variants", f"must be a list drawn from {list(VALUE_VARIANTS)}", "bad_type"))
        else:
            for i, name in enumerate(v):
                if name not in VALUE_VARIANTS:
                    errs.append((f"value_variants[{i}]", f"unknown value variant {name!r}; use one of "
                                 f"{', '.join(VALUE_VARIANTS)}", "bad_variant"))
    if "shape_variants" in record:
        errs.extend(_check_shape_variants(record["shape_variants"], record.get("reference_src")))
    return errs


def _check_shape_variants(value, src) -> list[tuple[str, str, str]]:
    if not isinstance(value, list):
        return [("shape_variants", "must be a list of objects mapping module constants to new values, "
                 "e.g. [{\"dim\": 1000}]", "bad_type")]
    try:
        consts = module_constants(src) if isinstance(src, str) else None
    except SyntaxError:
        consts = None  # reported under reference_src already
    errs: list[tuple[str, str, str]] = []
    for i, variant in enumerate(value):
        where = f"shape_variants[{i}]"
        if not isinstance(variant, dict) or not variant:
            errs.append((where, "must be a non-empty object such as {\"dim\": 1000}", "bad_type"))
            continue
        for name, new in variant.items():
            if isinstance(new, bool) or not isinstance(new, (int, float)):
                errs.append((f"{where}.{name}", f"must be an int or float, got {new!r}", "bad_variant"))
            elif consts is not None and name not in consts:
                known = ", ".join(sorted(consts)) or "none"
                errs.append((f"{where}.{name}", f"{name!r} is not a module-level int/float constant of the "
                             f"reference (it has: {known}); define `{name} = ...` at module level or drop it",
                             "bad_variant"))
            elif consts is not None and isinstance(consts[name], int) and not isinstance(new, int):
                errs.append((f"{where}.{name}", f"{name} is an int in the reference; give an int, not {new!r}",
                             "bad_variant"))
    return errs
