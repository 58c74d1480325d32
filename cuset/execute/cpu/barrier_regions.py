"""Barrier regions: kernels with `__syncthreads()` as loops over a block's threads.

On the fibers, between two barriers each thread of a block runs without a switch
(in a function that meets at barriers only `while` loops tick, see the rewriter),
the threads one after another in the block's order: index order under `forward`,
under the random orders the start order and, after each barrier, a permutation
the scheduler draws from its pool (`complete_barrier`). So a kernel whose barriers
every thread reaches in the same control context can run as the CPU-CUDA
compilers run it (MCUDA, COX): split at its barriers into regions, each region a
loop over the block's threads in that same order, with no fiber and no switch.

What qualifies (`BarrierVariant`):
- `__syncthreads();` as a statement at the top level of the kernel body, or at the
  top level of the body of a block-uniform `for` (header computed alike by every
  thread from parameters, built-ins, constants and uniform locals; its variable
  left alone; no `break`/`continue` out of it), nested uniform loops included;
- `__shared__` arrays declared at the top level of the body (`extern __shared__
  T s[];` too): one copy per worker, as on the fibers, declared once for the block;
- no `while`/`do` loop (they tick), no call of a function or macro with a loop (its
  loops tick), no warp operation, `atomicCAS` (a failing one switches), volatile
  memory, spin, printf ... (block_loop's checks); other atomics are plain calls here.

Regions are exactly the fibers' stretches between barriers, except around a hoisted
loop: the fibers run the statements before the loop and the first iteration's
statements up to its first barrier as one stretch (and the last stretch of an
iteration with the next iteration's first, or with what follows the loop), where
the regions would put a barrier between them. That barrier is invisible only when
the two sides' accesses cannot race (`_junctions_race`: neither writes what the
other accesses; shared arrays are told apart by name, other memory is one); otherwise the
kernel stays on the fibers (e.g. a tiled matmul missing its second barrier, whose
race the random order must still show).

Locals live across a barrier are recomputed in every later region when they are
pure values of the thread and block index (`RecomputedDeclaration`), declared once
for the block when every thread computes them alike (`UniformDeclaration`), else kept
per thread (`ThreadDeclaration`) in the runtime's scratch arrays. A thread that
returns is marked done and skips the later regions; as on the fibers, it no longer
counts at barriers. The random orders draw
one permutation per barrier passed while some thread is still running
(`::cuset::rt::block_loop_barrier`), as the fibers do, so both paths consume the
same random numbers and run every region's threads in the same order: outputs
are bit-identical, races included, apart from g++ contracting a*b+c differently
in the two versions (block_loop.py).
"""

from __future__ import annotations

import re
from dataclasses import replace

from cuset.execute.cpu import block_loop, inline_calls, region_lanes
from cuset.execute.cpu.block_loop import KernelPlan, KernelVariant, VariantWriter
from cuset.execute.cpu.plan_ir import (
    ATOMIC_CALL, FOR_EACH_THREAD, LOOPS, MAX_REPLICATED, WARP_ITEMS, WARP_OPS, Barrier, ForHeader, HoistedLoop, Item,
    NotCollapsible, RecomputedDeclaration, SharedDeclaration, Shuffle, Statement, ThreadDeclaration, Unit,
    UniformDeclaration, WarpIf, WarpLoop, WarpOperation, assigned_names, called_name, declared_names, flat,
    memory_accesses, replicated_types, unwrap, walk,
)
from cuset.execute.cpu.syntax_tree import declared_identifier, operator_text
from cuset.spans.grammar import parser

# Atomics that never switch threads on the fibers (a failing atomicCAS does: spin locks).
_FENCES = frozenset({"__threadfence", "__threadfence_block", "__threadfence_system"})
# Masks naming every lane: a shuffle in a region must have one (a partial mask leaves
# lanes out, which only the fibers model).
_FULL_MASKS = frozenset({"0xffffffff", "0xffffffffu", "~0", "~0u", "-1", "4294967295", "4294967295u",
                         "(unsigned)-1", "~0x0", "~0x0u", "0xffffffffull"})
EXTERN_SHARED = "extern __shared__"   # the memory object of every `extern __shared__` array
_VOTES = ("ballot", "any", "all")


# The head of a loop over one warp's lanes (`cuset_lo`, thread indices in the order they run).
_FOR_EACH_LANE = ("::cuset::rt::for_each_lane(cuset_bl, cuset_lo, [&](const unsigned cuset_t, const uint3 threadIdx) "
                  "__attribute__((always_inline)) { (void)cuset_t; (void)threadIdx; ")


def plan_kernels(src: str, *, ticking: frozenset[int]) -> list[KernelPlan]:
    """A plan per `__global__` definition of `src`: a block loop (block_loop.py) where
    it qualifies, else, for a kernel with `__syncthreads()`, barrier regions where they do
    (`ticking`: the rewriter's ticking loops, see block_loop.plan_kernels)."""
    return block_loop.plan_kernels(src, barrier_planner=plan_barrier_kernel, ticking=ticking)


def plan_barrier_kernel(unit: Unit, fn, name: str, line: int) -> KernelPlan:
    """The plan of a kernel with barriers; raises NotCollapsible where it needs the fibers.
    A kernel whose barriers sit in helpers it calls is planned with those calls inlined
    (inline_calls.py): the variant is written from that text, the fibers keep the calls.
    The regions run each stretch between barriers without a switch, so no loop the kernel
    runs may tick on the fibers (the rewriter's own list, checked last: `_ticking_loop`)."""
    plan = _plan_barrier_kernel(unit, fn, name, line)
    where = _ticking_loop(unit, fn.child_by_field_name("body"), set())
    if where:
        raise NotCollapsible(f"a loop that ticks on the fibers ({where})")
    return plan


def _plan_barrier_kernel(unit: Unit, fn, name: str, line: int) -> KernelPlan:
    try:
        return BarrierVariant(unit, fn).plan(name, line)
    except NotCollapsible:
        inlined = inline_calls.inline_barrier_calls(unit, fn)
        if inlined is None:
            raise
    source, calls = inlined
    data = source.encode()
    new_unit = Unit(data, parser().parse(data).root_node)
    # the edits are all inside the kernel's body: it starts where it did
    [new_fn] = [k for k in new_unit.kernels if k.start_byte == fn.start_byte]
    plan = BarrierVariant(new_unit, new_fn).plan(name, line)
    return replace(plan, inlined=calls)


def _ticking_loop(unit: Unit, body, seen: set[str]) -> str:
    """Where `body`, or a function of the file it calls (at any depth), has a loop that
    ticks on the fibers (`Unit.ticks`): "" for none."""
    for n in walk(body) if body is not None else ():
        if n.type in LOOPS and unit.ticks(n):
            return f"line {n.start_point[0] + 1}"
        name = called_name(unit, n) if n.type == "call_expression" else ""
        if name in unit.functions and name not in seen:
            seen.add(name)
            for f in unit.functions[name]:
                where = _ticking_loop(unit, f.child_by_field_name("body"), seen)
                if where:
                    return f"{where}, in {name}"
    return ""


