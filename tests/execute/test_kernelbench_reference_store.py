"""KernelBench reference runs kept on disk (cuset.execute.kernelbench.reference_store):
a second verify in another process runs no reference and gives the same verdict; every
key part makes a miss; a damaged entry is ignored, removed and recomputed; concurrent
writers leave one whole entry; a failing reference is never kept."""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from cuset.execute import compile_cache
from cuset.execute.kernelbench import reference_store as rs
from cuset.execute.kernelbench.options import VerifyOptions
from cuset.execute.kernelbench.reference_store import MANIFEST, ReferenceStore
from cuset.execute.result import Status

V = importlib.import_module("cuset.execute.kernelbench.verify")   # the module, not the function
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench"
REFERENCE = (FIXTURES / "relu_ref.py").read_text()
# Pure torch (no load_inline): nothing to build, only the two sandboxed runs.
CORRECT = REFERENCE.replace("class Model(", "class ModelNew(")
OFF_BY_ONE = CORRECT.replace("return torch.relu(x)", "return torch.relu(x) + 1.0")
REPO = Path(__file__).resolve().parents[2]
FAST = VerifyOptions(step_timeout=30)   # its store's root is read when used: CUSET_CACHE of each test


def reference_runs(monkeypatch) -> list[str]:
    """The names of the sandboxed runs verify starts from now on (appended as they start)."""
    names: list[str] = []
    real = V.run_sandboxed

    def counting(name, *a, **k):
        names.append(name)
        return real(name, *a, **k)

    monkeypatch.setattr(V, "run_sandboxed", counting)
    return names


def forget_memory():
    V._REFERENCES.entries.clear()


def store_entries(root: Path) -> list[Path]:
    return [e for shard in root.iterdir() if shard.is_dir() for e in shard.iterdir()
            if e.is_dir() and not e.name.startswith((".evicted-", "build-"))]


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A cache root whose store holds relu's reference for 2 trials, and the first verdict
    (the one that ran the reference)."""
    root = tmp_path_factory.mktemp("cuset_cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("CUSET_CACHE", str(root))
    forget_memory()
    first = V.verify(REFERENCE, OFF_BY_ONE, V.plain_checks(2), options=FAST)
    mp.undo()
    return root, first


@pytest.fixture
def cache_root(stored, monkeypatch):
    root, _ = stored
    monkeypatch.setenv("CUSET_CACHE", str(root))
    forget_memory()
    yield root
    forget_memory()


def test_the_first_verify_runs_the_reference_and_stores_it(stored):
    root, first = stored
    assert first.status is Status.WRONG and "max abs error 1;" in first.detail
    assert "reference" in first.timings and "reference_disk_cached" not in first.timings
    entries = store_entries(root / rs.SUBDIR)
    assert len(entries) == 1
    names = sorted(p.relative_to(entries[0]).as_posix() for p in entries[0].rglob("*") if p.is_file())
    assert names == [MANIFEST, *(f"expected/c0_t{t}.{ext}" for t in (0, 1) for ext in ("json", "safetensors")),
                     *(f"inputs/c0{s}.{ext}" for s in ("", "_t0", "_t1") for ext in ("json", "safetensors"))]
    assert (root / rs.SUBDIR).stat().st_mode & 0o777 == 0o700


def test_a_fresh_process_reads_the_store_and_runs_no_reference(cache_root):
    """Another process (a new `cuset eval`, a Ray worker): the reference does not run; the
    verdict is the same; a candidate searching the file system finds no stored outputs."""
    entry = store_entries(cache_root / rs.SUBDIR)[0]
    snoop = OFF_BY_ONE.replace("    def forward(self, x: torch.Tensor) -> torch.Tensor:\n", f'''    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import os
        for path in ({str(entry)!r}, {str(entry / "expected")!r}, {str(cache_root / rs.SUBDIR)!r}):
            if os.path.exists(path) and os.listdir(path):
                raise RuntimeError("found " + path)
''')
    script = """
