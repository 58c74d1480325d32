"""Barrier regions whose threads run side by side: a block-stride loop with the threads innermost.

A barrier region (barrier_regions.py) runs its stretch one thread after another, as
the fibers do. Attention's last stretch is such a loop:

    for (int c = threadIdx.x; c < D; c += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < S; ++j) acc += scores[j] * V[head + (size_t)j * D + c];
        O[head + (size_t)i * D + c] = acc * inv;
    }

One thread at a time, each `acc` chain waits on its own adds (an FMA's latency per
step). When no thread can see another's work inside the stretch, the order the
threads run in cannot change its outcome, and so the region may run LANES
consecutive threads (x) side by side: each thread's statements in its own order,
its locals in per-lane arrays, the uniform loops of the body hoisted around loops
over the lanes that g++ -O2 vectorises (a constant trip count under `GCC ivdep`):
LANES `acc` chains in the lanes of one SIMD register.

When the region qualifies (`plan`):
- one statement is a block-stride loop `for (T c = threadIdx.x [+ U]; c < B; c +=
  blockDim.x)` (U, B the same for every thread), its body leaving `c` alone;
- the region writes memory only in that loop's body, outside the body's own loops,
  each time as `P[E + c]` (E the same for every thread; P a `__shared__` array or a
  `__restrict__` parameter), one index per P and no other access of P: thread x's
  c takes the values x + U + k * blockDim.x, so no two threads, nor two rounds of one
  thread, write one element, and nobody reads one (a block of one row of threads:
  checked when the block starts, else the region runs as before);
- no `return`, `break`, `continue` or `goto` (a lane loop is no thread's loop) and no
  thread that returned earlier (the regions' `cuset_done`).
Then each group of LANES threads runs its statements before the loop, the loop's
rounds (all lanes in the loop: the body side by side; some: lane after lane) and
the statements after it; the threads past the last full group run as before, one
after another. Every order runs this same code, so forward and random give the same
bits as always; the fibers' result differs by nothing but what g++'s vector and
scalar code may contract differently (as for block_loop's threads-innermost loops).
"""

from __future__ import annotations

from dataclasses import dataclass

from cuset.execute.cpu.plan_ir import (
    Item, NotCollapsible, RecomputedDeclaration, Statement, ThreadDeclaration, flat, memory_accesses,
    replicated_types, walk,
)
from cuset.execute.cpu.syntax_tree import operator_text

LANES = 8
_JUMPS = ("return_statement", "break_statement", "continue_statement", "goto_statement")


@dataclass(frozen=True)
class LanePlan:
    loop: object    # the block-stride `for`
    index: int      # its position among the region's items
    var: str
    var_type: str
    init: str       # its first value, as the kernel spells it
    cond: str
    step: str


def plan(kv, items: list[Item]) -> LanePlan | None:
    """The region's stride loop when its threads may run side by side (see the module)."""
    loops = [(k, found) for k, it in enumerate(items) if isinstance(it, Statement) and it.node.type == "for_statement"
             and (found := _stride_loop(kv, it.node)) is not None]
    if len(loops) != 1:
        return None
    if any(n.type in _JUMPS for it in items for n in walk(it.node)):
        return None
    [(k, (var, var_type))] = loops
    node = items[k].node
    if not _writes_own_elements(kv, items, node, var):
        return None
    init = node.child_by_field_name("initializer")
    [d] = init.children_by_field_name("declarator")
    return LanePlan(node, k, var, var_type, flat(kv.u, d.child_by_field_name("value")),
                    flat(kv.u, node.child_by_field_name("condition")),
                    flat(kv.u, node.child_by_field_name("update")))