class BarrierVariant(KernelVariant):
    def __init__(self, unit: Unit, fn):
        super().__init__(unit, fn)
        self.uniform_now: set[str] = set()  # uniform locals and loop variables in scope while classifying
        self.remat_now: set[str] = set()    # recomputed locals in scope while classifying
        self.barriers = 0
        self.loops = 0
        self.shuffles = 0
        # with shuffles: conditions each warp's lanes must agree on for a block to take the
        # variant (`if (C) return;` guards, top-level ifs around shuffles: _exit_guards, _checked_ifs)
        self.warp_checks: list[tuple[list[str], str]] = []

    # -------------------------------------------------- what the kernel may use
    def _check_word(self, word: str, allow_thread_index: bool) -> None:
        if ATOMIC_CALL.fullmatch(word) or word in _FENCES:
            return
        if allow_thread_index and (word in ("__syncthreads", "__shared__", "extern") or word in WARP_OPS):
            return  # in the kernel body: where they stand is checked by _level
        super()._check_word(word, allow_thread_index)

    def _check_macro(self, name: str, seen: set[str]) -> bool:
        # A barrier or shared memory behind a macro would sit inside a region.
        for word in re.findall(r"[A-Za-z_]\w*", self.u.macros[name]):
            if word in ("__syncthreads", "__shared__", "extern"):
                raise NotCollapsible(f"macro {name} uses {word}")
        return super()._check_macro(name, seen)

    def _check_call(self, call) -> bool:
        name = self._callee_name(call)
        if name is not None and (name == "__syncthreads" or ATOMIC_CALL.fullmatch(name) or name in _FENCES
                                 or name in WARP_OPS):
            return False
        return super()._check_call(call)

    def _uniform_name(self, name: str, remat: set[str], thread_ok: bool) -> bool:
        # a shared array's name is its address, the same for every thread of the block
        return name in self.uniform_now or name in self._shared_arrays() \
            or super()._uniform_name(name, remat, thread_ok)

    # -------------------------------------------------- the plan
    def plan(self, name: str, line: int) -> KernelPlan:
        self._check_kernel()
        for n in walk(self.body):
            if n.type in ("while_statement", "do_statement"):
                raise NotCollapsible("a while loop (it ticks on the fibers)")
            if n.type == "call_expression" and self._callee_name(n) in self.checked_functions \
                    and self.checked_functions[self._callee_name(n)]:
                raise NotCollapsible("calls a function with a loop (it ticks on the fibers)")
            if n.type == "identifier" and self.u.text(n) in self.u.macros and self._check_macro(self.u.text(n), set()):
                raise NotCollapsible("a macro with a loop")
        items = self._level(unwrap(self.body), top=True)
        placed = sum(1 for n in walk(self.body) if n.type == "identifier" and self.u.text(n) == "__syncthreads")
        if placed != self.barriers:
            raise NotCollapsible("a barrier under thread-dependent control flow")
        if _junctions_race(items, self.accesses):
            raise NotCollapsible("a hoisted loop joins two stretches that may race with no barrier between")
        if self.shuffles:
            self._check_warp_intervals(items)
        gen = _BarrierGenerator(self, items)
        text = gen.variant()
        return KernelPlan(name, line, True, self.loops, gen.lanes, "", self._insert_at(), text,
                          barriers=self.barriers, shuffles=self.shuffles)

    def _level(self, stmts, top: bool) -> list[Item]:
        """The items of a level (the kernel body, or a hoisted loop's body), plan_ir's
        intermediate form: barriers, hoisted loops, shared declarations, declarations
        (uniform, recomputed or kept per thread), statements and warp items."""
        items: list[Item] = []
        for s in stmts:
            if s.type == "comment" or (s.type == "expression_statement" and not s.named_children):
                continue
            if _is_barrier(self.u, s):
                self.barriers += 1
                items.append(Barrier())
                continue
            if self._has_shuffle(s) and not self._has_barrier(s):
                items.append(self._warp_item(s))
                continue
            if any(n.type == "identifier" and self.u.text(n) == "__syncthreads" for n in walk(s)):
                if s.type != "for_statement":
                    raise NotCollapsible("a barrier under thread-dependent control flow")
                var = self.uniform_for(s)
                self.loops += 1
                outer = (set(self.uniform_now), set(self.remat_now))  # the body's locals end with it
                self.uniform_now.add(var)
                inner = self._level(unwrap(s.child_by_field_name("body")), top=False)
                self.uniform_now, self.remat_now = outer
                items.append(HoistedLoop(s, tuple(inner)))
                continue
            if any(n.type == "type_qualifier" and self.u.text(n) == "__shared__" for n in walk(s)):
                if not top or s.type != "declaration":
                    raise NotCollapsible("shared memory declared in a nested block")
                items.append(SharedDeclaration(s))
                continue
            if any(n.type == "storage_class_specifier" and self.u.text(n) == "extern" for n in walk(s)):
                raise NotCollapsible("extern")
            self._check_jumps(s)
            if s.type == "declaration":
                names = tuple(declared_names(self.u, s))
                if self._uniform_declaration(s):
                    self.uniform_now.update(names)
                    items.append(UniformDeclaration(s, names))
                elif self._remat_declaration(s, self.remat_now):
                    self.remat_now.update(names)
                    items.append(RecomputedDeclaration(s, names))
                else:
                    items.append(ThreadDeclaration(s, names))
                continue
            items.append(Statement(s))
        return items

    # -------------------------------------------------- warp shuffles
    def _has_shuffle(self, s) -> bool:
        return any(n.type == "identifier" and self.u.text(n) in WARP_OPS for n in walk(s))

    def _has_barrier(self, s) -> bool:
        return any(n.type == "identifier" and self.u.text(n) == "__syncthreads" for n in walk(s))

    def _warp_item(self, s) -> Item:
        """A statement with warp shuffles and no barrier: a WarpOperation for a
        whole-statement shuffle, a WarpLoop for a block-uniform `for` around shuffles, a
        WarpIf for an `if` (no `else`) around them."""
        shuffle = self._shuffle_statement(s)
        if shuffle is not None:
            self.shuffles += 1
            return WarpOperation(s, shuffle)
        if s.type == "for_statement":
            var = self.uniform_for(s)
            outer = (set(self.uniform_now), set(self.remat_now))
            self.uniform_now.add(var)
            inner = self._level(unwrap(s.child_by_field_name("body")), top=False)
            self.uniform_now, self.remat_now = outer
            return WarpLoop(s, tuple(inner))
        if s.type == "if_statement" and s.child_by_field_name("alternative") is None:
            cond = s.child_by_field_name("condition")
            if any(n.type in ("declaration", "init_statement") for n in cond.named_children):
                raise NotCollapsible("a declaration in the condition of an if around warp shuffles")
            outer = (set(self.uniform_now), set(self.remat_now))
            inner = self._level(unwrap(s.child_by_field_name("consequence")), top=False)
            self.uniform_now, self.remat_now = outer
            return WarpIf(s, tuple(inner))
        raise NotCollapsible("a warp shuffle other than a whole statement `T x = __shfl_*_sync(...);` or "
                              "`x = __shfl_*_sync(...);` in the kernel body, a block-uniform for or an if")

    def _shuffle_statement(self, s):
        """`T x = __shfl_*_sync(FULL, v, arg[, width]);` or `x = __shfl_*_sync(...);` (`+=`
        and the other compound assignments too); the votes (`__ballot_sync(FULL, p)`,
        `__any_sync`, `__all_sync`) alike; `__syncwarp();` as a statement of its own."""
        decl, op = None, "="
        if s.type == "expression_statement" and len(s.named_children) == 1 and self._is_shuffle_call(
                s.named_children[0]) and self.u.text(s.named_children[0].child_by_field_name("function")) == "__syncwarp":
            call = s.named_children[0]
            args = call.child_by_field_name("arguments").named_children
            if len(args) > 1 or (args and not self._full_mask(args[0])):
                raise NotCollapsible("__syncwarp with a mask that is not the full warp")
            return Shuffle("sync", "__syncwarp", "", None, None, None, None, call.start_point[0] + 1)
        if s.type == "declaration":
            declarators = s.children_by_field_name("declarator")
            if len(declarators) != 1 or declarators[0].type != "init_declarator":
                return None
            target, call = declarators[0].child_by_field_name("declarator"), declarators[0].child_by_field_name("value")
            decl = s
        elif s.type == "expression_statement" and len(s.named_children) == 1 \
                and s.named_children[0].type == "assignment_expression":
            target, call = s.named_children[0].child_by_field_name("left"), s.named_children[0].child_by_field_name("right")
            op = operator_text(self.u, s.named_children[0])
        else:
            return None
        if target is None or target.type != "identifier" or call is None:
            return None
        value, around = call, None
        if not self._is_shuffle_call(call):
            # the one shuffle inside a value that around it reads no memory: `v = f(v, shfl(...))`
            inner = [n for n in walk(value) if self._is_shuffle_call(n)]
            if len(inner) != 1 or not self._plain_around(value, inner[0]):
                return None
            call, around = inner[0], value
        f = call.child_by_field_name("function")
        kind = WARP_OPS[self.u.text(f)]
        args = call.child_by_field_name("arguments").named_children
        vote = kind in _VOTES
        if len(args) not in ((2,) if vote else (3, 4)) or any(self._has_shuffle(a) for a in args):
            return None
        if not self._full_mask(args[0]):
            raise NotCollapsible(f"a warp shuffle whose mask is not the full warp ({self.u.text(args[0])})")
        exchanged = "int" if vote else None   # a vote exchanges its predicate as an int, as the runtime does
        if around is not None and not vote:
            exchanged = self._local_type(args[1])
            if exchanged is None:
                return None   # the exchanged value's type cannot be named
        return Shuffle(kind, self.u.text(f), self.u.text(target), decl, args[1], None if vote else args[2],
                        args[3] if len(args) == 4 else None, call.start_point[0] + 1, op, around, call, exchanged)

    def _is_shuffle_call(self, n) -> bool:
        f = n.child_by_field_name("function") if n.type == "call_expression" else None
        return f is not None and f.type == "identifier" and self.u.text(f) in WARP_OPS

    def _plain_around(self, value, call) -> bool:
        """Around `call`, `value` holds locals, constants, operators and calls of pure
        functions or of the file's functions that touch no memory: evaluated after the
        exchange instead of before it, it computes the same."""
        inside = {id(n) for n in walk(call)}
        for n in walk(value):
            if id(n) in inside or not n.is_named:
                continue
            t = n.type
            if t == "call_expression":
                name = self._callee_name(n)
                if name is None or not (self._calls_pure_function(n) or self._touches_no_memory(name, set())):
                    return False
            elif t in ("subscript_expression", "pointer_expression", "assignment_expression", "update_expression",
                       "comma_expression") or (t == "field_expression" and operator_text(self.u, n) == "->"):
                return False
            elif t == "identifier" and self._names_memory(self.u.text(n)):
                return False
        return True

    def _names_memory(self, word: str) -> bool:
        """A shared scalar, a file-scope variable or a macro that is not a value (`#define
        LOAD q[i]` reads memory)."""
        return word in self._shared_scalars() or (word in self.u.globals and word not in self.u.constants) \
            or (word in self.u.macros and not self._macro_value(word, True, set()))

    def _touches_no_memory(self, name: str, seen: set[str]) -> bool:
        """A function of the file whose body reads and writes no memory (its parameters,
        taken by value, and locals only) and calls only pure functions and such functions."""
        if name in seen:
            return True
        seen.add(name)
        defined = self.u.functions.get(name, [])
        if not defined or self._takes_reference(name):
            return False   # unknown, or it writes what its caller passes by reference
        for fn in defined:
            body = fn.child_by_field_name("body")
            if body is None:
                return False
            for n in walk(body):
                t = n.type
                if t in ("subscript_expression", "pointer_expression") or \
                        (t == "field_expression" and operator_text(self.u, n) == "->"):
                    return False
                if t == "identifier" and (self._names_memory(self.u.text(n)) or self.u.text(n) in WARP_OPS
                                          or self.u.text(n) == "__syncthreads"):
                    return False
                if t == "call_expression":
                    callee = self._callee_name(n)
                    if callee is None or not (self._calls_pure_function(n) or self._touches_no_memory(callee, seen)):
                        return False
        return True

    def _local_type(self, node) -> str | None:
        """The type of `node` when it names a local or parameter declared once in the kernel."""
        if node.type != "identifier":
            return None
        name = self.u.text(node)
        found = []
        for n in walk(self.body):
            if n.type == "declaration" and name in declared_names(self.u, n):
                try:
                    found += [t for d, t in replicated_types(self.u, n) if d == name]
                except NotCollapsible:
                    return None
        for prm in self._parameters():
            if prm.type == "parameter_declaration":
                d = prm.child_by_field_name("declarator")
                ident = declared_identifier(d) if d is not None else None
                if ident is not None and self.u.text(ident) == name:
                    found.append(self.u.data[prm.start_byte:d.start_byte].decode(errors="replace").strip()
                                 + ("" if d.type == "identifier" else " *" if d.type == "pointer_declarator" else "?"))
        if len(found) != 1 or "?" in found[0] or "auto" in found[0]:
            return None
        return found[0]

    def _exit_guards(self, items) -> list[tuple[list[str], str]]:
        """A kernel with shuffles may return early only as `if (C) return;` (or `{ return; }`)
        at the top level before its first barrier and shuffle, C a value of the thread
        (`pure` with threadIdx): (the declarations C needs, C) of each. Whole warps must
        leave together, which the variant checks for every block before taking it
        (`block_loop_warps_agree`); a block where a warp splits runs on the fibers."""
        guards: list[tuple[list[str], str]] = []
        known: set[str] = set()   # the locals declared so far: all C may name
        guarded = set()
        uniform = self.uniform_now
        for it in items:
            if isinstance(it, (Barrier, HoistedLoop, *WARP_ITEMS)):
                break
            node = it.node
            if isinstance(it, (RecomputedDeclaration, UniformDeclaration)):
                known.update(it.names)
                continue
            cons = node.child_by_field_name("consequence") if node.type == "if_statement" else None
            body = [c for c in cons.named_children if c.type != "comment"] \
                if cons is not None and cons.type == "compound_statement" else [cons]
            cond = node.child_by_field_name("condition") if cons is not None else None
            if cons is not None and node.child_by_field_name("alternative") is None and len(body) == 1 \
                    and body[0] is not None and body[0].type == "return_statement" and not body[0].named_children \
                    and self._pure_with(cond, known, uniform & known):
                needed = self._needed_declarations(cond, items)
                if needed is not None:
                    guards.append((needed, flat(self.u, cond)))
                    guarded.add(body[0].start_byte)
        if any(n.type == "return_statement" and n.start_byte not in guarded for n in walk(self.body)):
            raise NotCollapsible("warp shuffles in a kernel that returns other than `if (C) return;` before its "
                                  "first barrier and shuffle")
        return guards

    def _checked_ifs(self, items) -> set[int]:
        """The `if`s around shuffles at the top level whose condition is a value of the thread
        (`pure` with threadIdx over the recomputed and uniform locals declared before it):
        the variant checks, for every block before taking it, that each warp's lanes agree
        on it (`block_loop_warps_agree`; else the block runs on the fibers), so such an `if`
        may stand anywhere outside a loop. Their start bytes; their checks join
        `warp_checks`."""
        known: set[str] = set()
        checked: set[int] = set()
        uniform = self.uniform_now
        for it in items:
            if isinstance(it, (RecomputedDeclaration, UniformDeclaration)):
                known.update(it.names)
            elif isinstance(it, WarpIf):
                cond = it.node.child_by_field_name("condition")
                needed = self._needed_declarations(cond, items)
                if needed is not None and self._pure_with(cond, known, uniform & known):
                    self.warp_checks.append((needed, flat(self.u, cond)))
                    checked.add(it.node.start_byte)
        return checked

    def _needed_declarations(self, cond, items) -> list[str] | None:
        """The top-level recomputed and uniform declarations `cond` needs (and those they
        need), in order, as text that compiles where the variant starts (before any of the
        body's statements: no shared array); None where one names something else."""
        decl_of = {n: it for it in items if isinstance(it, (RecomputedDeclaration, UniformDeclaration))
                   for n in it.names}
        wanted, todo = set(), [cond]
        while todo:
            node = todo.pop()
            for n in walk(node):
                name = self.u.text(n) if n.type == "identifier" else None
                if name in self._shared_arrays():
                    return None
                if name in decl_of and name not in wanted:
                    wanted.add(name)
                    todo.append(decl_of[name].node)
        return [flat(self.u, it.node) + "".join(f" (void){n};" for n in it.names) for it in items
                if isinstance(it, (RecomputedDeclaration, UniformDeclaration)) and set(it.names) & wanted]

    def _pure_with(self, node, remat: set[str], uniform: set[str]) -> bool:
        """`pure` (threadIdx allowed) with only `uniform` as the uniform locals in scope."""
        outer, self.uniform_now = self.uniform_now, set(uniform)
        try:
            return self.pure(node, remat, thread_ok=True)
        finally:
            self.uniform_now = outer

    def _runs_once(self, loop) -> bool:
        """A `for (int v = A; v OP B; ...)` with constant A and B whose condition holds at
        A: it runs at least one iteration (`for (int o = 16; o > 0; o >>= 1)`)."""
        h = ForHeader.of(self.u, loop)
        cond = loop.child_by_field_name("condition")
        start = self._constant(h.declarator.child_by_field_name("value"))
        if cond is None or cond.type != "binary_expression" or start is None:
            return False
        left, right = cond.child_by_field_name("left"), cond.child_by_field_name("right")
        bound = self._constant(right)
        if left is None or left.type != "identifier" or self.u.text(left) != h.var or bound is None:
            return False
        op = operator_text(self.u, cond)
        return {"<": start < bound, "<=": start <= bound, ">": start > bound, ">=": start >= bound,
                "!=": start != bound}.get(op, False)

    def _constant(self, node, depth: int = 0) -> int | None:
        """An integer constant: a literal, `warpSize`, a macro of one, or + - * / << >> of them."""
        if node is None or depth > 8:
            return None
        text = self.u.text(node)
        if node.type == "number_literal":
            try:
                return int(text.rstrip("uUlL"), 0)
            except ValueError:
                return None
        if node.type == "identifier":
            if text == "warpSize":
                return 32
            value = self.u.macros.get(text, "").strip()
            return int(value.rstrip("uUlL"), 0) if re.fullmatch(r"(0x[0-9a-fA-F]+|\d+)[uUlL]*", value) else None
        if node.type == "parenthesized_expression" and node.named_children:
            return self._constant(node.named_children[0], depth + 1)
        if node.type == "binary_expression":
            a = self._constant(node.child_by_field_name("left"), depth + 1)
            b = self._constant(node.child_by_field_name("right"), depth + 1)
            op = operator_text(self.u, node)
            if a is None or b is None or (op == "/" and b == 0) or (op in ("<<", ">>") and not 0 <= b < 63):
                return None
            return {"+": a + b, "-": a - b, "*": a * b, "/": int(a / b) if b else None, "<<": a << b,
                    ">>": a >> b}.get(op)
        return None

    def _full_mask(self, node) -> bool:
        text = "".join(self.u.text(node).split())
        return self._full_mask_text(self.u.macros.get(text, text))

    @staticmethod
    def _full_mask_text(text: str) -> bool:
        text = "".join(text.split()).lower()
        while text.startswith("(") and text.endswith(")") and text.count("(") == 1:
            text = text[1:-1]
        return text in _FULL_MASKS

    def _check_warp_intervals(self, items) -> None:
        """Where the regions reproduce the fibers around shuffles: between two barriers
        the fibers run warp after warp, so shuffles stand only in stretches bounded by
        barriers (or the kernel's ends) with no hoisted loop (whose junctions would join
        stretches of different warps); a thread that returns would leave lanes out
        (kept on the fibers); an `if` around shuffles only where a lane that skips it
        reaches a barrier next (on the fibers a deadlock, reported the same), so last
        in its interval, not in a loop, and not in the kernel's last stretch; and no
        junction inside a warp's stretches may race (`_warp_junctions_race`)."""
        if any(n.type == "return_statement" for n in walk(self.body)):
            self.warp_checks = self._exit_guards(items)
        checked = self._checked_ifs(items)
        for it in _all_items(items):
            if isinstance(it, HoistedLoop) and any(isinstance(x, WARP_ITEMS) for x in _all_items(it.items)):
                raise NotCollapsible("warp shuffles in a loop with barriers")
            if isinstance(it, (WarpLoop, WarpIf)) and any(isinstance(x, (Barrier, HoistedLoop, SharedDeclaration))
                                                          for x in _all_items(it.items)):
                raise NotCollapsible("a barrier among warp shuffles")  # _level counts it as placed
        for interval, closed in _intervals(items):
            if not any(isinstance(it, WARP_ITEMS) for it in interval):
                continue
            if any(isinstance(it, HoistedLoop) for it in interval):
                raise NotCollapsible("warp shuffles next to a hoisted loop with barriers")
            if _misplaced_if(interval, closed, checked):
                raise NotCollapsible("an if around warp shuffles that is not the last of its stretch before a "
                                      "barrier")
            if _warp_junctions_race(interval, self.accesses, self._runs_once):
                raise NotCollapsible("a loop or if around warp shuffles joins two stretches that may race")

    def _uniform_declaration(self, s) -> bool:
        """Every declarator initialised with a value every thread computes alike, never written."""
        return self._pure_declaration(s, set(), thread_ok=False, pointers=True)

    def uniform_for(self, node) -> str:
        """The variable of a `for` every thread runs alike (raises otherwise)."""
        cond = node.child_by_field_name("condition")
        update = node.child_by_field_name("update")
        why = "a barrier in a loop that is not block-uniform"
        var = self.loop_variable(node)
        if var is None or update is None:
            raise NotCollapsible(why)
        [declarator] = node.child_by_field_name("initializer").children_by_field_name("declarator")
        if not self.pure(declarator.child_by_field_name("value"), set(), thread_ok=False):
            raise NotCollapsible(why)
        outer = set(self.uniform_now)
        self.uniform_now.add(var)
        try:
            if not self.pure(cond, set(), thread_ok=False):
                raise NotCollapsible(why)
            for n in walk(update):  # writes only the loop variable, with uniform values
                if n.type in ("assignment_expression", "update_expression"):
                    target = n.child_by_field_name("left") or n.child_by_field_name("argument")
                    if target is None or target.type != "identifier" or self.u.text(target) != var:
                        raise NotCollapsible(why)
                    right = n.child_by_field_name("right")
                    if right is not None and not self.pure(right, set(), thread_ok=False):
                        raise NotCollapsible(why)
                elif n.type in ("subscript_expression", "call_expression", "pointer_expression", "comma_expression"):
                    raise NotCollapsible(why)
        finally:
            self.uniform_now = outer
        changed = self.changes_variable(node.child_by_field_name("body"), var)
        if changed:
            raise NotCollapsible(f"a loop with a barrier whose body {changed}")
        return var

    def _check_jumps(self, s) -> None:
        """A `break`/`continue` inside a region must stay inside its statement."""
        for n in walk(s):
            if n.type not in ("break_statement", "continue_statement"):
                continue
            p = n.parent
            while p is not None and p != s.parent:
                if p.type in LOOPS or (p.type == "switch_statement" and n.type == "break_statement"):
                    break
                p = p.parent
            if p is None or p == s.parent:
                raise NotCollapsible(f"{n.type.replace('_statement', '')} across a barrier")

    def accesses(self, node) -> tuple[set[str], set[str]]:
        """(written, read) memory objects of a statement (`memory_object`): its accesses as
        plan_ir.memory_accesses finds them (loads and store intrinsics, atomics included),
        each by the object it reaches: a `__shared__` array or a `__restrict__` parameter
        accessed by its own name or a local pointer into it (`pointer_aliases`), by that
        name; every `extern __shared__` array as one (EXTERN_SHARED); other pointer
        parameters as "params"; any other memory (other pointers, which may point anywhere,
        or a thread's own array) as "global", and "*" for what cannot be told (a call, a
        macro). See _overlap."""
        written: set[str] = set()
        read: set[str] = set()

        for a in memory_accesses(self.u, node):
            n = a.node
            if a.kind == "element":
                where = self.access_object(n)
            elif a.kind in ("intrinsic", "atomic"):
                if a.address is None:
                    if a.kind == "atomic":
                        continue
                    where = "*"
                else:
                    where = self._address_object(a.address)
            elif a.kind == "call":
                name = self._callee_name(n)
                if name in self.u.functions and self._touches_no_memory(name, set()):
                    pass   # its parameters and locals only
                elif name in self.u.functions and self._function_writes_no_memory(name):
                    read.add("*")  # it may read anything it is given
                elif not (self._calls_pure_function(n) or name in _FENCES or name in WARP_OPS
                          or (name or "").startswith("make_")):
                    written.add("*")
                continue
            elif self.u.text(n) in self._shared_scalars() and not _declares(n):
                # `__shared__ float total;` read or written by name is block memory (its declaration is not)
                where = self.u.text(n)
            else:
                word = self.u.text(n)
                if word in self.u.macros and not self._macro_value(word, True, set()):
                    written.add("*")
                elif word in self.u.globals and word not in self.u.constants and word not in self._kernel_locals():
                    written.add("global")
                    read.add("global")
                continue
            if a.writes:
                written.add(where)
            if a.reads:
                read.add(where)
        return written, read

    def access_object(self, access) -> str:
        """The memory object an element access (plan_ir.Access, "element") reaches, by the name it goes through."""
        target = access
        while target is not None and target.type not in ("identifier",):
            if target.type in ("subscript_expression", "field_expression", "pointer_expression"):
                target = target.child_by_field_name("argument")
            elif target.type in ("parenthesized_expression", "cast_expression"):
                target = target.named_children[-1] if target.named_children else None
            else:
                return "global"
        return self.memory_object(self.u.text(target) if target is not None else "")

    def _address_object(self, address) -> str:
        """The memory object an address (`p`, `p + i`, `&p[i]`: a load's, a store's or an
        atomic's argument) points into; "global" where it cannot be told."""
        while address is not None and address.type in ("parenthesized_expression", "cast_expression"):
            address = address.named_children[-1] if address.named_children else None
        if address is not None and address.type == "pointer_expression" and operator_text(self.u, address) == "&" \
                and address.child_by_field_name("argument").type == "identifier":
            return self.memory_object(self.u.text(address.child_by_field_name("argument")))  # `&total`
        name = _pointed_into(self.u, address)
        return self.memory_object(name) if name else "global"

    @staticmethod
    def objects_meet(x: set[str], y: set[str]) -> bool:
        """Whether two sets of memory objects may share a location (_overlap)."""
        return _overlap(x, y)

    def memory_object(self, name: str) -> str:
        """The memory object an access through `name` reaches: a `__shared__` array or a
        `__restrict__` parameter its own (a local pointer into one: its), every `extern
        __shared__` array one (EXTERN_SHARED: one storage on a GPU), other pointer
        parameters "params" (they may alias each other), anything else "global"."""
        name = self.pointer_aliases().get(name, name)
        if name in self._extern_shared():
            return EXTERN_SHARED
        if name in self._shared_names() or name in self._restrict_params():
            return name
        return "params" if name in self.pointer_params() else "global"

    def _restrict_pairs(self) -> list[tuple[str, str]]:
        """`__restrict__` is a promise the program can break (one buffer passed twice): the
        analyses that tell a restrict parameter's memory apart by its name (`memory_object`)
        hold only when it points into another allocation than every other pointer parameter.
        The pairs to check when a block starts (`block_loop_apart`, else the fibers): each
        restrict parameter with each other pointer parameter, where either is written."""
        restricted = self._restrict_params()
        if not restricted:
            return []
        written, _ = self.accesses(self.body)
        anything = bool(written & {"*", "global"})
        pairs = set()
        for r in restricted:
            for p in restricted | self.pointer_params():
                if p != r and (anything or r in written or (p in written if p in restricted else "params" in written)):
                    pairs.add(tuple(sorted((r, p))))
        return sorted(pairs)

    def pointer_aliases(self) -> dict[str, str]:
        """Local pointers into one `__shared__` array or `__restrict__` parameter, by the
        name of what they point into: declared at the top level of the body as
        `T* p = a;`, `a + e`, `a - e` or `&a[e]` (casts and parentheses allowed) and never
        assigned again nor their address taken. (`float* scores = smem;` is smem's.)"""
        if hasattr(self, "_alias_cache"):
            return self._alias_cache
        named = self._shared_names() | self._restrict_params()
        aliases: dict[str, str] = {}
        for decl in unwrap(self.body):
            if decl.type != "declaration":
                continue
            for d in decl.children_by_field_name("declarator"):
                inner = d.child_by_field_name("declarator") if d.type == "init_declarator" else None
                if inner is None or inner.type != "pointer_declarator":
                    continue
                target = _pointed_into(self.u, d.child_by_field_name("value"))
                if target in named:
                    aliases[self.u.text(declared_identifier(d))] = target
        declared: dict[str, int] = {}
        for n in walk(self.body):
            if n.type == "declaration":
                for name in declared_names(self.u, n):
                    declared[name] = declared.get(name, 0) + 1
        for name in [a for a in aliases if declared.get(a, 0) != 1]:
            del aliases[name]   # declared again in an inner scope: that one may point anywhere
        for n in walk(self.body):  # reassigned, stepped or its address taken: not an alias
            changed = []
            if n.type == "assignment_expression":
                changed = assigned_names(self.u, n.child_by_field_name("left"))
            elif n.type == "update_expression":
                changed = assigned_names(self.u, n.child_by_field_name("argument"))
            elif n.type == "pointer_expression" and operator_text(self.u, n) == "&":
                changed = assigned_names(self.u, n.child_by_field_name("argument"))   # may be written through
            for name in changed:
                aliases.pop(self.u.text(name), None)
        self._alias_cache = aliases
        return aliases

    def pointer_params(self) -> set[str]:
        """Pointer parameters: device memory, never a block's shared memory."""
        return self._parameter_names(lambda p: (d := p.child_by_field_name("declarator")) is not None
                                     and d.type == "pointer_declarator")

    def _restrict_params(self) -> set[str]:
        """Pointer parameters declared `__restrict__`: memory no other name reaches."""
        return self._parameter_names(lambda p: block_loop.RESTRICT.search(self.u.text(p)) is not None)

    def _shared_scalars(self) -> set[str]:
        """`__shared__` variables that are no arrays: their name reads the memory."""
        if not hasattr(self, "_scalar_cache"):
            self._scalar_cache = {self.u.text(declared_identifier(d)) for n in unwrap(self.body)
                                  if n.type == "declaration"
                                  and any(c.type == "type_qualifier" and self.u.text(c) == "__shared__"
                                          for c in n.children)
                                  for d in n.children_by_field_name("declarator")
                                  if d.type != "array_declarator" and declared_identifier(d) is not None
                                  and not any(x.type == "array_declarator" for x in walk(d))}
        return self._scalar_cache

    def _shared_arrays(self) -> set[str]:
        """`__shared__` arrays (and `extern __shared__ T s[]`): one address for the whole block."""
        return self._shared_names() - self._shared_scalars()

    def _extern_shared(self) -> set[str]:
        """`extern __shared__` arrays: all of them start at the one dynamic window."""
        if not hasattr(self, "_extern_cache"):
            self._extern_cache = {name for n in unwrap(self.body) if n.type == "declaration"
                                  and any(c.type == "type_qualifier" and self.u.text(c) == "__shared__"
                                          for c in n.children)
                                  and any(c.type == "storage_class_specifier" and self.u.text(c) == "extern"
                                          for c in n.children)
                                  for name in declared_names(self.u, n)}
        return self._extern_cache

    def _shared_names(self) -> set[str]:
        if not hasattr(self, "_shared_cache"):
            self._shared_cache = {name for n in unwrap(self.body) if n.type == "declaration"
                                  and any(c.type == "type_qualifier" and self.u.text(c) == "__shared__"
                                          for c in n.children)
                                  for name in declared_names(self.u, n)}
        return self._shared_cache


