"""Source rewriter: CUDA C++ -> C++ that the cuset CPU runtime compiles.

Edits, all of which keep every line where it was (so g++'s diagnostics point
at the user's lines):

- `k<<<g, b, s, st>>>` becomes `::cuset::kernel_call(...)`, a launcher object
  holding the configuration and a generic lambda that calls `k` (templates,
  namespaces and overloads resolve as in CUDA); the `(args)` that follow call
  it. Launches may span lines, hold comments or sit in macros.
- `extern __shared__ T name[];` becomes a pointer to the dynamic shared
  memory window; `__shared__` becomes a static in the shared-memory section.
- `volatile T*` in device code becomes a checked pointer (warp-synchronous
  code detection).
- every non-template `__global__` definition is registered by address, so
  `cudaLaunchKernel((void*)k, ...)` can find its parameter types.
- `#include` of a library the runtime does not provide (CUB, Thrust, cuBLAS, ...)
  becomes a comment: including is not using (features.py finds the uses).
- an `asm` statement with an empty template in device code (`asm volatile("" :
  "+r"(x) :: "memory")`, a compiler barrier) becomes a plain compiler barrier: its
  PTX operand constraints mean nothing to g++.
- the condition of every `for`/`while`/`do ... while` loop in device code gains a
  `::cuset::rt::loop_tick() &&` in front: every few iterations the thread lets the
  next thread of its block run, so a block's threads walk memory side by side as a
  GPU's warps do (a naive kernel whose threads each stride down a column reads
  neighbouring addresses in one pass instead of one column at a time), and a spin
  on a flag that another thread of the block sets makes progress. Loops with a small
  literal trip count (`i < 8`) or under `#pragma unroll` are left alone so they
  still unroll; range-for and declarations in conditions are left alone too.
- with `block_loops=True` (the CPU backend asks for it; other callers such as the
  KernelBench build do not), a kernel that needs no fiber gains a block-loop version
  of its body, on the line of its `{` (block_loop.py; one with barriers split at
  them: barrier_regions.py); `fallback_source` is the same rewrite without them.
- with `order_proofs=True` (the CPU backend, unless skip_independent_orders is off),
  kernels simple enough for the runtime to prove that their thread order cannot
  matter get checked pointers for the parameters they write (order_proof.py);
  `fallback_source` then also leaves them out.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from cuset.execute.cpu.conversions import gpu_conversions
from cuset.execute.cpu.barrier_regions import plan_kernels
from cuset.execute.cpu.block_loop import KernelPlan
from cuset.execute.cpu.order_proof import ProofPlan, plan_proofs
from cuset.execute.cpu.lexer import COMMENT, IDENT, NUMBER, PUNCT, SPACE, Token, significant, tokenize
from cuset.execute.cpu.scopes import Decl, declarations

ARITHMETIC_WORDS = {
    "unsigned", "signed", "int", "short", "long", "char", "float", "double", "bool", "size_t", "ptrdiff_t",
    "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "uint", "__half",
    "half", "__nv_bfloat16",
}


@dataclass(frozen=True)
class Edit:
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Rewritten:
    source: str
    launches: int
    kernels: tuple[str, ...]
    tokens: tuple[Token, ...] = field(repr=False, default=())
    decls: tuple[Decl, ...] = field(repr=False, default=())
    dropped_includes: tuple[str, ...] = ()  # "<cub/cub.cuh> (CUB)", in source order
    kernel_plans: tuple[KernelPlan, ...] = ()  # the path of each kernel (block loop or fibers)
    fallback_source: str = ""  # `source` without block loops and order proofs ("" when no kernel has one)
    proof_plans: tuple[ProofPlan, ...] = ()  # which kernels the runtime checks for order independence


def rewrite(src: str, block_loops: bool = False, order_proofs: bool = False) -> Rewritten:
    # First, so that every later step (and each kernel path) sees the same casts.
    src = gpu_conversions(src)
    tokens = tokenize(src)
    decls = declarations(tokens)
    code = significant(tokens)
    edits: list[Edit] = []
    launches = _launch_edits(src, tokens, code, edits)
    _shared_edits(src, tokens, code, edits)
    _volatile_edits(tokens, code, decls, edits)
    _shared_size_checks(tokens, code, decls, edits)
    kernels = _registration_edits(tokens, decls, edits)
    dropped = _library_include_edits(tokens, edits)
    _empty_asm_edits(src, tokens, decls, edits)
    ticking = _loop_tick_edits(tokens, code, decls, edits)  # last: it steps around the edits above
    plain = _apply(src, edits)
    plans = tuple(plan_kernels(src, ticking=ticking)) if block_loops else ()
    proofs = tuple(plan_proofs(src)) if order_proofs else ()
    # The checked pointers' lines go in before the block-loop variants at the same offset
    # (a stable sort in _apply): the variants use them too.
    checked = [Edit(e.start, e.end, e.text) for p in proofs for e in p.edits]
    loops = [Edit(p.insert_at, p.insert_at, p.text) for p in plans if p.loop]
    if not loops and not checked:
        return Rewritten(plain, launches, tuple(kernels), tuple(tokens), tuple(decls), dropped, plans,
                         proof_plans=proofs)
    return Rewritten(_apply(src, edits + checked + loops), launches, tuple(kernels), tuple(tokens), tuple(decls),
                     dropped, plans, plain, proofs)


def _library_include_edits(tokens: list[Token], edits: list[Edit]) -> tuple[str, ...]:
    from cuset.execute.cpu.features import library_includes

    dropped = []
    for inc in library_includes(tokens):
        edits.append(Edit(inc.start, inc.end, f"/* cuset: #include <{inc.header}> dropped: {inc.feature} "
                                              "is not provided on the CPU */"))
        dropped.append(f"<{inc.header}> ({inc.feature})")
    return tuple(dropped)


_BARRIER = '__asm__ __volatile__("" ::: "memory")'


def _empty_asm_edits(src: str, tokens: list[Token], decls: list[Decl], edits: list[Edit]) -> None:
    from cuset.execute.cpu.features import ASM_WORDS, asm_template

    device = [d for d in decls if d.device]
    for k, t in enumerate(tokens):
        if t.kind != IDENT or t.text not in ASM_WORDS or t.directive:
            continue
        close = _statement_close(tokens, k)
        if close is None or asm_template(tokens, k).strip() or not any(d.contains(k) for d in device):
            continue
        edits.append(Edit(t.start, tokens[close].end, _BARRIER + _newlines(src[t.start:tokens[close].end])))


def _statement_close(tokens: list[Token], k: int) -> int | None:
    """The `)` closing the parenthesis that follows token k (after qualifiers like volatile)."""
    depth = 0
    for j in range(k + 1, len(tokens)):
        text = tokens[j].text
        if text == "(":
            depth += 1
        elif text == ")":
            depth -= 1
            if depth == 0:
                return j
        elif depth == 0 and tokens[j].kind not in (SPACE, COMMENT) and text not in ("volatile", "__volatile__", "goto", "inline"):
            return None
    return None


def _apply(src: str, edits: list[Edit]) -> str:
    out, pos = [], 0
    for e in sorted(edits, key=lambda e: e.start):
        if e.start < pos:  # overlapping edit: the earlier one wins
            continue
        out.append(src[pos:e.start])
        out.append(e.text)
        pos = e.end
    out.append(src[pos:])
    return "".join(out)


def _newlines(text: str) -> str:
    return "\n" * text.count("\n")


def _flat(src: str, tokens: list[Token], a: int, b: int) -> str:
    """Tokens a..b (inclusive) as one line of code, comments dropped."""
    parts = []
    for t in tokens[a:b + 1]:
        if t.kind == COMMENT:
            continue
        parts.append(" " if t.kind == SPACE else t.text)
    return "".join(parts).strip()


# ---------------------------------------------------------------- launches
def _adjacent(tokens: list[Token], k: int, ch: str) -> bool:
    return (k + 2 < len(tokens) and all(tokens[k + d].kind == PUNCT and tokens[k + d].text == ch for d in range(3))
            and tokens[k].end == tokens[k + 1].start and tokens[k + 1].end == tokens[k + 2].start)


def _launch_edits(src: str, tokens: list[Token], code: list[int], edits: list[Edit]) -> int:
    count = 0
    pos_in_code = {k: i for i, k in enumerate(code)}
    k = 0
    while k < len(tokens):
        if not _adjacent(tokens, k, "<"):
            k += 1
            continue
        open_at = k
        close_at = _find_launch_close(tokens, k + 3)
        callee_first = _callee_start(tokens, code, pos_in_code, open_at)
        if close_at is None or callee_first is None:
            k += 3
            continue
        callee_last = _prev_significant(tokens, open_at - 1)
        callee = _flat(src, tokens, callee_first, callee_last)
        name = callee.replace("\\", "\\\\").replace('"', '\\"')
        head_span = src[tokens[callee_first].start:tokens[open_at + 2].end]
        edits.append(Edit(tokens[callee_first].start, tokens[open_at + 2].end,
                          f'::cuset::kernel_call("{name}", __FILE__, __LINE__, '
                          f"[&](auto... cuset_a) {{ {callee}(cuset_a...); }}, ::cuset::rt::LaunchConfig("
                          + _newlines(head_span)))
        edits.append(Edit(tokens[close_at].start, tokens[close_at + 2].end, "))"))
        _null_arguments(tokens, close_at + 3, edits)
        count += 1
        k = close_at + 3
    return count


def _null_arguments(tokens: list[Token], k: int, edits: list[Edit]) -> None:
    """`NULL` among kernel arguments becomes `nullptr`: the arguments are
    stored before the kernel sees them, and a stored `NULL` is a plain long
    that no longer converts to a pointer parameter as it would in CUDA."""
    paren = _next_significant(tokens, k)
    if paren is None or tokens[paren].text != "(":
        return
    depth = 0
    for j in range(paren, len(tokens)):
        t = tokens[j]
        if t.kind == PUNCT and t.text in "([{":
            depth += 1
        elif t.kind == PUNCT and t.text in ")]}":
            depth -= 1
            if depth == 0:
                return
        elif t.kind == IDENT and t.text == "NULL":
            edits.append(Edit(t.start, t.end, "nullptr"))


def _find_launch_close(tokens: list[Token], k: int) -> int | None:
    depth = 0
    while k < len(tokens):
        t = tokens[k]
        if t.kind == PUNCT:
            if t.text in "([{":
                depth += 1
            elif t.text in ")]}":
                depth -= 1
                if depth < 0:
                    return None
            elif t.text == ";" and depth == 0:
                return None
            elif depth == 0 and _adjacent(tokens, k, ">"):
                return k
        k += 1
    return None


def _next_significant(tokens: list[Token], k: int) -> int | None:
    while k < len(tokens) and tokens[k].kind in (SPACE, COMMENT):
        k += 1
    return k if k < len(tokens) else None


def _prev_significant(tokens: list[Token], k: int) -> int | None:
    while k >= 0 and tokens[k].kind in (SPACE, COMMENT):
        k -= 1
    return k if k >= 0 else None


def _callee_start(tokens: list[Token], code: list[int], pos: dict[int, int], open_at: int) -> int | None:
    """First token of the callee expression ending right before `<<<`:
    `k`, `ns::k`, `::k`, `k<T, 4>`, `ns::k<A<int>>`, `obj.k`, `(*fp)`."""
    j = _prev_significant(tokens, open_at - 1)
    if j is None or j not in pos:
        return None
    i = pos[j]

    def tok(x: int) -> Token:
        return tokens[code[x]]

    if tok(i).text == ")":
        m = _match_back(tokens, code, i, "(", ")")
        return None if m is None else code[m]
    start = None
    while i >= 0:
        if tok(i).text == ">":
            m = _match_back(tokens, code, i, "<", ">")
            if m is None or m == 0:
                return None
            i = m - 1
        if tok(i).kind != IDENT:
            return start
        start = code[i]
        if i >= 1 and tok(i - 1).text in ("::", ".", "->"):
            sep = i - 1
            if sep >= 1 and (tok(sep - 1).kind == IDENT or tok(sep - 1).text == ">"):
                i = sep - 1
                continue
            return code[sep] if tok(sep).text == "::" else start
        return start
    return start


def _match_back(tokens: list[Token], code: list[int], i: int, open_: str, close: str) -> int | None:
    """Index in `code` of the `open_` matching the `close` at code[i], skipping
    nested parentheses/brackets (for angle brackets)."""
    depth, nest = 0, 0
    while i >= 0:
        s = tokens[code[i]].text
        if open_ == "<" and s in (")", "]"):
            nest += 1
        elif open_ == "<" and s in ("(", "["):
            nest -= 1
        elif nest == 0 and s == close:
            depth += 1
        elif nest == 0 and s == open_:
            depth -= 1
            if depth == 0:
                return i
        i -= 1
    return None


# ---------------------------------------------------------------- shared memory
def _shared_edits(src: str, tokens: list[Token], code: list[int], edits: list[Edit]) -> None:
    for n, k in enumerate(code):
        t = tokens[k]
        if t.kind != IDENT or t.text != "__shared__":
            continue
        decl_first = _declaration_start(tokens, code, n)
        words = [tokens[code[x]].text for x in range(decl_first, n)]
        nxt = code[n + 1] if n + 1 < len(code) else None
        is_extern = "extern" in words or (nxt is not None and tokens[nxt].text == "extern")
        if is_extern:
            _extern_shared(src, tokens, code, decl_first, n, edits)
        elif _volatile_shared_array(src, tokens, code, decl_first, n, edits):
            pass
        elif "static" in words:
            edits.append(Edit(t.start, t.end, "__cuset_shared_attr__"))
        else:
            edits.append(Edit(t.start, t.end, "static __cuset_shared_attr__"))


def _semicolon_from(tokens: list[Token], code: list[int], at: int) -> int | None:
    """Code index of the first `;` at or after code index `at` (the end of a declaration
    with no braces in it); None where the source ends first."""
    end = at
    while end < len(code) and tokens[code[end]].text != ";":
        end += 1
    return end if end < len(code) else None


def _volatile_array_parts(tokens: list[Token], code: list[int], first: int, at: int):
    """(name, element type, size text, index of `;`) for `volatile __shared__ T name[N];`
    (one 1-D array of an arithmetic type), else None."""
    end = _semicolon_from(tokens, code, at)
    if end is None:
        return None
    texts = [tokens[code[x]].text for x in range(first, end)]
    if "volatile" not in texts or "," in texts or "=" in texts or texts.count("[") != 1:
        return None
    b = texts.index("[")
    if texts[-1] != "]" or b < 1 or not texts[b - 1].isidentifier():
        return None
    base = [w for w in texts[:b - 1] if w not in ("volatile", "__shared__", "static")]
    if not base or not all(w in ARITHMETIC_WORDS for w in base):
        return None
    return texts[b - 1], " ".join(base), " ".join(texts[b + 1:-1]), end


def _volatile_shared_array(src: str, tokens: list[Token], code: list[int], first: int, at: int,
                           edits: list[Edit]) -> bool:
    """`volatile __shared__ float s[64];` -> the array under another name plus
    a checked pointer `s` to it (see _volatile_edits)."""
    parts = _volatile_array_parts(tokens, code, first, at)
    if parts is None:
        return False
    name, t, size, end = parts
    span_start, span_end = tokens[code[first]].start, tokens[code[end]].end
    edits.append(Edit(span_start, span_end,
                      f"static __cuset_shared_attr__ {t} cuset_volatile_{name}[{size}]; "
                      f"const ::cuset::vptr<{t}> {name}(cuset_volatile_{name});"
                      + _newlines(src[span_start:span_end])))
    return True


def _declaration_start(tokens: list[Token], code: list[int], n: int) -> int:
    first = n
    while first > 0 and tokens[code[first - 1]].text not in (";", "{", "}") \
            and tokens[code[first - 1]].directive == tokens[code[n]].directive:
        first -= 1
    return first


def _extern_shared(src: str, tokens: list[Token], code: list[int], first: int, at: int, edits: list[Edit]) -> None:
    """`extern __shared__ T name[] rest;` -> `T (*const name) rest = reinterpret_cast<...>(window);`"""
    end = _semicolon_from(tokens, code, at)
    if end is None:
        return
    body = [code[x] for x in range(first, end)]
    # Drop the storage words and alignment attributes; find `name [ ]`.
    kept: list[int] = []
    skip_until = -1
    for x, k in enumerate(body):
        if x <= skip_until:
            continue
        s = tokens[k].text
        if s in ("extern", "__shared__"):
            continue
        if s in ("__align__", "alignas", "__attribute__", "__builtin_align__") and x + 1 < len(body) \
                and tokens[body[x + 1]].text == "(":
            depth = 0
            for y in range(x + 1, len(body)):
                depth += {"(": 1, ")": -1}.get(tokens[body[y]].text, 0)
                if depth == 0:
                    skip_until = y
                    break
            continue
        kept.append(k)
    texts = [tokens[k].text for k in kept]
    try:
        b = texts.index("[")
    except ValueError:
        return
    if b == 0 or b + 1 >= len(texts) or texts[b + 1] != "]" or tokens[kept[b - 1]].kind != IDENT:
        return
    name = texts[b - 1]
    type_text = " ".join(texts[:b - 1])
    rest = "".join(texts[b + 2:])
    base = [w for w in texts[:b - 1] if w != "volatile"]
    if "volatile" in texts[:b - 1] and not rest and base and all(w in ARITHMETIC_WORDS for w in base):
        # A volatile window is accessed through a checked pointer (see _volatile_edits).
        decl = (f"const ::cuset::vptr<{' '.join(base)}> {name} = "
                f"reinterpret_cast<volatile {' '.join(base)}*>(::cuset::rt::dynamic_smem);")
    elif rest:
        decl = f"{type_text} (* const {name}){rest} = reinterpret_cast<{type_text} (*){rest}>(::cuset::rt::dynamic_smem);"
    else:
        decl = f"{type_text}* const {name} = reinterpret_cast<{type_text}*>(::cuset::rt::dynamic_smem);"
    span_start = tokens[code[first]].start
    span_end = tokens[code[end]].end
    edits.append(Edit(span_start, span_end, decl + _newlines(src[span_start:span_end])))


# Static shared memory per block is limited to 48 KiB; nvcc refuses kernels
# that declare more (ptxas: "uses too much shared data").
STATIC_SMEM_LIMIT = 48 * 1024


def _shared_size_checks(tokens: list[Token], code: list[int], decls: list[Decl], edits: list[Edit]) -> None:
    for d in decls:
        if not d.kernel or d.body is None:
            continue
        top_level: list[tuple[list[str], int]] = []   # (names, index of `;`) at the body's top level
        depth = 0
        n = code.index(d.body)
        while n < len(code) and code[n] <= d.last:
            t = tokens[code[n]]
            if t.kind == PUNCT and t.text in "{}":
                depth += 1 if t.text == "{" else -1
            elif t.kind == IDENT and t.text == "__shared__" and not t.directive:
                names, end = _declared_names(tokens, code, n)
                first = _declaration_start(tokens, code, n)
                words = {tokens[code[x]].text for x in range(first, n)}
                parts = _volatile_array_parts(tokens, code, first, n)
                if parts:  # renamed by _volatile_shared_array
                    names = [f"cuset_volatile_{parts[0]}"]
                if names and end is not None and "extern" not in words:
                    if depth == 1:
                        top_level.append((names, end))
                    else:
                        edits.append(_size_assert(tokens, code[end], names, d.name))
                n = end if end is not None else n
            n += 1
        if top_level:
            names = [name for group, _ in top_level for name in group]
            edits.append(_size_assert(tokens, code[top_level[-1][1]], names, d.name))


def _declared_names(tokens: list[Token], code: list[int], at: int) -> tuple[list[str], int | None]:
    """Names declared by the declaration whose `__shared__` is code[at], and
    the index of its `;`."""
    names, depth, last_ident = [], 0, None
    n = at + 1
    while n < len(code):
        t = tokens[code[n]]
        if t.kind == PUNCT and t.text in "([{":
            if depth == 0 and t.text == "[" and last_ident:
                names.append(last_ident)
                last_ident = None
            depth += 1
        elif t.kind == PUNCT and t.text in ")]}":
            depth -= 1
        elif depth == 0 and t.kind == PUNCT and t.text in ",;=":
            if last_ident:
                names.append(last_ident)
            last_ident = None
            if t.text == ";":
                return list(dict.fromkeys(names)), n
        elif depth == 0 and t.kind == IDENT and t.text not in ("extern", "__shared__", "static", "volatile",
                                                              "const", "__align__", "alignas"):
            last_ident = t.text
        n += 1
    return [], None


def _size_assert(tokens: list[Token], semicolon: int, names: list[str], kernel: str | None) -> Edit:
    total = " + ".join(f"sizeof({name})" for name in names)
    end = tokens[semicolon].end
    return Edit(end, end, f' static_assert({total} <= {STATIC_SMEM_LIMIT}, "kernel {kernel} uses too much static '
                          f'shared memory: more than 48 KiB per block (nvcc refuses it)");')


# ---------------------------------------------------------------- volatile
def _volatile_edits(tokens: list[Token], code: list[int], decls: list[Decl], edits: list[Edit]) -> None:
    device = [d for d in decls if d.device]
    if not device:
        return
    for n, k in enumerate(code):
        t = tokens[k]
        if t.kind != IDENT or t.text != "volatile" or not any(d.contains(k) for d in device):
            continue
        if n > 0 and tokens[code[n - 1]].text == "const":
            continue
        m = n + 1
        words = []
        while m < len(code) and tokens[code[m]].kind == IDENT and tokens[code[m]].text in ARITHMETIC_WORDS:
            words.append(tokens[code[m]].text)
            m += 1
        if not words or m >= len(code) or tokens[code[m]].text != "*":
            continue
        # `volatile float * const p` or `* volatile` keep the raw form.
        after = code[m + 1] if m + 1 < len(code) else None
        if after is not None and tokens[after].text in ("const", "volatile", "*"):
            continue
        star = tokens[code[m]]
        gap = " " if after is not None and tokens[after].start == star.end and tokens[after].kind == IDENT else ""
        edits.append(Edit(t.start, star.end, f"::cuset::vptr<{' '.join(words)}>{gap}"))


# ---------------------------------------------------------------- kernel registry
def _registration_edits(tokens: list[Token], decls: list[Decl], edits: list[Edit]) -> list[str]:
    defined = [d for d in decls if d.kernel and d.body is not None and d.name]
    counts: dict[str, int] = {}
    for d in defined:
        counts[d.name] = counts.get(d.name, 0) + 1
    names = []
    for n, d in enumerate(defined):
        names.append(d.name)
        if d.template or counts[d.name] != 1:
            continue
        close = tokens[d.last]
        edits.append(Edit(close.end, close.end,
                          f" static const bool cuset_registered_{n} = "
                          f'::cuset::rt::register_kernel_fn(&{d.name}, "{d.name}");'))
    return names


# ---------------------------------------------------------------- loop ticks
_TICK = "::cuset::rt::loop_tick()"
SMALL_TRIP_COUNT = 64  # `i < 64` and below: the loop ends before it would yield more than once


def ticking_loops(src: str) -> frozenset[int]:
    """The offsets in `src` of the `for`/`while` keywords whose loops tick on the fibers
    (`rewrite` puts `loop_tick() &&` in their conditions; a `do ... while` is named by
    its `while`): the planners' one source of truth for where the fibers switch."""
    tokens = tokenize(src)
    decls = declarations(tokens)
    code = significant(tokens)
    edits: list[Edit] = []
    _launch_edits(src, tokens, code, edits)
    _shared_edits(src, tokens, code, edits)
    _volatile_edits(tokens, code, decls, edits)
    _shared_size_checks(tokens, code, decls, edits)
    _registration_edits(tokens, decls, edits)
    _library_include_edits(tokens, edits)
    _empty_asm_edits(src, tokens, decls, edits)
    return _loop_tick_edits(tokens, code, decls, edits)