import importlib, json, sys
V = importlib.import_module("cuset.execute.kernelbench.verify")
names = []
real = V.run_sandboxed
V.run_sandboxed = lambda name, *a, **k: (names.append(name), real(name, *a, **k))[1]
v = V.verify(sys.argv[1], sys.argv[2], V.plain_checks(2), options=V.VerifyOptions(step_timeout=30))
print(json.dumps({"status": v.status.value, "detail": v.detail, "timings": v.timings, "runs": names}))
"""
    out = subprocess.run([sys.executable, "-c", script, REFERENCE, snoop], capture_output=True, text=True,
                         cwd=REPO, env={**os.environ, "CUSET_CACHE": str(cache_root)}, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["runs"] == ["kernelbench[cpu]"]          # the candidate's run only
    assert got["timings"]["reference_disk_cached"] == 1.0 and "reference" not in got["timings"]
    assert got["status"] == "wrong" and "max abs error 1;" in got["detail"], got["detail"]


def test_a_disk_hit_fills_the_memory_cache_and_the_verdict_is_the_same(cache_root, monkeypatch, stored):
    runs = reference_runs(monkeypatch)
    again = V.verify(REFERENCE, OFF_BY_ONE, V.plain_checks(2), options=FAST)
    assert again.timings.get("reference_disk_cached") == 1.0
    assert (again.status, again.detail, again.max_abs_err) == (stored[1].status, stored[1].detail,
                                                               stored[1].max_abs_err)
    third = V.verify(REFERENCE, CORRECT, V.plain_checks(2), options=FAST)
    assert third.status is Status.PASSED and third.timings.get("reference_cached") == 1.0
    assert runs == ["kernelbench[cpu]", "kernelbench[cpu]"]


def test_turned_off_the_store_is_neither_read_nor_written(cache_root, monkeypatch, tmp_path):
    monkeypatch.setenv("CUSET_CACHE", str(tmp_path))
    runs = reference_runs(monkeypatch)
    expected, failure = V.reference_outputs(REFERENCE, V.plain_checks(2), options=VerifyOptions(reference_store=None))
    assert failure is None and len(expected) == 2
    assert runs == ["kernelbench-reference[cpu]"]
    assert not (tmp_path / rs.SUBDIR).exists()
    from cuset.evaluate.config import EvalConfig

    assert EvalConfig(reference_cache=False).options().reference_store is None
    on = EvalConfig(cache_dir=str(tmp_path), reference_cache_gb=0.5).options().reference_store
    assert on == ReferenceStore(root=str(tmp_path.resolve() / rs.SUBDIR), max_bytes=1 << 29)


def _expected_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k][0] == b[k][0] and a[k][1].keys() == b[k][1].keys() and all(torch.equal(a[k][1][n], b[k][1][n])
                                                                       for n in a[k][1]) for k in a)


def _damage(entry: Path, how: str) -> None:
    target = entry / "expected" / "c0_t1.safetensors"
    if how == "truncated, manifest rewritten to match":   # only the safetensors parser can tell
        data = target.read_bytes()[:-7]
        target.write_bytes(data)
        manifest = json.loads((entry / MANIFEST).read_text())
        manifest["files"]["expected/c0_t1.safetensors"] = [len(data), hashlib.sha256(data).hexdigest()]
        (entry / MANIFEST).write_text(json.dumps(manifest))
    elif how == "truncated":
        target.write_bytes(target.read_bytes()[:10])
    elif how == "a symlink":
        copy = entry.parent / "elsewhere.safetensors"
        copy.write_bytes(target.read_bytes())
        target.unlink()
        target.symlink_to(copy)
    elif how == "oversized":
        with open(target, "ab") as f:
            f.write(b"\0" * 4096)
    elif how == "garbage manifest":
        (entry / MANIFEST).write_bytes(b"{\"format\": 1, \"files\": [\xff")
    elif how == "garbage expected json":
        (entry / "expected" / "c0_t0.json").write_text("{not json")
    elif how == "an input missing from the manifest":
        manifest = json.loads((entry / MANIFEST).read_text())
        del manifest["files"]["inputs/c0_t1.safetensors"]
        (entry / MANIFEST).write_text(json.dumps(manifest))
    else:
        raise AssertionError(how)


DAMAGES = ["truncated, manifest rewritten to match", "truncated", "a symlink", "oversized", "garbage manifest",
           "garbage expected json", "an input missing from the manifest"]


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_entry_reads_as_a_miss_and_is_removed(stored, tmp_path, how, caplog):
    """Each damage on a copy of the stored entry, read as verify reads it (no runs): a miss,
    the entry removed, the reason logged at debug."""
    entry = store_entries(stored[0] / rs.SUBDIR)[0]
    store = ReferenceStore(root=str(tmp_path / "store"))
    copy = store.entry(entry.name)
    shutil.copytree(entry, copy, symlinks=True)
    read = functools.partial(V._read_stored, checks=V.plain_checks(2))
    files, expected = store.load(entry.name, read)   # whole: the values, the inputs' bytes
    assert sorted(expected) == ["c0_t0", "c0_t1"] and len(files) == 6
    _damage(copy, how)
    with caplog.at_level("DEBUG", logger=rs.__name__):
        assert store.load(entry.name, read) is None
    assert "ignored and removed" in caplog.text
    assert not copy.exists() and store_entries(tmp_path / "store") == []


@pytest.mark.parametrize("how", ["truncated, manifest rewritten to match", "a symlink", "oversized",
                                 "garbage manifest"])
def test_a_damaged_entry_is_recomputed_with_the_same_values(cache_root, monkeypatch, how, caplog):
    """The store's entry damaged as a crash, a full disk or a meddler could leave it: read as
    a miss (logged at debug), removed, the reference run again, the same values stored anew."""
    entries = store_entries(cache_root / rs.SUBDIR)
    assert len(entries) == 1
    original, failure = V.reference_outputs(REFERENCE, V.plain_checks(2))
    assert failure is None
    forget_memory()
    _damage(entries[0], how)
    runs = reference_runs(monkeypatch)
    with caplog.at_level("DEBUG", logger=rs.__name__):
        again, failure = V.reference_outputs(REFERENCE, V.plain_checks(2))
    assert failure is None and runs == ["kernelbench-reference[cpu]"]
    assert "ignored and removed" in caplog.text
    assert _expected_equal(again, original)
    assert len(store_entries(cache_root / rs.SUBDIR)) == 1   # stored anew, whole
    forget_memory()
    runs.clear()
    third, _ = V.reference_outputs(REFERENCE, V.plain_checks(2))
    assert runs == [] and _expected_equal(third, original)


def test_a_failing_reference_is_never_stored(tmp_path, monkeypatch):
    monkeypatch.setenv("CUSET_CACHE", str(tmp_path))
    forget_memory()
    broken = REFERENCE.replace("return torch.relu(x)", "raise ValueError('the reference is broken')")
    runs = reference_runs(monkeypatch)
    for _ in range(2):
        v = V.verify(broken, CORRECT, V.plain_checks(1), options=FAST)
        assert v.status is Status.SKIPPED, (v.status, v.detail)
        assert v.detail.startswith("check trials: the reference forward failed: ValueError: the reference is broken")
    assert runs == ["kernelbench-reference[cpu]"] * 2
    assert store_entries(tmp_path / rs.SUBDIR) == []


# ---------------------------------------------------------------- the key (no runs)
def test_each_part_of_the_key_makes_a_miss(monkeypatch):
    store = ReferenceStore()
    base_checks = V.plain_checks(2)
    # a GPU named as nvidia-smi would name it (this machine may have none)
    monkeypatch.setattr(rs, "_gpu_identity", lambda visible: {"gpu": f"GPU {visible}", "cuda": "12.8"})

    def key(src=REFERENCE, backend="cpu", checks=base_checks, eval_mode="train", env=None):
        return store.key(V._reference_key(src, backend, checks, eval_mode), backend, env or {})

    base = key()
    variants = {
        "source": key(src=REFERENCE.replace("dim = 1000", "dim = 1001")),
        "backend": key(backend="gpu"),
        "another GPU": key(backend="gpu", env={"CUDA_VISIBLE_DEVICES": "1"}),
        "seeds": key(checks=V.plain_checks(2, seed=7)),
        "trials": key(checks=V.plain_checks(3)),
        "model seed": key(checks=[V.Check("trials", (42, 43), model_seed=1)]),
        "overrides": key(checks=V.plain_checks(2, overrides={"dim": 7})),
        "value kind": key(checks=V.plain_checks(2, value="zeros")),
        "backward": key(checks=V.plain_checks(2, backward=True)),
        "eval_mode": key(eval_mode="eval"),
        "environment": key(env={"OMP_NUM_THREADS": "4"}),
    }
    software, cpu = rs._software(), rs._cpu_identity()
    with monkeypatch.context() as m:
        m.setattr(rs, "_software", lambda: {**software, "torch": "0.0.0-other"})
        variants["torch version"] = key()
    with monkeypatch.context() as m:
        m.setattr(rs, "_cpu_identity", lambda: {**cpu, "model": "another CPU"})
        variants["cpu model"] = key()
    with monkeypatch.context() as m:
        m.setattr(rs, "_cpu_identity", lambda: {**cpu, "isa": "0" * 16})
        variants["cpu instruction set"] = key()
    with monkeypatch.context() as m:
        m.setattr(rs, "_gpu_identity", lambda visible: {"gpu": f"GPU {visible}", "cuda": "13.0"})
        variants["torch's CUDA"] = key(backend="gpu")
    assert len(set(variants.values()) | {base}) == len(variants) + 1, variants
    # what cannot change the reference's files shares the entry
    assert key(checks=[V.Check("renamed", (42, 43))]) == base
    assert key(env={"CUSET_CPU_ORDER": "random:1"}) == base


def test_the_key_follows_the_producer_sources(tmp_path, monkeypatch):
    """harness.py (runs in the reference's process and writes its files), compare.py
    (decodes them) and verify.py (the run's config and environment) are hashed into the key."""
    assert V.HARNESS in rs.PRODUCER_SOURCES
    assert {p.name for p in rs.PRODUCER_SOURCES} >= {"harness.py", "compare.py", "verify.py"}
    before = ReferenceStore().key("k", "cpu", {})
    changed = tmp_path / "harness.py"
    changed.write_text(V.HARNESS.read_text() + "\n# changed\n")
    monkeypatch.setattr(rs, "PRODUCER_SOURCES", (changed, *rs.PRODUCER_SOURCES[1:]))
    rs._producers_hash.cache_clear()
    try:
        assert ReferenceStore().key("k", "cpu", {}) != before
    finally:
        monkeypatch.undo()
        rs._producers_hash.cache_clear()
    assert ReferenceStore().key("k", "cpu", {}) == before


def test_the_cpu_identity_names_the_model_and_instruction_set():
    ident = rs._cpu_identity()
    assert ident["machine"] and ident["model"] and len(ident["isa"]) == 16


def test_a_device_that_cannot_be_named_keeps_nothing(monkeypatch):
    """Without the GPU's name (no nvidia-smi) two machines' runs could share a key: verify
    then runs the reference without the store (UnknownDevice is an OSError it catches)."""
    monkeypatch.setattr("cuset.execute.gpu.gpu_name", lambda device: "unknown GPU (nvidia-smi not installed)")
    rs._gpu_identity.cache_clear()
    try:
        with pytest.raises(rs.UnknownDevice, match="the GPU this reference runs on cannot be identified"):
            ReferenceStore().key("k", "gpu", {})
    finally:
        rs._gpu_identity.cache_clear()
    assert issubclass(rs.UnknownDevice, OSError)


# ---------------------------------------------------------------- the store itself (no runs)
def _files(tmp_path: Path, payload: bytes = b"x" * 100) -> dict:
    src = tmp_path / "src"
    (src / "inputs").mkdir(parents=True, exist_ok=True)
    (src / "expected").mkdir(exist_ok=True)
    (src / "inputs" / "c0.json").write_bytes(b"{}")
    (src / "expected" / "c0_t0.safetensors").write_bytes(payload)
    return {"inputs/c0.json": (src, "inputs/c0.json"), "expected/c0_t0.safetensors": (src, "expected/c0_t0.safetensors")}


def _read(entry: Path, sizes: dict) -> dict:
    return {name: (entry / name).read_bytes() for name in sizes}


def test_two_concurrent_writers_leave_one_whole_entry(tmp_path):
    """Two processes save the same key at once (both waited on one start file): one rename
    wins, the other's staging dir is removed, and the entry reads back whole."""
    files = _files(tmp_path, os.urandom(1 << 20))
    root = tmp_path / "store"
    go = tmp_path / "go"
    script = f"""
import os, sys, time
from pathlib import Path
from cuset.execute.kernelbench.reference_store import ReferenceStore
while not os.path.exists({str(go)!r}):
    time.sleep(0.001)
files = {{k: (Path(d), r) for k, (d, r) in {json.dumps({k: [str(d), r] for k, (d, r) in files.items()})}.items()}}
print(ReferenceStore(root={str(root)!r}).save("ab" * 32, files))
"""
    procs = [subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    time.sleep(1.0)
    go.touch()
    said = sorted(p.communicate(timeout=120)[0].strip() for p in procs)
    assert all(p.returncode == 0 for p in procs)
    assert said == ["False", "True"]   # a rename onto a published entry fails: the loser says so
    shard = root / "ab"
    assert [p.name for p in shard.iterdir() if p.is_dir()] == ["ab" * 32]   # no staging dir left
    got = ReferenceStore(root=str(root)).load("ab" * 32, _read)
    assert got == {name: (d / r).read_bytes() for name, (d, r) in files.items()}


def test_a_second_writer_after_the_first_keeps_the_first_entry(tmp_path):
    store = ReferenceStore(root=str(tmp_path / "store"))
    assert store.save("cd" * 32, _files(tmp_path, b"first"))
    assert not store.save("cd" * 32, _files(tmp_path, b"second"))
    assert store.load("cd" * 32, _read)["expected/c0_t0.safetensors"] == b"first"
    assert [p.name for p in (tmp_path / "store" / "cd").iterdir() if p.is_dir()] == ["cd" * 32]


def test_an_entry_over_its_limit_is_not_kept_and_the_store_keeps_its_budget(tmp_path):
    root = tmp_path / "store"
    assert not ReferenceStore(root=str(root), max_entry_bytes=50).save("ef" * 32, _files(tmp_path, b"y" * 100))
    assert not (root / "ef" / ("ef" * 32)).exists()
    store = ReferenceStore(root=str(root), max_bytes=None)
    for k in ("01", "02", "03"):
        assert store.save(k * 32, _files(tmp_path, b"z" * 1000))
    os.utime(root / "01" / ("01" * 32) / MANIFEST, (1, 1))   # the least recently used
    removed = compile_cache.evict(root, 2500, marker=MANIFEST, grace=rs.GRACE_SECONDS)
    assert removed == ["01" * 32]
    assert sorted(e.name[:2] for e in store_entries(root)) == ["02", "03"]


def test_a_link_in_place_of_a_file_is_neither_stored_nor_read(tmp_path):
    files = _files(tmp_path)
    secret = tmp_path / "secret"
    secret.write_text("not the reference's")
    link = tmp_path / "src" / "expected" / "c0_t0.safetensors"
    link.unlink()
    link.symlink_to(secret)
    store = ReferenceStore(root=str(tmp_path / "store"))
    assert not store.save("12" * 32, files)
    assert not (tmp_path / "store" / "12" / ("12" * 32)).exists()
    # names the reference's run chose for its inputs: only plain ones are kept
    for name in ("inputs/../escape", "inputs/.hidden", "inputs/a b", "other/c0.json"):
        assert not store.save("12" * 32, {name: files["inputs/c0.json"]})
    assert not (tmp_path / "store" / "12" / ("12" * 32)).exists()


def test_an_unusable_store_only_costs_the_reference_run(tmp_path, monkeypatch):
    """A cache root that cannot hold the store (here a file in its place): the reference
    runs, the verdict stands, nothing raises."""
    monkeypatch.setenv("CUSET_CACHE", str(tmp_path))
    forget_memory()
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    runs = reference_runs(monkeypatch)
    blocked = VerifyOptions(reference_store=ReferenceStore(root=str(blocker / "store")))
    expected, failure = V.reference_outputs(REFERENCE, V.plain_checks(1), options=blocked)
    assert failure is None and sorted(expected) == ["c0_t0"]
    assert runs == ["kernelbench-reference[cpu]"]
    assert ReferenceStore(root=str(blocker / "store")).load("ab" * 32, _read) is None
    forget_memory()
