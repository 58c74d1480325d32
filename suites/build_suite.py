"""Regenerate the bundled suite (cuset-bench.jsonl), its CPU-sized subset
(cuset-bench-cpu.jsonl) and its README from the task families.

    python suites/build_suite.py          # rewrite both files
    python suites/build_suite.py --check  # exit 1 if either is stale

The output is a pure function of cuset/curation/families: same code, same bytes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cuset.curation.families import DOMAINS, all_families
from cuset.curation.families.suite import IDIOMS, idioms, suite_tasks

HERE = Path(__file__).resolve().parent
SUITE = HERE / "cuset-bench.jsonl"
CPU_SUITE = HERE / "cuset-bench-cpu.jsonl"
README = HERE / "README.md"

README_HEAD = """# The bundled benchmark suite

`cuset-bench.jsonl` holds {n_tasks} tasks in the CUDABench format (the twelve fields of
`CUDABench-Set.jsonl` plus `family`): {n_families} task families across {n_domains} domains, each at
{sizes_text}. Every record carries a reference program (`bench.cu`), an input generator
(`gen.py`) and a checker (`compare.py`):

- `bench.cu` is a complete CUDA program: `main()` reads `data/<input>.bin` and writes
  `data/<output>.bin`, raw little-endian values of the declared dtype, no header.
- `gen.py` uses numpy (plus scipy for `erf` and for connected components) and is deterministic. The environment
  variable `CUSET_CASE` (default 0) selects the input case: the seed is a per-task base seed
  plus the case, so every case has the same shapes and different values. It writes the
  inputs to `data/<input>.bin` and the reference outputs to `data/<output>_ref.bin`.
- `compare.py` prints `T` or `F`. Integer outputs, maxima and selections are compared
  exactly; float outputs with `|out - ref| <= atol + rtol * |ref|`, where atol grows with
  the square root of the reduction depth. A missing, short or non-finite output is `F`.

The first size of every family is small enough for the CPU execution backend (at most
{max_small_mb} MB of data, a run takes well under two seconds); the others are GPU-sized.
Ids are contiguous from 0. `cuset-bench-cpu.jsonl` holds just the first size of each
family ({n_families} tasks, same ids and records as in the full file): use it on machines
without a GPU, where the GPU sizes would only time out.

Evaluate a model on it like any CUDABench file:

    cuset generate configs/generate/hf.yaml tasks=suites/cuset-bench.jsonl out=gens.jsonl
    cuset eval suites/cuset-bench.jsonl gens.jsonl --out runs/bench --backend gpu
    # no GPU: the CPU-sized subset
    cuset generate configs/generate/hf.yaml tasks=suites/cuset-bench-cpu.jsonl out=gens-cpu.jsonl
    cuset eval suites/cuset-bench-cpu.jsonl gens-cpu.jsonl --out runs/bench-cpu --backend cpu

The suite is generated, never edited by hand: `python suites/build_suite.py` rewrites
this README and both JSONL files from `cuset/curation/families/`, and a test fails when one is
stale. The task factory (`cuset data synth`) draws from the same families but never uses a
suite variant or size, so synthesised training data cannot contain a suite task.

To add a family: write a `build(variant, size, seed) -> TaskParts` function in the
domain's module under `cuset/curation/families/` (the helpers in `base.py` write `main()`,
gen.py and compare.py from the declared tensors), declare a `Family` with its suite
variant, two or more suite sizes (the first CPU-sized) and its factory variants and
sizes, add it to the module's `FAMILIES`, then run this script. The tests check every
family's records, gen.py/compare.py consistency and nvcc compilation; the slow tests run
every suite reference on the CPU backend.

## Families

| ids | family | domain | task name | sizes (first input) | idioms in the reference |
|---|---|---|---|---|---|
"""


def render_readme(tasks) -> str:
    by_family: dict[str, list] = {}
    for t in tasks:
        by_family.setdefault(t.family, []).append(t)
    domains = {f.name: f.domain for f in all_families()}
    n_sizes = sorted({len(v) for v in by_family.values()})
    sizes_text = (f"{n_sizes[0]} problem sizes" if len(n_sizes) == 1
                  else f"{n_sizes[0]} to {n_sizes[-1]} problem sizes")
    text = README_HEAD.format(
        n_tasks=len(tasks), n_families=len(by_family), n_domains=len({domains[f] for f in by_family}),
        sizes_text=sizes_text, max_small_mb=round(max(g[0].data_bytes for g in by_family.values()) / 2**20, 1),
    )
    for fam, group in by_family.items():
        ids = f"{group[0].id}-{group[-1].id}"
        shapes = ", ".join(t.inputs[0].shape for t in group)
        found = sorted({i for t in group for i in idioms(t.bench_cu)}, key=list(IDIOMS).index)
        text += f"| {ids} | `{fam}` | {domains[fam]} | {group[0].task_name} | {shapes} | {', '.join(found)} |\n"
    counts = {d: sum(1 for f in by_family if domains[f] == d) for d in DOMAINS}
    text += "\n## Families per domain\n\n| domain | families |\n|---|---|\n"
    text += "".join(f"| {d} | {c} |\n" for d, c in counts.items())
    usage = {name: sum(1 for fam, g in by_family.items() if any(name in idioms(t.bench_cu) for t in g)) for name in IDIOMS}
    text += "\n## Idioms across the suite (families using each)\n\n| idiom | families |\n|---|---|\n"
    text += "".join(f"| {name} | {c} |\n" for name, c in usage.items())
    return text


def render_jsonl(tasks) -> str:
    return "".join(json.dumps(t.to_json(), ensure_ascii=False) + "\n" for t in tasks)


def cpu_subset(tasks) -> list:
    """The first (smallest) size of each family, with its id in the full suite."""
    first: dict = {}
    for t in tasks:
        first.setdefault(t.family, t)
    return list(first.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only check that the committed files are current")
    args = parser.parse_args(argv)
    tasks = suite_tasks()
    wanted = {SUITE: render_jsonl(tasks), CPU_SUITE: render_jsonl(cpu_subset(tasks)), README: render_readme(tasks)}
    if args.check:
        stale = [p.name for p, text in wanted.items() if not p.exists() or p.read_text(encoding="utf-8") != text]
        if stale:
            print(f"stale: {', '.join(stale)}; run python suites/build_suite.py", file=sys.stderr)
            return 1
        print(f"up to date: {len(tasks)} tasks")
        return 0
    for path, text in wanted.items():
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    print(f"wrote {SUITE.name} ({len(tasks)} tasks), {CPU_SUITE.name} ({len(cpu_subset(tasks))}) and {README.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