def _loop_tick_edits(tokens: list[Token], code: list[int], decls: list[Decl], edits: list[Edit]) -> frozenset[int]:
    """Adds the loop ticks; returns the offsets of the keywords of the loops that got one."""
    device = [d for d in decls if d.device and d.body is not None]
    if not device:
        return frozenset()
    code = [k for k in code if not tokens[k].directive]
    taken = [(e.start, e.end) for e in edits]
    synced = _synced_functions(tokens, code, device)
    ticking = set()
    for n, k in enumerate(code):
        t = tokens[k]
        if t.kind != IDENT or t.text not in ("for", "while") or n + 1 >= len(code):
            continue
        if tokens[code[n + 1]].text != "(" or not any(d.in_body(k) for d in device) or _under_unroll_pragma(tokens, k):
            continue
        # Threads that meet at barriers or warp operations already advance side by
        # side; ticking their bounded `for` loops (tile loops) only adds switches
        # (+35-45% on a tiled matmul). `while` loops there may still be spins.
        if t.text == "for" and any(d.in_body(k) for d in synced):
            continue
        close = _match_forward(tokens, code, n + 1)
        if close is None:
            continue
        if t.text == "while":
            cond = (n + 1, close)
        else:
            cond = _for_condition(tokens, code, n + 1, close)
            if cond is None:
                continue
        inserts = _tick_inserts(tokens, code, *cond)
        if inserts is None or any(s < at < e for at, _ in inserts for s, e in taken):
            continue
        edits.extend(Edit(at, at, text) for at, text in inserts)
        ticking.add(t.start)
    return frozenset(ticking)


