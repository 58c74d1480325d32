"""Shrink a kernel that makes the two sides disagree: drop statements (top level and
inside blocks, an `else` branch at a time) while the disagreement stays the same kind,
and save what is left as a reproducer (a one-kernel program and its verdicts)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Iterator

from cuset.execute.cpu.fuzz.generator import Kernel, Program, Stmt
from cuset.io import atomic_write_json, atomic_write_text


def smaller_bodies(stmts: tuple[Stmt, ...]) -> Iterator[tuple[Stmt, ...]]:
    """Every body with one statement (or one `else` branch) less; later statements first,
    so uses go before the declarations they need."""
    for i in reversed(range(len(stmts))):
        yield stmts[:i] + stmts[i + 1:]
    for i in reversed(range(len(stmts))):
        s = stmts[i]
        if s.orelse is not None:
            yield stmts[:i] + (Stmt(s.head, s.body, None, s.features),) + stmts[i + 1:]
        for attr in ("body", "orelse"):
            inner = getattr(s, attr)
            if inner:
                for smaller in smaller_bodies(inner):
                    changed = Stmt(s.head, smaller if attr == "body" else s.body,
                                   smaller if attr == "orelse" else s.orelse, s.features)
                    yield stmts[:i] + (changed,) + stmts[i + 1:]


def minimise(kernel: Kernel, still_fails: Callable[[Kernel], bool], budget: int = 40) -> tuple[Kernel, int]:
    """The smallest kernel found (greedy, at most `budget` checks) for which `still_fails`
    holds, and the number of checks made. `kernel` itself must fail."""
    current, checks = kernel, 0
    progress = True
    while progress and checks < budget:
        progress = False
        for body in smaller_bodies(current.body):
            if checks >= budget:
                break
            checks += 1
            candidate = current.with_body(body)
            if still_fails(candidate):
                current, progress = candidate, True
                break
    return current, checks


def save_reproducer(directory: Path, kernel: Kernel, info: dict, program: Program | None = None) -> Path:
    """`<directory>/<name>.cu` (the one-kernel program, or `program` when the kernel
    disagrees only there; its verdicts in a comment) and `<name>.json` (seed, verdicts,
    what differs, features); returns the .cu path."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = kernel.seed.replace(":", "-")
    head = (f"// cuset cpu-fuzz reproducer: {info['what']}\n"
            f"// expected verdict (every kernel on the fibers, every thread order): {info['reference']}\n"
            f"// default backend (fast paths and order proof): {info['default']}\n"
            f"// {info['detail']}\n"
            + (f"// kernel {kernel.name} of this program (it does not disagree alone)\n" if program else ""))
    path = directory / f"{stem}.cu"
    atomic_write_text(path, head + (program or Program((kernel,))).source())
    atomic_write_json(directory / f"{stem}.json", {**info, "source": path.name, "kernel": kernel.name,
                                                   "seed": kernel.seed}, indent=1)
    return path


def load_reproducer(path: Path) -> dict:
    return json.loads(Path(path).with_suffix(".json").read_text())
