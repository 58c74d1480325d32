"""bench/suite_time.py: a JUnit report read back into per-test and per-file seconds and outcomes."""

import sys

from .scripts import load_bench_script

# What pytest --junitxml writes (trimmed): a module-level test, a test in a class, a skip, a failure.
JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="4" time="12.5">
<testcase classname="tests.evaluate.test_robust" name="test_a" time="7.25" />
<testcase classname="tests.evaluate.test_robust.TestGroup" name="test_b[x-1]" time="0.5" />
<testcase classname="tests.execute.cpu.test_aarch64" name="test_c" time="0.001">
  <skipped type="pytest.skip" message="set CUSET_TEST_AARCH64=1">skip</skipped></testcase>
<testcase classname="tests.demo.test_demo" name="test_d" time="4.0"><failure message="assert 1 == 2">x</failure></testcase>
</testsuite></testsuites>"""


def test_junit_cases_map_to_their_files_and_outcomes(tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "suite_time", raising=False)
    script = load_bench_script("suite_time")
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    cases, counts = script.read_junit(path)
    assert counts == {"passed": 2, "skipped": 1, "failure": 1}
    assert [(c["file"], c["test"], c["seconds"], c["outcome"]) for c in cases] == [
        ("tests/evaluate/test_robust.py", "test_a", 7.25, "passed"),
        ("tests/evaluate/test_robust.py", "test_b[x-1]", 0.5, "passed"),   # the class is not part of the path
        ("tests/execute/cpu/test_aarch64.py", "test_c", 0.001, "skipped"),
        ("tests/demo/test_demo.py", "test_d", 4.0, "failure"),
    ]
