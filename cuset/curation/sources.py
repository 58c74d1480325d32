"""Stage 1: read every configured source into candidates; skip the unusable, counted by reason.

Skip reasons: unreadable, oversized, binary, non_utf8, no_kernel (code with no
`__global__` function), identical_copy (same content as an earlier candidate),
bad_json / missing_field / no_code (pair lines), and `task_<reason>` for
CUDABench records that fail validation (reasons of `cuset.tasks.load_tasks`).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from cuset.errors import CusetError
from cuset.io import JsonlError, iter_jsonl
from cuset.curation.config import SourceConfig
from cuset.curation.cudatext import kernel_names
from cuset.generate.extract import extract_code
from cuset.curation.records import Candidate, Skip, content_key

BINARY_SNIFF_BYTES = 8192


class SourceError(CusetError, RuntimeError):
    """A source cannot be read at all (missing path, dataset not loadable): the build stops."""


@dataclass
class SourceScan:
    candidates: list[Candidate] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    per_source: dict[str, Counter] = field(default_factory=dict)

    def skipped_by_reason(self) -> Counter:
        return Counter(s.reason for s in self.skips)


def scan_sources(sources: list[SourceConfig], max_bytes: int, progress=None) -> SourceScan:
    """Read all sources in order. Candidates with the same key as an earlier one are
    skipped as identical copies (they would cost the same LLM request and validation twice)."""
    scan = SourceScan()
    seen: dict[str, str] = {}
    for src in sources:
        counts = scan.per_source.setdefault(src.name, Counter())
        for item in _READERS[src.kind](src, max_bytes):
            if isinstance(item, Candidate) and item.key in seen:
                item = Skip(src.name, item.origin, "identical_copy", f"same content as {seen[item.key]}")
            if isinstance(item, Skip):
                scan.skips.append(item)
                counts[f"skipped:{item.reason}"] += 1
            else:
                seen[item.key] = item.origin
                scan.candidates.append(item)
                counts["candidates"] += 1
            if progress is not None:
                progress()
    return scan


# ---- cuda_dir ---------------------------------------------------------------

def _iter_cuda_dir(src: SourceConfig, max_bytes: int) -> Iterator[Candidate | Skip]:
    root = Path(src.path)
    if not root.is_dir():
        raise SourceError(f"source {src.name!r}: {root} is not a directory (sources[].path of a cuda_dir)")
    exts = tuple(e.lower() for e in src.extensions)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fname in sorted(filenames):
            if not fname.lower().endswith(exts):
                continue
            path = Path(dirpath) / fname
            yield _read_code_file(src.name, path, max_bytes)


def _read_code_file(source: str, path: Path, max_bytes: int) -> Candidate | Skip:
    origin = str(path)
    try:
        size = path.stat().st_size
        if size > max_bytes:
            return Skip(source, origin, "oversized", f"{size} bytes > max_file_bytes={max_bytes}")
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as e:
        return Skip(source, origin, "unreadable", f"{type(e).__name__}: {e.strerror or e}")
    return _code_candidate(source, origin, data, max_bytes)


def _code_candidate(source: str, origin: str, data: bytes, max_bytes: int, prompt: str = "") -> Candidate | Skip:
    if len(data) > max_bytes:
        return Skip(source, origin, "oversized", f"more than max_file_bytes={max_bytes} bytes")
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        return Skip(source, origin, "binary", "NUL byte in the first 8 KiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return Skip(source, origin, "non_utf8", f"invalid UTF-8 at byte {e.start}")
    return _text_candidate(source, origin, text, prompt)


def _text_candidate(source: str, origin: str, code: str, prompt: str = "") -> Candidate | Skip:
    if not kernel_names(code):
        return Skip(source, origin, "no_kernel", "no __global__ function")
    kind = "pair" if prompt else "code"
    return Candidate(content_key(kind, prompt, code), kind, source, origin, code, prompt)


# ---- pairs_jsonl -----------------------------------------------------------

def _iter_pairs_jsonl(src: SourceConfig, max_bytes: int) -> Iterator[Candidate | Skip]:
    path = _existing_file(src)
    reasons = {"oversized": "oversized", "utf8": "non_utf8", "json": "bad_json"}
    for lineno, row in iter_jsonl(path, errors="yield", max_line_bytes=max_bytes):
        origin = f"{path}:{lineno}"
        if isinstance(row, JsonlError):
            detail = f"{row.detail} (max_file_bytes)" if row.kind == "oversized" else row.detail
            yield Skip(src.name, origin, reasons[row.kind], detail)
        else:
            yield _pair_candidate(src, origin, row)


def _pair_candidate(src: SourceConfig, origin: str, row) -> Candidate | Skip:
    if not isinstance(row, dict):
        return Skip(src.name, origin, "bad_json", f"expected a JSON object, got {type(row).__name__}")
    for fld in (src.prompt_field, src.response_field):
        if not isinstance(row.get(fld), str) or not row[fld].strip():
            return Skip(src.name, origin, "missing_field", f"field {fld!r} missing or not a non-empty string")
    code = extract_code(row[src.response_field])
    if code is None:
        return Skip(src.name, origin, "no_code", f"no CUDA program in {src.response_field!r}")
    return _text_candidate(src.name, origin, code, row[src.prompt_field])


# ---- tasks_jsonl -----------------------------------------------------------

def _iter_tasks_jsonl(src: SourceConfig, max_bytes: int) -> Iterator[Candidate | Skip]:
    from cuset.tasks import load_tasks

    path = _existing_file(src)
    tasks, report = load_tasks(path, strict=False)
    for problem in _first_problem_per_line(report.problems):
        yield Skip(src.name, f"{path}:{problem.line}", f"task_{problem.reason}", f"{problem.field}: {problem.message}")
    for task in tasks:
        yield _task_candidate(src.name, f"{path}#id={task.id}", task.to_json())


def _first_problem_per_line(problems):
    seen: set[int] = set()
    for p in problems:
        if p.line not in seen:
            seen.add(p.line)
            yield p


def _task_candidate(source: str, origin: str, record: dict) -> Candidate:
    body = {k: v for k, v in record.items() if k != "id"}  # ids differ between files; content decides
    return Candidate(content_key("task", json.dumps(body, sort_keys=True)), "task", source, origin,
                     record["bench.cu"], record.get("level1_prompt", ""), record)


# ---- hf --------------------------------------------------------------------

def _iter_hf(src: SourceConfig, max_bytes: int) -> Iterator[Candidate | Skip]:
    from cuset.tasks import validate_record
    from cuset.tasks.schema import Task

    for i, row in enumerate(load_hf_rows(src.path, src.split), 1):
        origin = f"{src.path}[{src.split}]:{i}"
        if src.format == "pairs":
            yield _pair_candidate(src, origin, row)
        elif src.format == "code":
            code = row.get(src.code_field)
            if not isinstance(code, str):
                yield Skip(src.name, origin, "missing_field", f"field {src.code_field!r} missing or not a string")
            else:
                yield _code_candidate(src.name, origin, code.encode("utf-8", "surrogatepass"), max_bytes)
        else:
            errs = validate_record(row)
            if errs:
                fld, msg, reason = errs[0]
                yield Skip(src.name, origin, f"task_{reason}", f"{fld}: {msg}")
            else:
                yield _task_candidate(src.name, origin, Task.from_json(row).to_json())


def load_hf_rows(name: str, split: str):
    """Rows of a Hugging Face dataset (a hub name, or a local dataset directory)."""
    try:
        import datasets
    except ImportError as e:  # pragma: no cover - datasets is a core dependency
        raise SourceError("reading a Hugging Face source needs `pip install datasets`") from e
    try:
        ds = datasets.load_dataset(name, split=split)
    except Exception as e:  # the library raises many types for "offline" / "no such dataset"
        raise SourceError(
            f"Hugging Face dataset {name!r} (split {split!r}) could not be loaded: {type(e).__name__}: {e}. "
            "If this machine is offline, download the dataset elsewhere and point a tasks_jsonl or "
            "pairs_jsonl source at the exported file (or at a local dataset directory)."
        ) from None
    for row in ds:
        yield dict(row)


def _existing_file(src: SourceConfig) -> Path:
    path = Path(src.path)
    if not path.is_file():
        raise SourceError(f"source {src.name!r}: no such file {path} (sources[].path of a {src.kind})")
    return path


_READERS = {
    "cuda_dir": _iter_cuda_dir,
    "pairs_jsonl": _iter_pairs_jsonl,
    "tasks_jsonl": _iter_tasks_jsonl,
    "hf": _iter_hf,
}
