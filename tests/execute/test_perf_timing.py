"""The timing loop's logic with a fake clock and fake events, and the parent's reading of
a timing record."""

import pytest

from cuset.execute.perf.claims import UnbelievableTiming, checked_times
from cuset.execute.perf.timing import stats, time_trials


class FakeTimer:
    """Events read a fake clock; `log` keeps the order of what the loop did."""

    def __init__(self, clock):
        self.clock, self.log = clock, []

    def pair(self):
        return {}, {}

    def record(self, event):
        event["t"] = self.clock.now
        self.log.append("record")

    def wait(self, event):
        self.log.append("wait")

    def elapsed_ms(self, start, end):
        return (end["t"] - start["t"]) * 1e3

    def synchronize(self):
        self.log.append("sync")


class Clock:
    now = 0.0


def test_warmup_is_not_timed_flush_comes_before_each_trial_and_is_not_timed():
    clock = Clock()
    timer = FakeTimer(clock)
    durations = iter([9.0, 9.0, 0.002, 0.003, 0.004])   # 2 slow warm-ups (a first-call build), 3 trials

    def run():
        clock.now += next(durations)
        timer.log.append("run")

    def flush():
        clock.now += 5.0   # a slow flush must not count
        timer.log.append("flush")

    times = time_trials(run, warmup=2, trials=3, timer=timer, flush=flush)
    assert times == pytest.approx([2.0, 3.0, 4.0])
    assert timer.log == ["run", "run", "sync"] + ["flush", "sync", "record", "run", "record", "wait"] * 3


def test_stats_and_bad_arguments():
    assert stats([2.0, 3.0, 4.0]) == {"mean": 3.0, "median": 3.0, "std": 1.0, "min": 2.0, "max": 4.0, "n": 3}
    assert stats([5.0])["std"] == 0.0
    with pytest.raises(ValueError, match="trials >= 1"):
        time_trials(lambda: None, warmup=0, trials=0, timer=FakeTimer(Clock()))


def test_the_parent_believes_only_a_plausible_record():
    assert checked_times({"candidate_ms": [1.0, 2.0]}, "candidate_ms", 2, wall_seconds=1.0) == [1.0, 2.0]
    bad = [({"candidate_ms": [1.0]}, "1 trial times where 2"),
           ({"candidate_ms": [1.0, float("nan")]}, "not a finite number"),
           ({"candidate_ms": [1.0, True]}, "not a finite number"),
           ({"candidate_ms": [1.0, 1e-6]}, "shorter than a kernel launch"),
           ({"candidate_ms": [900.0, 900.0]}, "longer than the whole run took"),
           ([1.0, 2.0], "not an object")]
    for record, message in bad:
        with pytest.raises(UnbelievableTiming, match=message):
            checked_times(record, "candidate_ms", 2, wall_seconds=1.0)


def test_timing_harness_names_only_what_its_sibling_files_define():
    """kb_timing_harness.py runs only on a GPU, next to copies of the verification harness and
    timing.py; a rename there once broke its candidate side (`harness.install_gpu_extensions`)
    and only a lent GPU found it. Every `harness.X` / `timing.X` it uses must exist."""
    import ast

    from cuset.evaluate.perf.kernelbench_runner import HARNESS_FILES

    def top_level_names(path):
        names = set()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        return names

    defined = {stem: top_level_names(HARNESS_FILES[f"{stem}.py"]) for stem in ("harness", "timing")}
    used = {(node.value.id, node.attr) for node in ast.walk(ast.parse(HARNESS_FILES["kb_timing_harness.py"].read_text()))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in defined}
    missing = sorted(f"{mod}.{attr}" for mod, attr in used if attr not in defined[mod])
    assert not missing, f"kb_timing_harness.py uses names its sibling files do not define: {missing}"
    assert {"install_extensions", "GpuExtensions", "load_module", "save"} <= {attr for mod, attr in used if mod == "harness"}
