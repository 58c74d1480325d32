import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # llm_fakes

from llm_fakes import FakeLLMServer  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "data"
MAX_FILE_BYTES = 20_000


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def mixed_dir(tmp_path) -> Path:
    """The committed CUDA files plus the unusable ones made here: binary, non-UTF-8,
    oversized (> MAX_FILE_BYTES), a dangling symlink (unreadable) and a non-CUDA file."""
    root = tmp_path / "cuda"
    shutil.copytree(FIXTURES / "cuda_mixed", root)
    (root / "blob.cu").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00__global__ void k() {}\n")
    (root / "latin1.cu").write_bytes("// café au lait\n__global__ void k(float* x) { x[0] = 1; }\n".encode("latin-1"))
    (root / "huge.cu").write_text("// padding\n" * 2500 + "__global__ void big(float* x) { x[0] = 1; }\n")
    (root / "gone.cu").symlink_to(root / "does_not_exist.cu")
    (root / "README.txt").write_text("not CUDA\n")
    return root


@pytest.fixture
def fake_llm():
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def build_config(tmp_path, mixed_dir, fake_llm):
    """A DataBuildConfig over the mixed directory, the pairs and the task file, decontaminated
    against the two-task eval set, talking to the fake server."""
    from cuset.config import load_config
    from cuset.curation.config import DataBuildConfig

    def make(overrides=(), **base):
        data = {
            "out_dir": str(tmp_path / "run"),
            "max_file_bytes": MAX_FILE_BYTES,
            "sources": [
                {"kind": "cuda_dir", "path": str(mixed_dir), "label": "github"},
                {"kind": "pairs_jsonl", "path": str(FIXTURES / "pairs.jsonl"), "label": "pairs"},
                {"kind": "tasks_jsonl", "path": str(FIXTURES / "tasks.jsonl"), "label": "tasks"},
            ],
            "llm": {"base_url": fake_llm.base_url, "model": "fake-coder", "concurrency": 3, "backoff_s": 0.0,
                    "cache_dir": str(tmp_path / "llm_cache")},
            "validation": {"execution": {"backend": "cpu", "workers": 2, "compile_judge": "backend"}},
            "decontam": {"eval_sets": [str(FIXTURES / "eval_tasks.jsonl")]},
            "progress": False,
        }
        data.update(base)
        return load_config(DataBuildConfig, None, list(overrides), base=data)

    return make
