import multiprocessing
import threading
import time
from pathlib import Path

import pytest

from cuset.execute.interface import CompileOutcome
from cuset.execute.compile_cache import CompileCache, cache_key
from cuset.execute.result import Status, StepResult


class CountingBackend:
    """'Compiles' by writing the source to an executable file; logs each compile to a file.
    A source containing TIMEOUT times out, one containing ERROR fails."""

    name = "count"
    run_orders = ("default",)
    max_data_bytes = None

    def __init__(self, log: Path, version="v1", delay=0.3):
        self.log, self.version, self.delay = log, version, delay

    def fingerprint(self):
        return f"count|{self.version}"

    def compile(self, source, workdir, timeout):
        with open(self.log, "a") as fh:
            fh.write(source.replace("\n", " ") + "\n")
        time.sleep(self.delay)
        if "TIMEOUT" in source:
            return CompileOutcome(False, None, StepResult("compile", None, timeout, True), Status.TIMEOUT, "slow")
        if "OOM" in source:   # the compiler stopped by its memory limit
            step = StepResult("compile", -9, 0.1, False, "", "", limit="memory_limit")
            return CompileOutcome(False, None, step, Status.COMPILE_ERROR, "the compiler exceeded its limits")
        if "KILLED" in source:
            return CompileOutcome(False, None, StepResult("compile", -9, 0.1), Status.COMPILE_ERROR, "killed")
        if "ERROR" in source:
            return CompileOutcome(False, None, StepResult("compile", 1, 0.1, False, "", "error: nope"),
                                  Status.COMPILE_ERROR, "error: nope")
        exe = Path(workdir) / "bin" / "prog"
        exe.parent.mkdir()
        exe.write_text(source)
        return CompileOutcome(True, exe, StepResult("compile", 0, 0.1))

    def invocation(self, executable, order):
        raise NotImplementedError

    def classify_failure(self, step):
        return None


def compiles(log):
    return log.read_text().splitlines() if log.exists() else []


def test_identical_sources_submitted_concurrently_compile_once(tmp_path):
    log = tmp_path / "log"
    with CompileCache(CountingBackend(log), tmp_path / "c", workers=4) as cache:
        outcomes = []
        threads = [threading.Thread(target=lambda: outcomes.append(cache.compile("A"))) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert compiles(log) == ["A"]
        assert all(o.ok and o.executable.read_text() == "A" for o in outcomes)
        assert len({o.executable for o in outcomes}) == 1
        assert cache.misses == 1


class MeetingBackend(CountingBackend):
    """Each compile waits at a barrier for `parties` compiles in flight at once: run one at
    a time they never meet, and the barrier breaks (the timeout only ends a failing test)."""

    def __init__(self, log: Path, parties: int):
        super().__init__(log, delay=0)
        self.barrier = threading.Barrier(parties, timeout=30)

    def compile(self, source, workdir, timeout):
        self.barrier.wait()
        return super().compile(source, workdir, timeout)


def test_distinct_sources_compile_in_parallel(tmp_path):
    log = tmp_path / "log"
    backend = MeetingBackend(log, parties=4)
    with CompileCache(backend, tmp_path / "c", workers=4) as cache:
        futures = [cache.submit(s) for s in "ABCD"]
        assert all(f.result().ok for f in futures)  # a broken barrier raises here
    assert sorted(compiles(log)) == list("ABCD") and not backend.barrier.broken


def test_persistent_across_instances_and_keyed_on_fingerprint(tmp_path):
    log = tmp_path / "log"
    with CompileCache(CountingBackend(log), tmp_path / "c") as cache:
        first = cache.compile("A")
    with CompileCache(CountingBackend(log), tmp_path / "c") as cache:
        again = cache.compile("A")
        assert cache.hits == 1 and cache.misses == 0
    assert again.executable == first.executable and compiles(log) == ["A"]
    with CompileCache(CountingBackend(log, version="v2"), tmp_path / "c") as cache:
        cache.compile("A")  # new compiler version: rebuilt
    assert compiles(log) == ["A", "A"]
    assert cache_key("A", "count|v1") != cache_key("A", "count|v2") != cache_key("B", "count|v2")


def test_compile_errors_are_cached_timeouts_are_not(tmp_path):
    log = tmp_path / "log"
    with CompileCache(CountingBackend(log, delay=0), tmp_path / "c") as cache:
        e1 = cache.compile("ERROR")
        assert not e1.ok and e1.status is Status.COMPILE_ERROR and e1.detail == "error: nope"
    with CompileCache(CountingBackend(log, delay=0), tmp_path / "c") as cache:
        e2 = cache.compile("ERROR")
        assert e2 == e1
        t1 = cache.compile("TIMEOUT")
        assert t1.status is Status.TIMEOUT
    with CompileCache(CountingBackend(log, delay=0), tmp_path / "c") as cache:
        cache.compile("TIMEOUT")
    assert compiles(log) == ["ERROR", "TIMEOUT", "TIMEOUT"]


def test_compiles_stopped_by_a_limit_or_signal_are_not_cached(tmp_path):
    # Their outcome depends on the configured limits and the machine, not on the source.
    log = tmp_path / "log"
    for _ in range(2):
        with CompileCache(CountingBackend(log, delay=0), tmp_path / "c") as cache:
            oom, killed = cache.compile("OOM"), cache.compile("KILLED")
            assert (oom.status, oom.step.limit, killed.step.returncode) == (Status.COMPILE_ERROR, "memory_limit", -9)
    assert compiles(log) == ["OOM", "KILLED", "OOM", "KILLED"]


def _compile_in_process(root, log, source):
    with CompileCache(CountingBackend(Path(log), delay=0.5), root) as cache:
        assert cache.compile(source).ok


def test_separate_processes_share_one_build(tmp_path):
    log = tmp_path / "log"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_compile_in_process, args=(tmp_path / "c", log, "SAME")) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert compiles(log) == ["SAME"]