def _stride_loop(kv, node) -> tuple[str, str] | None:
    """(variable, its type) of `for (T c = threadIdx.x [+ U]; c < B; c += blockDim.x)`."""
    u = kv.u
    var = kv.loop_variable(node)
    init = node.child_by_field_name("initializer")
    cond, step = node.child_by_field_name("condition"), node.child_by_field_name("update")
    if var is None or cond is None or step is None:
        return None
    [d] = init.children_by_field_name("declarator")
    value = d.child_by_field_name("value")
    terms = _terms(u, value)
    if terms is None or sum(1 for t in terms if u.text(t).replace(" ", "") == "threadIdx.x") != 1 \
            or not all(u.text(t).replace(" ", "") == "threadIdx.x" or kv.pure(t, set(), thread_ok=False)
                       for t in terms):
        return None
    if cond.type != "binary_expression" or operator_text(u, cond) != "<" \
            or u.text(cond.child_by_field_name("left")) != var \
            or not kv.pure(cond.child_by_field_name("right"), set(), thread_ok=False):
        return None
    if step.type != "assignment_expression" or operator_text(u, step) != "+=" \
            or u.text(step.child_by_field_name("left")) != var \
            or u.text(step.child_by_field_name("right")).replace(" ", "") != "blockDim.x":
        return None
    if kv.changes_variable(node.child_by_field_name("body"), var):
        return None
    type_text = " ".join(w for w in u.data[init.start_byte:d.start_byte].decode(errors="replace").split()
                         if w not in ("register", "const"))
    if not type_text or "auto" in type_text:
        return None
    return var, type_text


def _terms(u, node) -> list | None:
    """The terms of a sum `a + b + c` (parentheses and casts around it kept as one term)."""
    if node is None:
        return None
    if node.type == "binary_expression" and operator_text(u, node) == "+":
        left, right = _terms(u, node.child_by_field_name("left")), _terms(u, node.child_by_field_name("right"))
        return None if left is None or right is None else left + right
    return [node]


def _writes_own_elements(kv, items, loop, var: str) -> bool:
    """Every memory write of the region is `P[E + var]` at the top level of the loop's
    body (E uniform), P a shared array or restrict parameter named by itself (not
    through a local pointer), each P its own memory object (two `extern __shared__`
    arrays are one), and every access of the region that may reach a written object
    (traced through local pointers as writes are: barrier_regions.memory_object) is
    P[E + var] itself: P's name is used nowhere else, nor any pointer into it."""
    u = kv.u
    body = loop.child_by_field_name("body")
    top = [s for s in (body.named_children if body.type == "compound_statement" else [body])]
    index_of: dict[str, str] = {}
    written_objects: set[str] = set()
    for it in items:
        written, _ = kv.accesses(it.node)
        if written and it.node is not loop:
            return False   # a write before or after the loop
        written_objects |= written
    for n in walk(loop):
        if n.type not in ("assignment_expression", "update_expression"):
            continue
        target = n.child_by_field_name("left") or n.child_by_field_name("argument")
        if target is None or target.type != "subscript_expression":
            if target is not None and target.type != "identifier":
                return False
            continue
        if not any(s.start_byte <= n.start_byte and n.end_byte <= s.end_byte and s.type == "expression_statement"
                   for s in top):
            return False   # a write inside one of the body's loops or conditions
        name, index = _subscript(u, target)
        if name is None or name in kv.pointer_aliases() or not _own_index(kv, index, var):
            return False
        if index_of.setdefault(name, _text(u, index)) != _text(u, index):
            return False
    objects = {kv.memory_object(name) for name in index_of}
    # every write one of those (not a shared scalar, an atomic, a store, memory through other pointers),
    # and each written array a memory object of its own
    if not index_of or len(objects) != len(index_of) or not written_objects <= objects or objects & {"params", "global"}:
        return False
    for it in items:   # no other access of a written object
        for a in memory_accesses(u, it.node):
            n = a.node
            if a.kind == "element":
                if not kv.objects_meet({kv.access_object(n)}, objects):
                    continue
                name, index = _subscript(u, n) if n.type == "subscript_expression" else (None, None)
                if name not in index_of or _text(u, index) != index_of[name]:
                    return False
            elif a.kind == "name" and kv.memory_object(u.text(n)) in objects and not (
                    n.parent is not None and n.parent.type == "subscript_expression"
                    and n.parent.child_by_field_name("argument") == n):
                return False   # the array's address (or a pointer into it) passed on or read another way
        _, read = kv.accesses(it.node)
        if "*" in read:
            return False   # a call that may read through what it is given
    return True