def _intervals(items):
    """The top level's stretches between barriers: (items, whether a barrier ends it)."""
    current: list[Item] = []
    for it in items:
        if isinstance(it, Barrier):
            yield current, True
            current = []
        else:
            current.append(it)
    yield current, False


def _misplaced_if(items, closed: bool, checked: set[int]) -> bool:
    """An `if` around shuffles that is in a loop, or, unless its warps are checked to agree
    on it when the block starts (`checked`), has shuffles after it in its stretch or ends
    the kernel (see _check_warp_intervals)."""
    def bad(its, in_loop: bool, warp_after: bool) -> bool:
        for k, it in enumerate(its):
            later = warp_after or any(isinstance(x, WARP_ITEMS) for x in its[k + 1:])
            split_ok = isinstance(it, WarpIf) and it.node.start_byte in checked
            if isinstance(it, WarpIf) and (in_loop or (not split_ok and (later or not closed))
                                           or bad(it.items, in_loop, later)):
                return True
            if isinstance(it, WarpLoop) and bad(it.items, True, later):
                return True
        return False
    return bad(items, False, False)


def _warp_junctions_race(items, accesses, runs_once) -> bool:
    """_junctions_race for a warp's stretches between two barriers: a shuffle separates
    the lanes' stretches; a loop around shuffles joins its body's last stretch with its
    first and with what follows, an `if` its condition's stretch with the body's first
    and its last with what follows (the fibers run each lane through the join, the
    regions all lanes up to it first)."""
    nodes: list[tuple[set[str], set[str]]] = []
    edges: dict[int, set[int]] = {}

    def add(k: int, node) -> None:
        written, read = accesses(node)
        nodes[k][0].update(written)
        nodes[k][1].update(read)

    def new() -> int:
        nodes.append((set(), set()))
        return len(nodes) - 1

    def level(its) -> tuple[int, int]:
        first = current = new()
        for it in its:
            if isinstance(it, WarpOperation):
                for part in (it.shuffle.value, it.shuffle.arg, it.shuffle.width):
                    if part is not None:
                        add(current, part)
                current = new()
            elif isinstance(it, (WarpLoop, WarpIf)):
                if isinstance(it, WarpIf):
                    add(current, it.node.child_by_field_name("condition"))
                body_first, body_last = level(it.items)
                after = new()
                joins = [(current, body_first), (body_last, after)]
                if isinstance(it, WarpIf) or not runs_once(it.node):
                    joins.append((current, after))  # no iteration: before and after meet
                if isinstance(it, WarpLoop):
                    joins.append((body_last, body_first))
                for a, b in joins:
                    edges.setdefault(a, set()).add(b)
                current = after
            elif isinstance(it, (Statement, ThreadDeclaration)):
                add(current, it.node)
        return first, current

    level(items)
    return _path_conflicts(nodes, edges)