def test_a_repeated_request_in_one_process_is_a_hit_not_a_build(tmp_path):
    """A KernelBench sample's budget charges builds (`built`): the second sample asking this
    process's cache for the same source was charged the first one's build."""
    log = tmp_path / "log"
    with CompileCache(CountingBackend(log, delay=0), tmp_path / "c") as cache:
        first, second = cache.compile("A"), cache.compile("A")
        assert (first.built, second.built) == (True, False) and (cache.hits, cache.misses) == (1, 1)
        assert second.executable == first.executable and second.digest == first.digest
    assert compiles(log) == ["A"]


def test_an_entry_whose_executable_changed_is_discarded_and_built_again(tmp_path):
    """outcome.json names the executable's sha256 (hand-checked here); an executable that
    no longer matches it is not handed out: the entry goes and the source is built again."""
    import hashlib
    import json

    log = tmp_path / "log"
    with CompileCache(CountingBackend(log, delay=0), tmp_path / "c") as cache:
        first = cache.compile("A")
        meta = json.loads((first.executable.parents[1] / "outcome.json").read_text())
        assert meta["sha256"] == first.digest == hashlib.sha256(b"A").hexdigest()
        first.executable.write_text("B")     # the entry's executable is not the one built any more
    with CompileCache(CountingBackend(log, delay=0), tmp_path / "c") as cache:
        again = cache.compile("A")
        assert (cache.hits, cache.misses) == (0, 1)
    assert compiles(log) == ["A", "A"]
    assert again.executable.read_text() == "A" and again.digest == hashlib.sha256(b"A").hexdigest()


@pytest.mark.parametrize("planted", ["no digest", "wrong digest", "link", "no outcome"])
def test_a_planted_entry_is_not_used(tmp_path, planted):
    """A directory at a key's place that the cache did not write (no sha256 in its outcome.json,
    one that does not match, an executable that is a link to a file with the right bytes, no
    outcome.json at all) is not an entry: never returned, replaced by a build."""
    import hashlib
    import json

    log = tmp_path / "log"
    with CompileCache(CountingBackend(log, delay=0), tmp_path / "c") as cache:
        entry = cache.entry_dir(cache.key("A"))
        (entry / "bin").mkdir(parents=True)
        meta = {"ok": True, "executable": "bin/prog", "step": {"name": "compile", "returncode": 0, "seconds": 0.1}}
        if planted == "link":
            (tmp_path / "target").write_text("PLANTED")
            (entry / "bin" / "prog").symlink_to(tmp_path / "target")
            meta["sha256"] = hashlib.sha256(b"PLANTED").hexdigest()
        else:
            (entry / "bin" / "prog").write_text("PLANTED")
            if planted == "wrong digest":
                meta["sha256"] = hashlib.sha256(b"A").hexdigest()
        if planted != "no outcome":
            (entry / "outcome.json").write_text(json.dumps(meta))
        got = cache.compile("A")
        assert (cache.hits, cache.misses) == (0, 1)
    assert compiles(log) == ["A"]
    assert got.executable.read_text() == "A" and not got.executable.is_symlink()