def _synced_functions(tokens: list[Token], code: list[int], device: list[Decl]) -> list[Decl]:
    """The device functions that meet at barriers or warp operations, themselves
    (`_uses_block_sync`) or through a function of the file they call (by name, at any
    depth): a kernel whose `__syncthreads()` sits in a helper meets its threads there
    as one that calls it itself, and the barrier planner runs it so (inline_calls.py)."""
    synced = {id(d) for d in device if _uses_block_sync(tokens, code, d)}
    names = {d.name for d in device if id(d) in synced and d.name}
    words = {id(d): {tokens[k].text for k in code[bisect.bisect_right(code, d.body):bisect.bisect_left(code, d.last)]
                     if tokens[k].kind == IDENT} for d in device}
    changed = True
    while changed:
        changed = False
        for d in device:
            if id(d) in synced:
                continue
            if words[id(d)] & names:
                synced.add(id(d))
                if d.name:
                    names.add(d.name)
                changed = True
    return [d for d in device if id(d) in synced]


# Calls after which every thread of a block (or warp) has caught up with the others.
_SYNC_CALLS = frozenset({
    "__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or", "__syncwarp",
    "__ballot_sync", "__any_sync", "__all_sync", "__match_any_sync", "__match_all_sync",
    "__reduce_add_sync", "__reduce_min_sync", "__reduce_max_sync", "__reduce_and_sync",
    "__reduce_or_sync", "__reduce_xor_sync", "arrive_and_wait",
})