def _path_conflicts(nodes, edges) -> bool:
    """Whether a stretch conflicts with one it reaches through joins (`edges`)."""
    for start, here in enumerate(nodes):
        if not (here[0] or here[1]):
            continue
        seen, todo = set(), list(edges.get(start, ()))
        while todo:
            k = todo.pop()
            if k in seen:
                continue
            seen.add(k)
            if _conflict(here, nodes[k]):
                return True
            todo.extend(edges.get(k, ()))
    return False


def _declares(ident) -> bool:
    """Whether the identifier is the name a declaration declares (not a value in it)."""
    parent = ident.parent
    return parent is not None and (parent.type == "declaration" or parent.type.endswith("declarator")) \
        and ident in parent.children_by_field_name("declarator")


def _pointed_into(unit: Unit, value) -> str:
    """The array or pointer named first in `a`, `a + e`, `a - e`, `&a[e]` (casts and
    parentheses around them allowed); "" otherwise."""
    while value is not None:
        if value.type == "identifier":
            return unit.text(value)
        if value.type in ("parenthesized_expression", "cast_expression"):
            value = value.named_children[-1] if value.named_children else None
        elif value.type == "binary_expression" and operator_text(unit, value) in ("+", "-"):
            value = value.child_by_field_name("left")
        elif value.type == "pointer_expression" and operator_text(unit, value) == "&":
            arg = value.child_by_field_name("argument")
            value = arg.child_by_field_name("argument") if arg is not None and arg.type == "subscript_expression" \
                else None
        else:
            return ""
    return ""


