"""Built-in functions that read or write memory through a pointer argument.

`__ldg(p)` is `*p`, `__stcs(p, v)` is `*p = v`: memory accesses spelled as calls, not
pure functions of their arguments. Every analysis that lets a kernel leave the
fibers or skip a thread order (block_loop.py, region_memory.py, barrier_regions.py,
region_lanes.py, order_proof.py) must count them as accesses of what `p` points
into; this table is the one place that says which call touches which argument.

Calls of anything else that is neither a pure function (plan_ir.PURE_FUNCTIONS)
nor a function of the file are not understood: the kernel stays on the fibers
(block_loop's `_check_call`) and the order proof does not check it.
"""

from __future__ import annotations

# The cache-hint loads (`ld.global.nc`, `.cg`, `.ca`, `.cs`, `.lu`, `.cv`): `*p`.
LOADS = frozenset({"__ldg", "__ldcg", "__ldca", "__ldcs", "__ldlu", "__ldcv"})
# The cache-hint stores: `*p = v`.
STORES = frozenset({"__stcs", "__stwb", "__stcg", "__stwt"})


def reads_pointer(name: str | None) -> bool:
    """A load intrinsic: reads through its first argument, writes nothing."""
    return name in LOADS


def writes_pointer(name: str | None) -> bool:
    """A store intrinsic: writes through its first argument."""
    return name in STORES


def accesses_pointer(name: str | None) -> bool:
    """A load or store intrinsic: a memory access through its first argument."""
    return name in LOADS or name in STORES
