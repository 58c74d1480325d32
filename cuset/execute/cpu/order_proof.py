"""Which kernels may prove at run time that their thread order cannot matter.

Every sample runs under three thread orders (forward, random, parallel) and a
difference between their outputs is a `race`. For a kernel whose threads share
nothing, the other orders cannot differ from forward, and running them only costs
time. This module decides, per kernel and at compile time, whether the kernel is
simple enough for the runtime to prove that in the forward run (runtime
src/order_proof.cpp), and writes the instrumentation:

- statically (`plan_proofs`): no fiber feature (barriers, warp operations, atomics,
  shared or volatile memory, clocks, printf, asm, calls of unknown functions...:
  block_loop's own check), every memory access traced to a pointer parameter
  (region_memory: no file-scope `__device__` variable, no pointer loaded from
  memory, no macro that subscripts), every subscript's base one of those
  parameters or a local pointer computed from them, in the kernel and in the
  functions it calls (no local arrays, no address smuggled through an integer),
  every parameter a pointer or of a type that cannot hold one (a typedef'd or
  template type could: region_memory would not follow it), no `&` (an address
  could leak a fiber's stack into an output) but `__ldg(&in[i])` (load and store intrinsics are
  accesses of what their pointer points into: memory_intrinsics.py), and every local initialised where
  it is declared (an uninitialised local holds what the previous thread left,
  which depends on the order). The parameters written are the ones whose
  accesses are checked; all others are only read.
- the instrumentation: a written parameter `float* out` is renamed `cuset_pp_out`
  and the body starts with `auto out = ::cuset::rt::proof_wrap(cuset_pp_out);`, a
  checked pointer whose `out[i]` reports the element to the runtime before
  returning the plain reference (so every access through it, read or write,
  counts as a write); it also reports the pointers of the launch
  (`proof_enter`: written and read-only ones). Read-only parameters stay plain
  pointers, so hot read loops stay vectorised. A written parameter may appear only
  as `p[i]` (never `&p[i]`, `p + i`, `*p`, as an argument), which is all the
  checked pointer offers. The block-loop variant (block_loop.py) goes in after
  this line and sees the checked pointer too, so both versions report.

What the runtime then checks, and why that suffices, is in runtime/src/order_proof.cpp
and the backend README ("Thread orders and checks").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cuset.execute.cpu import memory_intrinsics, region_memory
from cuset.execute.cpu.block_loop import KernelVariant
from cuset.execute.cpu.plan_ir import (
    PURE_FUNCTIONS, NotCollapsible, Unit, function_declarator, memory_accesses, pointer_parameter, walk,
)
from cuset.execute.cpu.syntax_tree import operator_text
from cuset.spans.grammar import parser

PREFIX = "cuset_pp_"  # renamed written parameters


@dataclass(frozen=True)
class Edit:
    start: int  # str offsets into the source, as the rewriter's edits
    end: int
    text: str


@dataclass(frozen=True)
class ProofPlan:
    name: str
    eligible: bool
    reason: str = ""                 # why the runtime cannot prove this kernel order-independent
    written: tuple[str, ...] = ()    # pointer parameters accessed through checked pointers
    read_only: tuple[str, ...] = ()  # pointer parameters only read (plain pointers)
    edits: tuple[Edit, ...] = ()

    def describe(self) -> str:
        if not self.eligible:
            return f"{self.name}: not checked ({self.reason})"
        return f"{self.name}: checked (writes {', '.join(self.written) or 'nothing'})"


class _Ineligible(Exception):
    pass


def plan_proofs(src: str) -> list[ProofPlan]:
    """A plan per `__global__` definition of `src`, with its instrumentation edits when eligible."""
    if "__global__" not in src:
        return []
    data = src.encode()
    unit = Unit(data, parser().parse(data).root_node)
    plans = []
    for fn in unit.kernels:
        name = unit.function_name(fn) or "?"
        try:
            plans.append(_plan(unit, fn, name))
        except (_Ineligible, NotCollapsible) as e:
            plans.append(ProofPlan(name, False, str(e)))
    return plans


def summary(plans: list[ProofPlan]) -> str:
    """One line for the compile step's log."""
    return "cuset-cpu: order proofs: " + "; ".join(p.describe() for p in plans) if plans else ""