def _conflict(a: tuple[set[str], set[str]], b: tuple[set[str], set[str]]) -> bool:
    """Whether two stretches' accesses could race: one writes what the other reads or writes."""
    (wa, ra), (wb, rb) = a, b
    return _overlap(wa, rb | wb) or _overlap(wb, ra)


def _overlap(x: set[str], y: set[str]) -> bool:
    """Two sets of memory names that may share a location: the same name, or "global"
    or "*" (anything: a local pointer may point into a shared array or a parameter).
    "params" (through pointer parameters that are not `__restrict__`) is device memory:
    it meets only itself (and "global", "*"), never a shared array."""
    if not x or not y:
        return False
    return bool(x & y) or bool((x | y) & {"global", "*"})


def _is_barrier(unit: Unit, s) -> bool:
    if s.type != "expression_statement" or len(s.named_children) != 1:
        return False
    call = s.named_children[0]
    if call.type != "call_expression":
        return False
    f = call.child_by_field_name("function")
    args = call.child_by_field_name("arguments")
    return f is not None and f.type == "identifier" and unit.text(f) == "__syncthreads" \
        and args is not None and not args.named_children


def _all_items(items):
    for it in items:
        yield it
        if isinstance(it, HoistedLoop):
            yield from _all_items(it.items)


