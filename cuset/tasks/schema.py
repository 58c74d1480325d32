"""The CUDABench task record (the format of the CUDABench release's task files).

Every record has exactly twelve fields. Three of them have dots in their JSON
names (`bench.cu`, `gen.py`, `compare.py`); the dataclass uses underscores and
`to_json`/`from_json` translate.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field
from typing import ClassVar

# JSON field name -> dataclass attribute name, in the dataset's column order.
FIELDS: dict[str, str] = {
    "id": "id",
    "task_name": "task_name",
    "task_description": "task_description",
    "inputs": "inputs",
    "outputs": "outputs",
    "gpu": "gpu",
    "bench.cu": "bench_cu",
    "gen.py": "gen_py",
    "compare.py": "compare_py",
    "level1_prompt": "level1_prompt",
    "level2_prompt": "level2_prompt",
    "level3_prompt": "level3_prompt",
}

# numpy dtype name -> element size in bytes. CUDABench uses float32, int32,
# uint32, int64 and uint8; the rest are accepted because user datasets use them.
DTYPES: dict[str, int] = {
    "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8,
    "int8": 1, "int16": 2, "int32": 4, "int64": 8,
    "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1,
}

LEVELS = (1, 2, 3)
IDENT_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def task_id_order(task_id: int | str) -> tuple[bool, int | str]:
    """Sort key for task ids of both kinds: CUDABench's integers first, then KernelBench's names."""
    return (isinstance(task_id, str), task_id)


def valid_task_id(task_id) -> bool:
    """A CUDABench id is an integer, a KernelBench id a non-empty string."""
    return (isinstance(task_id, int) and not isinstance(task_id, bool)) or (isinstance(task_id, str) and bool(task_id))


def parse_shape(text: str) -> tuple[int, ...]:
    """Parse a CUDABench shape string such as "(1048576,)" or "(16, 1024)".

    Raises ValueError with a message that says what is wrong.
    """
    if not isinstance(text, str):
        raise ValueError(f"shape must be a string like '(16, 1024)', got {type(text).__name__}")
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        raise ValueError(f"unparsable shape {text!r}: write it like '(16, 1024)' or '(1048576,)'") from None
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value,)
    if not isinstance(value, (tuple, list)):
        raise ValueError(f"unparsable shape {text!r}: expected a tuple of integers")
    dims = tuple(value)
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int):
            raise ValueError(f"shape {text!r} has a non-integer dimension {d!r}")
        if d < 0:
            raise ValueError(f"shape {text!r} has a negative dimension {d}")
    return dims


@dataclass(frozen=True)
class TensorSpec:
    """One declared input or output: a raw little-endian file `data/<name>.bin`."""

    name: str
    dtype: str
    shape: str  # kept as the original string so records round-trip byte for byte

    @property
    def dims(self) -> tuple[int, ...]:
        return parse_shape(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.dims)

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPES[self.dtype]

    def to_json(self) -> dict:
        return {"name": self.name, "dtype": self.dtype, "shape": self.shape}


@dataclass(frozen=True)
class Task:
    """A CUDABench-format task: prompts, I/O declaration, reference program and checker."""

    id: int
    task_name: str
    task_description: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    gpu: str
    bench_cu: str
    gen_py: str
    compare_py: str
    level1_prompt: str
    level2_prompt: str
    level3_prompt: str
    # Not part of the 12-field schema: the task family (e.g. "relu"), used for
    # per-family metrics. Serialised only when set, so CUDABench files round-trip.
    family: str | None = field(default=None, compare=False)
    # The task kind, for code that handles both kinds (see cuset.tasks.kernelbench).
    kind: ClassVar[str] = "cudabench"

    def prompt(self, level: int) -> str:
        if level not in LEVELS:
            raise ValueError(f"prompt level must be one of {LEVELS}, got {level!r}")
        return getattr(self, f"level{level}_prompt")

    @property
    def family_name(self) -> str:
        """The family for grouping: explicit, else the task name (CUDABench: 5 sizes share a name)."""
        return self.family or self.task_name

    @property
    def data_bytes(self) -> int:
        """Bytes of declared inputs plus outputs: what a run has to hold at least."""
        return sum(t.nbytes for t in (*self.inputs, *self.outputs))

    def to_json(self) -> dict:
        out: dict = {}
        for key, attr in FIELDS.items():
            value = getattr(self, attr)
            if attr in ("inputs", "outputs"):
                value = [t.to_json() for t in value]
            out[key] = value
        if self.family is not None:
            out["family"] = self.family
        return out

    @classmethod
    def from_json(cls, record: dict) -> "Task":
        """Build from a record already checked by `validate_record`."""
        kwargs = {attr: record[key] for key, attr in FIELDS.items()}
        for attr in ("inputs", "outputs"):
            kwargs[attr] = tuple(TensorSpec(t["name"], t["dtype"], t["shape"]) for t in kwargs[attr])
        kwargs["family"] = record.get("family")
        return cls(**kwargs)


@dataclass(frozen=True)
class RenderedPrompt:
    """A task's prompt as a model gets it (`cuset.tasks.render_prompt`, any kind)."""

    system: str
    user: str

    def messages(self) -> list[dict[str, str]]:
        """Chat messages, the form HF chat templates and OpenAI servers take."""
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]