def _uses_block_sync(tokens: list[Token], code: list[int], decl: Decl) -> bool:
    """Does the body of `decl` call a barrier, a warp shuffle/vote, or a cooperative-groups sync?"""
    for n, k in enumerate(code):
        if not decl.in_body(k) or tokens[k].kind != IDENT:
            continue
        text = tokens[k].text
        if text in _SYNC_CALLS or text.startswith("__shfl"):
            return True
        if text == "sync" and n > 0 and tokens[code[n - 1]].text in (".", "::", "->"):
            return True
    return False


def _under_unroll_pragma(tokens: list[Token], k: int) -> bool:
    """`#pragma unroll` right before the loop: its author counts on a compile-time trip count."""
    j = k - 1
    while j >= 0 and not tokens[j].directive and tokens[j].kind in (SPACE, COMMENT):
        j -= 1
    words: list[str] = []
    while j >= 0 and tokens[j].directive and tokens[j].text != "#":
        if tokens[j].kind == IDENT:
            words.insert(0, tokens[j].text)
        j -= 1
    return words[:2] == ["pragma", "unroll"]


def _match_forward(tokens: list[Token], code: list[int], open_n: int) -> int | None:
    """Code index of the `)` closing the `(` at code index open_n."""
    depth = 0
    for m in range(open_n, len(code)):
        text = tokens[code[m]].text
        if text in "([{":
            depth += 1
        elif text in ")]}":
            depth -= 1
            if depth == 0:
                return m if text == ")" else None
    return None


