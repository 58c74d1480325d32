"""Stage 2's contract with the LLM: the request that asks it to turn a CUDA program
into a task, and the checks a reply must pass to become one.

The reply is ONE JSON object with the fields of `REPLY_FIELDS`. A reply that is
not JSON, lacks a field, or breaks a rule is rejected with a reason (counted in
the manifest): bad_json, missing_field, bad_type, bad_name, bad_dtype, bad_shape,
no_outputs, empty_field, duplicate_name, name_clash, bad_value, no_kernel,
no_main, kernels_dropped, gen_syntax_error, gen_ignores_case, gen_no_reference.
The checker (compare.py) is not asked for: `cuset.curation.checker` writes it.
"""

from __future__ import annotations

import ast
import json
import re
import threading

from cuset.curation.checker import Check, compare_script, tolerance
from cuset.curation.cudatext import has_main, kernel_names
from cuset.curation.records import Candidate
from cuset.tasks import Task, validate_record
from cuset.tasks.schema import DTYPES

# CPython 3.11's ast.parse is not thread-safe ("AST constructor recursion depth
# mismatch" when replies are parsed by several worker threads at once).
_AST_LOCK = threading.Lock()

PROMPT_VERSION = "cuset-data-task-v1"  # bump when the request text changes: it is part of every cache key

FAMILIES = ("elementwise", "activation", "reduction", "scan", "softmax", "normalization", "gemm", "gemv",
            "convolution", "stencil", "pooling", "transpose", "histogram", "sort", "sparse", "graph",
            "attention", "image", "scientific", "other")

# field -> (type, what to write); the prompt's field list is generated from this table.
REPLY_FIELDS: dict[str, tuple[type, str]] = {
    "task_name": (str, "Snake_Case name of what the kernel computes (letters, digits, _)"),
    "family": (str, "one of: " + ", ".join(FAMILIES)),
    "level1_prompt": (str, "detailed task statement: what is computed (exact formula), every input and output with dtype and shape, edge cases"),
    "level2_prompt": (str, "the algorithm in one or two sentences, without sizes"),
    "level3_prompt": (str, "one sentence naming the operation only"),
    "inputs": (list, 'list of {"name", "dtype", "shape"}, shape written like "(16, 1024)" or "(4096,)"'),
    "outputs": (list, "same form as inputs"),
    "reduction_depth": (int, "the most values accumulated into one output element (1 for elementwise, K for a length-K dot product)"),
    "bench_cu": (str, "the complete CUDA program (rules below)"),
    "gen_py": (str, "the input generator (rules below)"),
}

ALLOWED_DTYPES = tuple(d for d in DTYPES if d != "bfloat16")  # numpy cannot write bfloat16

SYSTEM_PROMPT = """You turn a CUDA program into a self-contained, checkable task. Reply with ONE JSON object and nothing else: no prose, no code fences. Its fields:
{fields}

Rules for bench_cu:
- Keep the program's __global__ kernels: same names, same computation. Rewrite main() and other host code as needed.
- main() reads each input x from data/x.bin: raw little-endian values of the declared dtype and shape, no header. It runs the kernels, writes each output y to data/y.bin the same way, and returns 0.
- Sizes are fixed (hard-coded) and small: all inputs and outputs together under 16 MB.
- Use only the CUDA runtime and the C++ standard library.

Rules for gen_py (Python 3, numpy only):
- case = int(os.environ.get("CUSET_CASE", "0")) is 0, 1, 2, 3 or 4; seed every random generator with it, so the five cases differ and are reproducible.
- os.makedirs("data", exist_ok=True); write each input x to data/x.bin with arr.astype(dtype).tofile(...).
- Compute each output y with numpy from the same inputs, exactly as the kernel defines it, and write it to data/y_ref.bin in the declared dtype and shape.
- Write no other files; no network.

dtypes: {dtypes}. Input and output names are distinct identifiers. Outputs are compared with a tolerance derived from their dtype and reduction_depth, so state reduction_depth truthfully."""

USER_PROMPT = """Source: {origin}
{context}Program:
```cuda
{code}
```"""


def build_messages(cand: Candidate) -> list[dict]:
    fields = "\n".join(f'- "{k}": {desc}' for k, (_, desc) in REPLY_FIELDS.items())
    system = f"[{PROMPT_VERSION}]\n" + SYSTEM_PROMPT.format(fields=fields, dtypes=", ".join(ALLOWED_DTYPES))
    context = f"The program answers this request:\n{cand.prompt}\n\n" if cand.prompt else ""
    user = USER_PROMPT.format(origin=cand.origin, context=context, code=cand.code)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


class ReplyRejected(ValueError):
    def __init__(self, reason: str, detail: str):
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}")


