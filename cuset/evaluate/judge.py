"""Who judged a sample: the evaluator's identity, stamped on every result it writes.

A results file is a cache of verdicts: `evaluate_file` skips the samples already judged, and a
finished cell (cuset.experiment.cell) skips its evaluation. Like every cache here it keys on
the code that produced what it holds, so a run resumed on other code never mixes two
evaluators' verdicts in one table (a study whose cells ran over days and commits would
otherwise compare arms judged by different backends). The judge is a hash of

- the files that decide a verdict: every file under cuset/tasks, cuset/execute (the backends,
  their runtime sources, the sandbox) and cuset/evaluate, and the answer extractor
  (cuset/generate/extract.py). A file that does not take part is hashed too: a spurious
  change costs a re-evaluation, a missed one a table of mixed verdicts;
- the backend's fingerprint (its toolchain: nvcc's version and flags, the CPU backend's
  compiler, parser packages and runtime);
- the settings that can change a verdict: every EvalConfig field except those listed in
  `NOT_VERDICT` (parallelism, caches, scratch directories, the progress bar).

Results written before judges were stamped carry none and count as judged by another.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path

from cuset.evaluate.config import EvalConfig
from cuset.execute.cpu.code_hash import files_hash

PACKAGE = Path(__file__).resolve().parents[1]
JUDGE_SOURCES = ("tasks", "execute", "evaluate", "generate/extract.py")   # under cuset/
# EvalConfig fields (dotted for nested ones) that change where and how fast samples are judged,
# never what a verdict is; every other field is part of the judge.
NOT_VERDICT = frozenset({
    "allow_missing",            # decides how missing samples are scored, not any sample's verdict
    "cache_dir", "compile_cache_gb", "compile_cache_entry_mb", "reference_cache", "reference_cache_gb",
    "data_cache", "python_preload", "workdir", "keep_workdirs", "progress",
    "execution.workers", "execution.executor", "execution.ray_address", "execution.ray_max_retries",
    "execution.gpu_device",
})


def judge_files() -> list[Path]:
    files = []
    for name in JUDGE_SOURCES:
        path = PACKAGE / name
        files += sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts) \
            if path.is_dir() else [path]
    return files


@lru_cache(maxsize=1)
def judge_code_hash() -> str:
    """Hash of the files that decide a verdict (read once per process)."""
    return files_hash(judge_files())


def verdict_settings(cfg: EvalConfig) -> dict:
    """The fields of `cfg` that can change a verdict (dotted names, see NOT_VERDICT)."""
    def flatten(d: dict, prefix: str = "") -> dict:
        out = {}
        for key, value in d.items():
            name = f"{prefix}{key}"
            if name in NOT_VERDICT:
                continue
            if isinstance(value, dict) and key in ("execution", "sandbox", "perf_timing"):
                out.update(flatten(value, f"{name}."))
            else:
                out[name] = value
        return out
    return flatten(asdict(cfg))


def judge_of(cfg: EvalConfig, backend_fingerprint: str) -> str:
    """The judge of samples evaluated under `cfg` by a backend with this fingerprint."""
    h = hashlib.sha256()
    for part in (judge_code_hash(), backend_fingerprint,
                 json.dumps(verdict_settings(cfg), sort_keys=True, default=str)):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:16]


def current_judge(cfg: EvalConfig, backend=None) -> str:
    """The judge `evaluate_file(..., cfg, backend=backend)` would stamp now (default backend: cfg's)."""
    return judge_of(cfg, (backend or cfg.make_backend()).fingerprint())


def judged_by_others(results_path: str | Path, judge: str) -> int:
    """How many results in `results_path` another judge (or none) wrote: each is judged again
    when the file is resumed with `judge`."""
    from cuset.evaluate.records import load_results

    return sum(1 for r in load_results(results_path) if r.judge != judge)
