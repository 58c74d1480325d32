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


def test_the_cache_keeps_to_its_size_budget_least_recently_used_out(tmp_path, monkeypatch):
    """Issue 37: an entry made huge by its program (a 300 MiB array literal) cannot grow the
    cache without end. Entries of 1000 bytes under a budget of 3500: the least recently used
    go first; a hit counts as a use; one used within the grace period is never removed."""
    import os

    from cuset.execute import compile_cache

    class Sized(CountingBackend):
        def compile(self, source, workdir, timeout):
            (Path(workdir) / "prog").write_bytes(b"x" * 10_000)
            return CompileOutcome(True, Path(workdir) / "prog", StepResult("compile", 0, 0.0))

    clock = [1_000_000.0]
    monkeypatch.setattr(compile_cache.time, "time", lambda: clock[0])
    with CompileCache(Sized(tmp_path / "log", delay=0), tmp_path / "cache", max_bytes=35_000) as cache:
        def build(source):
            clock[0] += 2 * compile_cache.GRACE_SECONDS
            outcome = cache.compile(source)
            os.utime(cache.entry_dir(cache.key(source)) / compile_cache.OUTCOME, (clock[0], clock[0]))
            return outcome

        for source in ("a", "b", "c"):
            build(source)
        build("a")                      # used again: "a" is now the most recently used
        build("d")                      # 4 x ~10 KB > 35 KB: the least recently used ("b") goes
        present = {s for s in "abcd" if cache.entry_dir(cache.key(s)).exists()}
        assert present == {"a", "c", "d"}
        assert not list((tmp_path / "cache").glob("*/.evicted-*"))
        # everything used just now: over budget, nothing removed
        for s in "acd":
            os.utime(cache.entry_dir(cache.key(s)) / compile_cache.OUTCOME, (clock[0], clock[0]))
        for s in "efg":   # these at the real time: later than the test's clock
            cache.compile(s)
        assert compile_cache.evict(tmp_path / "cache", 35_000, now=clock[0]) == []
        assert all(cache.entry_dir(cache.key(s)).exists() for s in "acdefg")
        # later, the budget applies again: the least recently used go until it holds
        removed = compile_cache.evict(tmp_path / "cache", 35_000, now=clock[0] + 2 * compile_cache.GRACE_SECONDS)
        assert sorted(removed) == sorted(cache.key(s) for s in "acd")
        # an evicted entry is looked up again, not taken from the finished future
        assert cache.compile("a").ok and cache.entry_dir(cache.key("a")).exists()