def _check_tensor_list(value, fld: str) -> list[tuple[str, str, str]]:
    """Return (field, message, reason) triples for a malformed inputs/outputs list."""
    errs: list[tuple[str, str, str]] = []
    if not isinstance(value, list):
        return [(fld, f"must be a list of {{name, dtype, shape}}, got {type(value).__name__}", "bad_type")]
    seen: set[str] = set()
    for i, spec in enumerate(value):
        where = f"{fld}[{i}]"
        if not isinstance(spec, dict):
            errs.append((where, "must be an object with name, dtype, shape", "bad_type"))
            continue
        for key in ("name", "dtype", "shape"):
            if key not in spec:
                errs.append((f"{where}.{key}", "missing", "missing_field"))
        name = spec.get("name")
        if "name" in spec:
            if not isinstance(name, str) or not name or not set(name) <= IDENT_CHARS:
                errs.append((f"{where}.name", f"{name!r} is not a valid file stem (letters, digits, _)", "bad_name"))
            elif name in seen:
                errs.append((f"{where}.name", f"duplicate tensor name {name!r}", "duplicate_name"))
            else:
                seen.add(name)
        if "dtype" in spec and spec["dtype"] not in DTYPES:
            errs.append((f"{where}.dtype", f"unknown dtype {spec['dtype']!r}; use one of {', '.join(DTYPES)}", "bad_dtype"))
        if "shape" in spec:
            try:
                parse_shape(spec["shape"])
            except ValueError as e:
                errs.append((f"{where}.shape", str(e), "bad_shape"))
    return errs


def validate_record(record) -> list[tuple[str, str, str]]:
    """All problems of one decoded JSON record as (field, message, reason)."""
    if not isinstance(record, dict):
        return [("<record>", f"must be a JSON object, got {type(record).__name__}", "bad_type")]
    errs: list[tuple[str, str, str]] = []
    for key in FIELDS:
        if key not in record:
            errs.append((key, "missing (CUDABench records have all 12 fields)", "missing_field"))
    if "id" in record and (isinstance(record["id"], bool) or not isinstance(record["id"], int)):
        errs.append(("id", f"must be an integer, got {record['id']!r}", "bad_type"))
    for key in FIELDS:
        if key in ("id", "inputs", "outputs") or key not in record:
            continue
        if not isinstance(record[key], str):
            errs.append((key, f"must be a string, got {type(record[key]).__name__}", "bad_type"))
    for key in ("bench.cu", "gen.py", "compare.py", "task_name"):
        if isinstance(record.get(key), str) and not record[key].strip():
            errs.append((key, "is empty", "empty_field"))
    for key in ("inputs", "outputs"):
        if key in record:
            errs.extend(_check_tensor_list(record[key], key))
    if isinstance(record.get("outputs"), list) and not record["outputs"]:
        errs.append(("outputs", "declares no outputs: nothing could be checked", "no_outputs"))
    if "family" in record and not isinstance(record["family"], str):
        errs.append(("family", "must be a string when present", "bad_type"))
    return errs
