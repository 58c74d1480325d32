"""Issue 59, item 4: a KernelBench sample's extension builds share one budget of wall and
CPU time, enforced while each build runs; its request rounds are bounded; what it spent
is in its timings."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from cuset.execute.compile_cache import CompileCache
from cuset.execute.interface import CompileOutcome
from cuset.execute.kernelbench.budget import BuildBudget
from cuset.execute.kernelbench.build import ExtensionSpec
from cuset.execute.kernelbench.options import VerifyOptions
from cuset.execute.kernelbench.verify import plain_checks, verify
from cuset.execute.process import run_step
from cuset.execute.result import Status

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench"
REFERENCE = (FIXTURES / "relu_ref.py").read_text()
BUDGET = 3.0          # seconds of wall and of CPU time for all builds of the sample
COMPILE_TIMEOUT = 20  # each build alone could take this long
SLACK = 1.5           # killing a build's process tree and reaping it


class SlowCompiler:
    """A compile-cache backend whose every build burns CPU for 10 s, then fails: a slow,
    hostile source without the cost of a real toolchain."""

    name = "slow"

    def fingerprint(self) -> str:
        return "slow-compiler-1"

    def compile(self, source: str, workdir: Path, timeout: float) -> CompileOutcome:
        burn = "import time\nend = time.process_time() + 10\nwhile time.process_time() < end: pass"
        step = run_step("compile", [sys.executable, "-c", burn], cwd=workdir, timeout=timeout)
        return CompileOutcome(False, None, step, Status.COMPILE_ERROR, "the slow compiler gave up")


def specs(n: int) -> list[ExtensionSpec]:
    return [ExtensionSpec(f"slow{i}", (f"int f{i}() {{ return {i}; }}",), (), (f"f{i}",)) for i in range(n)]


def test_eight_slow_builds_stop_at_the_samples_budget(tmp_path):
    """One request naming 8 builds of 10 s each, compile timeout 20 s, budget 3 s: the builds
    together take the budget (the first is stopped there, the others never start), not 8 x 10 s."""
    budget = BuildBudget(BUDGET)
    manifest, steps, timings = {}, [], {}
    with CompileCache(SlowCompiler(), root=tmp_path / "cache", workers=2, timeout=COMPILE_TIMEOUT) as cache:
        t0 = time.monotonic()
        over = budget.build(cache, specs(8), manifest, steps, timings)
        wall = time.monotonic() - t0
    assert wall < BUDGET + SLACK, wall
    assert sum(s.seconds for s in steps) < BUDGET + SLACK
    assert over is not None and over.startswith("the candidate's extension builds took") and \
        "its whole budget of 3 s: load_inline('slow0') was stopped there" in over
    assert budget.builds == 1 and len(steps) == 1 and steps[0].timed_out
    assert BUDGET - 0.5 < budget.wall < BUDGET + SLACK
    # the compiler's CPU time is counted (wait4 of its process; the machine may be busy)
    assert steps[0].cpu_seconds is not None and 0.1 < budget.cpu <= budget.wall + 0.5   # under load: less than the wall
    report = budget.report()
    assert report["builds"] == 1.0 and report["build_rounds"] == 0.0 and report["build_wall_seconds"] == \
        round(budget.wall, 3)
    # nothing more for this sample, and the stopped build is not cached
    assert budget.refuses(specs(1), {}).endswith("its whole budget of 3 s, and it asks for 1 more")
    assert not list((tmp_path / "cache").glob("*/*/outcome.json"))


def test_cpu_time_counts_against_the_budget_too(tmp_path):
    """CPU seconds spent count like wall seconds: a sample whose compilers used the budget's
    CPU time gets no further build, whatever its wall time."""
    budget = BuildBudget(BUDGET)
    budget.cpu = BUDGET + 0.1
    with CompileCache(SlowCompiler(), root=tmp_path / "cache", workers=2, timeout=COMPILE_TIMEOUT) as cache:
        over = budget.build(cache, specs(1), {}, [], {})
    assert over == ("the candidate's extension builds took 0.0 s of wall time and 3.1 s of CPU time, its whole "
                    "budget of 3 s; load_inline('slow0') was not built")


def test_request_rounds_are_counted_and_bounded():
    budget = BuildBudget(BUDGET, rounds=2)
    assert budget.next_round() is None and budget.next_round() is None
    assert budget.next_round() == ("the candidate still asks for extensions after 2 request rounds, the most one "
                                   "sample may have (kernelbench_build_rounds)")
    assert budget.report()["build_rounds"] == 2.0
    with pytest.raises(ValueError, match="rounds=-1"):
        BuildBudget(BUDGET, rounds=-1)


# ------------------------------------------------------------- through verify
# A constant expression g++ evaluates for a very long time: a genuinely slow source.
SLOW_CPP = ("constexpr long spin(long n) {{ long s = 0; for (long i = 0; i < n; ++i) s += i % 7; return s; }}\n"
            "constexpr long value{i} = spin(1L << 40);\n"
            "long f{i}() {{ return value{i}; }}\n")


def flood(n: int) -> str:
    """A candidate that ends its first run asking for `n` slow extensions at once (its own
    verdict.json, as the harness's request looks)."""
    from cuset.execute.kernelbench.build import FLAG_FIELDS

    wanted = [{"name": f"slow{i}", "cpp_sources": [SLOW_CPP.format(i=i)], "cuda_sources": [], "functions": [f"f{i}"],
               **{flags: [] for flags in FLAG_FIELDS}, "with_cuda": False, "with_pytorch_error_handling": True}
              for i in range(n)]
    record = json.dumps({"status": "need_extensions", "detail": "", "specs": wanted})
    return ("import json, os\nCFG = json.load(open('config.json'))\n"
            f"open(CFG['verdict_path'], 'w').write({record!r})\nos._exit(0)\n"
            "class ModelNew:\n    pass\n")


def test_a_request_of_eight_slow_builds_is_stopped_at_the_budget(cold_compile_cache):
    """The flood of issue 59 through verify: 8 builds named in one request under a compile
    timeout of 20 s took 80.8 s there; here the sample's builds end at its 3 s budget and
    its verdict is the parent's compile_error, with the time spent in its timings."""
    v = verify(REFERENCE, flood(8), plain_checks(1),
               options=VerifyOptions(compile_timeout=COMPILE_TIMEOUT, step_timeout=30, build_budget_seconds=BUDGET,
                                     reference_store=None))
    assert v.status is Status.COMPILE_ERROR, v.detail
    assert "its whole budget of 3 s" in v.detail
    builds = [s for s in v.steps if s.name == "compile"]
    assert builds and sum(s.seconds for s in builds) < BUDGET + SLACK, [s.seconds for s in builds]
    assert v.timings["compile"] < BUDGET + SLACK and v.timings["build_wall_seconds"] < BUDGET + SLACK
    assert v.timings["build_rounds"] == 1.0
    assert [s.name for s in v.steps if s.name != "compile"] == ["kernelbench[cpu]"]   # one run of the candidate


def churn() -> str:
    """A candidate that asks for a new (broken, quickly rejected) extension in every run."""
    return ("import time\nfrom torch.utils.cpp_extension import load_inline\n"
            "load_inline(name='e' + str(time.time_ns()), cpp_sources='int broken(', functions=['broken'])\n"
            "class ModelNew:\n    pass\n")


def test_request_rounds_stop_at_the_configured_number(cold_compile_cache):
    v = verify(REFERENCE, churn(), plain_checks(1),
               options=VerifyOptions(compile_timeout=120, step_timeout=30, build_rounds=1, reference_store=None))
    assert v.status is Status.COMPILE_ERROR, v.detail
    assert v.detail == ("the candidate still asks for extensions after 1 request round, the most one sample may "
                        "have (kernelbench_build_rounds)")
    assert [s.name for s in v.steps] == ["kernelbench[cpu]", "compile", "kernelbench[cpu]"]
    assert v.timings["build_rounds"] == 1.0 and v.timings["builds"] == 1.0
