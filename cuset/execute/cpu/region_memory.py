"""Which memory each region of a block loop writes and reads, by pointer parameter.

A block loop with a hoisted loop runs its kernel as regions (block_loop.py): every
thread finishes one region before any thread starts the next, in every thread
order. That is a barrier the kernel does not have. On the fibers, a thread that
writes memory before a loop interleaves with its neighbours reading it inside
the loop (the loop ticks), so the orders disagree and a race shows; split into
regions, every order reads after all the writes, and the race would be hidden.

So a kernel may be split only where no region writes memory that another region
reads or writes. Accesses are traced to the kernel's pointer parameters
(through local pointers computed from them): the same parameter written in one
region and accessed in another keeps the kernel on the fibers; two different
parameters are checked at run time, once per block, to point into different
allocations (`::cuset::rt::block_loop_apart`), else the block runs on the fibers.
Anything that cannot be traced (a pointer loaded from memory, a file-scope
variable, a macro or a function of this file that touches memory through
something else) counts as any memory. Load and store intrinsics (`__ldg(p)`,
`__stcs(p, v)`: memory_intrinsics.py) are accesses of what `p` points into.
"""

from __future__ import annotations

from cuset.execute.cpu import macro_effects, memory_intrinsics
from cuset.execute.cpu.plan_ir import PURE_FUNCTIONS, assigned_names, memory_accesses, walk
from cuset.execute.cpu.syntax_tree import declared_identifier, operator_text

ANY = "?"  # memory that could not be traced to one pointer parameter


class RegionMemory:
    """Traces the memory accesses of statements of one kernel to its pointer parameters."""

    def __init__(self, unit, kernel_body, pointer_params: set[str]):
        self.u = unit
        self.pointer_params = pointer_params
        self.pointer_locals: dict[str, set[str]] = {}  # local pointer -> parameters it may point into
        self._trace_locals(kernel_body)

    # -------------------------------------------------- local pointers
    def _trace_locals(self, body) -> None:
        sources: dict[str, list] = {}  # local -> the expressions assigned to it
        declared_pointers: set[str] = set()
        for n in walk(body):
            if n.type == "declaration":
                for d in n.children_by_field_name("declarator"):
                    ident = declared_identifier(d)
                    if ident is None or not _declares_pointer(d):
                        continue
                    name = self.u.text(ident)
                    declared_pointers.add(name)
                    value = d.child_by_field_name("value") if d.type == "init_declarator" else None
                    sources.setdefault(name, []).extend([value] if value is not None else [])
            elif n.type == "assignment_expression":
                for name in assigned_names(self.u, n.child_by_field_name("left")):
                    sources.setdefault(self.u.text(name), []).append(n.child_by_field_name("right"))
        # What each local pointer may point into: a fixed point (pointers assigned from each other).
        self.pointer_locals = {name: set() for name in declared_pointers}
        changed = True
        while changed:
            changed = False
            for name in declared_pointers:
                out = set(self.pointer_locals[name])
                for value in sources.get(name, []):
                    out |= self._bases_of_expression(value, declared_pointers, self.pointer_locals.__getitem__)
                if out != self.pointer_locals[name]:
                    self.pointer_locals[name] = out
                    changed = True

    def _bases_of_expression(self, expr, pointer_locals: set[str], resolve) -> set[str]:
        """The parameters a pointer-valued expression may point into (ANY when it loads
        a pointer from memory, calls a function or names a file-scope variable)."""
        out: set[str] = set()
        for n in walk(expr):
            if n.type in ("subscript_expression", "call_expression") or \
                    (n.type == "pointer_expression" and operator_text(self.u, n) == "*") or \
                    (n.type == "field_expression" and operator_text(self.u, n) == "->"):
                return {ANY}
            if n.type == "identifier":
                word = self.u.text(n)
                if word in self.pointer_params:
                    out.add(word)
                elif word in pointer_locals:
                    out |= resolve(word)
                elif word in self.u.globals and word not in self.u.constants:
                    return {ANY}
        return out

    def pointer_bases(self, expr) -> set[str]:
        return self._bases_of_expression(expr, set(self.pointer_locals), lambda n: self.pointer_locals[n])

    # -------------------------------------------------- accesses
    def accesses(self, node) -> tuple[set[str], set[str]]:
        """(written, accessed): the parameters (or ANY) `node` writes, and reads or writes
        (its accesses as plan_ir.memory_accesses finds them, traced to parameters)."""
        written: set[str] = set()
        accessed: set[str] = set()
        for a in memory_accesses(self.u, node):
            n = a.node
            if a.kind == "element":
                base = a.address
                if base.type == "subscript_expression":  # a[i][j]: a 2-D array, or a pointer loaded from a[i]
                    inner = base
                    while inner.type == "subscript_expression":
                        inner = inner.child_by_field_name("argument")
                    if self._local_array(inner):
                        continue  # a thread's own array
                    bases = {ANY}
                else:
                    bases = self.pointer_bases(base)
                    if not bases and self._local_array(base):
                        continue  # a thread's own array
                    if not bases and base.type == "identifier" and self.u.text(base) in self.u.constants \
                            and not a.writes:
                        continue  # __constant__ memory: kernels only read it
                    bases = bases or {ANY}
                accessed |= bases
                if a.writes:
                    written |= bases
            elif a.kind == "name" and self.u.text(n) in self.u.globals \
                    and self.u.text(n) not in self.u.constants and self.u.text(n) not in self.u.functions:
                accessed.add(ANY)
                if a.writes:
                    written.add(ANY)
            elif a.kind == "intrinsic":
                bases = self._address_bases(a.address) if a.address is not None else {ANY}
                accessed |= bases
                if a.writes:
                    written |= bases
            elif a.kind in ("call", "atomic"):   # an atomic: no block loop or proof takes one (any memory)
                w, acc = self._call(n)
                written |= w
                accessed |= acc
            elif a.kind == "name" and self.u.text(n) in self.u.macros and _macro_touches_memory(
                    self.u, self.u.text(n), self.pointer_params | set(self.pointer_locals)):
                written.add(ANY)
                accessed.add(ANY)
        return written, accessed

    def _local_array(self, base) -> bool:
        return base.type == "identifier" and self.u.text(base) not in self.pointer_params \
            and self.u.text(base) not in self.u.globals and self.u.text(base) not in self.pointer_locals

    def _call(self, call) -> tuple[set[str], set[str]]:
        """A call of a function defined here: whatever its pointer arguments point into,
        written and read; ANY if it touches memory otherwise. Pure functions: nothing."""
        f = call.child_by_field_name("function")
        name = self.u.text(f) if f is not None else ""
        if name in PURE_FUNCTIONS or name.startswith("make_") or (f is not None and f.type == "primitive_type") \
                or name in self.u.macros:
            return set(), set()
        if name not in self.u.functions:
            return {ANY}, {ANY}
        bases: set[str] = set()
        if self._takes_pointers(name):  # what its arguments point into (ANY where they load)
            for arg in call.child_by_field_name("arguments").named_children:
                bases |= self.pointer_bases(arg)
        if self._function_touches_other_memory(name, set()):
            bases.add(ANY)
        return bases, bases

    def _address_bases(self, address) -> set[str]:
        """The parameters (or ANY) an address passed to a load or store intrinsic points
        into: `p + i`, `p` (a local pointer traced as ever), `&p[i]`; nothing for `&a[i]` of a
        thread's own array; ANY for what cannot be traced (`&x`, a pointer loaded from memory)."""
        while address is not None and address.type in ("parenthesized_expression", "cast_expression"):
            address = address.named_children[-1] if address.named_children else None
        if address is None:
            return {ANY}
        if address.type == "pointer_expression" and operator_text(self.u, address) == "&":
            element = address.child_by_field_name("argument")
            if element is None or element.type != "subscript_expression":
                return {ANY}
            base = element.child_by_field_name("argument")
            if base.type == "subscript_expression":
                return {ANY}
            bases = self.pointer_bases(base)
            if not bases and self._local_array(base):
                return set()  # a thread's own array
            return bases or {ANY}
        return self.pointer_bases(address) or {ANY}

    def _takes_pointers(self, name: str) -> bool:
        """A function of this file with a pointer, array or reference parameter."""
        for fn in self.u.functions.get(name, ()):
            d = fn.child_by_field_name("declarator")
            for n in walk(d):
                if n.type == "parameter_declaration" and any(
                        c.type in ("pointer_declarator", "array_declarator", "reference_declarator",
                                   "abstract_pointer_declarator", "abstract_array_declarator")
                        for c in walk(n)):
                    return True
        return False

    def _function_touches_other_memory(self, name: str, seen: set[str]) -> bool:
        """A function of this file that reads or writes a file-scope variable (or calls one that does)."""
        if name in seen:
            return False
        seen.add(name)
        for fn in self.u.functions.get(name, ()):
            for n in walk(fn):
                if n.type == "identifier":
                    word = self.u.text(n)
                    if word in self.u.globals and word not in self.u.constants and word not in self.u.functions:
                        return True
                    if word in self.u.functions and word != name and self._function_touches_other_memory(word, seen):
                        return True
        return False