def _subscript(u, node):
    """(array name, index node) of `name[index]`; (None, None) for other shapes."""
    arg = node.child_by_field_name("argument")
    index = node.child_by_field_name("index")
    if index is None:   # tree-sitter-cuda keeps the index in a subscript_argument_list
        lists = [c for c in node.named_children if c.type == "subscript_argument_list"]
        index = lists[0].named_children[0] if lists and len(lists[0].named_children) == 1 else None
    if arg is None or arg.type != "identifier" or index is None:
        return None, None
    return u.text(arg), index


def _own_index(kv, index, var: str) -> bool:
    """`E + var` (terms in any order, `var` once, maybe cast) with E uniform."""
    terms = _terms(kv.u, index)
    if terms is None:
        return False
    own = [t for t in terms if _is_var(kv.u, t, var)]
    return len(own) == 1 and all(t in own or kv.pure(t, set(), thread_ok=False) for t in terms)


def _is_var(u, node, var: str) -> bool:
    while node is not None and node.type in ("parenthesized_expression", "cast_expression"):
        node = node.named_children[-1] if node.named_children else None
    return node is not None and node.type == "identifier" and u.text(node) == var


def _text(u, node) -> str:
    return "".join(u.text(node).split())


# ---------------------------------------------------------------- code
class LaneWriter:
    """The region's text with its threads side by side (see the module)."""

    def __init__(self, kv, p: LanePlan, bind):
        self.kv = kv
        self.u = kv.u
        self.p = p
        self.bind = bind              # name -> the text binding a replicated local to thread cuset_t's slot
        self.arrays: list[str] = []   # per-lane arrays of the region's own locals
        self.names: list[tuple[str, str]] = []   # (name, type) of those, bound in every later lane loop
        self.slots: list[str] = []    # replicated locals the region declares, bound in every later lane loop

    def write(self, entries: list[tuple], prologue: list[str], bound: list[str], one_thread: str,
              fallback: str) -> str:
        """`entries`: (item, its text in the region, whether it declares replicated locals);
        `one_thread`: the region's statements for the thread `cuset_t` (prologue and binds
        included); `fallback`: the region as barrier_regions writes it."""
        k = self.p.index
        c, var_type = self.p.var, self.p.var_type

        def lanes(stmts: list[str]) -> str:
            return self._lanes(prologue, bound, stmts, vectorise=False)

        slots = list(self.slots)   # a replicated declaration binds its own name where it stands
        pre = self._lanes(prologue, bound, [self._statement(*e) for e in entries[:k]], False, slots)
        self.arrays.append(f"{var_type} cuset_c[{LANES}];")
        start = lanes([f"cuset_c[cuset_l] = {self.p.init};"])
        test = lanes([f"{{ const {var_type} {c} = cuset_c[cuset_l]; cuset_in[cuset_l] = ({self.p.cond}); "
                      "cuset_all &= cuset_in[cuset_l]; cuset_any |= cuset_in[cuset_l]; }"])
        declared = (list(self.names), list(self.arrays))
        side_by_side = self._body(_body_statements(self.p.loop), prologue, bound,
                                  f"const {var_type} {c} = ({var_type})(cuset_c[0] + cuset_l);")
        self.names = declared[0]   # the body's locals end with it (their arrays stay declared)
        one_by_one = lanes([f"if (cuset_in[cuset_l]) {{ const {var_type} {c} = cuset_c[cuset_l]; "
                            f"{flat(self.u, self.p.loop.child_by_field_name('body'))} }}"])
        step = lanes([f"{{ {var_type}& {c} = cuset_c[cuset_l]; {self.p.step}; }}"])
        slots = list(self.slots)
        post = self._lanes(prologue, bound, [self._statement(*e) for e in entries[k + 1:]], False, slots)
        rounds = (f"for (;;) {{ bool cuset_in[{LANES}]; bool cuset_all = true, cuset_any = false; {test} "
                  f"if (!cuset_any) break; if (cuset_all) {{ {side_by_side} }} else {{ {one_by_one} }} {step} }}")
        group = (f"for (; cuset_x0 + {LANES} <= cuset_bd.x; cuset_x0 += {LANES}) {{ {' '.join(self.arrays)} "
                 f"{pre} {start} {rounds} {post} }}")
        rest = (f"for (unsigned cuset_t = cuset_x0; cuset_t < cuset_bd.x; ++cuset_t) {{ "
                f"const uint3 threadIdx{{cuset_t, 0, 0}}; (void)threadIdx; {one_thread} }}")
        return (f"if (cuset_bd.y == 1 && cuset_bd.z == 1 && ::cuset::rt::block_loop_lanes) {{ unsigned cuset_x0 = 0; "
                f"{group} {rest} }} else {{ {fallback} }}")

    def _statement(self, it, text: str, replicated: bool) -> str:
        """A statement of a lane: a local the region declares goes to a per-lane array,
        unless it is replicated (a slot per thread already)."""
        if replicated:
            self.slots.extend(it.names)
            return text
        if isinstance(it, (RecomputedDeclaration, ThreadDeclaration)):
            return self._declare(it.node)
        return text

    def _declare(self, decl) -> str:
        parts = []
        for (name, type_text), d in zip(replicated_types(self.u, decl), decl.children_by_field_name("declarator")):
            self.arrays.append(f"std::remove_const_t<{type_text}> cuset_a_{name}[{LANES}];")
            self.names.append((name, type_text))
            if d.type == "init_declarator":
                parts.append(f"cuset_a_{name}[cuset_l] = {flat(self.u, d.child_by_field_name('value'))};")
        return " ".join(parts)

    def _body(self, stmts, prologue, bound, own: str) -> str:
        """The loop body side by side: its uniform loops around loops over the lanes."""
        out: list[str] = []
        pending: list[str] = []

        def flush():
            if pending:
                out.append(self._lanes(prologue, bound, [own, *pending], vectorise=True))
                pending.clear()

        for s in stmts:
            if s.type == "for_statement" and not any(n.type in _JUMPS for n in walk(s)) and self._uniform(s):
                flush()
                update = s.child_by_field_name("update")
                outer = set(self.kv.uniform_now)
                self.kv.uniform_now.add(self.kv.loop_variable(s))
                try:
                    inner = self._body(_body_statements(s), prologue, bound, own)
                finally:
                    self.kv.uniform_now = outer
                out.append(f"for ({flat(self.u, s.child_by_field_name('initializer'))} "
                           f"{flat(self.u, s.child_by_field_name('condition'))}; "
                           f"{flat(self.u, update) if update is not None else ''}) {{ {inner} }}")
            elif s.type == "declaration":
                pending.append(self._declare(s))
            else:
                pending.append(flat(self.u, s))
        flush()
        return " ".join(out)

    def _uniform(self, loop) -> bool:
        try:
            self.kv.uniform_for(loop)
        except NotCollapsible:
            return False
        return True

    def _lanes(self, prologue, bound, stmts, vectorise: bool, slots: list[str] | None = None) -> str:
        """`stmts` for each lane of the group (thread cuset_x0 + cuset_l), with the region's
        recomputed locals, the replicated ones (`slots`: those the region declared before
        these statements) and the per-lane arrays bound under their names."""
        if not any(s.strip() for s in stmts):
            return ""
        binds = " ".join(self.bind(n) for n in [*bound, *(self.slots if slots is None else slots)])
        arrays = " ".join(f"{t}& {n} = cuset_a_{n}[cuset_l]; (void){n};" for n, t in self.names)
        # a constant trip count under ivdep: g++ -O2 vectorises the lanes (see block_loop.LANES)
        pragma = '_Pragma("GCC ivdep") ' if vectorise else ""
        return (f"{pragma}for (unsigned cuset_l = 0; cuset_l < {LANES}; ++cuset_l) {{ "
                "const unsigned cuset_t = cuset_x0 + cuset_l; const uint3 threadIdx{cuset_t, 0, 0}; "
                "(void)cuset_t; (void)threadIdx; " + " ".join(prologue) + f" {binds} {arrays} " + " ".join(stmts) + " }")


def _body_statements(loop) -> list:
    body = loop.child_by_field_name("body")
    return [c for c in body.named_children if c.type != "comment"] if body.type == "compound_statement" else [body]
