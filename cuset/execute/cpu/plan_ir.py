"""The planners' declared library: what block_loop.py, barrier_regions.py,
region_lanes.py, inline_calls.py, region_memory.py and order_proof.py share, under
public names.

- the translation unit (`Unit`: kernels, functions, macros, constants of a source),
- the syntax helpers every planner walks the tree with (`walk`, `unwrap`, `flat`,
  `declared_names`, `callee_name`...), the pure-function list and the warp operations,
- `NotCollapsible`, raised wherever a planner leaves a kernel on the fibers,
- the barrier planner's intermediate form (`Barrier`, `HoistedLoop`, declarations,
  `Statement`, the warp items), which its checks, its generator and region_lanes read,
- `memory_accesses`: what a statement reads and writes, the one place every fast path
  and the order proof learn it from (see the README's "Soundness").

A planner imports from here, never another module's private names
(tests/execute/cpu/test_plan_ir.py checks it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cuset.execute.cpu import memory_intrinsics
from cuset.execute.cpu.syntax_tree import declared_identifier, operator_text

# Functions that compute a value from their arguments only (never a load or store
# intrinsic: those are memory accesses, memory_intrinsics.py).
PURE_FUNCTIONS = frozenset("""
sqrt sqrtf rsqrt rsqrtf cbrt cbrtf exp expf exp2 exp2f exp10 exp10f expm1 expm1f log logf log2 log2f log10
log10f log1p log1pf pow powf sin sinf cos cosf tan tanf sinh sinhf cosh coshf tanh tanhf asin asinf acos acosf
atan atanf atan2 atan2f asinh asinhf acosh acoshf atanh atanhf erf erff erfc erfcf erfinv erfinvf lgamma lgammaf
tgamma tgammaf fabs fabsf abs labs llabs fmin fminf fmax fmaxf min max umin umax llmin llmax fma fmaf floor floorf
ceil ceilf round roundf trunc truncf rint rintf lrint lrintf llrint llrintf lround lroundf llround llroundf fmod
fmodf remainder remainderf copysign copysignf hypot hypotf isnan isinf isfinite signbit ldexp ldexpf nearbyint
nearbyintf fdim fdimf normcdff normcdf sincosf
__expf __exp10f __logf __log2f __log10f __powf __sinf __cosf __tanf __fdividef __fdiv_rn __fdiv_rz __fmul_rn
__fmul_rz __fadd_rn __fadd_rz __fsub_rn __fsub_rz __fmaf_rn __fmaf_rz __frcp_rn __fsqrt_rn __frsqrt_rn
__dadd_rn __dmul_rn __dsub_rn __ddiv_rn __fma_rn __drcp_rn __dsqrt_rn __saturatef
__float2int_rn __float2int_rz __float2int_rd __float2int_ru __float2uint_rn __float2uint_rz __int2float_rn
__uint2float_rn __float2ll_rn __float2ll_rz __ll2float_rn __double2float_rn __double2int_rn __int2double_rn
__float_as_int __int_as_float __float_as_uint __uint_as_float __double_as_longlong __longlong_as_double
__popc __popcll __clz __clzll __ffs __ffsll __brev __brevll __mul24 __umul24 __mulhi __umulhi __mul64hi
__umul64hi __sad __usad __hadd __hmul __hsub __hdiv __hfma __hneg __habs __hmax __hmin __hlt __hgt __heq
__float2half __float2half_rn __half2float __float2bfloat16 __bfloat162float
static_cast reinterpret_cast const_cast __cuset_cvt
""".split())

# Words of a value that name no variable (types, sizeof, literals).
TYPE_WORDS = frozenset("int unsigned signed long short char float double bool size_t sizeof const true false".split())
LOOPS = ("for_statement", "while_statement", "do_statement", "for_range_loop")
MAX_REPLICATED = 48   # scratch slots a variant may use for per-thread locals (the runtime has kScratchSlots)


class NotCollapsible(Exception):
    """The kernel keeps the fibers; the message says why (the compile log shows it)."""


def called_name(unit: Unit, call) -> str:
    """`f` of `f(...)` and of `f<T, 4>(...)` (the text of anything else: `ns::f`, `o.f`);
    `callee_name` reads through qualified names too."""
    f = call.child_by_field_name("function")
    if f is not None and f.type == "template_function":
        f = f.child_by_field_name("name")
    return unit.text(f) if f is not None else ""


def callee_name(unit: Unit, call) -> str | None:
    """The function a call names (`f`, `f<T>`, `ns::f`, `ns::f<T>`, a type's constructor);
    None for a call through an expression (`obj.f()`, `(*fp)()`)."""
    f = call.child_by_field_name("function")
    if f is None:
        return None
    if f.type == "template_function":
        f = f.child_by_field_name("name")
    elif f.type == "qualified_identifier":
        while f is not None and f.type == "qualified_identifier":
            f = f.child_by_field_name("name")
        if f is not None and f.type == "template_function":
            f = f.child_by_field_name("name")
    if f is None:
        return None
    if f.type in ("identifier", "primitive_type", "type_identifier"):
        return unit.text(f)
    return None


def meets(unit: Unit, body, seen: set[str]) -> bool:
    """Whether `body`, or a function of the file it calls (and so on), has a barrier or a
    warp operation: a kernel for the barrier planner."""
    if has_barrier(unit, body) or has_shuffle(unit, body):
        return True
    for n in walk(body) if body is not None else ():
        name = called_name(unit, n) if n.type == "call_expression" else ""
        if name in unit.functions and name not in seen:
            seen.add(name)
            if any(meets(unit, f.child_by_field_name("body"), seen) for f in unit.functions[name]):
                return True
    return False


def has_barrier(unit: Unit, body) -> bool:
    return body is not None and any(n.type == "identifier" and unit.text(n) == "__syncthreads" for n in walk(body))


# Warp operations the barrier planner splits regions at (barrier_regions.py), by WarpKind:
# shuffles, votes and __syncwarp.
WARP_OPS = {"__shfl_sync": "shfl_idx", "__shfl_up_sync": "shfl_up", "__shfl_down_sync": "shfl_down",
            "__shfl_xor_sync": "shfl_xor", "__ballot_sync": "ballot", "__any_sync": "any", "__all_sync": "all",
            "__syncwarp": "sync"}


def has_shuffle(unit: Unit, body) -> bool:
    return body is not None and any(n.type == "identifier" and unit.text(n) in WARP_OPS for n in walk(body))


# ---------------------------------------------------------------- the translation unit
class Unit:
    def __init__(self, data: bytes, root, ticking: frozenset[int] = frozenset()):
        self.data = data
        # byte offsets of the keywords of the loops that tick on the fibers (see `ticks`)
        self.ticking = ticking
        self.kernels = []
        self.functions: dict[str, list] = {}   # device/host functions defined here, by name
        self.macros: dict[str, str] = {}       # macro name -> replacement text
        self.function_macros: dict[str, tuple[str, ...]] = {}  # macros defined with parameters: their names
        self.constants: set[str] = set()       # file-scope const/constexpr/__constant__ names
        self.globals: set[str] = set()         # every name a file-scope declaration declares
        self._walk(root)

    def text(self, node) -> str:
        return self.data[node.start_byte:node.end_byte].decode(errors="replace")

    def _walk(self, node) -> None:
        for child in node.children:
            t = child.type
            if t == "function_definition":
                words = {self.text(c) for c in child.children if c.type not in ("compound_statement",)}
                name = self.function_name(child)
                if "__global__" in words and child.child_by_field_name("body") is not None:
                    self.kernels.append(child)
                elif name:
                    self.functions.setdefault(name, []).append(child)
            elif t in ("preproc_def", "preproc_function_def"):
                name = child.child_by_field_name("name")
                value = child.child_by_field_name("value")
                if name is not None:
                    self.macros[self.text(name)] = self.text(value) if value is not None else ""
                    if t == "preproc_function_def":
                        params = child.child_by_field_name("parameters")
                        self.function_macros[self.text(name)] = tuple(
                            self.text(p) for p in (params.named_children if params is not None else ())
                            if p.type == "identifier")
            elif t == "declaration":
                names = declared_names(self, child)
                self.globals.update(names)
                words = {self.text(c) for c in child.children}
                if words & {"const", "constexpr", "__constant__"} or any(
                        c.type == "type_qualifier" and self.text(c) in ("const", "constexpr", "__constant__")
                        for c in child.children):
                    self.constants.update(names)
            if t in ("template_declaration", "namespace_definition", "declaration_list", "linkage_specification",
                     "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif"):
                self._walk(child)

    def ticks(self, loop) -> bool:
        """Whether the fibers' thread switches at `loop`'s condition (`loop_tick()`, which
        the rewriter puts in the loops it names: not in `for` loops of functions that meet
        at barriers, loops with a small literal trip count, under `#pragma unroll`...)."""
        if loop.type == "do_statement":
            keyword = next((c for c in loop.children if c.type == "while"), None)
            return keyword is not None and keyword.start_byte in self.ticking
        return loop.type in LOOPS and loop.start_byte in self.ticking

    def function_name(self, fn) -> str | None:
        d = function_declarator(fn)
        if d is None:
            return None
        n = d.child_by_field_name("declarator")
        if n is None:
            return None
        if n.type == "qualified_identifier":
            n = n.child_by_field_name("name") or n
        return self.text(n)


def function_declarator(fn):
    """The `name(params)` declarator of a function definition, under its pointer or
    reference declarators (None where the definition has none)."""
    d = fn.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    return d


def pointer_parameter(p) -> bool:
    """A parameter declared as a pointer or an array (`float* a`, `float a[]`)."""
    if p.type != "parameter_declaration":
        return False
    decl = p.child_by_field_name("declarator")
    return decl is not None and decl.type in ("pointer_declarator", "array_declarator")


def replicated_types(unit: Unit, decl) -> list[tuple[str, str]]:
    """(name, type) of each local `decl` declares, for per-thread copies of it
    (`float a = x, b[4];` -> a: float, b: float [4]); raises where the type cannot be named."""
    declarators = decl.children_by_field_name("declarator")
    base = unit.data[decl.start_byte:declarators[0].start_byte].decode(errors="replace")
    base = " ".join(w for w in base.split() if w != "register")
    out = []
    for d in declarators:
        n = declared_identifier(d)
        if n is None:
            raise NotCollapsible("a local live across a region that cannot be replicated")
        inner = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
        if d.type == "init_declarator" and inner.type == "array_declarator":
            raise NotCollapsible("an initialised array live across a region")
        if d.type == "init_declarator" and not any(c.type == "=" for c in d.children):
            raise NotCollapsible("a constructor-style declaration live across a region")
        abstract = (unit.data[inner.start_byte:n.start_byte] + b" " +
                    unit.data[n.end_byte:inner.end_byte]).decode(errors="replace")
        out.append((unit.text(n), " ".join(f"{base} {abstract}".split())))
    return out


def walk(node):
    yield node
    for c in node.children:
        yield from walk(c)


def unwrap(node):
    """A compound statement's statements, or the one statement."""
    if node.type == "compound_statement":
        return [c for c in node.named_children if c.type != "comment"]
    return [node]


def is_pragma(unit: Unit, node) -> bool:
    """`#pragma ...` (e.g. `#pragma unroll`) inside a body."""
    if node.type != "preproc_call":
        return False
    directive = node.child_by_field_name("directive")
    return directive is not None and unit.text(directive) == "#pragma"


def declared_names(unit: Unit, stmt) -> list[str]:
    if isinstance(stmt, tuple) or stmt.type != "declaration":
        return []
    out = []
    for d in stmt.children_by_field_name("declarator"):
        n = declared_identifier(d)
        if n is not None:
            out.append(unit.text(n))
    return out


def flat(unit: Unit, node, replace: dict[int, tuple[int, str]] | None = None) -> str:
    """The node's source on one line: comments dropped, `replace` (start byte -> (end byte, text)) applied."""
    out, pos = [], node.start_byte
    cuts = {}
    for n in walk(node):
        if n.type == "comment" or is_pragma(unit, n):  # a pragma needs a line of its own; g++ ignores `unroll`
            cuts[n.start_byte] = (n.end_byte, " ")
    cuts.update(replace or {})
    data = unit.data
    for start in sorted(cuts):
        if start < pos:
            continue
        end, text = cuts[start]
        out.append(data[pos:start].decode(errors="replace"))
        out.append(text)
        pos = end
    out.append(data[pos:node.end_byte].decode(errors="replace"))
    return " ".join("".join(out).split())


@dataclass(frozen=True)
class ForHeader:
    """A hoisted `for (T v = x; cond; step)` as the generators write it again: each
    part on one line, the step `(void)0` where the loop has none."""
    init_node: object    # the declaration `T v = x;`
    declarator: object   # its one init declarator `v = x`
    init: str            # the declaration's text, `;` included
    var: str
    cond: str
    step: str
    body: list           # the body's statements

    @staticmethod
    def of(unit: Unit, node) -> ForHeader:
        """The header of a loop the planners let through (one variable, declared in it)."""
        init = node.child_by_field_name("initializer")
        [declarator] = init.children_by_field_name("declarator")
        update = node.child_by_field_name("update")
        return ForHeader(init, declarator, flat(unit, init), unit.text(declarator.child_by_field_name("declarator")),
                          flat(unit, node.child_by_field_name("condition")),
                          flat(unit, update) if update is not None else "(void)0",
                          unwrap(node.child_by_field_name("body")))


# The head of a loop over the block's threads, in the order of `cuset_bl` (runtime
# core.h), each thread with its index in the block and its own `threadIdx`.
FOR_EACH_THREAD = ("::cuset::rt::for_each_thread(cuset_bl, [&](const unsigned cuset_t, const uint3 threadIdx) "
                    "__attribute__((always_inline)) { (void)cuset_t; (void)threadIdx; ")


# ---------------------------------------------------------------- the intermediate form
# What barrier_regions.py makes of a kernel body, level by level (the body, a hoisted
# loop's body, a warp loop's or if's body), and what its checks, its generator and
# region_lanes.py read. Every item but a barrier holds its statement's syntax node.
@dataclass(frozen=True)
class Shuffle:
    """A warp operation as a whole statement: `target = api(FULL, value, arg[, width])`
    (`decl`: the declaration, when it is one)."""
    kind: str   # the runtime's WarpKind
    api: str
    target: str
    decl: object
    value: object
    arg: object
    width: object
    line: int
    op: str = "="  # the assignment's operator (`+=` ...) where it is not a declaration
    around: object = None     # the value holding the shuffle, when it is not the shuffle itself
    call: object = None       # the shuffle's call (inside `around`)
    exchanged: str | None = None  # the exchanged value's type, when `around` is set


@dataclass(frozen=True)
class Barrier:
    """`__syncthreads();` as a statement of its own."""
    node: None = None


@dataclass(frozen=True)
class HoistedLoop:
    """A block-uniform `for` with barriers in its body: run once for the block."""
    node: object
    items: tuple


@dataclass(frozen=True)
class SharedDeclaration:
    """A `__shared__` (or `extern __shared__`) declaration at the top level: once per block."""
    node: object


@dataclass(frozen=True)
class Declaration:
    """A declaration of locals (`names`); its subclass says how they outlive a region."""
    node: object
    names: tuple[str, ...]


@dataclass(frozen=True)
class UniformDeclaration(Declaration):
    """Computed alike by every thread: declared once for the block."""


@dataclass(frozen=True)
class RecomputedDeclaration(Declaration):
    """A pure value of the thread and block index: recomputed in every later region."""


@dataclass(frozen=True)
class ThreadDeclaration(Declaration):
    """Anything else: kept per thread (scratch arrays) where it outlives its region."""


@dataclass(frozen=True)
class Statement:
    """Any other statement of a region."""
    node: object


@dataclass(frozen=True)
class WarpOperation:
    """A shuffle, vote or `__syncwarp` as a whole statement."""
    node: object
    shuffle: Shuffle


@dataclass(frozen=True)
class WarpLoop:
    """A block-uniform `for` around warp operations."""
    node: object
    items: tuple


@dataclass(frozen=True)
class WarpIf:
    """An `if` (no `else`) around warp operations."""
    node: object
    items: tuple


Item = (Barrier | HoistedLoop | SharedDeclaration | Declaration | Statement | WarpOperation | WarpLoop | WarpIf)
WARP_ITEMS = (WarpOperation, WarpLoop, WarpIf)   # the items a warp's stretch splits at


# ---------------------------------------------------------------- memory accesses
# Atomics the barrier planner runs as plain calls (atomicCAS keeps the fibers: spin locks).
ATOMIC_CALL = re.compile(r"atomic(?!CAS)[A-Z]\w*")


@dataclass(frozen=True)
class Access:
    """A place where a statement may reach memory, and how (`memory_accesses`). Which
    memory object it reaches is the reader's model: region_memory.py traces it to the
    kernel's pointer parameters, barrier_regions.py names shared arrays and restrict
    parameters; both start from these records, so what counts as an access, a write or
    a read is decided once."""
    node: object
    # "element": `a[i]`, `*p`, `p->f` (`address`: the `a`, `p` it goes through);
    # "intrinsic": a load or store intrinsic (memory_intrinsics.py; `address`: its pointer argument);
    # "atomic": an atomic other than atomicCAS, reading and writing its address argument;
    # "call": any other call (a function of the file, a pure function, a fence...);
    # "name": an identifier (a file-scope variable, a `__shared__` scalar or a macro reach memory by name)
    kind: str
    address: object = None
    writes: bool = False   # stores: an assignment's target, `++`/`--`, a store intrinsic, an atomic
    reads: bool = True     # loads: everything but the target of a plain `=` and a store intrinsic


def memory_accesses(unit: Unit, node) -> list[Access]:
    """Every place `node` may reach memory, in tree order. A target (assigned, or stepped
    by `++`/`--`) is found through parentheses and `.field` (`(s[i]).x = v` writes `s[i]`);
    a compound assignment and a step read it too. A target that is neither an access nor a
    name (`(c ? a[i] : b[j]) = v`, `(x, a[i]) = v`) writes and reads every access and
    name inside it: which one it stores to is not known before it runs."""
    stored: set[tuple[int, int]] = set()
    updated: set[tuple[int, int]] = set()
    unclear: list[tuple[int, int]] = []   # targets that choose what they write
    for n in walk(node):
        if n.type == "assignment_expression":
            target, compound = _target(unit, n.child_by_field_name("left")), operator_text(unit, n) != "="
        elif n.type == "update_expression":
            target, compound = _target(unit, n.child_by_field_name("argument")), True
        else:
            continue
        if target is None:
            continue
        span = (target.start_byte, target.end_byte)
        if _is_element(unit, target) or target.type == "identifier":
            stored.add(span)
            if compound:
                updated.add(span)
        else:
            unclear.append(span)
    out = []
    for n in walk(node):
        span = (n.start_byte, n.end_byte)
        writes = span in stored
        reads = not writes or span in updated
        if not writes and any(start <= n.start_byte and n.end_byte <= end for start, end in unclear):
            writes = reads = True
        if _is_element(unit, n):
            out.append(Access(n, "element", n.child_by_field_name("argument"), writes, reads))
        elif n.type == "call_expression":
            name = callee_name(unit, n) or ""
            args = n.child_by_field_name("arguments").named_children
            address = args[0] if args else None
            if memory_intrinsics.accesses_pointer(name):
                store = memory_intrinsics.writes_pointer(name)
                out.append(Access(n, "intrinsic", address, store, not store))
            elif ATOMIC_CALL.fullmatch(name):
                out.append(Access(n, "atomic", address, True, True))
            else:
                out.append(Access(n, "call"))
        elif n.type == "identifier":
            out.append(Access(n, "name", None, writes, reads))
    return out


def assigned_names(unit: Unit, target) -> list:
    """The variables (identifier nodes) an assignment or step with this target changes:
    the one it names through parentheses and `.field`; every name inside a target that
    chooses (`(c ? p : q) = r`); none where it writes memory (`p[i]`, `*p`, `p->f`)."""
    target = _target(unit, target)
    if target is None or _is_element(unit, target):
        return []
    if target.type == "identifier":
        return [target]
    return [n for n in walk(target) if n.type == "identifier"]


def _is_element(unit: Unit, n) -> bool:
    """`a[i]`, `*p`, `p->f`: an access of memory by its syntax."""
    return n.type == "subscript_expression" or (n.type == "pointer_expression" and operator_text(unit, n) == "*") \
        or (n.type == "field_expression" and operator_text(unit, n) == "->")


def _target(unit: Unit, target):
    """What an assignment or step writes, through parentheses and `.field` (None where
    the tree has nothing there)."""
    while target is not None:
        if target.type == "parenthesized_expression":
            target = target.named_children[0] if target.named_children else None
        elif target.type == "field_expression" and operator_text(unit, target) != "->":
            target = target.child_by_field_name("argument")
        else:
            break
    return target