def conflicts(regions: list[tuple[set[str], set[str]]]) -> tuple[str | None, list[tuple[str, str]]]:
    """(why the kernel cannot be split, or None; the pairs of different parameters that
    must point into different allocations at run time)."""
    pairs: set[tuple[str, str]] = set()
    for i, (written, _) in enumerate(regions):
        for j, (_, accessed) in enumerate(regions):
            if i == j:
                continue
            for w in written:
                for a in accessed:
                    if ANY in (w, a):
                        return "memory written in one region of its block loop and accessed in another", []
                    if w == a:
                        return (f"writes {w} in one region of its block loop and accesses it in another "
                                "(a race between them would be hidden)"), []
                    pairs.add(tuple(sorted((w, a))))
    return None, sorted(pairs)


# ---------------------------------------------------------------- syntax helpers
def _declares_pointer(d) -> bool:
    inner = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
    return inner is not None and inner.type == "pointer_declarator"


def _macro_touches_memory(unit, name: str, pointers: set[str]) -> bool:
    """A macro whose expansion subscripts, dereferences, takes an address, writes a
    variable (macro_effects.py), calls an intrinsic that touches memory, or names a
    pointer or file-scope variable."""
    import re

    value = unit.macros.get(name, "")
    effects = macro_effects.effects_of(value, unit.function_macros.get(name, ()))
    if "[" in value or "->" in value or effects.memory or effects.writes_variable:
        return True
    if any(memory_intrinsics.accesses_pointer(w) for w in re.findall(r"[A-Za-z_]\w*", value)):
        return True   # `#define LOAD(p) __ldg(p)`: an access through whatever it is given
    words = set(re.findall(r"[A-Za-z_]\w*", value))
    return bool(words & pointers) or any(w in unit.globals and w not in unit.constants for w in words)
