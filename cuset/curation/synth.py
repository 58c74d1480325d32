"""The task factory: deterministic CUDABench-format tasks from the parametrised families.

    tasks = synthesize(2000, seed=0)                      # same seed -> same tasks, same bytes
    train, test = synthesize_split(400, 60, seed=0)       # disjoint: held-out parameter points
    train, test = synthesize_split(400, 60, seed=0, holdout="families")  # held-out families

A task is one (family, variant, size) point. The factory only draws from each family's
factory variants and sizes, which exclude the bundled suite's, so no synthesised task
shares a name or a program with a suite task. Within a call every task is distinct.
Families take turns (in a seeded order), so small requests still cover every domain.
"""

from __future__ import annotations

import random
import zlib
from typing import Collection, Iterable, Literal, Sequence

from cuset.errors import CusetError
from cuset.curation.families import DOMAINS, Family, all_families, get_family, param_key
from cuset.tasks.schema import Task

SizeScale = Literal["small", "large", "all"]
Holdout = Literal["params", "families"]
Split = Literal["train", "eval"]

Candidate = tuple[Family, dict, dict]


class SynthError(CusetError, ValueError):
    """The options allow no task, or fewer distinct tasks than asked for."""


def select_families(families: Iterable[str] | None = None, exclude_families: Iterable[str] | None = None) -> list[Family]:
    """Families by name (registry order); unknown names raise KeyError with close matches."""
    chosen = [get_family(n) for n in families] if families is not None else all_families()
    excluded = {get_family(n).name for n in (exclude_families or ())}
    order = {f.name: i for i, f in enumerate(all_families())}
    picked = sorted({f.name: f for f in chosen if f.name not in excluded}.values(), key=lambda f: order[f.name])
    if not picked:
        raise SynthError("no task family left after applying families/exclude_families")
    return picked


def split_families(seed: int, eval_fraction: float = 0.25) -> tuple[list[str], list[str]]:
    """Hold out whole families for evaluation: in each domain with at least two families,
    round(eval_fraction * k) of them (at least one), chosen by `seed`. Every domain keeps
    at least one training family. Returns (train names, eval names)."""
    _check_fraction(eval_fraction)
    rng = random.Random(f"split-families|{seed}")
    train, held = [], []
    for domain in DOMAINS:
        names = [f.name for f in all_families() if f.domain == domain]
        k = 0 if len(names) < 2 else min(len(names) - 1, max(1, round(eval_fraction * len(names))))
        chosen = set(rng.sample(names, k))
        train += [n for n in names if n not in chosen]
        held += [n for n in names if n in chosen]
    return train, held


def candidates(
    fams: Sequence[Family], size_scale: SizeScale = "small", *, seed: int = 0,
    split: Split | None = None, holdout: Holdout = "params", eval_fraction: float = 0.2,
) -> dict[str, list[Candidate]]:
    """Every (variant, size) point each family may contribute, per family name."""
    if size_scale not in ("small", "large", "all"):
        raise ValueError(f"size_scale must be 'small', 'large' or 'all', got {size_scale!r}")
    if split not in (None, "train", "eval"):
        raise ValueError(f"split must be None, 'train' or 'eval', got {split!r}")
    if holdout not in ("params", "families"):
        raise ValueError(f"holdout must be 'params' or 'families', got {holdout!r}")
    _check_fraction(eval_fraction)
    if split is not None and holdout == "families":
        train, held = split_families(seed, eval_fraction)
        keep = set(train if split == "train" else held)
        fams = [f for f in fams if f.name in keep]
    out: dict[str, list[Candidate]] = {}
    for fam in fams:
        sizes = {"small": fam.small_sizes, "large": fam.large_sizes,
                 "all": (*fam.small_sizes, *fam.large_sizes)}[size_scale]
        points = [(fam, dict(v), dict(s)) for v in fam.variants for s in sizes]
        if split is not None and holdout == "params":
            points = [p for p in points if _in_eval(p, seed, eval_fraction) == (split == "eval")]
        if points:
            out[fam.name] = points
    return out


def _in_eval(point: Candidate, seed: int, eval_fraction: float) -> bool:
    fam, variant, size = point
    h = zlib.crc32(f"holdout|{seed}|{fam.name}|{param_key(variant)}|{param_key(size)}".encode())
    return h / 2**32 < eval_fraction


def _check_fraction(eval_fraction: float) -> None:
    if not 0.0 < eval_fraction < 1.0:
        raise ValueError(f"eval_fraction must be between 0 and 1 (exclusive), got {eval_fraction!r}")


