"""What one KernelBench sample may spend on building its `load_inline` extensions.

A sample's candidate may name extensions in its source (built before it runs) or ask
for them at run time (its run ends with `need_extensions`, the parent builds, the
candidate runs again: one "request round"). Both draw on one `BuildBudget` per sample,
shared by every verification of that sample (plain trials, thread order, robust checks):

- at most MAX_EXTENSIONS distinct extensions;
- `seconds` of wall-clock time AND `seconds` of CPU time over all its builds. The builds
  of one sample run one after another, each stopped when what is left runs out (the
  compile cache's deadline: a build killed there is not cached), and each compiler
  process is limited to what is left in CPU seconds (RLIMIT_CPU). After each build its
  wall and CPU seconds (the compilers' whole process tree, wait4) are counted; cache
  hits cost nothing. A build the budget stopped, or one asked for when nothing is
  left, makes the sample's verdict `compile_error`, whatever its code would do next;
- at most `rounds` request rounds; a candidate still asking after them is a
  `compile_error` too. Extensions asked for at run time are remembered
  (`requested`) and built up front in the sample's later verifications, which then
  need no rounds of their own.

What was spent is reported in the sample's timings (`report`).
"""

from __future__ import annotations

import json
import time

from cuset.execute.compile_cache import CompileCache
from cuset.execute.kernelbench.build import ExtensionSpec
from cuset.execute.result import Status, truncate_log

MAX_EXTENSIONS = 8          # distinct load_inline extensions one sample may build
MAX_STATIC_BUILDS = 4       # of those, built from the source before the candidate runs
DEFAULT_ROUNDS = 4          # request rounds (candidate runs that end asking for builds) per sample


class BuildBudget:
    """The extension builds of one sample (see the module's docstring)."""

    def __init__(self, seconds: float, rounds: int = DEFAULT_ROUNDS):
        if rounds < 0:
            raise ValueError(f"rounds={rounds}: the request rounds of a sample cannot be negative")
        self.seconds = seconds
        self.rounds = rounds
        self.wall = 0.0        # seconds spent waiting for builds
        self.cpu = 0.0         # CPU seconds of the compilers that ran for this sample
        self.rounds_used = 0
        self.builds = 0        # builds that ran (cache hits not counted)
        self.requested: dict[str, ExtensionSpec] = {}   # asked for at run time, by key

    def left(self) -> float:
        return self.seconds - max(self.wall, self.cpu)

    def spent(self) -> str:
        return f"{self.wall:.1f} s of wall time and {self.cpu:.1f} s of CPU time"

    def refuses(self, new: list[ExtensionSpec], manifest: dict) -> str | None:
        """Why building `new` as well is over the budget; None when it is not."""
        if len(manifest) + len(new) > MAX_EXTENSIONS:
            return (f"the candidate asks for {len(manifest) + len(new)} load_inline extensions, more than the "
                    f"{MAX_EXTENSIONS} one sample may build")
        if self.left() <= 0:
            return (f"the candidate's extension builds took {self.spent()}, its whole budget of "
                    f"{self.seconds:g} s, and it asks for {len(new)} more")
        return None

    def next_round(self) -> str | None:
        """Take one request round; why not when none is left."""
        if self.rounds_used >= self.rounds:
            return (f"the candidate still asks for extensions after {self.rounds_used} request round"
                    f"{'s' if self.rounds_used != 1 else ''}, the most one sample may have (kernelbench_build_rounds)")
        self.rounds_used += 1
        return None

    def build(self, cache: CompileCache, specs: list[ExtensionSpec], manifest: dict, steps: list,
              timings: dict) -> str | None:
        """Build `specs` (those not in `manifest` yet) one after another, each within what is
        left; their outcomes go into `manifest` and `steps`. Returns why the budget ran out
        (the sample's compile_error), or None."""
        prepare = getattr(cache.backend, "prepare", None)
        if prepare is not None:
            prepare()    # the shared toolchain, trusted: before the clock starts
        for spec in specs:
            key = spec.key()
            if key in manifest:
                continue
            if self.left() <= 0:
                return (f"the candidate's extension builds took {self.spent()}, its whole budget of "
                        f"{self.seconds:g} s; load_inline({spec.name!r}) was not built")
            tb = time.monotonic()
            outcome = cache.submit(json.dumps(spec.to_json(), sort_keys=True), deadline=tb + self.left()).result()
            elapsed = time.monotonic() - tb
            self.wall += elapsed
            timings["compile"] = timings.get("compile", 0.0) + elapsed
            if outcome.built:
                self.builds += 1
                self.cpu += outcome.step.cpu_seconds or 0.0
            steps.append(outcome.step)
            if outcome.ok:   # its digest: each run's copy is checked against it (extension_cache.place_extensions)
                manifest[key] = {"path": str(outcome.executable), "module": module_name(cache.backend, spec),
                                 "sha256": outcome.digest}
                continue
            manifest[key] = {"status": (outcome.status or Status.COMPILE_ERROR).value,
                             "detail": f"load_inline({spec.name!r}): {outcome.detail}",
                             "log": truncate_log(outcome.step.stderr)}
            if outcome.step.timed_out and self.left() <= 0:
                return (f"the candidate's extension builds took {self.spent()}, its whole budget of "
                        f"{self.seconds:g} s: load_inline({spec.name!r}) was stopped there")
        return None

    def report(self) -> dict[str, float]:
        """The sample's timings: what its builds and request rounds cost."""
        return {"build_wall_seconds": round(self.wall, 3), "build_cpu_seconds": round(self.cpu, 3),
                "build_rounds": float(self.rounds_used), "builds": float(self.builds)}


def module_name(builder, spec: ExtensionSpec) -> str:
    """The name the built module initialises under: the builder's (torch's: the call's name),
    else the CPU build's own (ExtensionSpec.module_name)."""
    named = getattr(builder, "module_name", None)
    return named(spec) if named is not None else spec.module_name()