def _junctions_race(items, accesses) -> bool:
    """Around a hoisted loop the regions add barriers the kernel does not have: between
    the stretch before the loop and the body's first stretch, the body's last stretch
    and its first (next iteration) or what follows the loop, and, for a loop that runs
    no iteration, the stretches before and after it. Stretches are nodes of a graph
    with those edges (a barrier starts a node with none into it); two stretches joined
    by a path whose accesses could race (`_conflict`) run interleaved one way on the
    fibers and another as regions, which could hide the race: True."""
    nodes: list[tuple[set[str], set[str]]] = []  # (written, read) of each stretch
    edges: dict[int, set[int]] = {}

    def level(its) -> tuple[int, int]:
        """Adds the stretches of a level; returns its first and last."""
        current = len(nodes)
        nodes.append((set(), set()))
        first = current
        for it in its:
            if isinstance(it, Barrier):
                current = len(nodes)
                nodes.append((set(), set()))
            elif isinstance(it, HoistedLoop):
                body_first, body_last = level(it.items)
                after = len(nodes)
                nodes.append((set(), set()))
                for a, b in ((current, body_first), (body_last, body_first), (body_last, after), (current, after)):
                    edges.setdefault(a, set()).add(b)
                current = after
            elif isinstance(it, (Statement, ThreadDeclaration)):
                written, read = accesses(it.node)
                nodes[current][0].update(written)
                nodes[current][1].update(read)
        return first, current

    level(items)
    return _path_conflicts(nodes, edges)