def capacity(*, families=None, exclude_families=None, size_scale: SizeScale = "small", **split_options) -> int:
    """How many distinct tasks `synthesize` can make with these options."""
    fams = select_families(families, exclude_families)
    return sum(len(v) for v in candidates(fams, size_scale, **split_options).values())


# A task's identity: (family, variant, size), the parameter texts as `param_key` writes them.
Point = tuple[str, str, str]


def point_of(candidate: Candidate) -> Point:
    fam, variant, size = candidate
    return fam.name, param_key(variant), param_key(size)


def synthesize(n: int, seed: int, *, start_id: int = 0, **options) -> list[Task]:
    """`n` distinct tasks, a pure function of the arguments (those of `synthesize_points`).

    split="train"/"eval" draws from one side of a held-out partition (by parameter
    point, or by whole families with holdout="families"); the two sides never share a
    task for the same seed, holdout and eval_fraction.
    """
    return make_tasks(synthesize_points(n, seed, **options), start_id=start_id)


def make_tasks(points: Sequence[Candidate], *, start_id: int = 0) -> list[Task]:
    """The tasks of `points`, with ids from `start_id`."""
    return [fam.make(variant, size, start_id + i) for i, (fam, variant, size) in enumerate(points)]


def synthesize_points(
    n: int,
    seed: int,
    *,
    families: Iterable[str] | None = None,
    exclude_families: Iterable[str] | None = None,
    size_scale: SizeScale = "small",
    split: Split | None = None,
    holdout: Holdout = "params",
    eval_fraction: float = 0.2,
    exclude_points: Collection[Point] = (),
) -> list[Candidate]:
    """The (family, variant, size) points of `synthesize`'s tasks, in its order. `exclude_points`
    (see `point_of`) are never drawn: the points of sets the new one must not share a task with."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    fams = select_families(families, exclude_families)
    pools = candidates(fams, size_scale, seed=seed, split=split, holdout=holdout, eval_fraction=eval_fraction)
    if exclude_points:
        excluded = set(exclude_points)
        pools = {name: kept for name, points in pools.items()
                 if (kept := [p for p in points if point_of(p) not in excluded])}
    available = sum(len(p) for p in pools.values())
    if n > available:
        raise SynthError(
            f"asked for {n} tasks but these options allow only {available} distinct ones "
            f"({len(pools)} families, size_scale={size_scale!r}"
            + (f", {len(exclude_points)} points excluded" if exclude_points else "")
            + "); lower n, allow more families, or use size_scale='all'"
        )
    # Each family's points in a seeded order; families take turns in a seeded order.
    for name, points in pools.items():
        random.Random(f"synth|{seed}|{name}").shuffle(points)
    order = list(pools)
    random.Random(f"synth-order|{seed}").shuffle(order)
    queues = [pools[name] for name in order]
    picked: list[Candidate] = []
    depth = 0
    while len(picked) < n:
        for queue in queues:
            if depth < len(queue) and len(picked) < n:
                picked.append(queue[depth])
        depth += 1
    return picked


def shared_points(new: Iterable[Point], others: dict[str, Iterable[Point]]) -> dict[str, list[Point]]:
    """The points of `new` that each named set in `others` also holds (empty lists: disjoint)."""
    mine = set(new)
    return {name: sorted(mine & set(points)) for name, points in others.items()}


def check_disjoint(name: str, new: Iterable[Point], others: dict[str, Iterable[Point]]) -> None:
    """Raise SynthError naming the shared (family, variant, size) points when the set `name`
    shares a task with any set in `others`."""
    found = {other: shared for other, shared in shared_points(new, others).items() if shared}
    if found:
        detail = "; ".join(f"{len(s)} with the {other} set, e.g. {s[0][0]} {s[0][1]} {s[0][2]}"
                           for other, s in found.items())
        raise SynthError(f"the {name} set shares (family, variant, size) points: {detail}; draw it with "
                         "exclude_points holding the other sets' points")


def synthesize_split(
    n_train: int, n_eval: int, seed: int, *, holdout: Holdout = "params", eval_fraction: float = 0.2, **options,
) -> tuple[list[Task], list[Task]]:
    """A training set and a disjoint evaluation set (ids from 0 in each)."""
    common = dict(holdout=holdout, eval_fraction=eval_fraction, **options)
    return (
        synthesize(n_train, seed, split="train", **common),
        synthesize(n_eval, seed, split="eval", **common),
    )
