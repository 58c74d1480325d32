"""Device code's explicit float-to-integer casts, converted as a GPU converts them.

C++ leaves a floating-point value converted to an integer type it does not fit
(or a NaN) undefined, and x86 gives the "integer indefinite" (INT_MIN; a 32-bit
unsigned target takes the low bits of a 64-bit conversion). A GPU's `cvt.rzi`
saturates to 32 or 64 bits (NaN gives 0) and a narrower target keeps the low bits
of that (nvcc converts `(signed char)x` with `cvt.rzi.s32.f32`): a quantiser that
casts before it clamps is right on a GPU and wrong here without this rewrite.

`gpu_conversions(src)` turns every explicit cast to an integer type inside the
body of a `__device__` / `__global__` function -- `(int)x`, `static_cast<int>(x)`,
`int(x)` -- into `__cuset_cvt((int)0, x)` (runtime: device_math.h), which converts
in-range values as C++ does and saturates the rest in kernel code. Lines are kept.
A cast whose operand is an integer by what the file declares (`(size_t)i` with
`int i`, `(long)blockIdx.x`, `(size_t)rowptr[r]` with `const int* rowptr`) is left
as written: it converts no floating-point value, and the kernel planners read a
cast in an index or a loop bound where they could not read a call.
What it does not rewrite (implicit conversions, casts in macros, to types it does
not know, in functions tree-sitter cannot parse) is caught when it matters: user
code is built with -fsanitize=float-cast-overflow, and the runtime reports an
out-of-range conversion in a kernel as `unsupported` (a GPU would saturate; this
backend cannot), never as a silently different value.
"""

from __future__ import annotations

import re

from cuset.spans.grammar import parser

HELPER = "__cuset_cvt"

_INTEGER_WORDS = frozenset("signed unsigned short long int char".split())
# Integer typedefs a C-style cast may name (the cast proves the name is a type).
_INTEGER_TYPEDEFS = frozenset("""
size_t ssize_t ptrdiff_t intptr_t uintptr_t int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t
int_fast8_t int_fast16_t int_fast32_t int_fast64_t uint_fast8_t uint_fast16_t uint_fast32_t uint_fast64_t
int_least8_t int_least16_t int_least32_t int_least64_t uint_least8_t uint_least16_t uint_least32_t uint_least64_t
intmax_t uintmax_t uint ushort ulong longlong ulonglong
""".split())
# In a functional cast `T(x)` a typedef could also be a function's name: only the
# standard ones, which a program cannot define as functions.
_STANDARD_TYPEDEFS = _INTEGER_TYPEDEFS - {"uint", "ushort", "ulong", "longlong", "ulonglong"}


def _integer_type(text: str, typedefs: frozenset[str]) -> bool:
    words = text.split()
    if not words:
        return False
    if all(w in _INTEGER_WORDS for w in words):
        return True
    return len(words) == 1 and words[0].removeprefix("std::") in typedefs


_INTEGER_LITERAL = re.compile(r"(0[xX][0-9a-fA-F']+|0[bB][01']+|[0-9][0-9']*)[uUlLzZ]*")
_BUILTIN_INDEXES = frozenset({"threadIdx", "blockIdx", "blockDim", "gridDim"})
_BOOLEAN_OPERATORS = frozenset({"<", ">", "<=", ">=", "==", "!=", "&&", "||"})
_INTEGER_OPERATORS = frozenset({"+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^"})


def _declared_integers(root, data: bytes) -> tuple[set[str], set[str]]:
    """(names every declaration of which in the file is an integer variable, names every
    declaration of which is a pointer to or array of integers): the file's parameters,
    locals and globals, at any depth. A name declared as anything else anywhere is in
    neither (no scope analysis: a conflict just leaves the cast to the helper)."""
    kinds: dict[str, set[str]] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type not in ("parameter_declaration", "declaration", "field_declaration"):
            continue
        kind_node = node.child_by_field_name("type")
        integral = kind_node is not None and _integer_type(
            data[kind_node.start_byte:kind_node.end_byte].decode(errors="replace"), _INTEGER_TYPEDEFS)
        for d in node.children_by_field_name("declarator"):
            if d.type == "init_declarator":
                d = d.child_by_field_name("declarator")
            kind = "value"
            if d is not None and d.type == "reference_declarator":
                d = d.named_children[0] if d.named_children else None
            elif d is not None and d.type in ("pointer_declarator", "array_declarator"):
                kind = "elements"
                d = d.child_by_field_name("declarator")
            if d is None or d.type != "identifier":
                continue   # a pointer to pointers, a function pointer...: nothing recorded
            name = data[d.start_byte:d.end_byte].decode(errors="replace")
            kinds.setdefault(name, set()).add(kind if integral else "other")
    return ({n for n, k in kinds.items() if k == {"value"}}, {n for n, k in kinds.items() if k == {"elements"}})