# ---------------------------------------------------------------- code generation
class _BarrierGenerator(VariantWriter):
    """The variant's text: each level's statements between barriers as one loop over
    the block's threads (`::cuset::rt::for_each_thread`, in the order of `cuset_bl`),
    hoisted loops and uniform locals at block level, a barrier as the next order."""

    def __init__(self, kv: BarrierVariant, items: list[Item]):
        super().__init__(kv)
        self.items = items
        self.uses_done = any(n.type == "return_statement" for n in walk(kv.body))
        self.lanes = 0  # regions run with groups of threads side by side (region_lanes.py)

    def variant(self) -> str:
        body = self._level(self.items, [], [])
        if len(self.replicated) + 1 > MAX_REPLICATED:
            raise NotCollapsible("too many locals live across a barrier")
        # The threads still running: a barrier draws the next order for them alone.
        live = "unsigned cuset_live = cuset_bl.n; " if self.uses_done else ""
        # Shuffles run warp by warp: blocks of whole warps only, each leaving whole (else the fibers).
        warps = "::cuset::rt::block_loop_full_warps() && " if self.kv.shuffles else ""
        for decls, cond in self.kv.warp_checks:
            warps += ("::cuset::rt::block_loop_warps_agree(::cuset::rt::block_loop, [&](const uint3 threadIdx) "
                      f"-> bool {{ {' '.join(decls)} return {cond}; }}) && ")
        # A copy of the runtime's order: each barrier replaces it.
        apart = self._apart(self.kv._restrict_pairs())
        return self._entry(f"{apart}{warps}::cuset::rt::take_barrier_block_loop()", "::cuset::rt::BlockLoop",
                           self._scratch() + live, body)

    def _level(self, items: list[Item], prologue: list[str], bound: list[str]) -> str:
        out: list[str] = []
        region: list[str] = []
        entries: list[tuple] = []   # (item, its text in `region`, whether it declares replicated locals)
        start = (list(prologue), list(bound))
        prologue, bound = list(prologue), list(bound)
        skip_to = 0

        def flush():
            if region:
                out.append(self._region_text(start[0], start[1], region, entries))
                region.clear()
                entries.clear()

        for k, it in enumerate(items):
            if not isinstance(it, Barrier) and (k == 0 or isinstance(items[k - 1], Barrier)):
                end = next((j for j in range(k, len(items)) if isinstance(items[j], Barrier)), len(items))
                if any(isinstance(x, WARP_ITEMS) for x in items[k:end]):
                    # a stretch between barriers with shuffles: warp after warp (_warp_interval)
                    out.append(self._warp_interval(items[k:end], items[end:], prologue, bound))
                    skip_to = end
            if k < skip_to:
                continue
            if isinstance(it, Barrier):
                flush()
                live = "cuset_live" if self.uses_done else "cuset_bl.n"
                out.append(f"cuset_bl.order = ::cuset::rt::block_loop_barrier(cuset_bl.order, {live});")
                start = (list(prologue), list(bound))
            elif isinstance(it, HoistedLoop):
                flush()
                h = ForHeader.of(self.u, it.node)
                out.append(f"for ({h.init} {h.cond}; {h.step}) {{ {self._level(it.items, prologue, bound)} }}")
                start = (list(prologue), list(bound))
            elif isinstance(it, SharedDeclaration):
                out.append(self._shared(it.node))
            elif isinstance(it, UniformDeclaration):
                out.append(flat(self.u, it.node) + "".join(f" (void){n};" for n in it.names))
            elif isinstance(it, RecomputedDeclaration):
                text = flat(self.u, it.node) + "".join(f" (void){n};" for n in it.names)
                region.append(text)
                entries.append((it, text, False))
                prologue.append(text)
            elif isinstance(it, ThreadDeclaration) and _used_later(self.u, it.names, items[k + 1:]):
                for name, type_text in replicated_types(self.u, it.node):
                    self._replicate(name, type_text)
                region.append(self._replicated_declaration(it.node))
                entries.append((it, region[-1], True))
                bound.extend(it.names)
            else:
                region.append(self._with_returns(it.node))
                entries.append((it, region[-1], False))
        flush()
        return " ".join(out) + " "

    def _region_text(self, prologue: list[str], bound: list[str], stmts: list[str], entries: list[tuple]) -> str:
        """The region as a loop over the threads; with a block-stride loop whose threads
        cannot see each other's work, groups of threads side by side (region_lanes.py)."""
        text = self._region(prologue, bound, stmts)
        lanes = None if self.uses_done else region_lanes.plan(self.kv, [e[0] for e in entries])
        if lanes is None:
            return text
        self.lanes += 1
        one_thread = " ".join(prologue) + " " + " ".join(self._bind(n) for n in bound) + " " + " ".join(stmts)
        return region_lanes.LaneWriter(self.kv, lanes, self._bind).write(entries, prologue, bound, one_thread, text)

    # -------------------------------------------------- warp shuffles
    def _warp_interval(self, items: list[Item], later: list[Item], prologue: list[str], bound: list[str]) -> str:
        """A stretch between barriers with shuffles, as the fibers run it: warp after warp
        in the order's warp order (a released warp's lanes go to the front of the fibers'
        queue, so a warp runs to the barrier before the next starts), each stretch between
        two of its shuffles a loop over its lanes, in the order the last shuffle released
        them (`block_loop_warp_release`). `__shared__` arrays and uniform locals are
        declared before the warps' loop; `prologue` and `bound` gain this stretch's
        recomputed and replicated locals, for the later regions."""
        hoisted: list[str] = []
        buffers: list[str] = []
        body = self._warp_level(items, later, prologue, bound, hoisted, buffers, top=True)
        return (" ".join(hoisted) + " for (unsigned cuset_w = 0; cuset_w < cuset_bl.n; cuset_w += 32u) { "
                "int cuset_lo[32]; ::cuset::rt::block_loop_warp_lanes(cuset_bl, cuset_w, cuset_lo); "
                + " ".join(buffers) + " " + body + " } ")

    def _warp_level(self, items, later, prologue, bound, hoisted, buffers, top: bool) -> str:
        out: list[str] = []
        region: list[str] = []
        if not top:  # the locals of a loop's or an if's body end with it
            prologue, bound = list(prologue), list(bound)
        start = (list(prologue), list(bound))

        def flush():
            if region:
                out.append(self._lanes(start[0], start[1], region))
                region.clear()

        for k, it in enumerate(items):
            rest = [*items[k + 1:], *later]
            if isinstance(it, WarpOperation):
                sh = it.shuffle
                n = len(buffers)
                if sh.kind == "sync":   # __syncwarp: the lanes meet and are released, nothing exchanged
                    buffers.append("")
                    flush()
                    out.append(self._release())
                    start = (list(prologue), list(bound))
                    continue
                if sh.decl is not None:
                    [(_, type_text)] = replicated_types(self.u, sh.decl)
                elif sh.target in dict(self.replicated):
                    type_text = f"cuset_t_{sh.target}"
                else:
                    raise NotCollapsible(f"a shuffle assigned to {sh.target}, which is not a local of the kernel")
                exchanged = sh.exchanged or type_text
                buffers.append(f"std::remove_const_t<{exchanged}> cuset_xv{n}[32]; int cuset_xa{n}[32], cuset_xw{n}[32];")
                width = flat(self.u, sh.width) if sh.width is not None else "32"
                lane = "cuset_t & 31u"
                if sh.kind in _VOTES:
                    region.append(f"cuset_xv{n}[{lane}] = (int)({flat(self.u, sh.value)});")
                else:
                    region.append(f"cuset_xv{n}[{lane}] = ({flat(self.u, sh.value)}); cuset_xa{n}[{lane}] = "
                                  f"(int)({flat(self.u, sh.arg)}); cuset_xw{n}[{lane}] = (int)({width});")
                flush()
                out.append(self._release())
                start = (list(prologue), list(bound))
                read = (f"cuset_xv{n}[::cuset::rt::block_loop_shuffle_source(::cuset::rt::WarpKind::{sh.kind}, {lane}, "
                        f"cuset_xa{n}[{lane}], cuset_xw{n}[{lane}], \"{sh.api}\", __builtin_FILE(), {sh.line})]")
                if sh.kind in _VOTES:   # every lane's predicate, as compute_group reads them
                    read = f"::cuset::rt::block_loop_vote(::cuset::rt::WarpKind::{sh.kind}, cuset_xv{n})"
                if sh.around is not None:  # the value around the shuffle, with the exchanged value in its place
                    read = flat(self.u, sh.around, {sh.call.start_byte: (sh.call.end_byte, f"({read})")})
                if sh.decl is None:
                    region.append(f"{sh.target} {sh.op} {read};")
                elif self._outlives_stretch((sh.target,), items[k + 1:], later if top else []):
                    self._replicate(sh.target, type_text)
                    region.append(f"cuset_r_{sh.target}[cuset_t] = {read}; {self._bind(sh.target)}")
                    bound.append(sh.target)
                else:
                    region.append(f"{type_text} {sh.target} = {read}; (void){sh.target};")
            elif isinstance(it, WarpLoop):
                flush()
                h = ForHeader.of(self.u, it.node)
                inner = self._warp_level(it.items, rest, prologue, bound, hoisted, buffers, top=False)
                out.append(f"for ({h.init} {h.cond}; {h.step}) {{ {inner} }}")
                start = (list(prologue), list(bound))
            elif isinstance(it, WarpIf):
                n = len(buffers)
                buffers.append(f"unsigned char cuset_wc{n}[32] = {{}};")  # a returned lane counts as out
                region.append(f"cuset_wc{n}[cuset_t & 31u] = {flat(self.u, it.node.child_by_field_name('condition'))} "
                              "? 1 : 0;")
                flush()
                inner = self._warp_level(it.items, rest, prologue, bound, hoisted, buffers, top=False)
                out.append(f"{{ unsigned cuset_in = 0; for (unsigned cuset_k = 0; cuset_k < 32u; ++cuset_k) "
                           f"cuset_in += cuset_wc{n}[cuset_k]; if (cuset_in == 32u) {{ {inner} }} else if (cuset_in) "
                           f"::cuset::rt::block_loop_warp_divergence(cuset_w >> 5, __builtin_FILE(), "
                           f"{it.node.start_point[0] + 1}); }}")
                start = (list(prologue), list(bound))
            elif isinstance(it, SharedDeclaration):
                hoisted.append(self._shared(it.node))
            elif isinstance(it, UniformDeclaration):
                text = flat(self.u, it.node) + "".join(f" (void){n};" for n in it.names)
                (hoisted if top else out).append(text)
            elif isinstance(it, RecomputedDeclaration):
                text = flat(self.u, it.node) + "".join(f" (void){n};" for n in it.names)
                region.append(text)
                prologue.append(text)
            elif isinstance(it, ThreadDeclaration) \
                    and self._outlives_stretch(it.names, items[k + 1:], later if top else []):
                for name, type_text in replicated_types(self.u, it.node):
                    self._replicate(name, type_text)
                region.append(self._replicated_declaration(it.node))
                bound.extend(it.names)
            else:
                region.append(self._with_returns(it.node))
        flush()
        return " ".join(out) + " "

    def _outlives_stretch(self, names: tuple, siblings: list[Item], later: list[Item]) -> bool:
        """Whether locals declared here are used past the next shuffle, loop or if around
        shuffles at their level (or, at the top level, after the stretch's barrier)."""
        split = next((j for j, it in enumerate(siblings) if isinstance(it, WARP_ITEMS)), len(siblings))
        return _used_later(self.u, names, [*siblings[split:], *later])

    def _replicate(self, name: str, type_text: str) -> None:
        """A per-thread slot for `name` (one for the kernel: an inlined helper may declare
        the same name in two loops)."""
        known = dict(self.replicated)
        if name not in known:
            self.replicated.append((name, type_text))
        elif known[name] != type_text:
            raise NotCollapsible(f"two locals named {name} of different types live across regions")

    def _lanes(self, prologue: list[str], bound: list[str], stmts: list[str]) -> str:
        """A stretch of the warp's lanes (`cuset_lo`), as _region writes one of the block's threads."""
        return self._region(prologue, bound, stmts, head=_FOR_EACH_LANE)

    def _release(self) -> str:
        """The warp's lanes meet at a warp operation; the order they go on in. A warp whose
        lanes all returned (whole warps only: the entry checks) meets nowhere, as on the fibers."""
        release = "::cuset::rt::block_loop_warp_release(cuset_lo);"
        return f"if (!cuset_done[cuset_lo[0]]) {release}" if self.uses_done else release

    def _region(self, prologue: list[str], bound: list[str], stmts: list[str], head: str = FOR_EACH_THREAD) -> str:
        binds = " ".join(self._bind(n) for n in bound)
        inner = " ".join(prologue) + " " + binds + " " + " ".join(stmts)
        if not self.uses_done:
            return head + "{ " + inner + " } });"
        # A thread that returns no longer counts at barriers (cuset_live), as on the fibers.
        return self._each_thread(inner, "if (cuset_done[cuset_t]) return; ",
                                 "{ cuset_done[cuset_t] = 1; --cuset_live; }", head=head)

    def _shared(self, decl) -> str:
        """A `__shared__` declaration once for the block (the same static storage the
        fibers' copy has: thread-local to the worker, poisoned per block under random);
        `extern __shared__ T s[];` as a pointer to the dynamic window, as the rewriter writes it."""
        words = [self.u.text(c) for c in decl.children if c.type in ("storage_class_specifier", "type_qualifier")]
        if "extern" not in words:
            return flat(self.u, decl)
        [d] = decl.children_by_field_name("declarator")
        name = d.child_by_field_name("declarator")
        if d.type != "array_declarator" or d.child_by_field_name("size") is not None or name is None \
                or name.type != "identifier":
            raise NotCollapsible("an extern shared declaration other than `T name[]`")
        quals = " ".join(w for w in words if w not in ("extern", "__shared__"))
        type_text = f"{quals} {self.u.text(decl.child_by_field_name('type'))}".strip()
        n = self.u.text(name)
        return f"{type_text}* const {n} = reinterpret_cast<{type_text}*>(::cuset::rt::dynamic_smem); (void){n};"


def _used_later(unit: Unit, names: tuple, rest: list[Item]) -> bool:
    wanted = set(names)
    for it in _all_items(rest):
        if it.node is not None and any(n.type == "identifier" and unit.text(n) in wanted for n in walk(it.node)):
            return True
    return False