def test_executable_outside_workdir_is_refused(tmp_path):
    class Escaping(CountingBackend):
        def compile(self, source, workdir, timeout):
            exe = tmp_path / "elsewhere"
            exe.write_text("x")
            return CompileOutcome(True, exe, StepResult("compile", 0, 0.1))

    with CompileCache(Escaping(tmp_path / "log"), tmp_path / "c") as cache:
        with pytest.raises(RuntimeError, match="outside its workdir"):
            cache.compile("A")


def test_the_default_root_follows_cuset_cache_set_after_import(tmp_path, monkeypatch):
    from cuset.execute.cpu.toolchain import default_cache_dir
    from cuset.train.data.build import tokenized_root
    from cuset.train.data.config import DataConfig

    monkeypatch.setenv("CUSET_CACHE", str(tmp_path / "one"))
    with CompileCache(CountingBackend(tmp_path / "log")) as cache:
        assert cache.root == (tmp_path / "one" / "compile").resolve()
    assert default_cache_dir() == tmp_path / "one" / "cpu-pch"
    assert tokenized_root(DataConfig()) == tmp_path / "one" / "tokenized"
    monkeypatch.setenv("CUSET_CACHE", str(tmp_path / "two"))
    with CompileCache(CountingBackend(tmp_path / "log")) as cache:
        assert cache.root == (tmp_path / "two" / "compile").resolve()


class Sized(CountingBackend):
    """Each build: a 10,000-byte executable (a source containing ERROR: a failed compile
    leaving 10,000 bytes of objects behind)."""

    def compile(self, source, workdir, timeout):
        with open(self.log, "a") as fh:
            fh.write(source + "\n")
        (Path(workdir) / "prog").write_bytes(b"x" * 10_000)
        if "ERROR" in source:
            return CompileOutcome(False, None, StepResult("compile", 1, 0.0, False, "", "error: nope"),
                                  Status.COMPILE_ERROR, "error: nope")
        return CompileOutcome(True, Path(workdir) / "prog", StepResult("compile", 0, 0.0))


def _age(cache, source, seconds_ago):
    import os

    from cuset.execute import compile_cache

    t = time.time() - seconds_ago
    os.utime(cache.entry_dir(cache.key(source)) / compile_cache.OUTCOME, (t, t))


def test_the_cache_keeps_to_its_size_budget_least_recently_used_out(tmp_path):
    """Issues 37 and 59: an entry made huge by its program cannot grow the cache without end.
    Entries of ~10,000 bytes under a budget of 35,000 (three fit): the least recently used
    go first, however recently that was (every entry here was used within the last minute);
    a hit counts as a use."""
    with CompileCache(Sized(tmp_path / "log", delay=0), tmp_path / "cache", max_bytes=35_000) as cache:
        for age, source in ((40, "a"), (30, "b"), (20, "c")):
            cache.compile(source)
            cache.release(source)
            _age(cache, source, age)
        cache.compile("a")              # a hit: "a" is now the most recently used
        cache.release("a")
        cache.compile("d")              # 4 x ~10 KB > 35 KB: the least recently used ("b") goes
        cache.release("d")
        present = {s for s in "abcd" if cache.entry_dir(cache.key(s)).exists()}
        assert present == {"a", "c", "d"}
        assert not list((tmp_path / "cache").glob("*/.evicted-*"))
        # an evicted entry is looked up again, not taken from the finished future
        assert cache.compile("b").ok and cache.entry_dir(cache.key("b")).exists()
        assert compiles(tmp_path / "log") == ["a", "b", "c", "d", "b"]


def test_an_entry_in_use_is_not_evicted_until_released(tmp_path):
    """A sample copies its executable for every case and order: the entry it was handed stays
    while it is not released, whoever evicts (this cache, or another process: a pin is a
    flock on the entry's outcome.json); released, it goes like any other."""
    from cuset.execute import compile_cache

    with CompileCache(Sized(tmp_path / "log", delay=0), tmp_path / "cache", max_bytes=25_000) as cache:
        held = cache.compile("held")             # not released: a sample still runs it
        _age(cache, "held", 100)                 # the least recently used of all
        for source in "xyz":
            cache.compile(source)
            cache.release(source)
        assert held.executable.exists()
        assert cache.entry_dir(cache.key("held")).exists()
        assert {s for s in "xyz" if cache.entry_dir(cache.key(s)).exists()} == {"z"}   # 2 x 10 KB fit
        # another holder: a pin taken on its own (as another process's cache takes it)
        fd = compile_cache.pin_entry(cache.entry_dir(cache.key("z")))
        assert fd is not None
        cache.release("held")
        assert compile_cache.evict(cache.root, 5_000) == [cache.key("held")]   # "z" is pinned
        import os
        os.close(fd)
        assert compile_cache.evict(cache.root, 5_000) == [cache.key("z")]