def _plan(unit: Unit, fn, name: str) -> ProofPlan:
    kv = KernelVariant(unit, fn)  # raises on unnamed / unusual parameters
    kv.check_declarator(fn)       # no volatile parameter
    kv.check_region(kv.body)      # no fiber feature, no call of an unknown function (nor helper's volatile one)
    bodies = [kv.body] + [f.child_by_field_name("body") for callee in kv.checked_functions
                          for f in unit.functions.get(callee, ())]
    for body in bodies:
        _check_locals_and_addresses(unit, body)
    pointers = kv.pointer_params()
    memory = region_memory.RegionMemory(unit, kv.body, pointers)
    written, accessed = memory.accesses(kv.body)
    if region_memory.ANY in accessed:
        raise _Ineligible("memory not traced to a pointer parameter")
    _check_names(unit, fn, set(kv.params) | kv.template_params())
    _check_parameters(unit, fn)
    _check_subscript_bases(unit, kv.body, memory)
    for callee in kv.checked_functions:  # region_memory counts what their pointer arguments point into
        for f in unit.functions.get(callee, ()):
            _check_names(unit, f, _parameter_names(unit, f))
            _check_parameters(unit, f)
            own = KernelVariant(unit, f)
            _check_subscript_bases(unit, own.body, region_memory.RegionMemory(
                unit, own.body, own.pointer_params()))
    written_params = [p for p in kv.params if p in written]
    read_only = [p for p in kv.params if p in accessed and p not in written]
    declared_in_body = {unit.text(n) for d in walk(kv.body) if d.type == "declaration"
                        for n in _declarator_identifiers(d)}
    for w in written_params:
        if w in declared_in_body:
            raise _Ineligible(f"redeclares its parameter {w}")
        for n in walk(kv.body):
            if n.type == "identifier" and unit.text(n) == w and not _plain_subscript(unit, n):
                raise _Ineligible(f"uses its written parameter {w} other than as {w}[i]")
    return ProofPlan(name, True, "", tuple(written_params), tuple(read_only), _edits(unit, fn, kv, written_params,
                                                                                       read_only))


def _check_locals_and_addresses(unit: Unit, body) -> None:
    for n in walk(body):
        if n.type == "pointer_expression" and operator_text(unit, n) == "&" and not _loaded_element(unit, n):
            raise _Ineligible("takes an address (&)")
        if n.type == "declaration":
            for d in n.children_by_field_name("declarator"):
                if d.type != "init_declarator":
                    raise _Ineligible(f"declares {unit.text(d)} without an initial value")
                inner = d.child_by_field_name("declarator")
                if inner is not None and inner.type == "array_declarator":
                    raise _Ineligible("a local array")


_BUILTIN_NAMES = frozenset({"threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize"})
_CONSTANT_NAME = re.compile(r"[A-Z][A-Z0-9_]*")  # FLT_MAX, INFINITY, M_PI, CUDART_PI_F: value macros of headers


def _check_names(unit: Unit, fn, params: set[str]) -> None:
    """Every name `fn`'s body uses is its own (a parameter, a local), a built-in index, a
    constant, macro or function of this file, a pure function or an upper-case value
    macro. Anything else lives elsewhere and may differ between orders: a runtime
    variable (`cuset::rt::loop_ticks`, the proof's own flag), an `extern` variable."""
    body = fn.child_by_field_name("body")
    own = params | {unit.text(n) for d in walk(body) if d.type == "declaration" for n in _declarator_identifiers(d)}
    allowed = own | _BUILTIN_NAMES | unit.constants | set(unit.macros) | set(unit.functions) | PURE_FUNCTIONS \
        | memory_intrinsics.LOADS | memory_intrinsics.STORES   # accesses region_memory counts
    for n in walk(body):
        if n.type == "identifier":
            word = unit.text(n)
            if word not in allowed and not _CONSTANT_NAME.fullmatch(word):
                raise _Ineligible(f"uses {word}, declared outside the kernel")


# Parameter types that cannot hold a pointer (a typedef'd or template type could: region_memory
# would take a subscript of it for a thread's own array, and a call would pass it untraced).
_VALUE_TYPES = frozenset("""
size_t ssize_t ptrdiff_t int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t uint half __half
__nv_bfloat16 float2 float3 float4 double2 double3 double4 int2 int3 int4 uint2 uint3 uint4 char2 char4 uchar2
uchar4 short2 short4 ushort2 ushort4 long2 ulong2 longlong2 ulonglong2 dim3 __half2 half2
""".split())


