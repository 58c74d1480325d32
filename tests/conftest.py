"""Fixtures shared across test packages: a valid CUDABench record factory. Makes the
helpers in tests/ importable (`from sandbox_tools import ...`)."""

import os
import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).parent))
from jsonl_tools import write_jsonl  # noqa: E402  (importable once tests/ is on the path)
from xdist_order import slow_files_first  # noqa: E402
# A runner's terminal size (pytest-xdist workers inherit COLUMNS=80) must not decide how
# the CLI's console, created when cuset.cli is first imported, lays out tables: tests
# that need a width give it to CliRunner, which sets it for the command alone.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)
# Under pytest-xdist every worker is one of `-n` processes sharing the machine's cores, and
# torch's default of one intra-op thread per core makes each of them (and every training or
# generation subprocess a test starts) run as many threads as there are cores: OpenMP threads
# that spin-wait for each other on oversubscribed cores. One thread per process keeps the
# workers from slowing each other down (bench/worker_threads.py measures two `cuset demo --fast`
# side by side both ways: bench/results/worker_threads.json). Set before torch is imported;
# subprocesses inherit it.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_var, "1")
    if "torch" in sys.modules:   # imported by a plugin before this file: too late for the variable
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
# DeepSpeed builds its CPU shared-memory op with torch's JIT loader at every start (the
# sharded-training tests). In torch's one default directory, checkouts with different
# virtual environments (a CI clone beside a working copy) rewrite each other's build file
# (its include paths name the environment) and ninja rebuilds: about a minute each time
# (bench/results/suite_time.json as committed in 82c069a, the run at 63edc8a:
# test_zero_two_processes_match_one_process[zero3-lora-cuset] 90.7 s against 22.5-23.5 s for
# its siblings; `git log -p` on the file). One directory per environment keeps each build.
if "TORCH_EXTENSIONS_DIR" not in os.environ:
    import hashlib
    _default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "torch_extensions"
    os.environ["TORCH_EXTENSIONS_DIR"] = str(
        _default / f"env-{hashlib.sha256(sys.prefix.encode()).hexdigest()[:12]}")

BENCH_CU = r'''#include <cuda_runtime.h>
#include <fstream>
__global__ void add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
int main() {
    const int n = 1024;
    float *a = new float[n], *b = new float[n], *c = new float[n];
    std::ifstream("data/a.bin", std::ios::binary).read((char*)a, n * 4);
    std::ifstream("data/b.bin", std::ios::binary).read((char*)b, n * 4);
    float *da, *db, *dc;
    cudaMalloc(&da, n * 4); cudaMalloc(&db, n * 4); cudaMalloc(&dc, n * 4);
    cudaMemcpy(da, a, n * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(db, b, n * 4, cudaMemcpyHostToDevice);
    add<<<(n + 255) / 256, 256>>>(da, db, dc, n);
    cudaMemcpy(c, dc, n * 4, cudaMemcpyDeviceToHost);
    std::ofstream("data/c.bin", std::ios::binary).write((char*)c, n * 4);
    return 0;
}
'''


def make_record(i=0, **changes):
    rec = {
        "id": i,
        "task_name": "Vector_Add",
        "task_description": "Compute the Vector_Add kernel on GPU using CUDA.",
        "inputs": [{"name": "a", "dtype": "float32", "shape": "(1024,)"},
                   {"name": "b", "dtype": "float32", "shape": "(1024,)"}],
        "outputs": [{"name": "c", "dtype": "float32", "shape": "(1024,)"}],
        "gpu": "unknown",
        "bench.cu": BENCH_CU,
        "gen.py": "import numpy as np\n",
        "compare.py": "print('T')\n",
        "level1_prompt": "Add two float32 vectors a and b of 1024 elements into c.",
        "level2_prompt": "Elementwise sum of two vectors.",
        "level3_prompt": "Compute the Vector_Add kernel on GPU using CUDA.",
    }
    rec.update(changes)
    return rec


def pytest_collection_modifyitems(config, items):
    slow_files_first(config, items)   # `make test`: the minute-long files start first


@pytest.fixture(name="make_record")
def make_record_fixture():
    return make_record


@pytest.fixture
def record():
    return make_record()


@pytest.fixture(name="write_jsonl")
def write_jsonl_fixture(tmp_path):
    """write_jsonl(lines, name="tasks.jsonl") -> a file of tmp_path (jsonl_tools.write_jsonl)."""
    def write(lines, name="tasks.jsonl"):
        return write_jsonl(tmp_path / name, lines)
    return write


def _run_dir(tmp_path_factory, pytestconfig, name: str) -> Path:
    """`name` under this pytest run's base temp dir, the same on every xdist worker (their
    base temp dirs are popen-gwN under the run's) and fresh for each run."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if hasattr(pytestconfig, "workerinput") else base) / name
    root.mkdir(exist_ok=True)
    return root


@pytest.fixture(scope="session")
def run_compile_cache():
    """The persistent compile cache (`$CUSET_CACHE/compile`), shared by the tests that
    compile the bundled suite's reference programs: each compiles once, in this run or an
    earlier one. Safe because the key hashes the code that builds a program
    (cuset/execute/cpu/code_hash.py): a checkout with other code gets other entries."""
    from cuset.execute.compile_cache import default_root

    return default_root()


@pytest.fixture(scope="session")
def run_gen_data(tmp_path_factory, pytestconfig):
    """A `Workspace(data_root=...)` shared by the tests of this pytest run: each bundled
    task's gen.py runs once per input case and run, not once per test that evaluates it."""
    return _run_dir(tmp_path_factory, pytestconfig, "run-gen-data")


def _fresh_cache_root(root: Path) -> Path:
    """A new cache root whose compile cache starts empty; the precompiled headers (build
    products keyed by toolchain fingerprint, not results) are the shared ones, so a test does
    not pay for building them again. They are symlinked in, which also checks that a
    symlinked cache works inside the sandbox (the compile once saw a dangling link)."""
    from cuset.cachedir import cache_root

    shared = cache_root()
    root.mkdir()
    for pch in ("cpu-pch", "kb-pch"):
        (shared / pch).mkdir(parents=True, exist_ok=True)
        (root / pch).symlink_to(shared / pch)
    return root


@pytest.fixture
def cold_compile_cache(tmp_path, monkeypatch):
    """A fresh cache root (CUSET_CACHE, see _fresh_cache_root) for this test alone."""
    root = _fresh_cache_root(tmp_path / "cuset_cache")
    monkeypatch.setenv("CUSET_CACHE", str(root))
    return root / "compile"


@pytest.fixture(scope="module")
def _module_cache_root(tmp_path_factory):
    return _fresh_cache_root(tmp_path_factory.mktemp("module") / "cuset_cache")


@pytest.fixture
def module_cold_compile_cache(_module_cache_root, monkeypatch):
    """A fresh cache root (CUSET_CACHE) shared by the tests of one module that build the same
    programs: the module's first such test starts cold, the others reuse its builds."""
    monkeypatch.setenv("CUSET_CACHE", str(_module_cache_root))
    return _module_cache_root / "compile"
