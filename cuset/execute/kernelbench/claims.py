"""What a KernelBench harness run may say about itself, and how the parent reads it.

The harness writes `verdict.json` (its record) and `progress.json` (the step in
progress) into its run dir. The candidate's code runs in that same process, so both
files are the candidate's words: the parent reads them through the careful reader
(no links, regular files only, size checked before reading, never blocking on a
fifo), parses them with every failure caught, and checks the record against a
schema. A candidate's run may report any failure of its own and nothing else: never
a pass, a skip, an infrastructure error or a missing answer (those would take the
sample out of a denominator or change how other samples count).
"""

from __future__ import annotations

import math
from pathlib import Path

from cuset.execute.kernelbench.build import FLAG_FIELDS
from cuset.execute.kernelbench.compare import BadOutput, parse_json
from cuset.execute.result import Status, printable
from cuset.execute.untrusted_files import UnsafeOutput, read_bounded

VERDICT_FILE = "verdict.json"
PROGRESS_FILE = "progress.json"
WATCHDOG_FILE = "timeout.txt"
VERDICT_LIMIT = 8 << 20      # bytes: a record with the sources of the extensions it asks for
PROGRESS_LIMIT = 64 << 10
WATCHDOG_LIMIT = 1 << 20     # faulthandler's traceback of the overrunning step
MAX_SPECS = 16               # load_inline calls one need_extensions record may name
TEXT_LIMIT = 1 << 16         # characters of a claimed detail or log kept (truncated later anyway)

# The run's own states (not verdicts): it finished its trials, or it needs extensions built.
RAN, NEED_EXTENSIONS = "ran", "need_extensions"
# Failures a candidate's run may claim: each keeps the sample in every denominator.
CANDIDATE_STATUSES = frozenset(s.value for s in (
    Status.COMPILE_ERROR, Status.RUNTIME_ERROR, Status.TIMEOUT, Status.WRONG, Status.RACE, Status.WARP_SYNC,
    Status.UNSUPPORTED, Status.MEMORY_LIMIT, Status.DISK_LIMIT)) | {RAN, NEED_EXTENSIONS}
# The reference run is the task's own code: it may also skip the task (a reference that
# does not build) or report the machine's fault (torch does not import).
REFERENCE_STATUSES = frozenset(s.value for s in Status if s is not Status.PASSED) | {RAN}

# field -> accepted types (bool is not an int here)
_FIELDS = {"status": (str,), "detail": (str,), "log": (str,), "check": (str,), "trial": (int,), "seed": (int,),
           "max_abs_err": (int, float), "step": (dict,), "specs": (list,),
           # a `ran` record's evidence of kernel work (the parent believes only what it can check, see verify)
           "loaded": (list,), "kernel_launches": (int,), "extension_calls": (int,), "build_failed": (list,)}
_NAME_LISTS = ("loaded", "build_failed")
MAX_NAMES = 64               # extensions a record may say it loaded (or failed to build)
_PROGRESS = {"step": (str,), "timeout": (int, float), "check": (str,), "trial": (int,), "seed": (int,)}
# a request's build record (harness.call_spec, build.ExtensionSpec.to_json): lists of strings, two flags
_SPEC_LISTS = ("cpp_sources", "cuda_sources", "functions", *FLAG_FIELDS)
_SPEC_FLAGS = ("with_cuda", "with_pytorch_error_handling")


class Unbelievable(ValueError):
    """A harness file the parent cannot take at its word (named in the message)."""


def _typed(value, types) -> bool:
    if isinstance(value, bool):
        return bool in types
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return isinstance(value, types)


def read_json(run_dir: Path, name: str, limit: int):
    """The parsed JSON of run_dir/name; None when there is no such file. Unbelievable when it
    is a link, a fifo, a device, larger than `limit`, or not JSON."""
    try:
        raw = read_bounded(run_dir, name, limit)
    except (UnsafeOutput, OSError) as e:
        raise Unbelievable(printable(str(e))) from None
    if raw is None:
        return None
    try:
        return parse_json(raw, name)
    except BadOutput as e:
        raise Unbelievable(str(e)) from None


def checked_record(value, role: str) -> dict:
    """The record of a `role` ("candidate" | "reference") run if it is one the parent can
    believe: an object, known fields of the right types, a status that run may claim.
    Unknown fields are dropped; anything else is Unbelievable."""
    if not isinstance(value, dict):
        raise Unbelievable(f"{VERDICT_FILE} holds a JSON {type(value).__name__}, not an object")
    allowed = CANDIDATE_STATUSES if role == "candidate" else REFERENCE_STATUSES
    status = value.get("status")
    if not isinstance(status, str) or status not in allowed:
        shown = printable(str(status))[:80]
        raise Unbelievable(f"{VERDICT_FILE} claims status {shown!r}, which a {role} run may not report")
    record = {}
    for key, types in _FIELDS.items():
        if key not in value:
            continue
        if not _typed(value[key], types):
            raise Unbelievable(f"{VERDICT_FILE}: field {key!r} is a {type(value[key]).__name__}")
        record[key] = printable(value[key][:TEXT_LIMIT]) if isinstance(value[key], str) else value[key]
    if "step" in record:
        record["step"] = checked_progress(record["step"])
    for key in _NAME_LISTS:
        if key in record and (len(record[key]) > MAX_NAMES or not all(isinstance(n, str) for n in record[key])):
            raise Unbelievable(f"{VERDICT_FILE}: field {key!r} is not a list of at most {MAX_NAMES} names")
        if key in record:
            record[key] = [printable(n[:200]) for n in record[key]]
    for key in ("kernel_launches", "extension_calls"):
        if key in record and record[key] < 0:
            raise Unbelievable(f"{VERDICT_FILE}: field {key!r} is negative")
    if status == NEED_EXTENSIONS:
        record["specs"] = _checked_specs(record.get("specs"))
    else:
        record.pop("specs", None)
    return record


def _checked_specs(specs) -> list[dict]:
    if not isinstance(specs, list) or not specs:
        raise Unbelievable(f"{VERDICT_FILE} asks for extensions without naming them")
    if len(specs) > MAX_SPECS:
        raise Unbelievable(f"{VERDICT_FILE} asks for {len(specs)} extensions at once, more than {MAX_SPECS}")
    checked = []
    for spec in specs:
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or any(
                not isinstance(spec.get(k), list) or not all(isinstance(s, str) for s in spec[k])
                for k in _SPEC_LISTS) or any(not isinstance(spec.get(k), bool) for k in _SPEC_FLAGS):
            raise Unbelievable(f"{VERDICT_FILE}: an extension request is not a load_inline call's arguments")
        checked.append({k: spec[k] for k in ("name", *_SPEC_LISTS, *_SPEC_FLAGS)})
    return checked


def checked_progress(value) -> dict:
    """The well-typed fields of a progress note (it only labels messages: the rest is dropped)."""
    if not isinstance(value, dict):
        return {}
    return {k: printable(v[:200]) if isinstance(v, str) else v
            for k, v in value.items() if k in _PROGRESS and _typed(v, _PROGRESS[k])}


def read_progress(run_dir: Path) -> dict:
    try:
        return checked_progress(read_json(run_dir, PROGRESS_FILE, PROGRESS_LIMIT))
    except Unbelievable:
        return {}


def watchdog_fired(run_dir: Path) -> bool:
    """The harness's per-step watchdog (faulthandler) wrote its traceback."""
    try:
        raw = read_bounded(run_dir, WATCHDOG_FILE, WATCHDOG_LIMIT)
    except (UnsafeOutput, OSError):
        return False
    return raw is not None and b"Timeout (" in raw
