"""Block loops: a kernel's threads as plain loops, with no fiber switch.

Under the fiber path a block's threads run one after another as calls, each
reading `threadIdx` from a thread-local, and every loop in device code ticks
(switches to the next thread every 32 iterations, about 12 ns each) so that
threads walk memory side by side. g++ sees neither the thread index nor the
loops over threads.

For a kernel that needs no fiber (no barrier, warp operation, atomic, shared
or volatile memory, spin, ...: `check_region`), this module writes a second
version of the kernel body, entered when the runtime offers it at the start
of a block (`::cuset::rt::take_block_loop`, runtime core.h):

- the block's threads are a loop (`::cuset::rt::for_each_thread`: x innermost,
  or the random order's permutation) and `threadIdx`, `blockIdx`, `blockDim`,
  `gridDim` are locals, so g++ knows them and what they do not alias (it still
  does not vectorise across threads: the guards are control flow);
- a `for` loop at the top level of the body (after flattening a trailing
  `if (in range) { ... }` into a guard) whose header every thread computes
  alike (`_uniform_loop`) is hoisted out of the thread loop, as the CPU-CUDA
  compilers do (MCUDA, COX): the kernel becomes regions, each a loop over the
  threads, and the hoisted loop runs in chunks, each chunk such a region (every
  thread runs the chunk with its own copy of the loop variable), cut exactly where
  the fibers' loop ticks switch threads (`_hoisted_region`). Locals
  declared before a hoisted loop are either recomputed in every region (pure
  values of the thread and block index, and guards on them: "remat") or kept
  per thread in runtime scratch arrays ("replicated"). So a naive column sum
  walks 32 rows of the block's columns at a time with no switch between threads.
  A top-level `for` whose header depends on the thread (grid-stride, bounds read
  from memory: `_private_loop`) runs likewise, its variable kept per thread.

A hoisted loop that writes no memory (`writes_no_memory`: it assigns only the
kernel's locals, calls only what writes no memory) runs with the threads innermost
instead (`_threads_innermost_region`): no thread can see another's work in it, so
any interleaving gives the same values, and groups of 8 threads under `GCC ivdep`
each run 8 iterations unrolled, which g++ -O2 vectorises across the threads.

Regions run one after another for the whole block, a barrier the kernel does not
have: a kernel is split only where no region writes memory that another accesses
(region_memory.py), else a race between them would be hidden in every order.

Kernels with any other loop (a `while`, a loop under a thread-dependent
condition, one with a `break` out of it) stay on the fiber path: run one whole
thread after another, a column walk thrashes the cache where the ticking fibers
walk side by side.

Kernels with `__syncthreads()` in their body are planned by barrier_regions.py
instead (split at their own barriers): its `plan_kernels` is this one's with its
planner for them, and what the rewriter uses.

The variant is inserted on the line of the body's `{` (one line, comments
dropped), so every line of the user's code keeps its number.

Exactness. For a kernel whose threads do not communicate (a race-free one),
both versions compute the same values in the same IEEE operations, except that
g++ may contract a*b+c into fused multiply-adds differently in the two
(-ffp-contract=fast, as nvcc): outputs are bit-identical or an ulp apart where
it did. So every thread order runs the same version of a kernel: `forward` in
index order (x innermost), `random` and `parallel` with the threads of every
region in the random start order of the block, which for a hoisted loop means
every chunk (where the fibers switch, in the same order); a loop writing nothing
another thread sees runs alike in every order (its order cannot matter) and counts
the checks the fibers' ticks count. Races that depend on the order of the threads
within a region, or on blocks running concurrently, stay visible, in the same
interleaving as on the fibers: a kernel whose switches cannot be reproduced (a
ticking loop nested in a hoisted loop that writes memory, a call of a function with
a loop in a hoisted loop) stays on the fibers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cuset.execute.cpu import macro_effects, memory_intrinsics
from cuset.execute.cpu.plan_ir import (
    FOR_EACH_THREAD, LOOPS, MAX_REPLICATED, PURE_FUNCTIONS, TYPE_WORDS, ForHeader, NotCollapsible, Unit,
    callee_name, declared_names, flat, function_declarator, is_pragma, meets,
    pointer_parameter, replicated_types, unwrap, walk,
)
from cuset.execute.cpu.syntax_tree import declared_identifier, operator_text
from cuset.spans.grammar import FREE_FUNCTIONS, parser

# Words that need a fiber, or whose meaning a second copy of the body would change.
_BLOCKING_WORDS = {
    "__shared__": "shared memory", "volatile": "volatile memory", "static": "a static local",
    "asm": "inline assembly", "__asm__": "inline assembly", "__asm": "inline assembly", "goto": "goto",
    "printf": "printf (output order)", "assert": "assert", "__trap": "__trap", "__brkpt": "__brkpt",
    "clock": "clock()", "clock64": "clock64()", "__nanosleep": "__nanosleep", "malloc": "device malloc",
    "free": "device free", "new": "new", "delete": "delete", "this": "this", "throw": "throw", "try": "try",
    "cooperative_groups": "cooperative groups", "cg": "cooperative groups", "this_thread_block": "cooperative groups",
    "this_grid": "cooperative groups", "thread_block": "cooperative groups", "grid_group": "cooperative groups",
    "thread_local": "thread_local", "__thread": "__thread", "decltype": "decltype", "auto": "auto",
    "dynamic_smem": "shared memory", "extern": "extern",
    # the rewriter's checked volatile pointer (`volatile T*` parameters become `::cuset::vptr<T>`):
    # each access reports to the fiber running it
    "vptr": "volatile memory",
}

_BUILTINS = frozenset({"blockIdx", "blockDim", "gridDim", "warpSize"})
RESTRICT = re.compile(r"\b(__restrict__|__restrict|restrict)\b")
_LOOP_KINDS = ("loop", "ploop")  # a uniform loop (hoisted), a loop of each thread's own (private)
CHUNK = 32  # condition checks of a thread's ticking loops between two switches (the fibers' kLoopTicks)
UNROLL = 8  # iterations of a loop writing no memory each thread runs in turn, unrolled (see writes_no_memory)
LANES = 8   # threads of such a loop g++ sees side by side (a constant trip count: -O2 vectorises it)
_MAX_UNROLLED_BODY = 2000  # characters of a loop body unrolled UNROLL times; longer ones are not unrolled


@dataclass(frozen=True)
class KernelPlan:
    name: str
    line: int                 # 1-based line of the kernel's body
    loop: bool                # runs as a block loop (forward order at least)
    hoisted: int = 0          # top-level loops run as regions of their own (chunked)
    thread_innermost: int = 0  # of those, loops that write no memory: iterations outermost, threads innermost
    reason: str = ""          # why not (fibers), or what was done
    insert_at: int = -1       # byte offset where `text` goes (after the body's `{`)
    text: str = ""
    barriers: int = 0          # barrier_regions.py: `__syncthreads()` statements the regions are split at
    inlined: int = 0           # inline_calls.py: calls of helpers with barriers inlined into the variant
    shuffles: int = 0          # barrier_regions.py: warp shuffles the regions are split at, warp by warp

    def describe(self) -> str:
        if not self.loop:
            return f"{self.name}: fibers ({self.reason})"
        if self.barriers or self.shuffles:
            parts = [f"{self.barriers} barrier(s)"] if self.barriers else []
            parts += [f"{self.shuffles} warp operation(s)"] if self.shuffles else []
            return (f"{self.name}: block loop with barrier regions ({', '.join(parts)}"
                    + (f", {self.hoisted} loop(s) with barriers hoisted" if self.hoisted else "")
                    + (f", {self.inlined} call(s) of helpers with barriers inlined" if self.inlined else "")
                    + (f", {self.thread_innermost} block-stride loop(s) run with the threads side by side"
                       if self.thread_innermost else "") + ")")
        chunked = self.hoisted - self.thread_innermost
        return (f"{self.name}: block loop" + (f", {chunked} loop(s) run in chunks" if chunked else "")
                + (f", {self.thread_innermost} loop(s) writing no memory run with the threads innermost"
                   if self.thread_innermost else ""))


def plan_kernels(src: str, barrier_planner=None, *, ticking: frozenset[int]) -> list[KernelPlan]:
    """A plan per `__global__` definition of `src` (a variant where it qualifies).
    `barrier_planner(unit, fn, name, line)` plans the kernels with `__syncthreads()` or warp shuffles
    this module leaves on the fibers (barrier_regions.plan_kernels passes its own). `ticking`:
    the offsets (in `src`) of the loops that tick on the fibers, as the rewriter found them
    (`rewriter.ticking_loops`; required: a planner that guessed them could cut a loop's chunks
    where the fibers do not switch). The planners never import the rewriter, which imports them."""
    if "__global__" not in src:
        return []
    data = src.encode()
    tree = parser().parse(data)
    unit = Unit(data, tree.root_node, _byte_offsets(src, ticking))
    plans = []
    for fn in unit.kernels:
        name = unit.function_name(fn) or "?"
        body = fn.child_by_field_name("body")
        line = body.start_point[0] + 1
        try:
            plans.append(KernelVariant(unit, fn).plan(name, line))
        except NotCollapsible as e:
            barriers = barrier_planner is not None and meets(unit, body, set())
            if not barriers:
                plans.append(KernelPlan(name, line, False, reason=str(e)))
                continue
            try:
                plans.append(barrier_planner(unit, fn, name, line))
            except NotCollapsible as why:
                plans.append(KernelPlan(name, line, False, reason=str(why)))
    return plans


def _byte_offsets(src: str, offsets: frozenset[int]) -> frozenset[int]:
    """Offsets into `src` (a str) as offsets into its UTF-8 bytes (tree-sitter's)."""
    if src.isascii():
        return frozenset(offsets)
    return frozenset(len(src[:o].encode()) for o in offsets)


def summary(plans: list[KernelPlan]) -> str:
    """One line for the compile step's log: which path each kernel takes."""
    return "cuset-cpu: kernel paths: " + "; ".join(p.describe() for p in plans) if plans else ""


# ---------------------------------------------------------------- one kernel
@dataclass
class _Stmt:
    kind: str          # "remat" | "guard" | "loop" | "other"
    node: object = None
    text: str = ""     # guards: the condition under which the thread stops
    names: tuple = ()  # remat/other declarations: the names declared


class KernelVariant:
    def __init__(self, unit: Unit, fn):
        self.u = unit
        self.fn = fn
        self.body = fn.child_by_field_name("body")
        self.params = self._params()
        self.written = self._written_names()
        self.checked_functions: dict[str, bool] = {}  # name -> has loops
        self.read_only_functions: dict[str, bool] = {}  # name -> writes no memory (see writes_no_memory)

    # -------------------------------------------------- eligibility
    def _parameters(self) -> list:
        """The kernel's parameter list: declarations, comments, `...`."""
        return function_declarator(self.fn).child_by_field_name("parameters").named_children

    def _params(self) -> list[str]:
        names = []
        for p in self._parameters():
            if p.type == "comment":
                continue
            if p.type != "parameter_declaration":
                raise NotCollapsible("variadic or unusual parameter list")
            n = declared_identifier(p.child_by_field_name("declarator"))
            if n is None:
                if self.u.text(p).strip() == "void":
                    continue
                raise NotCollapsible("unnamed or reference parameter")
            names.append(self.u.text(n))
        return names

    def _written_names(self) -> set[str]:
        """Names assigned, incremented, passed to a function defined here (it may take a
        reference) or whose address is taken, anywhere in the body."""
        out = set()
        for n in walk(self.body):
            targets = []
            if n.type == "assignment_expression":
                targets = [n.child_by_field_name("left")]
            elif n.type == "update_expression":
                targets = [n.child_by_field_name("argument")]
            elif n.type == "pointer_expression" and operator_text(self.u, n) == "&":
                targets = [n.child_by_field_name("argument")]
            elif n.type == "call_expression" and self._takes_reference(self._callee_name(n)):
                targets = list(n.child_by_field_name("arguments").named_children)
            for target in targets:
                root = _variable_root(target)
                if root is not None:
                    out.add(self.u.text(root))
        return out

    def _takes_reference(self, name: str | None) -> bool:
        """A function defined here with a reference parameter (it may write an argument)."""
        for fn in self.u.functions.get(name or "", ()):
            if any(n.type == "reference_declarator" for n in walk(fn.child_by_field_name("declarator"))):
                return True
        return False

    def _callee_name(self, call) -> str | None:
        return callee_name(self.u, call)

    def _calls_pure_function(self, call) -> bool:
        """A call computing a value from its arguments only: a function of `PURE_FUNCTIONS`
        or a conversion to a built-in type (`float(x)`)."""
        f = call.child_by_field_name("function")
        return self._callee_name(call) in PURE_FUNCTIONS or (f is not None and f.type == "primitive_type")

    def check_region(self, node, allow_thread_index: bool = True) -> bool:
        """Raises if `node` needs a fiber; returns whether it (with callees) holds a loop."""
        text = self.u.text(node)
        if "\\\n" in text:
            raise NotCollapsible("line continuation in the body")
        loops = False
        for n in walk(node):
            t = n.type
            if t.startswith("preproc") and not is_pragma(self.u, n) and n.parent.type != "preproc_call":
                raise NotCollapsible("preprocessor directive in the body")
            if t in ("lambda_expression", "ERROR", "reference_declarator", "throw_statement", "try_statement",
                     "goto_statement", "labeled_statement", "new_expression", "delete_expression", "gnu_asm_expression"):
                raise NotCollapsible(t.replace("_", " "))
            if t in LOOPS:
                loops = True
            if n.child_count == 0 or t in ("identifier", "type_identifier", "field_identifier"):
                word = self.u.text(n)
                self._check_word(word, allow_thread_index)
                if word in self.u.macros:
                    loops |= self._check_macro(word, set())
            if t == "call_expression":
                loops |= self._check_call(n)
        return loops

    def check_declarator(self, fn) -> None:
        """Raises where a parameter of `fn` needs a fiber (a volatile pointer: `check_region`
        sees the body only, whose uses of the parameter do not say it is volatile)."""
        for n in walk(function_declarator(fn).child_by_field_name("parameters")):
            if n.child_count == 0 or n.type in ("identifier", "type_identifier", "field_identifier"):
                self._check_word(self.u.text(n), True)

    def _check_word(self, word: str, allow_thread_index: bool) -> None:
        if word in _BLOCKING_WORDS:
            raise NotCollapsible(_BLOCKING_WORDS[word])
        m = FREE_FUNCTIONS.fullmatch(word)
        if m and m.lastgroup in ("sync", "warp", "atomic"):
            raise NotCollapsible(word)
        if word == "threadIdx" and not allow_thread_index:
            raise NotCollapsible("a called function reads threadIdx")

    def _check_macro(self, name: str, seen: set[str]) -> bool:
        if name in seen:
            return False
        seen.add(name)
        value = self.u.macros[name]
        effects = macro_effects.effects_of(value, self.u.function_macros.get(name, ()))
        if effects.writes_variable:
            raise NotCollapsible(f"macro {name} writes a variable or takes an address (the analyses would not see it)")
        if effects.through_parameters or any(
                not (c in PURE_FUNCTIONS or c in TYPE_WORDS or c in self.u.macros or c.startswith("make_"))
                for c in effects.parameter_calls):
            raise NotCollapsible(f"macro {name} may reach memory through its arguments")
        loops = False
        for word in re.findall(r"[A-Za-z_]\w*", value):
            self._check_word(word, True)
            if word in ("for", "while", "do"):
                loops = True
            if word in self.u.macros:
                loops |= self._check_macro(word, seen)
        for callee in re.findall(r"([A-Za-z_]\w*)\s*\(", value):
            if callee in self.u.macros or callee in PURE_FUNCTIONS or memory_intrinsics.accesses_pointer(callee) \
                    or callee in ("if", "for", "while", "switch", "sizeof", "return"):
                continue
            if callee in self.u.functions:
                loops |= self._check_function(callee)
            elif not callee.startswith("make_"):
                raise NotCollapsible(f"macro {name} calls {callee}")
        return loops

    def _check_call(self, call) -> bool:
        f = call.child_by_field_name("function")
        if f is not None and f.type == "field_expression":
            raise NotCollapsible("member function call")
        name = self._callee_name(call)
        if name is None:
            raise NotCollapsible("call through an expression")
        if self._calls_pure_function(call) or name.startswith("make_") or name in self.u.macros:
            return False
        if memory_intrinsics.accesses_pointer(name):
            return False  # a load or store: a memory access, which the analyses count (region_memory)
        if name in self.u.functions:
            return self._check_function(name)
        raise NotCollapsible(f"calls {name}")

    def _check_function(self, name: str) -> bool:
        if name in self.checked_functions:
            return self.checked_functions[name]
        self.checked_functions[name] = False  # recursion: assume none until seen
        loops = False
        for fn in self.u.functions[name]:
            body = fn.child_by_field_name("body")
            if body is None:
                raise NotCollapsible(f"calls {name} (not defined here)")
            self.check_declarator(fn)
            loops |= self.check_region(body, allow_thread_index=False)
        self.checked_functions[name] = loops
        return loops

    # -------------------------------------------------- purity and uniformity
    def pure(self, node, remat: set[str], thread_ok: bool) -> bool:
        """An expression of literals, unwritten parameters, built-ins, constants
        (and with thread_ok threadIdx and recomputed locals), through operators and pure functions."""
        for n in walk(node):
            t = n.type
            if t in ("subscript_expression", "assignment_expression", "update_expression", "comma_expression"):
                return False
            if t == "pointer_expression":
                return False
            if t == "field_expression" and operator_text(self.u, n) == "->":
                return False
            if t == "call_expression" and not self._calls_pure_function(n):
                return False
            if t == "identifier":
                if not self._uniform_name(self.u.text(n), remat, thread_ok):
                    return False
        return True

    def _uniform_name(self, name: str, remat: set[str], thread_ok: bool) -> bool:
        if name in _BUILTINS or name in PURE_FUNCTIONS:
            return True
        if name == "threadIdx" or name in remat:
            return thread_ok
        if name in self.params:
            return name not in self.written
        if name in self.u.macros:
            return self._macro_value(name, thread_ok, set())
        return name in self.u.constants or name in self.template_params()

    def _macro_value(self, name: str, thread_ok: bool, seen: set[str]) -> bool:
        """A macro that expands to a value of constants, built-ins (threadIdx only with
        thread_ok) and pure functions: no memory, no locals, no parameters (`#define TID
        threadIdx.x` is no uniform value, `#define LOAD q[i]` none to recompute)."""
        if name in seen:
            return True
        seen.add(name)
        value = re.sub(r"\.\s*[xyz]\b", "", self.u.macros[name])  # the fields of built-ins
        if re.search(r"\[|->|(?<![=!<>])=(?!=)|\+\+|--", value):
            return False
        for word in re.findall(r"[A-Za-z_]\w*", value):
            if word in self.u.macros:
                if not self._macro_value(word, thread_ok, seen):
                    return False
            elif not (word in PURE_FUNCTIONS or word in _BUILTINS or word in TYPE_WORDS
                      or word in self.u.constants or word in self.template_params()
                      or (thread_ok and word == "threadIdx")):
                return False
        return True

    def template_params(self) -> set[str]:
        parent = self.fn.parent
        if parent is None or parent.type != "template_declaration":
            return set()
        plist = parent.child_by_field_name("parameters")
        out = set()
        for p in plist.named_children if plist is not None else ():
            for n in walk(p):
                if n.type in ("identifier", "type_identifier"):
                    out.add(self.u.text(n))
        return out

    def _uniform_loop(self, node) -> bool:
        """A `for` whose header every thread computes alike and whose body leaves
        its variables alone and does not `break` out of it."""
        if node.type != "for_statement":
            return False
        init = node.child_by_field_name("initializer")
        cond = node.child_by_field_name("condition")
        update = node.child_by_field_name("update")
        if init is None or init.type != "declaration" or cond is None:
            return False
        names = set()
        if len(init.children_by_field_name("declarator")) != 1:
            return False
        for d in init.children_by_field_name("declarator"):
            n = declared_identifier(d)
            if n is None or d.type != "init_declarator":
                return False
            value = d.child_by_field_name("value")
            if value is None or not self.pure(value, set(), thread_ok=False):
                return False
            names.add(self.u.text(n))
        loop_vars = names

        def uniform(expr) -> bool:
            for n in walk(expr):
                if n.type == "identifier" and self.u.text(n) in loop_vars:
                    continue
                if n.type in ("update_expression", "assignment_expression"):
                    continue
                if n.type == "identifier" and not self._uniform_name(self.u.text(n), set(), False):
                    return False
                if n.type in ("subscript_expression", "call_expression", "pointer_expression"):
                    return False
            return True

        if not uniform(cond) or (update is not None and not uniform(update)):
            return False
        if update is not None:  # the update may only write the loop's variables
            for n in walk(update):
                if n.type in ("update_expression", "assignment_expression"):
                    target = n.child_by_field_name("argument") or n.child_by_field_name("left")
                    if target is None or target.type != "identifier" or self.u.text(target) not in loop_vars:
                        return False
        body = node.child_by_field_name("body")
        for n in walk(body):
            if n.type in ("assignment_expression", "update_expression"):
                target = n.child_by_field_name("left") or n.child_by_field_name("argument")
                if target is not None and target.type == "identifier" and self.u.text(target) in loop_vars:
                    return False
            if n.type == "pointer_expression" and n.child_by_field_name("argument") is not None \
                    and self.u.text(n.child_by_field_name("argument")) in loop_vars:
                return False
            if n.type == "break_statement" and _enclosing_loop_or_switch(n) == node:
                return False
        return True

    def writes_no_memory(self, loop) -> bool:
        """A hoisted loop whose body only reads memory: it assigns locals of the kernel
        (never memory through a pointer, a subscript or `->`, nor a file-scope variable),
        calls only pure functions, value macros and functions of this file that write
        no memory either, and has no `return`. No thread of the block can see another's
        work inside it, so its outcome is the same for every interleaving of the
        threads, and it may run iteration by iteration with the threads innermost
        (where g++ vectorises them) in every order."""
        body = loop.child_by_field_name("body")
        if any(n.type == "return_statement" for n in walk(body)):
            return False
        return self._assigns_only(body, self._kernel_locals())

    def writes_only_its_own(self, loop) -> bool:
        """A hoisted loop that writes nothing another thread can see: as `writes_no_memory`,
        and it may also write elements of the kernel's local arrays (each thread's own)
        that the kernel only ever subscripts (no pointer to one can reach another thread).
        Any interleaving of the threads gives it the same outcome."""
        body = loop.child_by_field_name("body")
        if any(n.type == "return_statement" for n in walk(body)):
            return False
        return self._assigns_only(body, self._kernel_locals(), self._own_arrays())

    def _own_arrays(self) -> set[str]:
        """The kernel's local arrays (`T a[N];` in its body) whose name appears only as the
        array of a subscript `a[i]`."""
        arrays = set()
        for n in walk(self.body):
            if n.type == "declaration":
                for d in n.children_by_field_name("declarator"):
                    if d.type == "array_declarator":
                        name = declared_identifier(d)
                        if name is not None:
                            arrays.add(self.u.text(name))
        for n in walk(self.body):
            if n.type == "identifier" and self.u.text(n) in arrays:
                parent = n.parent
                declared = parent.type == "array_declarator" and parent.child_by_field_name("declarator") == n
                subscripted = parent.type == "subscript_expression" and parent.child_by_field_name("argument") == n
                if not (declared or subscripted):
                    arrays.discard(self.u.text(n))
        return arrays

    def _assigns_only(self, node, locals_: set[str], arrays: set[str] = frozenset()) -> bool:
        """`node` writes no variable but `locals_`, no memory but elements of `arrays`
        (`a[i]`, `a[i][j]`), through what it calls too."""
        for n in walk(node):
            t = n.type
            targets = []
            if t == "assignment_expression":
                targets = [n.child_by_field_name("left")]
            elif t == "update_expression":
                targets = [n.child_by_field_name("argument")]
            elif t == "pointer_expression" and operator_text(self.u, n) == "&":
                return False  # an address taken may be written through later
            for target in targets:
                base = target
                while base is not None and base.type == "subscript_expression":
                    base = base.child_by_field_name("argument")
                if target.type == "subscript_expression" and base is not None and base.type == "identifier" \
                        and self.u.text(base) in arrays:
                    continue  # an element of the thread's own array
                root = _variable_root(target)
                if root is None or self.u.text(root) not in locals_ or self.u.text(root) in self.u.globals:
                    return False
            if t == "call_expression":
                name = self._callee_name(n)
                if not (self._calls_pure_function(n) or (name or "").startswith("make_")
                        or memory_intrinsics.reads_pointer(name)
                        or (name in self.u.macros and _macro_is_a_value(self.u, name, set()))
                        or (name in self.u.functions and self._function_writes_no_memory(name))):
                    return False
            if t == "identifier" and self.u.text(n) in self.u.macros \
                    and not _macro_is_a_value(self.u, self.u.text(n), set()):
                return False
        return True

    def _function_writes_no_memory(self, name: str) -> bool:
        """Every definition of `name` here takes its parameters by value and writes only
        its own locals and parameters (copies)."""
        if name in self.read_only_functions:
            return self.read_only_functions[name]
        self.read_only_functions[name] = False  # recursion: assume it writes until seen
        ok = not self._takes_reference(name)
        for fn in self.u.functions[name]:
            body = fn.child_by_field_name("body")
            if not ok or body is None:
                ok = False
                break
            own = {self.u.text(i) for d in walk(fn.child_by_field_name("declarator"))
                   if d.type == "parameter_declaration"
                   for i in [declared_identifier(d.child_by_field_name("declarator"))] if i is not None}
            own |= {n for d in walk(body) if d.type == "declaration" for n in declared_names(self.u, d)}
            ok = self._assigns_only(body, own)
        self.read_only_functions[name] = ok
        return ok

    def _kernel_locals(self) -> set[str]:
        out = set()
        for n in walk(self.body):
            if n.type == "declaration":
                out.update(declared_names(self.u, n))
        return out

    # -------------------------------------------------- statements
    def _flattenable(self, stmt, remat: set[str], declared: set[str]) -> list | None:
        """`if (c) { body }` as the last statement, with c a pure guard: its statements,
        to follow an `if (!(c)) return;` (None when it is not that)."""
        if stmt.type != "if_statement" or stmt.child_by_field_name("alternative") is not None:
            return None
        cons = stmt.child_by_field_name("consequence")
        if cons.type != "compound_statement" or not self.pure(stmt.child_by_field_name("condition"), remat, True):
            return None
        inner = unwrap(cons)
        if {n for s in inner for n in declared_names(self.u, s)} & declared:
            return None  # would clash with a name of the top level
        return inner

    def _check_kernel(self) -> None:
        """Raises where the kernel needs the fibers whatever its shape (`check_region`)
        or writes a parameter: the threads of a block loop share the parameters, where
        each CUDA thread has its own copy."""
        self.check_declarator(self.fn)
        self.check_region(self.body)
        changed = sorted(set(self.params) & self.written)
        if changed:
            raise NotCollapsible(f"writes its parameter {changed[0]}")

    def _insert_at(self) -> int:
        """Where the variant goes: after the body's `{`, as a str offset (the rewriter's edits are)."""
        return len(self.u.data[:self.body.children[0].end_byte].decode())

    def plan(self, name: str, line: int) -> KernelPlan:
        self._check_kernel()
        stmts = list(unwrap(self.body))
        declared = set(self.params) | {n for s in stmts for n in declared_names(self.u, s)}
        remat: set[str] = set()
        plan: list[_Stmt] = []
        k = 0
        while k < len(stmts):
            s = stmts[k]
            inner = self._flattenable(s, remat, declared) if k == len(stmts) - 1 else None
            if inner is not None:
                cond = s.child_by_field_name("condition")
                plan.append(_Stmt("guard", cond, f"!({_cond_text(self.u, cond)})"))
                declared |= {n for t in inner for n in declared_names(self.u, t)}
                stmts.extend(inner)
            else:
                plan.append(self._classify(s, remat))
            k += 1
        loops = sum(1 for p in plan if p.kind in _LOOP_KINDS)
        # Every loop a region of its own or inside one: otherwise one whole thread after
        # another walks memory worse than the ticking fibers.
        for p in plan:
            if p.kind not in _LOOP_KINDS and any(n.type in LOOPS for n in walk(p.node)):
                raise NotCollapsible("a loop under thread-dependent control flow, or one it may break out of")
            if p.kind not in _LOOP_KINDS and self._calls_looping_function(p.node):
                raise NotCollapsible("calls a function with a loop outside a top-level loop")
        apart = self._regions_apart(plan) if loops else []
        apart = sorted(set(apart) | set(self._restrict_apart()))
        gen = _Generator(self, plan, loops > 0, apart)
        text = gen.variant()
        return KernelPlan(name, line, True, loops, gen.thread_innermost, "", self._insert_at(), text)

    def _regions_apart(self, plan: list[_Stmt]) -> list[tuple[str, str]]:
        """The pointer parameters that must point into different allocations for the
        regions to run one after another (region_memory.py); raises where no check at
        run time can allow it."""
        from cuset.execute.cpu import region_memory

        memory = region_memory.RegionMemory(self.u, self.body, self.pointer_params())
        regions: list[tuple[set[str], set[str]]] = []
        current: tuple[set[str], set[str]] | None = None
        for p in plan:
            if p.kind in ("remat", "guard"):
                continue  # pure: no memory
            written, accessed = memory.accesses(p.node)
            if p.kind in _LOOP_KINDS:
                regions.append((written, accessed))
                current = None
            elif current is None:
                current = (set(written), set(accessed))
                regions.append(current)
            else:
                current[0].update(written)
                current[1].update(accessed)
        why, pairs = region_memory.conflicts(regions)
        if why:
            raise NotCollapsible(why)
        return pairs

    def _restrict_apart(self) -> list[tuple[str, str]]:
        """The variant runs every thread of a block in one call of the kernel, whose
        `__restrict__` parameters then promise g++ that no thread's access through one
        meets another thread's through another pointer: a broken promise (one buffer
        passed twice) would let g++ move one thread's load past another's store and hide
        a race in every order. So each restrict parameter is checked, when a block starts,
        to point into another allocation than every other pointer parameter where either
        is written (`block_loop_apart`, else the fibers); memory reached otherwise (a
        pointer loaded from memory, a file-scope variable) keeps the kernel on the fibers."""
        from cuset.execute.cpu import region_memory

        restricted = self._parameter_names(lambda p: pointer_parameter(p) and RESTRICT.search(self.u.text(p)))
        if not restricted:
            return []
        memory = region_memory.RegionMemory(self.u, self.body, self.pointer_params())
        written, accessed = memory.accesses(self.body)
        if region_memory.ANY in accessed:
            raise NotCollapsible("memory it cannot trace beside a __restrict__ parameter (g++ would trust "
                                  "the promise across the block's threads)")
        return sorted({tuple(sorted((r, p))) for r in restricted for p in self.pointer_params()
                       if p != r and (r in written or p in written)})

    def pointer_params(self) -> set[str]:
        return self._parameter_names(pointer_parameter)

    def _parameter_names(self, keep) -> set[str]:
        """The names of the kernel's parameter declarations `p` with `keep(p)`."""
        out = set()
        for p in self._parameters():
            if p.type == "parameter_declaration" and keep(p):
                n = declared_identifier(p.child_by_field_name("declarator"))
                if n is not None:
                    out.add(self.u.text(n))
        return out

    def _calls_looping_function(self, node) -> bool:
        for n in walk(node):
            if n.type == "call_expression":
                name = self._callee_name(n)
                if name in self.checked_functions and self.checked_functions[name]:
                    return True
        return False

    def _classify(self, s, remat: set[str]) -> _Stmt:
        if s.type == "declaration":
            names = tuple(declared_names(self.u, s))
            if self._remat_declaration(s, remat):
                remat.update(names)
                return _Stmt("remat", s, names=names)
            return _Stmt("other", s, names=names)
        if s.type == "if_statement" and s.child_by_field_name("alternative") is None:
            cons = unwrap(s.child_by_field_name("consequence"))
            cond = s.child_by_field_name("condition")
            if len(cons) == 1 and cons[0].type == "return_statement" and not cons[0].named_children \
                    and self.pure(cond, remat, thread_ok=True):
                return _Stmt("guard", s, _cond_text(self.u, cond))
        if self._uniform_loop(s):
            return _Stmt("loop", s)
        if self._private_loop(s):
            return _Stmt("ploop", s)
        return _Stmt("other", s)

    def _private_loop(self, node) -> bool:
        """A top-level `for` whose header depends on the thread (a grid-stride loop, bounds
        read from memory), with one variable of its own that the body leaves alone and
        no `break` out of it: each thread runs it in chunks, its variable kept per thread."""
        name = self.loop_variable(node)
        if name is None:
            return False
        body = node.child_by_field_name("body")
        if self.changes_variable(body, name):
            return False
        return not any(n.type == "break_statement" and _enclosing_loop_or_switch(n) == node for n in walk(body))

    def loop_variable(self, node) -> str | None:
        """The one variable `for (T v = x; cond; ...)` declares (and a condition there
        is); None for a loop of another shape."""
        if node.type != "for_statement":
            return None
        init = node.child_by_field_name("initializer")
        if init is None or init.type != "declaration" or node.child_by_field_name("condition") is None:
            return None
        declarators = init.children_by_field_name("declarator")
        if len(declarators) != 1 or declarators[0].type != "init_declarator":
            return None
        var = declarators[0].child_by_field_name("declarator")
        if var is None or var.type != "identifier":
            return None
        return self.u.text(var)

    def changes_variable(self, body, name: str) -> str:
        """How `body` may change the local `name` behind a loop's back, as the reason a
        loop cannot be split by its iterations: "writes its variable" (assigns or
        increments it), "takes its variable's address"; "" where it leaves it alone."""
        for n in walk(body):
            if n.type in ("assignment_expression", "update_expression"):
                target = _variable_root(n.child_by_field_name("left") or n.child_by_field_name("argument"))
                if target is not None and self.u.text(target) == name:
                    return "writes its variable"
            if n.type == "pointer_expression" and operator_text(self.u, n) == "&":
                target = _variable_root(n.child_by_field_name("argument"))
                if target is not None and self.u.text(target) == name:
                    return "takes its variable's address"
        return ""

    def _remat_declaration(self, s, remat: set[str]) -> bool:
        """A declaration each region can compute again: values of the thread (`pure` with threadIdx)."""
        return self._pure_declaration(s, remat, thread_ok=True)

    def _pure_declaration(self, s, remat: set[str], thread_ok: bool, pointers: bool = False) -> bool:
        """Every declarator of `s` a variable (with `pointers`, a pointer too) initialised
        with `= value` of `pure(value, remat, thread_ok)`, and never written."""
        shapes = ("identifier", "pointer_declarator") if pointers else ("identifier",)
        for d in s.children_by_field_name("declarator"):
            if d.type != "init_declarator":
                return False
            n = d.child_by_field_name("declarator")
            value = d.child_by_field_name("value")
            if n is None or n.type not in shapes or value is None or value.type == "initializer_list":
                return False
            name = declared_identifier(n)
            if (name is not None and self.u.text(name) in self.written) or not self.pure(value, remat, thread_ok):
                return False
        return True


_MACRO_WRITE = re.compile(r"(?<![=!<>])=(?!=)|\+\+|--|\+=|-=|\*=|/=|[A-Za-z_]\w*\s*\(")


def _macro_is_a_value(unit: Unit, name: str, seen: set[str]) -> bool:
    """A macro whose expansion assigns nothing and calls only pure functions and value macros."""
    if name in seen:
        return True
    seen.add(name)
    value = unit.macros[name]
    for m in _MACRO_WRITE.finditer(value):
        word = m.group(0).rstrip("( \t")
        if not word or not (word[0].isalpha() or word[0] == "_"):
            return False  # an assignment or increment
        if word in unit.macros:
            if not _macro_is_a_value(unit, word, seen):
                return False
        elif word not in PURE_FUNCTIONS and word not in ("sizeof",) and not word.startswith("make_"):
            return False
    return all(_macro_is_a_value(unit, w, seen) for w in re.findall(r"[A-Za-z_]\w*", value) if w in unit.macros)


def _variable_root(target):
    """The variable an lvalue names (`v`, `v.x`, `(v)`); None for memory (`p[i]`, `*p`)."""
    while target is not None and target.type in ("parenthesized_expression", "field_expression"):
        if any(c.type == "->" for c in target.children):
            return None
        target = target.child_by_field_name("argument") if target.type == "field_expression" \
            else (target.named_children[0] if target.named_children else None)
    return target if target is not None and target.type == "identifier" else None


def _enclosing_loop_or_switch(node):
    p = node.parent
    while p is not None and p.type not in LOOPS + ("switch_statement",):
        p = p.parent
    return p


def _cond_text(unit: Unit, cond) -> str:
    """The expression of a condition clause `( e )`."""
    inner = cond.child_by_field_name("value") or (cond.named_children[0] if cond.named_children else cond)
    return flat(unit, inner)


# ---------------------------------------------------------------- code generation
class VariantWriter:
    """What the block loop's variant and the barrier regions' (barrier_regions.py) write
    alike: the entry the runtime offers, the loop over the block's threads, per-thread
    slots of the locals that outlive a region (`replicated`), and a thread that returns
    (`uses_done`: marked done, skipped in the later regions)."""

    def __init__(self, kv: KernelVariant):
        self.kv = kv
        self.u = kv.u
        self.replicated: list[tuple[str, str]] = []  # (name, type text)
        self.uses_done = False

    @staticmethod
    def _entry(condition: str, block_loop_type: str, setup: str, body: str) -> str:
        """The variant: taken where the runtime offers it (`condition`), the block's
        built-ins as locals g++ can see, `setup` (scratch storage) at block level, then
        `body`; it returns, so the fibers' version after it does not run."""
        return (" if (__builtin_expect(::cuset::rt::block_loop_offered, 0) && "
                f"{condition}) {{ "
                f"{block_loop_type} cuset_bl = ::cuset::rt::block_loop; "
                "const uint3 cuset_b = blockIdx; const dim3 cuset_bd = blockDim, cuset_gd = gridDim; "
                f"{setup}"
                "{ const uint3 blockIdx = cuset_b; const dim3 blockDim = cuset_bd, gridDim = cuset_gd; "
                "(void)blockIdx; (void)blockDim; (void)gridDim; "
                f"{body}}} return; }} ")

    @staticmethod
    def _apart(pairs) -> str:
        """The entry's check that each pair of pointer parameters points into two different
        allocations (`block_loop_apart`: else the block runs on the fibers); "" for none."""
        if not pairs:
            return ""
        pointers = ", ".join(f"(const void*)({a}), (const void*)({b})" for a, b in pairs)
        return f"::cuset::rt::block_loop_apart({{{pointers}}}) && "

    def _scratch(self) -> str:
        """The replicated locals' types and runtime scratch arrays, then the done flags:
        slot k for the k-th local, the next one for the flags."""
        aliases = "".join(f"using cuset_t_{n} = {t}; " for n, t in self.replicated)
        storage = "".join(
            f"std::remove_const_t<cuset_t_{n}>* const cuset_r_{n} = static_cast<std::remove_const_t<cuset_t_{n}>*>("
            f"::cuset::rt::block_loop_scratch({k}, sizeof(cuset_t_{n}) * cuset_bl.n)); "
            for k, (n, _) in enumerate(self.replicated))
        if self.uses_done:
            storage += ("unsigned char* const cuset_done = static_cast<unsigned char*>(::cuset::rt::block_loop_scratch("
                        f"{len(self.replicated)}, cuset_bl.n)); __builtin_memset(cuset_done, 0, cuset_bl.n); ")
        return aliases + storage

    @staticmethod
    def _each_thread(inner: str, skip: str = "", on_return: str = "(void)0;", head: str = FOR_EACH_THREAD) -> str:
        """`inner` run by each thread of the block in the order's turn (after `skip`, a
        statement that may leave a thread out), `on_return` where the thread returned;
        `head` another loop over threads (barrier_regions: a warp's lanes)."""
        return (head + skip + "if (![&]() __attribute__((always_inline)) -> bool { " + inner
                + " return true; }()) " + on_return + " });")

    @staticmethod
    def _bind(name: str) -> str:
        """The replicated local `name`: this thread's slot, under the local's own name."""
        return f"cuset_t_{name}& {name} = cuset_r_{name}[cuset_t]; (void){name};"

    def _replicated_declaration(self, decl) -> str:
        """`T a = x, b;` where it stood: this thread's slots, assigned, and the names bound to them."""
        parts = []
        for d in decl.children_by_field_name("declarator"):
            name = self.u.text(declared_identifier(d))
            if d.type == "init_declarator":
                parts.append(f"cuset_r_{name}[cuset_t] = {self._with_returns(d.child_by_field_name('value'))};")
            parts.append(self._bind(name))
        return " ".join(parts)

    def _with_returns(self, node, replace: dict[int, tuple[int, str]] | None = None) -> str:
        """`return;`: this thread is done (false: skipped in later regions); `replace`: more cuts."""
        replace = dict(replace or {})
        for n in walk(node):
            if n.type == "return_statement":
                if n.named_children:
                    raise NotCollapsible("return with a value in a kernel")
                replace[n.start_byte] = (n.end_byte, "return false;" if self.uses_done else "return true;")
        return flat(self.u, node, replace)


class _Generator(VariantWriter):
    """The variant's text. With hoisted loops the body becomes regions: thread
    regions (a loop over the threads running a run of statements) and loop
    regions (the hoisted loop, each iteration a loop over the threads). Each
    region first recomputes what it needs of earlier regions (remat declarations
    and guards) and binds the replicated locals to this thread's slot."""

    def __init__(self, kv: KernelVariant, plan: list[_Stmt], regions: bool, apart: list[tuple[str, str]] = ()):
        super().__init__(kv)
        self.apart = list(apart)  # pointer parameters checked to be different allocations per block
        self.plan = plan
        self.regions = regions
        last_loop = max((k for k, p in enumerate(plan) if p.kind in _LOOP_KINDS), default=-1)
        # Locals live across a loop region: declared before the last one.
        self.live = [p for p in plan[:last_loop] if p.kind == "other" and p.node.type == "declaration"]
        self.replicated_names: set[str] = set()
        # A thread that returns early skips the later regions (a guard is re-checked instead).
        self.uses_done = regions and any(n.type == "return_statement" for p in plan
                                         if p.kind in ("other",) + _LOOP_KINDS for n in walk(p.node))
        self.private_slots: list[str] = []  # storage of the private loops' per-thread state
        self.thread_innermost = 0  # hoisted loops run with the threads innermost (see writes_no_memory)
        # The fibers' loop ticks (see _hoisted_region): a thread's count of its ticking loops'
        # condition checks is `cuset_tk` (the hoisted loops every thread runs alike) plus its
        # `cuset_tks[t]` (the rest: private loops, loops nested in a loop writing no memory),
        # once `per_thread_ticks` some thread's own part may be nonzero.
        self.tick_slot = ""
        self.per_thread_ticks = False
        self.counted: frozenset[int] = frozenset()  # start bytes of the nested loops the region counts

    def variant(self) -> str:
        for p in self.live:
            self._replicate(p.node)
        body = self._regions()
        slots = len(self.replicated) + (1 if self.uses_done else 0) + len(self.private_slots)
        if slots > MAX_REPLICATED:
            raise NotCollapsible("too many locals live across a hoisted loop")
        # The order is the runtime's: the threads of every region run in it unchanged.
        ticks = "unsigned cuset_tk = 0; (void)cuset_tk; " if self.regions else ""
        return self._entry(f"{self._apart(self.apart)}::cuset::rt::take_block_loop()", "const ::cuset::rt::BlockLoop&",
                           self._scratch() + "".join(self.private_slots) + ticks, body)

    def _replicate(self, decl) -> None:
        for name, type_text in replicated_types(self.u, decl):
            self.replicated.append((name, type_text))
            self.replicated_names.add(name)

    def _regions(self) -> str:
        out, current, prologue, bound = [], [], [], []
        start: tuple[list, list] = ([], [])
        for p in self.plan:
            if p.kind in _LOOP_KINDS:
                if current:
                    out.append(self._thread_region(start, current))
                    current = []
                out.append(self._hoisted_region(p, list(prologue), list(bound)))
                continue
            if not current:
                start = (list(prologue), list(bound))
            current.append(p)
            if p.kind in ("remat", "guard"):
                prologue.append(p)
            elif p.node.type == "declaration":
                bound.extend(n for n in p.names if n in self.replicated_names)
        if current:
            out.append(self._thread_region(start, current))
        return " ".join(out) + " "

    def _prologue(self, prologue: list[_Stmt], bound: list[str]) -> str:
        parts = [f"if ({p.text}) return true;" if p.kind == "guard" else flat(self.u, p.node) for p in prologue]
        parts.extend(self._bind(n) for n in bound)
        return " ".join(parts)

    def _statement_text(self, p: _Stmt) -> str:
        if p.kind == "guard":
            return f"if ({p.text}) return true;"
        if p.kind == "other" and p.node.type == "declaration" and set(p.names) & self.replicated_names:
            return self._replicated_declaration(p.node)
        return self._with_returns(p.node)

    def _per_thread(self, inner: str) -> str:
        if not self.uses_done:
            return self._each_thread(inner)
        return self._each_thread(inner, "if (cuset_done[cuset_t]) return; ", "cuset_done[cuset_t] = 1;")

    def _thread_region(self, start: tuple[list, list], stmts: list[_Stmt]) -> str:
        """Statements each thread runs without a tick: in the block's order where every
        thread has made as many ticks, else round by round (`_in_rounds`)."""
        prologue, bound = start
        text = " ".join(self._statement_text(p) for p in stmts)
        inner = self._prologue(prologue, bound) + " " + text
        if not self.per_thread_ticks:
            return self._per_thread(inner)
        at = (f"{{ const unsigned cuset_at = (cuset_tk + {self._tick_counts()}[cuset_t]) / {CHUNK}u; "
              "if (cuset_at != cuset_r) { if (cuset_at > cuset_r && cuset_at < cuset_next) cuset_next = cuset_at; "
              "return true; } } ")
        return self._in_rounds(self._per_thread(at + inner))

    @staticmethod
    def _in_rounds(per_thread: str) -> str:
        """`per_thread` (a loop over the block's threads in its order) once per round of the
        fibers' ticks, from round 0 to the last one a thread is in: each thread runs what it
        runs in round `cuset_r` and names in `cuset_next` the next round it has work in
        (the fibers' threads run one slice each per round, in the block's order)."""
        return ("for (unsigned cuset_r = 0, cuset_next = 0; cuset_next != ~0u; cuset_r = cuset_next) { "
                f"cuset_next = ~0u; {per_thread} }}")

    def _tick_counts(self) -> str:
        """The per-thread part of the tick counts (zero when the block starts)."""
        if not self.tick_slot:
            slot = len(self.replicated) + (1 if self.uses_done else 0) + len(self.private_slots)
            self.private_slots.append(
                f"unsigned* const cuset_tks = static_cast<unsigned*>(::cuset::rt::block_loop_scratch({slot}, "
                "sizeof(unsigned) * cuset_bl.n)); __builtin_memset(cuset_tks, 0, sizeof(unsigned) * cuset_bl.n); ")
            self.tick_slot = "cuset_tks"
        return self.tick_slot

    def _counting_cuts(self, node) -> dict[int, tuple[int, str]]:
        """The cuts that make each nested loop of `self.counted` under `node` count its
        condition checks in the thread's `cuset_c`, as the fibers' `loop_tick()` does."""
        cuts = {}
        for n in walk(node):
            if n.type not in LOOPS or n.start_byte not in self.counted:
                continue
            cond = n.child_by_field_name("condition")
            if cond is None:
                raise NotCollapsible("a loop without a condition nested in a hoisted loop ticks on the fibers")
            if n.type == "for_statement":
                cuts[cond.start_byte] = (cond.end_byte, f"(++cuset_c, ({flat(self.u, cond)}))")
            else:
                cuts[cond.start_byte] = (cond.end_byte, f"((++cuset_c, ({_cond_text(self.u, cond)})))")
        return cuts

    def _counter(self, thread: str) -> str:
        """Binds `cuset_c` to the per-thread tick count of linear thread `thread` where the
        region counts nested loops."""
        if not self.counted:
            return ""
        return f"unsigned& cuset_c = {self._tick_counts()}[{thread}]; (void)cuset_c; "

    def _hoisted_region(self, p: _Stmt, prologue: list[_Stmt], bound: list[str]) -> str:
        """A hoisted loop's region, its threads interleaved as the fibers' loop ticks
        interleave them. On the fibers a thread lets the next one run at every CHUNK-th
        condition check of its ticking loops (`loop_tick()`, counted across the thread's
        loops, the first switch at its CHUNK-th check; the rewriter names the loops that
        tick: `Unit.ticks`), and the block's threads take turns in its order, one slice
        each. A loop that writes memory runs exactly those slices; one that writes no
        memory may run in any interleaving (no thread sees another's work in it) and only
        counts the checks. A loop that writes memory and holds a ticking loop (a switch in
        the middle of an iteration), or any hoisted loop calling a function with a loop
        (checks that cannot be counted here), keeps the kernel on the fibers."""
        node = p.node
        body = node.child_by_field_name("body")
        if self.kv._calls_looping_function(body):
            raise NotCollapsible("a hoisted loop calls a function with a loop (the fibers' ticks in it are not counted)")
        nested = frozenset(n.start_byte for n in walk(body) if n.type in LOOPS and self.u.ticks(n))
        order_free = self.kv.writes_only_its_own(node)
        if nested and not order_free:
            raise NotCollapsible("a loop nested in a hoisted loop that writes memory ticks on the fibers "
                                  "in the middle of an iteration")
        self.counted = nested
        if p.kind == "loop" and not self.uses_done and self.kv.writes_no_memory(node):
            self.thread_innermost += 1
            text = self._threads_innermost_region(p, prologue, bound)
        elif p.kind == "loop" and (order_free or not self.per_thread_ticks):
            text = self._loop_region(p, prologue, bound)
        else:
            text = self._private_loop_region(p, prologue, bound)
        if nested or (p.kind == "ploop" and self.u.ticks(node)):
            self.per_thread_ticks = True
        self.counted = frozenset()
        return text

    def _loop_region(self, p: _Stmt, prologue: list[_Stmt], bound: list[str]) -> str:
        """The hoisted loop in chunks, each the iterations whose condition checks fall in
        one slice of the fibers (their CHUNK-th check switches: the first chunk of a first
        loop is CHUNK - 1 iterations, and later loops go on from the count the earlier left;
        a loop that does not tick is one chunk): each thread in turn runs a chunk with its
        own copy of the loop variable (its locals in registers, the block's threads walking
        memory side by side as on the fibers), then the shared copy advances past the chunk
        and the count (`cuset_tk`) with it. Every thread has made the same checks (else
        `_private_loop_region`). `continue` keeps its meaning."""
        h = ForHeader.of(self.u, p.node)
        var, cond, step = h.var, h.cond, h.step
        inner = " ".join(self._with_returns(n, self._counting_cuts(n)) for n in h.body)
        ticks = self.u.ticks(p.node)
        length = f"{CHUNK}u - (cuset_tk + 1u) % {CHUNK}u" if ticks else "~0u"
        per_thread = (f"{self._prologue(prologue, bound)} {self._counter('cuset_t')}auto {var} = cuset_from; "
                      f"for (unsigned cuset_k = 0; cuset_k < cuset_len && ({cond}); ++cuset_k, {step}) {{ {inner} }}")
        return (f"{{ {h.init} while ({cond}) {{ const unsigned cuset_len = {length}; const auto cuset_from = {var}; "
                f"{self._per_thread(per_thread)} "
                f"unsigned cuset_k = 0; for (; cuset_k < cuset_len && ({cond}); ++cuset_k, {step}) {{}} "
                + ("cuset_tk += cuset_k; } cuset_tk += 1u; }" if ticks else "} }"))

    def _threads_innermost_region(self, p: _Stmt, prologue: list[_Stmt], bound: list[str]) -> str:
        """A hoisted loop that writes no memory (`writes_no_memory`): its outcome does not
        depend on how the threads interleave, so every order runs it the same way, the
        threads innermost (x) under `GCC ivdep` (different threads touch different
        per-thread copies and read memory nobody writes meanwhile), where g++ vectorises
        them: the shared copy of the loop steps UNROLL iterations ahead, their values
        kept, then each thread runs those iterations (unrolled, so a thread's add chain
        stays in a register and the threads' chains run side by side in SIMD lanes).
        The threads' loops have no guard, so this runs only when the earlier guards let
        every thread of the block through (checked once per region); otherwise the
        chunked region, which computes the same values. A `continue` ends the thread's
        iteration, as in the kernel."""
        h = ForHeader.of(self.u, p.node)
        init, var, cond, step = h.init, h.var, h.cond, h.step
        inner = " ".join(flat(self.u, n, self._counting_cuts(n)) for n in h.body)
        remat = " ".join(flat(self.u, q.node) for q in prologue if q.kind == "remat")
        counter = self._counter("cuset_t0 + cuset_x")
        ticks = self.u.ticks(p.node)

        def thread(x: str, copy: str, iterations: str, unroll: str) -> str:
            binds = " ".join(f"cuset_t_{n}& {n} = {copy.format(n=n)}; (void){n};" for n in bound)
            return (f"const unsigned cuset_x = {x}; const uint3 threadIdx{{cuset_x, cuset_y, cuset_z}}; "
                    f"(void)threadIdx; {remat} {binds} {counter}"
                    f"{unroll}for (unsigned cuset_u = 0; cuset_u < {iterations}; ++cuset_u) {{ "
                    f"auto {var} = cuset_v[cuset_u]; {{ {inner} }} }}")

        # Lanes: threads in groups of LANES, each through pointers indexed by the lane
        # alone (with a wrapping unsigned index the addresses are not affine to g++, and
        # -O2 vectorises only loops whose trip count is a multiple of the vector's).
        group = " ".join(f"cuset_t_{n}* const cuset_l_{n} = cuset_q_{n} + cuset_xs;" for n in bound)
        # Unrolled, a long body would cost compile time out of proportion (g++ honours the pragma).
        pragma = f'_Pragma("GCC unroll {UNROLL}") ' if len(inner) <= _MAX_UNROLLED_BODY else ""
        unrolled = thread("cuset_xs + cuset_lane", "cuset_l_{n}[cuset_lane]", str(UNROLL), pragma)
        lanes = (f"if (cuset_n == {UNROLL}) for (; cuset_xs + {LANES} <= cuset_bd.x; cuset_xs += {LANES}) {{ {group} "
                 f"_Pragma(\"GCC ivdep\") for (unsigned cuset_lane = 0; cuset_lane < {LANES}; ++cuset_lane) {{ "
                 f"{unrolled} }} }} ")
        rest = (f"for (unsigned cuset_x2 = cuset_xs; cuset_x2 < cuset_bd.x; ++cuset_x2) {{ "
                f"{thread('cuset_x2', 'cuset_q_{n}[cuset_x]', 'cuset_n', '')} }}")
        fast = (f"{{ {init} while ({cond}) {{ decltype({var}) cuset_v[{UNROLL}]; unsigned cuset_n = 0; "
                f"for (; cuset_n < {UNROLL} && ({cond}); ++cuset_n, {step}) cuset_v[cuset_n] = {var}; "
                "for (unsigned cuset_z = 0; cuset_z < cuset_bd.z; ++cuset_z) "
                "for (unsigned cuset_y = 0; cuset_y < cuset_bd.y; ++cuset_y) { "
                "const unsigned cuset_t0 = (cuset_z * cuset_bd.y + cuset_y) * cuset_bd.x; unsigned cuset_xs = 0; "
                + " ".join(f"cuset_t_{n}* const cuset_q_{n} = cuset_r_{n} + cuset_t0;" for n in bound)
                + f" {lanes}{rest} }} " + ("cuset_tk += cuset_n; } cuset_tk += 1u; }" if ticks else "} }"))
        chunked = self._loop_region(p, prologue, bound)
        guards = [q for q in prologue if q.kind == "guard"]
        if not guards:
            return f"if (::cuset::rt::block_loop_lanes) {fast} else {chunked}"
        check = " ".join(f"if ({q.text}) return false;" if q.kind == "guard" else flat(self.u, q.node)
                         for q in prologue)
        all_in = ("{ bool cuset_all_in = ::cuset::rt::block_loop_lanes; "
                  f"if (cuset_all_in) {self._each_thread(check, on_return='cuset_all_in = false;')} ")
        return f"{all_in}if (cuset_all_in) {fast} else {chunked} }}"

    def _private_loop_region(self, p: _Stmt, prologue: list[_Stmt], bound: list[str]) -> str:
        """A loop of each thread's own (or any hoisted loop once the threads' tick counts
        differ), as the fibers' ticks run it: round by round (`_in_rounds`), each thread
        starting it (its variable kept per thread) in the round its count is in, then
        running the iterations whose condition checks fall in the round, until every
        thread has left it. A loop that does not tick runs whole in the thread's round."""
        k = len(self.private_slots)
        slot = len(self.replicated) + (1 if self.uses_done else 0) + k
        h = ForHeader.of(self.u, p.node)
        var, cond, step, declarator = h.var, h.cond, h.step, h.declarator
        base = self.u.data[h.init_node.start_byte:declarator.start_byte].decode(errors="replace")
        base = " ".join(w for w in base.split() if w not in ("register", "const"))
        if not base or any(w in base for w in ("auto", "decltype")):
            raise NotCollapsible("a loop variable whose type cannot be named")
        state = f"cuset_pl{k}"
        self.private_slots.append(
            f"struct cuset_pl{k}_t {{ {base} v; unsigned char started, left; }}; cuset_pl{k}_t* const {state} = "
            f"static_cast<cuset_pl{k}_t*>(::cuset::rt::block_loop_scratch({slot}, sizeof(cuset_pl{k}_t) * cuset_bl.n)); ")
        tks = self._tick_counts()
        value = flat(self.u, declarator.child_by_field_name("value"))
        inner = " ".join(self._with_returns(n, self._counting_cuts(n)) for n in h.body)
        me = f"{state}[cuset_t]"
        # the round of the thread's next step: its start, or its next condition check
        at = (f"{{ const unsigned cuset_at = (cuset_tk + cuset_c + ({me}.started ? 1u : 0u)) / {CHUNK}u; "
              "if (cuset_at != cuset_r) { if (cuset_at > cuset_r && cuset_at < cuset_next) cuset_next = cuset_at; "
              "return true; } } ")
        tick = (f"{{ const unsigned cuset_at = (cuset_tk + cuset_c + 1u) / {CHUNK}u; if (cuset_at != cuset_r) {{ "
                f"{me}.v = {var}; if (cuset_at < cuset_next) cuset_next = cuset_at; break; }} }} ++cuset_c; "
                if self.u.ticks(p.node) else "")
        # the count in a register while the thread runs (a thread that returns is done with it)
        run = self._per_thread(
            f"if ({me}.left) return true; unsigned cuset_c = {tks}[cuset_t]; {at}"
            f"{self._prologue(prologue, bound)} {base} {var} = {me}.started ? {me}.v : ({value}); {me}.started = 1; "
            f"for (;; {step}) {{ {tick}if (!({cond})) {{ {me}.left = 1; break; }} {{ {inner} }} }} "
            f"{tks}[cuset_t] = cuset_c;")
        reset = f"for (unsigned cuset_i = 0; cuset_i < cuset_bl.n; ++cuset_i) {state}[cuset_i].started = {state}[cuset_i].left = 0; "
        return f"{{ {reset}{self._in_rounds(run)} }}"