def _integer_valued(node, data: bytes, integers: set[str], arrays: set[str]) -> bool:
    """Whether `node` is an integer (or bool) by the file's declarations and C++'s rules;
    False where it cannot tell (a call, a macro, a member, a float anywhere)."""
    t = node.type
    text = lambda n: data[n.start_byte:n.end_byte].decode(errors="replace")  # noqa: E731
    if t == "number_literal":
        return _INTEGER_LITERAL.fullmatch(text(node)) is not None
    if t in ("char_literal", "true", "false", "sizeof_expression", "alignof_expression"):
        return True
    if t == "identifier":
        return text(node) in integers or text(node) == "warpSize"
    if t == "field_expression":
        base = node.child_by_field_name("argument")
        return base is not None and base.type == "identifier" and text(base) in _BUILTIN_INDEXES \
            and text(node.child_by_field_name("operator") or node) == "."
    if t == "subscript_expression":
        base = node.child_by_field_name("argument")
        return base is not None and base.type == "identifier" and text(base) in arrays
    if t in ("parenthesized_expression", "update_expression"):
        inner = node.named_children
        return len(inner) == 1 and _integer_valued(inner[0], data, integers, arrays)
    if t == "unary_expression":
        op, arg = node.child_by_field_name("operator"), node.child_by_field_name("argument")
        return op is not None and arg is not None and (
            text(op) == "!" or (text(op) in ("-", "+", "~") and _integer_valued(arg, data, integers, arrays)))
    if t == "binary_expression":
        op = text(node.child_by_field_name("operator") or node)
        if op in _BOOLEAN_OPERATORS:
            return True
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        return op in _INTEGER_OPERATORS and left is not None and right is not None and \
            _integer_valued(left, data, integers, arrays) and _integer_valued(right, data, integers, arrays)
    if t == "conditional_expression":
        a, b = node.child_by_field_name("consequence"), node.child_by_field_name("alternative")
        return a is not None and b is not None and _integer_valued(a, data, integers, arrays) and \
            _integer_valued(b, data, integers, arrays)
    if t == "cast_expression":
        kind = node.child_by_field_name("type")
        return kind is not None and _integer_type(text(kind), _INTEGER_TYPEDEFS)
    return False


def _device_functions(root, data: bytes):
    """Every function definition (at any depth: members, namespaces, templates) whose
    specifiers say `__device__` or `__global__`, parsed without errors."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "function_definition":
            words = {data[c.start_byte:c.end_byte] for c in node.children if c.type != "compound_statement"}
            if words & {b"__device__", b"__global__"} and not node.has_error:
                yield node
                continue
        stack.extend(node.children)


def _casts(body, data: bytes, integers: set[str], arrays: set[str]):
    """(start, end, type text, closing offset or None) per explicit integer cast in `body`
    whose operand may be a floating-point value: the text [start, end) becomes
    `__cuset_cvt((T)0, ` and, for a C-style cast, `)` goes in at the closing offset (the
    end of its operand)."""
    stack = [body]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type == "cast_expression":
            kind, value = node.child_by_field_name("type"), node.child_by_field_name("value")
            if kind is not None and value is not None:
                text = data[kind.start_byte:kind.end_byte].decode(errors="replace")
                if _integer_type(text, _INTEGER_TYPEDEFS) and not _integer_valued(value, data, integers, arrays):
                    yield node.start_byte, value.start_byte, text, value.end_byte
        elif node.type == "call_expression":
            function, args = node.child_by_field_name("function"), node.child_by_field_name("arguments")
            if function is None or args is None or len(args.named_children) != 1 \
                    or args.named_children[0].type == "comment":
                continue
            text = None
            if function.type == "template_function":
                name, targs = function.child_by_field_name("name"), function.child_by_field_name("arguments")
                if name is not None and targs is not None and len(targs.named_children) == 1 and \
                        data[name.start_byte:name.end_byte] == b"static_cast":
                    text = data[targs.named_children[0].start_byte:targs.named_children[0].end_byte].decode(
                        errors="replace")
            elif function.type in ("primitive_type", "sized_type_specifier", "identifier", "type_identifier",
                                   "qualified_identifier"):
                text = data[function.start_byte:function.end_byte].decode(errors="replace")
            if text is not None and _integer_type(text, _STANDARD_TYPEDEFS) and \
                    not _integer_valued(args.named_children[0], data, integers, arrays):
                yield function.start_byte, args.start_byte + 1, text, None


def gpu_conversions(src: str) -> str:
    """`src` with device code's explicit integer casts going through `__cuset_cvt`
    (the module docstring); `src` itself when it has none."""
    if "__device__" not in src and "__global__" not in src:
        return src
    data = src.encode()
    tree = parser().parse(data)
    integers, arrays = _declared_integers(tree.root_node, data)
    edits: dict[int, tuple[int, bytes]] = {}      # start -> (end, replacement)
    closes: list[int] = []
    for fn in _device_functions(tree.root_node, data):
        body = fn.child_by_field_name("body")
        if body is None:
            continue
        for start, end, text, close in _casts(body, data, integers, arrays):
            if start in edits:
                continue
            # Whatever stood between `(int)` and its operand (a comment) keeps its newlines.
            gap = b"\n" * data[start:end].count(b"\n")
            edits[start] = (end, f"{HELPER}(({text})0, ".encode() + gap)
            if close is not None:
                closes.append(close)
    if not edits:
        return src
    inserts = [(start, end, text) for start, (end, text) in edits.items()] + [(c, c, b")") for c in closes]
    # Zero-width closes at an offset where a cast also starts go first: `(int)a(int)b` cannot
    # occur, but a close and a later cast's start can meet (`f((int)x,(int)y)` has a comma between).
    inserts.sort(key=lambda e: (e[0], e[1] != e[0]))
    out, at = [], 0
    for start, end, text in inserts:
        out.append(data[at:start])
        out.append(text)
        at = end
    out.append(data[at:])
    return b"".join(out).decode()