def _for_condition(tokens: list[Token], code: list[int], open_n: int, close_n: int) -> tuple[int, int] | None:
    """(code index of the `;` before the condition, code index of the `;` after it); None for range-for."""
    depth, semis = 0, []
    for m in range(open_n + 1, close_n):
        text = tokens[code[m]].text
        if text in "([{":
            depth += 1
        elif text in ")]}":
            depth -= 1
        elif depth == 0 and text == ";":
            semis.append(m)
    return (semis[0], semis[1]) if len(semis) == 2 else None


def _tick_inserts(tokens: list[Token], code: list[int], before_n: int, after_n: int) -> list[tuple[int, str]] | None:
    """Insertions that make the condition between code indices before_n and after_n tick first."""
    inner = [tokens[code[m]] for m in range(before_n + 1, after_n)]
    start, end = tokens[code[before_n]].end, tokens[code[after_n]].start
    if not inner:  # `for (;;)`
        return [(start, " " + _TICK)]
    if len(inner) >= 2 and inner[0].kind == IDENT and inner[1].kind == IDENT:
        return None  # `while (int x = f())`: a declaration cannot be wrapped
    if (len(inner) == 3 and inner[0].kind == IDENT and inner[1].text in ("<", "<=", "!=")
            and inner[2].kind == NUMBER and _small_literal(inner[2].text)):
        return None
    gap = " " if tokens[code[before_n]].text == ";" else ""
    return [(start, gap + _TICK + " && ("), (end, ")")]


def _small_literal(text: str) -> bool:
    digits = text.rstrip("uUlL").replace("'", "")
    try:
        return int(digits, 0) <= SMALL_TRIP_COUNT
    except ValueError:
        return False
