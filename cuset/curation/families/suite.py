"""The bundled benchmark suite: every family's suite variant at each of its suite sizes.

Ids are contiguous from 0, family by family in registry order, sizes smallest first,
so the file is a pure function of the family code (`suites/build_suite.py`).
"""

from __future__ import annotations

import re

from cuset.curation.families import all_families
from cuset.tasks.schema import Task

# CUDA idioms a reference program shows, found by looking at its source.
IDIOMS: dict[str, re.Pattern] = {
    "shared memory": re.compile(r"__shared__"),
    "dynamic shared memory": re.compile(r"extern\s+__shared__"),
    "__syncthreads": re.compile(r"__syncthreads\(\)"),
    "warp shuffles": re.compile(r"__shfl_\w*sync"),
    "atomics": re.compile(r"\batomic[A-Z]\w*\("),
    "grid-stride loop": re.compile(r"\+=\s*(?:blockDim\.x\s*\*\s*gridDim\.x|gridDim\.x\s*\*\s*blockDim\.x|\w+\s*\*\s*gridDim\.x)"),
    "2-D/3-D grid (dim3)": re.compile(r"\bdim3\b"),
    "constant memory": re.compile(r"__constant__"),
    "templates": re.compile(r"\btemplate\s*<(?!typename T>\s*\nvoid (?:read|write)_binary)"),
    "vector types (float4)": re.compile(r"\bfloat4\b"),
    "multiple kernel launches": re.compile(r"<<<[^;]*;[\s\S]*<<<"),
}


def idioms(source: str) -> list[str]:
    """Names of the idioms in IDIOMS that `source` uses."""
    return [name for name, pattern in IDIOMS.items() if pattern.search(source)]


def suite_tasks() -> list[Task]:
    tasks: list[Task] = []
    for fam in all_families():
        for size in fam.suite_sizes:
            tasks.append(fam.make(fam.suite_variant, size, task_id=len(tasks)))
    return tasks