def test_a_build_over_the_entry_cap_is_used_but_never_stored(tmp_path):
    """compile_cache_entry_mb: a build of 10,000 bytes under a cap of 5,000 runs for the
    requests that asked for it (from its private staging dir), is not in the cache, and is
    gone once they released it: the next request builds it again. A failed build that big
    keeps its verdict only (outcome.json), not its objects."""
    from cuset.execute import compile_cache

    with CompileCache(Sized(tmp_path / "log", delay=0), tmp_path / "cache", max_entry_bytes=5_000) as cache:
        first, second = cache.compile("big"), cache.compile("big")
        assert first.ok and first.executable.read_bytes() == b"x" * 10_000
        assert second.executable == first.executable
        assert not cache.entry_dir(cache.key("big")).exists()
        cache.release("big")
        assert first.executable.exists()          # the second request still holds it
        cache.release("big")
        assert not first.executable.exists() and not first.executable.parent.exists()
        again = cache.compile("big")
        assert again.ok and again.executable.exists()
        assert compiles(tmp_path / "log") == ["big", "big"]
        failed = cache.compile("ERROR big")
        assert not failed.ok
        entry = cache.entry_dir(cache.key("ERROR big"))
        assert sorted(p.name for p in entry.iterdir()) == [compile_cache.OUTCOME]
    assert not again.executable.exists()          # close() removes what was never released
    assert not list((tmp_path / "cache").glob("*/build-*"))


class PlantingBackend(CountingBackend):
    """A build that leaves something of its own at the name of the cache's outcome.json, as a
    candidate's build can (a KernelBench load_inline's extra_cflags run shell in its build)."""

    def __init__(self, log: Path, plant):
        super().__init__(log, delay=0.0)
        self.plant = plant

    def compile(self, source, workdir, timeout):
        outcome = super().compile(source, workdir, timeout)
        self.plant(Path(workdir) / "outcome.json")
        return outcome


FORGED = '{"ok": true, "executable": null, "sha256": null, "status": null, "detail": "", ' \
         '"step": {"name": "compile", "returncode": 0, "seconds": 0.0}}'


@pytest.mark.parametrize("what", ["link_to_host_file", "link_to_own_file", "directory", "forged_file"])
def test_what_a_build_leaves_at_outcome_json_is_replaced_never_written_through(tmp_path, what):
    victim = tmp_path / "host" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text("host data\n")

    def plant(path: Path):
        if what == "link_to_host_file":
            path.symlink_to(victim)
        elif what == "link_to_own_file":
            (path.parent / "mine.json").write_text(FORGED)
            path.symlink_to("mine.json")
        elif what == "directory":
            (path / "sub").mkdir(parents=True)
            (path / "sub" / "f").write_text("x")
        else:
            path.write_text(FORGED)

    log = tmp_path / "log"
    with CompileCache(PlantingBackend(log, plant), tmp_path / "c") as cache:
        built = cache.compile("ERROR in the source")     # a failure: its outcome.json is the entry
        assert not built.ok and built.status == Status.COMPILE_ERROR and built.detail == "error: nope"
    assert victim.read_text() == "host data\n"
    with CompileCache(PlantingBackend(log, plant), tmp_path / "c") as cache:
        again = cache.compile("ERROR in the source")
        assert not again.ok and again.detail == "error: nope" and not again.built   # read back: the parent's verdict
    assert compiles(log) == ["ERROR in the source"]
    entry = tmp_path / "c" / cache.key("ERROR in the source")[:2] / cache.key("ERROR in the source")
    assert (entry / "outcome.json").is_file() and not (entry / "outcome.json").is_symlink()


def test_an_entry_whose_outcome_json_is_a_link_is_built_again_not_looped_on(tmp_path):
    """A link at outcome.json cannot be pinned (O_NOFOLLOW); reading it through the link made
    the lookup retry forever. It is no entry: discarded and built again."""
    log = tmp_path / "log"
    with CompileCache(CountingBackend(log, delay=0.0), tmp_path / "c") as cache:
        assert cache.compile("int main;").ok
        entry = tmp_path / "c" / cache.key("int main;")[:2] / cache.key("int main;")
    outcome = entry / "outcome.json"
    (entry / "real.json").write_text(outcome.read_text())
    outcome.unlink()
    outcome.symlink_to("real.json")
    with CompileCache(CountingBackend(log, delay=0.0), tmp_path / "c") as cache:
        done = []
        worker = threading.Thread(target=lambda: done.append(cache.compile("int main;")), daemon=True)
        worker.start()
        worker.join(timeout=30)
        assert done and done[0].ok and done[0].built
    assert compiles(log) == ["int main;", "int main;"]
