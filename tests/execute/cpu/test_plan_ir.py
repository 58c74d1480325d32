"""The planners' declared library (cuset/execute/cpu/plan_ir.py): no module of the CPU
backend reaches into another's private names, and one function (`memory_accesses`)
decides what a statement reads and writes for every fast path and the order proof."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import cuset.execute.cpu as cpu_package
from cuset.execute.cpu.barrier_regions import BarrierVariant
from cuset.execute.cpu.plan_ir import Unit, memory_accesses
from cuset.execute.cpu.region_memory import RegionMemory
from cuset.spans.grammar import parser

PACKAGE = Path(cpu_package.__file__).parent
PREFIX = "cuset.execute.cpu"


def private_reaches(path: Path, package: Path = PACKAGE) -> list[str]:
    """`from cuset.execute.cpu.m import _x` and `m._x` (m a module of the package, at
    `package`, imported by name) in the file at `path`, where m is another module: "line: what"."""
    own = PREFIX + "." + ".".join(path.relative_to(package).with_suffix("").parts)
    tree = ast.parse(path.read_text(), str(path))
    modules: set[str] = set()   # local names bound to modules of the package
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PREFIX):
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                inside = package.joinpath(*target.split(".")[3:])
                if node.module == PREFIX or inside.with_suffix(".py").exists() or inside.is_dir():
                    modules.add(alias.asname or alias.name)
                elif alias.name.startswith("_") and node.module != own:
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PREFIX + ".") and alias.asname:
                    modules.add(alias.asname)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                and isinstance(node.value, ast.Name) and node.value.id in modules:
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_no_module_of_the_backend_imports_another_modules_private_names():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 15 and PACKAGE / "plan_ir.py" in files
    reaches = {str(f.relative_to(PACKAGE)): r for f in files if (r := private_reaches(f))}
    assert reaches == {}


def test_the_scan_sees_both_ways_of_reaching_a_private_name(tmp_path):
    # as block_loop's importers did before plan_ir: a name imported, and one read through the module
    fake = tmp_path / "cpu"
    fake.mkdir()
    (fake / "block_loop.py").write_text("_walk = None\n")
    (fake / "planner.py").write_text("from cuset.execute.cpu import block_loop\n"
                                     "from cuset.execute.cpu.block_loop import _walk, summary\n"
                                     "from cuset.execute.cpu.planner import _own\n"
                                     "x = block_loop._called_name\n")
    assert private_reaches(fake / "planner.py", fake) == ["2: from cuset.execute.cpu.block_loop import _walk",
                                                     "4: block_loop._called_name"]


def _kernel(body: str, params: str = "float* __restrict__ o, float* g"):
    src = (f"struct P {{ float x, y; }};\n__global__ void k({params}) {{ __shared__ P s[64]; "
           f"__shared__ float t[64]; {body} }}").encode()
    unit = Unit(src, parser().parse(src).root_node)
    return unit, unit.kernels[0]


def _statement_accesses(body: str):
    unit, fn = _kernel(body)
    return [(a.kind, unit.text(a.node), a.writes, a.reads) for a in memory_accesses(unit, fn.child_by_field_name("body"))
            if a.kind != "name"]


@pytest.mark.parametrize("body, expected", [
    ("t[1] = 2;", [("element", "t[1]", True, False)]),
    ("t[1] += 2;", [("element", "t[1]", True, True)]),
    ("t[1]++;", [("element", "t[1]", True, True)]),
    ("(t[1]) = 2;", [("element", "t[1]", True, False)]),           # through parentheses
    ("s[1].x = 2;", [("element", "s[1]", True, False)]),           # through .field: s[1] is written
    ("g[0] = t[1];", [("element", "g[0]", True, False), ("element", "t[1]", False, True)]),
    ("float v = __ldg(&g[2]);", [("intrinsic", "__ldg(&g[2])", False, True), ("element", "g[2]", False, True)]),
    ("__stcs(o + 1, 2.0f);", [("intrinsic", "__stcs(o + 1, 2.0f)", True, False)]),
    ("atomicAdd(&t[0], 1.0f);", [("atomic", "atomicAdd(&t[0], 1.0f)", True, True), ("element", "t[0]", False, True)]),
    ("float v = sqrtf(2.0f);", [("call", "sqrtf(2.0f)", False, True)]),
    # a target choosing what it writes: everything it may choose is written (and read)
    ("(threadIdx.x ? t[1] : g[0]) = 2;", [("element", "t[1]", True, True), ("element", "g[0]", True, True)]),
    ("(t[0], t[1]) = 2;", [("element", "t[0]", True, True), ("element", "t[1]", True, True)]),
])
def test_memory_accesses_say_what_each_access_writes_and_reads(body, expected):
    assert _statement_accesses(body) == expected


def test_a_field_written_in_a_shared_array_is_a_write_on_every_path():
    """The barrier planner once took `s[i].x = v` (and `(s[i]) = v`) for a read of s: two
    stretches writing and reading a shared struct array with no barrier between them
    would not have conflicted. Both models now count the write, from the same records."""
    unit, fn = _kernel("s[threadIdx.x].x = 1.0f; (t[threadIdx.x]) = 2.0f; g[threadIdx.x].y; ")
    body = fn.child_by_field_name("body")
    written, read = BarrierVariant(unit, fn).accesses(body)
    assert written == {"s", "t"} and read == {"params"}
    unit, fn = _kernel("o[threadIdx.x] = 1.0f; (g[0]) = 2.0f;")
    written, accessed = RegionMemory(unit, fn.child_by_field_name("body"), {"o", "g"}).accesses(
        fn.child_by_field_name("body"))
    assert written == {"o", "g"} and accessed == {"o", "g"}


@pytest.mark.parametrize("assignment", ["(p) = {other};", "(threadIdx.x ? p : p) = {other};", "p = {other};"])
def test_a_pointer_reassigned_through_parentheses_or_a_choice_points_into_both(assignment):
    """Before plan_ir.assigned_names, `(p) = t` and `(c ? p : q) = t` left p an alias of
    the shared array s in the barrier planner (a write through p counted as s's) and
    traced to o only in region_memory (a write through p into g went unseen)."""
    unit, fn = _kernel("float* p = t; " + assignment.format(other="&s[1].x") + " p[0] = 1;")
    body = fn.child_by_field_name("body")
    variant = BarrierVariant(unit, fn)
    assert "p" not in variant.pointer_aliases() and variant.accesses(body)[0] == {"global"}
    unit, fn = _kernel("float* p = o; " + assignment.format(other="g") + " p[0] = 2;")
    body = fn.child_by_field_name("body")
    memory = RegionMemory(unit, body, {"o", "g"})
    assert memory.pointer_locals["p"] == {"o", "g"} and memory.accesses(body)[0] == {"o", "g"}