def _check_parameters(unit: Unit, fn) -> None:
    """Every parameter of `fn` a pointer or array, or of a type that holds no pointer (a
    reference to one in a device function: region_memory counts what it is given)."""
    d = function_declarator(fn)
    for p in d.child_by_field_name("parameters").named_children if d is not None else ():
        if p.type != "parameter_declaration" or pointer_parameter(p):
            continue
        kind = p.child_by_field_name("type")
        if kind is not None and (kind.type in ("primitive_type", "sized_type_specifier")
                                 or (kind.type == "type_identifier" and unit.text(kind) in _VALUE_TYPES)):
            continue
        raise _Ineligible(f"parameter {unit.text(p)[:40]} may hold a pointer")


def _parameter_names(unit: Unit, fn) -> set[str]:
    d = fn.child_by_field_name("declarator")
    return {unit.text(i) for p in walk(d) if p.type == "parameter_declaration"
            for i in [_identifier_of(p.child_by_field_name("declarator"))] if i is not None}


def _identifier_of(d):
    while d is not None and d.type != "identifier":
        d = d.child_by_field_name("declarator")
    return d


def _loaded_element(unit: Unit, address) -> bool:
    """`&a[i]` as the argument of `__ldg` (and kin): a read of a[i] (region_memory counts it),
    the address going nowhere else."""
    operand, args = address.child_by_field_name("argument"), address.parent
    call = args.parent if args is not None and args.type == "argument_list" else None
    f = call.child_by_field_name("function") if call is not None else None
    return operand is not None and operand.type == "subscript_expression" and f is not None \
        and f.type == "identifier" and memory_intrinsics.reads_pointer(unit.text(f)) and len(args.named_children) == 1


def _check_subscript_bases(unit: Unit, body, memory: region_memory.RegionMemory) -> None:
    """Every `a[i]`, `*a`, `a->f` of the kernel reads or writes through a pointer parameter
    (or a local pointer computed from one), or reads `__constant__` memory: region_memory
    counts anything else it cannot trace as a thread's own array, which here could be a
    parameter of a typedef'd pointer type."""
    for access in memory_accesses(unit, body):
        if access.kind == "element":
            base = access.address
            if base is None:
                raise _Ineligible("an access the analysis cannot read")
            if memory.pointer_bases(base):
                continue
            if base.type == "identifier" and unit.text(base) in unit.constants:
                continue  # __constant__ / const tables: read only (region_memory refuses writes)
            raise _Ineligible(f"accesses {unit.text(base)[:40]}, not traced to a pointer parameter")


def _plain_subscript(unit: Unit, ident) -> bool:
    """`ident` is the array of a subscript `ident[i]` that is not under `&`."""
    parent = ident.parent
    if parent is None or parent.type != "subscript_expression":
        return False
    if parent.child_by_field_name("argument") != ident:
        return False
    up = parent.parent
    return not (up is not None and up.type == "pointer_expression" and operator_text(unit, up) == "&")


def _declarator_identifiers(decl):
    for d in decl.children_by_field_name("declarator"):
        while d is not None and d.type != "identifier":
            d = d.child_by_field_name("declarator")
        if d is not None:
            yield d


def _edits(unit: Unit, fn, kv: KernelVariant, written: list[str], read_only: list[str]) -> tuple[Edit, ...]:
    def offset(byte: int) -> int:
        return len(unit.data[:byte].decode(errors="replace"))

    edits = []
    d = function_declarator(fn)
    for p in d.child_by_field_name("parameters").named_children:
        if p.type != "parameter_declaration":
            continue
        ident = _identifier_of(p.child_by_field_name("declarator"))
        if ident is not None and unit.text(ident) in written:
            edits.append(Edit(offset(ident.start_byte), offset(ident.end_byte), PREFIX + unit.text(ident)))
    wrap = " ".join(f"auto {w} = ::cuset::rt::proof_wrap({PREFIX}{w});" for w in written)
    pointers_w = ", ".join(f"(const void*)({PREFIX}{w})" for w in written)
    pointers_r = ", ".join(f"(const void*)({r})" for r in read_only)
    enter = f"::cuset::rt::proof_enter({{{pointers_w}}}, {{{pointers_r}}});"
    at = offset(kv.body.children[0].end_byte)  # after `{`: where block_loop puts its variant, before it
    edits.append(Edit(at, at, f" {wrap} {enter} "))
    return tuple(edits)
