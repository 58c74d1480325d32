"""Fixtures for the analysis tests: PNG checks, synthetic eval runs, a tiny local model.
Makes the helpers in this folder importable (`from viewer_runs import ...`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).parent))   # after tests/: `conftest` stays the shared one

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_png(path: Path, min_bytes: int = 10_000, min_width: int = 600, min_height: int = 300) -> tuple[int, int]:
    """A real, non-trivial PNG: signature, size on disk, and PIL can decode all of it."""
    from PIL import Image

    path = Path(path)
    assert path.exists(), f"{path} was not written"
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert len(data) >= min_bytes, f"{path} is only {len(data)} bytes"
    with Image.open(path) as img:
        img.verify()
    with Image.open(path) as img:
        img.load()
        assert img.format == "PNG"
        width, height = img.size
        # A blank figure would be one colour: a plot has many.
        assert len(img.convert("RGB").getcolors(maxcolors=1 << 20) or []) > 20
    assert width >= min_width and height >= min_height
    return width, height


def write_run(run_dir: Path, outcomes: dict[int, list[tuple[bool, bool]]], *, meta: dict | None = None,
              tokens: dict[int, list[int]] | None = None, ran_ok: bool = True) -> Path:
    """An eval run directory with results.jsonl + summary.json.

    `outcomes[task_id]` lists (compiled, passed) per sample, in sample order.
    """
    from cuset.evaluate.records import SampleResult, save_results
    from cuset.execute.result import Status

    records = []
    for tid, samples in outcomes.items():
        for s, (compiled, passed) in enumerate(samples):
            status = Status.PASSED if passed else (Status.WRONG if compiled else Status.COMPILE_ERROR)
            n_tok = tokens[tid][s] if tokens else 100
            records.append(SampleResult(task_id=tid, task_name=f"task{tid}", family=f"fam{tid % 2}", sample=s,
                                        status=status, compiled=compiled, ran_ok=compiled and ran_ok, passed=passed,
                                        n_tokens=n_tok))
    run_dir.mkdir(parents=True, exist_ok=True)
    save_results(run_dir / "results.jsonl", records)
    (run_dir / "summary.json").write_text(json.dumps({"overall": {}, "meta": meta or {}}))
    return run_dir


@pytest.fixture
def make_run(tmp_path):
    def make(name: str, outcomes, **kw) -> Path:
        return write_run(tmp_path / "runs" / name, outcomes, **kw)
    return make


@pytest.fixture(name="assert_png")
def assert_png_fixture():
    return assert_png


@pytest.fixture(name="write_run")
def write_run_fixture():
    return write_run