def parse_reply_json(content: str) -> dict:
    """The JSON object in a reply (bare, fenced, or wrapped in a little prose)."""
    text = content.strip()
    fenced = re.search(r"```(?:json)?[ \t]*\n(.*?)```", text, re.S)
    if fenced:
        text = fenced.group(1).strip()
    if not text.startswith("{"):
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end < start:
            raise ReplyRejected("bad_json", f"no complete JSON object in the reply (starts {content[:80]!r})")
        text = text[start:end + 1]
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReplyRejected("bad_json", f"{e.msg} at line {e.lineno} column {e.colno}") from None
    if not isinstance(obj, dict):
        raise ReplyRejected("bad_json", f"expected a JSON object, got {type(obj).__name__}")
    return obj


def reply_to_task(content: str, cand: Candidate, task_id: int) -> Task:
    """Validate a reply against the contract and build the task; raises ReplyRejected."""
    obj = parse_reply_json(content)
    missing = [k for k in REPLY_FIELDS if k not in obj]
    if missing:
        raise ReplyRejected("missing_field", "missing " + ", ".join(missing))
    for key, (tp, _) in REPLY_FIELDS.items():
        value = obj[key]
        if not isinstance(value, tp) or isinstance(value, bool):
            raise ReplyRejected("bad_type", f"{key} must be a {tp.__name__}, got {type(value).__name__}")
    record = _record(obj, cand, task_id)
    errs = validate_record(record)
    if errs:
        fld, msg, reason = errs[0]
        raise ReplyRejected(reason, f"{fld}: {msg}")
    if not re.fullmatch(r"[A-Za-z_]\w*", obj["task_name"]):
        raise ReplyRejected("bad_name", f"task_name {obj['task_name']!r} must be letters, digits and _")
    _check_names(record)
    if obj["reduction_depth"] < 1:
        raise ReplyRejected("bad_value", f"reduction_depth must be >= 1, got {obj['reduction_depth']}")
    _check_program(obj["bench_cu"], cand)
    _check_generator(obj["gen_py"])
    task = Task.from_json(record)
    tols = {o.name: tolerance(o.dtype, obj["reduction_depth"]) for o in task.outputs}
    compare = compare_script(task.outputs, tuple(Check(name, tol, tol) for name, tol in tols.items()))
    return Task.from_json({**record, "compare.py": compare})


def _record(obj: dict, cand: Candidate, task_id: int) -> dict:
    family = obj["family"].strip().lower()
    return {
        "id": task_id,
        "task_name": obj["task_name"],
        "task_description": f"Compute the {obj['task_name']} kernel on GPU using CUDA.",
        "inputs": obj["inputs"],
        "outputs": obj["outputs"],
        "gpu": "unknown",
        "bench.cu": obj["bench_cu"],
        "gen.py": obj["gen_py"],
        "compare.py": "# written by cuset.curation.checker\n",
        "level1_prompt": obj["level1_prompt"],
        "level2_prompt": obj["level2_prompt"],
        "level3_prompt": obj["level3_prompt"],
        "family": family if family in FAMILIES else "other",
    }


def _check_names(record: dict) -> None:
    ins = {t["name"] for t in record["inputs"]}
    for t in record["outputs"]:
        if t["name"] in ins:
            raise ReplyRejected("name_clash", f"output {t['name']!r} has the name of an input")
        if t["name"].endswith("_ref") or f"{t['name']}_ref" in ins:
            raise ReplyRejected("name_clash", f"output {t['name']!r} collides with reference file names")
    for spec in (*record["inputs"], *record["outputs"]):
        if spec["dtype"] not in ALLOWED_DTYPES:
            raise ReplyRejected("bad_dtype", f"{spec['name']}: {spec['dtype']} cannot be written by numpy")


def _check_program(code: str, cand: Candidate) -> None:
    kernels = kernel_names(code)
    if not kernels:
        raise ReplyRejected("no_kernel", "bench_cu defines no __global__ function")
    if not has_main(code):
        raise ReplyRejected("no_main", "bench_cu has no main()")
    original = kernel_names(cand.code)
    if original and not set(original) & set(kernels):
        raise ReplyRejected("kernels_dropped", f"bench_cu keeps none of the program's kernels ({', '.join(original)})")


def _check_generator(gen: str) -> None:
    try:
        with _AST_LOCK:
            ast.parse(gen)
    except SyntaxError as e:
        raise ReplyRejected("gen_syntax_error", f"gen_py line {e.lineno}: {e.msg}") from None
    if "CUSET_CASE" not in gen:
        raise ReplyRejected("gen_ignores_case", "gen_py does not read CUSET_CASE: all five cases would be the same")
    if "_ref" not in gen:
        raise ReplyRejected("gen_no_reference", "gen_py writes no data/<output>_ref.bin reference")
