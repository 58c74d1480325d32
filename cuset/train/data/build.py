"""Build the tokenised training set from JSONL files, with bad-data handling and a cache.

The cache key hashes the data files' bytes, the tokenizer (vocabulary, merges,
special tokens, chat template), every data setting, and the source of the code
that turns records into tokens (this package and the span detector), so a change
to any of them re-tokenises instead of training on stale tokens.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from cuset.errors import CusetError
from cuset.cachedir import cache_root
from cuset.localpath import MissingPath
from cuset.progress import progress_bar
from cuset.tasks.io import Problem
from cuset.train.data.config import DataConfig
from cuset.train.data.cuda_spans import response_spans
from cuset.train.data.records import Example, read_examples
from cuset.train.data.tokenize import PromptTooLongError, TemplateError, tokenize_example

log = logging.getLogger(__name__)

COLUMNS = ("input_ids", "labels", "cuda_mask")
MAX_LISTED = 50  # problems spelled out in a strict-mode error; the rest are counted


class DataError(CusetError, ValueError):
    """Bad training records (strict mode): every problem as file:line: field: message."""

    def __init__(self, problems: list[Problem], message: str | None = None):
        self.problems = problems
        if message is not None:
            super().__init__(message)
            return
        lines = [f"  {p} [{p.reason}]" for p in problems[:MAX_LISTED]]
        if len(problems) > MAX_LISTED:
            lines.append(f"  ... and {len(problems) - MAX_LISTED} more")
        counts = Counter(p.reason for p in problems)
        super().__init__(
            f"{len(problems)} bad training record(s) ({', '.join(f'{r}: {n}' for r, n in sorted(counts.items()))}):\n"
            + "\n".join(lines) + "\nFix them, or set data.strict=false to skip them and count them by reason.")


@dataclass
class DataReport:
    """What went into the tokenised set and what was left out, by reason."""

    sources: list[str]
    examples: int = 0
    skipped: Counter = field(default_factory=Counter)
    problems: list[Problem] = field(default_factory=list)
    truncated: int = 0
    tokens: int = 0
    supervised_tokens: int = 0
    cuda_tokens: int = 0
    reasoning_tokens: int = 0  # supervised tokens of reasoning traces (before reasoning_weight drops any)
    reasoning_examples: int = 0
    cache_key: str = ""
    cache_hit: bool = False

    def to_json(self) -> dict:
        return {
            "sources": self.sources, "examples": self.examples, "skipped": dict(self.skipped),
            "problems": [{**dataclasses.asdict(p)} for p in self.problems[:1000]],
            "truncated": self.truncated, "tokens": self.tokens, "supervised_tokens": self.supervised_tokens,
            "cuda_tokens": self.cuda_tokens, "reasoning_tokens": self.reasoning_tokens,
            "reasoning_examples": self.reasoning_examples, "cache_key": self.cache_key, "cache_hit": self.cache_hit,
        }

    @classmethod
    def from_json(cls, d: dict) -> "DataReport":
        return cls(sources=list(d["sources"]), examples=d["examples"], skipped=Counter(d["skipped"]),
                   problems=[Problem(**p) for p in d["problems"]], truncated=d["truncated"], tokens=d["tokens"],
                   supervised_tokens=d["supervised_tokens"], cuda_tokens=d["cuda_tokens"],
                   reasoning_tokens=d.get("reasoning_tokens", 0), reasoning_examples=d.get("reasoning_examples", 0),
                   cache_key=d["cache_key"])


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def tokenizer_fingerprint(tokenizer) -> str:
    """A hash of everything about a tokenizer that changes the tokens we produce."""
    h = hashlib.sha256(type(tokenizer).__name__.encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise DataError([], f"{type(tokenizer).__name__} is a slow tokenizer: training needs a fast (Rust) tokenizer "
                        "for character offsets; load it with use_fast=True")
    h.update(backend.to_str().encode())
    h.update(json.dumps(tokenizer.special_tokens_map, sort_keys=True, default=str).encode())
    h.update(str(getattr(tokenizer, "chat_template", "")).encode())
    return h.hexdigest()


# Every package whose code decides the tokens and masks of a record: the records and
# tokenisation (train/data), the CUDA spans (spans) and the prompt rendering, task
# schema and reasoning split (tasks). A change in any of them invalidates cached data.
TOKENISATION_PACKAGES = ("cuset.train.data", "cuset.spans", "cuset.tasks")


def _code_digest() -> str:
    """Hash of the modules that turn records into tokens and masks."""
    import importlib

    roots = [Path(p) for name in TOKENISATION_PACKAGES for p in importlib.import_module(name).__path__]
    h = hashlib.sha256()
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            h.update(path.name.encode() + path.read_bytes())
    return h.hexdigest()


def cache_key(cfg: DataConfig, tokenizer) -> str:
    settings = {k: v for k, v in dataclasses.asdict(cfg).items() if k != "cache_dir"}
    payload = {
        "files": [[p, _file_digest(Path(p))] for p in cfg.paths],
        "tokenizer": tokenizer_fingerprint(tokenizer),
        "settings": settings,
        "code": _code_digest(),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:24]


def tokenized_root(cfg: DataConfig) -> Path:
    if cfg.cache_dir:
        return Path(cfg.cache_dir).expanduser()
    return cache_root() / "tokenized"


def _tokenize_one(example: Example, cfg: DataConfig, tokenizer) -> dict | Problem:
    spans = response_spans(example.response, example.code_range, cfg.cuda_spans) if cfg.cuda_mask else None
    try:
        return tokenize_example(tokenizer, list(example.prompt), example.response, max_length=cfg.max_length,
                                spans=spans, chat_template_kwargs=cfg.chat_template_kwargs,
                                reasoning=example.reasoning, reasoning_weight=cfg.reasoning_weight)
    except PromptTooLongError as e:
        return Problem(example.source, example.line, "prompt", str(e), "prompt_too_long")
    except TemplateError as e:
        return Problem(example.source, example.line, "<record>", str(e), "template_error")


def tokenize_files(cfg: DataConfig, tokenizer, *, progress: bool = True) -> tuple[dict[str, list], DataReport]:
    """Columns of the tokenised set and its report. Strict mode raises DataError."""
    missing = [p for p in cfg.paths if not Path(p).is_file()]
    if not cfg.paths or missing:
        raise MissingPath("data.paths: " + (f"no such file: {', '.join(missing)}" if missing else "no training files given"))
    report = DataReport(sources=list(cfg.paths))
    columns: dict[str, list] = {c: [] for c in _columns(cfg)}
    opts = cfg.record_options()
    with progress_bar("tokenize", None, enabled=progress) as bar:
        for path in cfg.paths:
            for item in read_examples(path, opts):
                if cfg.limit is not None and report.examples >= cfg.limit:
                    break
                row = item if isinstance(item, Problem) else _tokenize_one(item, cfg, tokenizer)
                bar.advance()
                if isinstance(row, Problem):
                    report.problems.append(row)
                    report.skipped[row.reason] += 1
                    continue
                for c in columns:
                    columns[c].append(row[c])
                report.examples += 1
                report.truncated += row["truncated"]
                report.tokens += len(row["input_ids"])
                report.supervised_tokens += sum(t != -100 for t in row["labels"])
                report.cuda_tokens += int(sum(row["cuda_mask"]))
                report.reasoning_tokens += int(sum(row["reasoning_mask"]))
                report.reasoning_examples += item.reasoning is not None
    if cfg.strict and report.problems:
        raise DataError(report.problems)
    if report.examples == 0:
        raise DataError(report.problems) if report.problems else DataError([], f"data.paths: no examples in {', '.join(cfg.paths)}")
    return columns, report


def _columns(cfg: DataConfig) -> tuple[str, ...]:
    """The per-token columns stored; loss_weight only when it is not all ones or zeros (see tokenize_example)."""
    return COLUMNS + (("loss_weight",) if 0.0 < cfg.reasoning_weight < 1.0 else ())


def _features(cfg: DataConfig):
    import datasets

    types = {"input_ids": "int32", "labels": "int32", "cuda_mask": "float32", "loss_weight": "float32"}
    return datasets.Features({c: datasets.List(datasets.Value(types[c])) for c in _columns(cfg)})


def build_dataset(cfg: DataConfig, tokenizer, *, progress: bool = True):
    """(datasets.Dataset with input_ids/labels/cuda_mask, DataReport), from the cache when it holds this key."""
    import datasets

    key = cache_key(cfg, tokenizer) if cfg.paths and all(Path(p).is_file() for p in cfg.paths) else ""
    target = tokenized_root(cfg) / key
    if key and (target / "report.json").is_file():
        report = DataReport.from_json(json.loads((target / "report.json").read_text()))
        report.cache_hit = True
        return datasets.load_from_disk(str(target / "dataset")), report
    columns, report = tokenize_files(cfg, tokenizer, progress=progress)
    report.cache_key = key
    dataset = datasets.Dataset.from_dict(columns, features=_features(cfg))
    _save_atomically(dataset, report, target)
    log.info("tokenised %d examples (%d skipped) -> %s", report.examples, sum(report.skipped.values()), target)
    return datasets.load_from_disk(str(target / "dataset")), report


def _save_atomically(dataset, report: DataReport, target: Path) -> None:
    # Written beside the target and renamed: a reader never sees half a cache entry,
    # and two processes racing to build the same key both end with a complete one.
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        dataset.save_to_disk(str(tmp / "dataset"))
        (tmp / "report.json").write_text(json.dumps(report.to_json(), indent=1))
        try:
            os.replace(tmp, target)
        except OSError:  # another process finished the same key first
            if not (target / "report.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
