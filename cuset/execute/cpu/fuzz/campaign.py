"""A fuzzing run: generate kernels from one seed, check them a program at a time
(runner.check_program), minimise every disagreement into a reproducer, and keep a tally.

The tally is saved in `<out>/state.json` after every batch of programs, so a run that is
stopped (or a long one under `nice`) resumes where it left off when started again with
the same seed and program size; kernels already checked are never checked again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from cuset.config import ConfigError
from cuset.execute.cpu import code_hash
from cuset.execute.cpu.fuzz.generator import FEATURES, Program, generate_program
from cuset.execute.cpu.fuzz.minimise import minimise, save_reproducer
from cuset.execute.cpu.fuzz.runner import PLAN_MARKERS, Disagreement, ProgramCheck, Sides, check_program
from cuset.io import atomic_write_json

STATE = "state.json"


@dataclasses.dataclass
class Tally:
    """What a run has found so far (the record's numbers)."""

    seed: int
    per_program: int
    generator: str = ""        # digest of the run's first program: a changed generator is another run
    backend: str = ""          # code_hash.compile_hash() of the backend checked: changed code is another run
    programs_done: list[int] = dataclasses.field(default_factory=list)
    kernels: int = 0
    reference_verdicts: dict = dataclasses.field(default_factory=dict)
    default_verdicts: dict = dataclasses.field(default_factory=dict)
    features: dict = dataclasses.field(default_factory=lambda: {f: 0 for f in FEATURES})
    paths: dict = dataclasses.field(default_factory=dict)
    plans: dict = dataclasses.field(default_factory=lambda: {m: 0 for m in PLAN_MARKERS})
    proven: int = 0
    parallel_only: int = 0
    disagreements: list = dataclasses.field(default_factory=list)
    compile_errors: list = dataclasses.field(default_factory=list)
    strict_not_passed: list = dataclasses.field(default_factory=list)   # generator rule gaps (not a backend fault)
    seconds: float = 0.0

    def add(self, index: int, program: Program, check: ProgramCheck, found: list[dict]) -> None:
        self.programs_done.append(index)
        self.kernels += check.kernels
        for name, counts in (("reference_verdicts", check.reference), ("default_verdicts", check.default)):
            tally = Counter(getattr(self, name))
            tally.update(counts.values())
            setattr(self, name, dict(sorted(tally.items())))
        feats = Counter(self.features)
        for k in program.kernels:
            feats.update(k.features)
            if k.strict and check.reference.get(k.name, "passed") != "passed":
                self.strict_not_passed.append(f"{k.seed}: {check.reference[k.name]}")
        self.features = dict(feats)
        self.paths = dict(sorted((Counter(self.paths) + Counter(check.paths.values())).items()))
        self.plans = {m: self.plans.get(m, 0) + sum(m in plan for plan in check.plans.values()) for m in PLAN_MARKERS}
        self.proven += len(check.proven)
        self.parallel_only += len(check.parallel_only)
        self.disagreements += found
        if check.compile_error:
            self.compile_errors.append({"program": index, "error": check.compile_error[:500]})
        self.seconds += check.seconds

    def summary(self) -> dict:
        return {"seed": self.seed, "kernels_generated": self.kernels, "programs": len(self.programs_done),
                "kernels_per_program": self.per_program,
                "reference_verdicts": self.reference_verdicts, "default_verdicts": self.default_verdicts,
                "features": dict(sorted(self.features.items())), "default_paths": self.paths,
                "default_plans": self.plans,
                "proven_kernels": self.proven, "parallel_only_differences": self.parallel_only,
                "disagreements": len(self.disagreements), "disagreement_list": self.disagreements,
                "compile_errors": self.compile_errors,
                "strict_kernels_not_passing": self.strict_not_passed, "seconds": round(self.seconds, 1),
                "kernels_per_s": round(self.kernels / self.seconds, 3) if self.seconds else None}


def generator_digest(seed: int, per_program: int) -> str:
    return hashlib.sha256(generate_program(seed, 0, per_program).source().encode()).hexdigest()[:16]


def load_tally(out: Path, seed: int, per_program: int) -> Tally:
    path = out / STATE
    digest = generator_digest(seed, per_program)
    backend = code_hash.compile_hash()
    if not path.exists():
        return Tally(seed, per_program, digest, backend)
    data = json.loads(path.read_text())
    if (data.get("seed"), data.get("per_program")) != (seed, per_program):
        raise ConfigError([f"{path}: a run with seed {data.get('seed')} and {data.get('per_program')} kernels per "
                           f"program, not seed {seed} with {per_program}: resume it with those, or give another "
                           "--out"], "the fuzzing run")
    if data.get("generator", digest) not in ("", digest):
        raise ConfigError([f"{path}: the kernel generator changed since this run started (its first program is "
                           "another): give another --out for a new run"], "the fuzzing run")
    if data.get("backend") != backend:
        # Kernels checked by other code say nothing of this code: one run, one backend.
        raise ConfigError([f"{path}: the CPU backend changed since this run checked its kernels (code hash "
                           f"{data.get('backend') or 'not recorded'}, now {backend}): give another --out (--state) "
                           "for a new run"], "the fuzzing run")
    return Tally(**{**data, "generator": digest})


def run_campaign(seed: int, kernels: int, out: Path, *, per_program: int = 25, jobs: int = 1,
                 minimise_budget: int = 40, stop_when: Callable[[Tally], bool] | None = None,
                 sides: Sides | None = None,
                 progress: Callable[[Tally], None] | None = None) -> Tally:
    """Check kernels 0 .. `kernels` - 1 of `seed` (resuming a run saved in `out`), in
    programs of `per_program` kernels, `jobs` programs at a time. Every disagreement is
    minimised (at most `minimise_budget` checks; 0: kept as generated) into
    `<out>/repro/`. `stop_when(tally)`: checked after every batch, True stops the run."""
    if kernels < 1 or per_program < 1 or jobs < 1:
        raise ConfigError([f"kernels={kernels}, per_program={per_program}, jobs={jobs}: each must be >= 1"],
                          "the fuzzing run")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    sides = sides or Sides()
    tally = load_tally(out, seed, per_program)
    todo = [i for i in range((kernels + per_program - 1) // per_program) if i not in set(tally.programs_done)]
    work = out / "work"

    def one(index: int) -> tuple[int, Program, ProgramCheck]:
        first = index * per_program
        program = generate_program(seed, first, min(per_program, kernels - first))
        return index, program, check_program(program, work / f"p{index}", sides)

    with ThreadPoolExecutor(jobs) as pool:
        for start in range(0, len(todo), jobs):
            for index, program, check in pool.map(one, todo[start:start + jobs]):
                found = [_reproduce(d, program, out, sides, minimise_budget) for d in check.disagreements]
                tally.add(index, program, check, found)
            atomic_write_json(out / STATE, dataclasses.asdict(tally), indent=1)
            if progress:
                progress(tally)
            if stop_when is not None and stop_when(tally):
                break
    shutil.rmtree(work, ignore_errors=True)
    return tally


def _reproduce(d: Disagreement, program: Program, out: Path, sides: Sides, budget: int) -> dict:
    """Minimise one disagreement and save it; its record for the tally. A kernel that
    disagrees only inside its program (the random orders' stream depends on the launches
    before it) is saved with its whole program."""
    kernel = next(k for k in program.kernels if k.name == d.kernel)
    scratch = out / "work" / f"min-{d.kernel}"

    def same_kind(candidate) -> bool:
        check = check_program(Program((candidate,)), scratch, sides)
        return any(x.what == d.what for x in check.disagreements)

    alone = same_kind(kernel)
    small, checks = minimise(kernel, same_kind, budget) if budget and alone else (kernel, 0)
    info = {"what": d.what, "reference": d.reference, "default": d.default, "detail": d.detail,
            "strict": d.strict, "features": list(d.features), "statements": sum(s.size() for s in kernel.body),
            "statements_minimised": sum(s.size() for s in small.body), "minimise_checks": checks,
            "reproduces_alone": alone}
    path = save_reproducer(out / "repro", small, info, None if alone else program)
    shutil.rmtree(scratch, ignore_errors=True)
    return {**info, "kernel_seed": d.seed, "reproducer": str(path)}
