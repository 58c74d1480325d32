"""`detect`: CUDA-sensitive character spans of a response, from the tree-sitter CUDA parse.

What each kind covers (character ranges of the decoded text, end exclusive):

kernel_body
    The whole definition of every function declared ``__global__`` or ``__device__``
    (``__host__ __device__`` included): template header(s), ``extern "C"`` when it applies
    to that function alone, qualifiers, signature and body, from the first character of
    the first of those to the closing brace. Member functions of structs count too; so do
    ``__device__`` lambdas (the lambda expression). Declarations of variables at namespace
    scope (outside any function or class) carrying ``__shared__``, ``__constant__``,
    ``__device__`` or ``__managed__``: the whole declaration with its ``;``.
    Prototypes (``__global__ void k(float*);``) are not definitions and do not count.
launch_config
    * every execution configuration ``<<<...>>>``, chevrons included;
    * every call (whole call expression) of ``cudaLaunchKernel``, ``cudaLaunchKernelEx(C)``,
      ``cudaLaunchCooperativeKernel(MultiDevice)``, ``cuLaunchKernel(Ex)``,
      ``cuLaunchCooperativeKernel`` and ``cudaFuncSetAttribute``;
    * the backward slice of those, inside the function that contains them: every
      declaration or assignment statement (whole statement, ``;`` included; the bare
      expression when it is not a statement of its own, e.g. in a ``for`` header) that gives
      a value to a variable named in a configuration (grid, block, shared-memory size,
      stream; for the launch APIs the configuration arguments, not the kernel or its
      argument array), then to the variables those statements read, transitively.
      "Gives a value" means: a declaration (``dim3 grid(b);``, ``int blocks = ...;``),
      an assignment to the variable, one of its fields or elements (``grid.x = ...``,
      ``config.gridDim = ...``), ``++``/``--``, or a call receiving its address
      (``cudaOccupancyMaxPotentialBlockSize(&minGrid, &block, k)``,
      ``cudaGetDeviceProperties(&prop, 0)``). Variables are matched by name within the
      function (no shadowing analysis); parameters and globals are not followed.
thread_index
    ``threadIdx``, ``blockIdx``, ``blockDim``, ``gridDim``, ``warpSize`` (with the ``.x``
    member) and cooperative-groups rank calls (``block.thread_rank()``,
    ``group_index()``, ...), each grown to the largest enclosing arithmetic expression
    (``+ - * / % << >> & | ^``, unary ``- + ~``, casts, parentheses), e.g. the whole
    ``blockIdx.x * blockDim.x + threadIdx.x``; a comparison or assignment stops it.
memory_space
    Declarations (whole, anywhere) carrying ``__shared__`` (``extern __shared__``
    included) or ``__constant__``; each ``__restrict__`` qualifier (the keyword);
    calls of ``__ldg`` and the other cache-hinted loads/stores (``__ldcg``, ``__stcs``, ...).
sync, atomic, warp, memory_api
    Whole call expressions of the functions listed in `cuset.spans.span.KIND_HELP`
    (``__syncthreads()``, ``atomicAdd(&s, v)``, ``__shfl_down_sync(m, v, o)``,
    ``cudaMemcpy(...)``), including cooperative-groups forms (``block.sync()``,
    ``cg::reduce(tile, v, op)``, ``tile.shfl_down(v, 1)``, ``cg::tiled_partition<32>(b)``).

Modes: ``broad`` (the default) is everything above. ``paper`` follows the paper's wording
literally: only the definitions of ``__global__`` functions (no ``__device__`` helpers, no
namespace-scope variables, no finer kinds outside them) and launch configurations
(``<<<...>>>``, the launch API calls, and the statements that give a value to a variable
named *directly* in a configuration, without following what those statements read).

Where the text is parsed: see `cuset.spans.text.code_segments` (whole text, or the
fenced code blocks of a markdown answer). Macro bodies (``#define``) that mention CUDA
constructs are parsed as code too. Where the grammar gives up (ERROR nodes, e.g. a
truncated response whose last kernel never closes), a fallback scans the text outside
comments and strings: an uncovered ``__global__``/``__device__`` followed by ``{`` before
any ``;`` gives a kernel_body up to the matching ``}`` (or the end of the code), and an
uncovered ``<<<`` ... ``>>>`` followed by an argument list ``(`` (or the end of the text)
gives a launch_config; chevrons in prose ("launch k<<<g, b>>> with ...") are not marked.
"""

from __future__ import annotations

import logging

from cuset.spans import grammar
from cuset.spans.fallback import recover
from cuset.spans.span import Span, span_sort_key
from cuset.spans.text import ByteToChar, code_segments, decode, encode

log = logging.getLogger(__name__)

# Tests set this to surface internal errors that `detect` otherwise logs and survives.
RAISE_INTERNAL_ERRORS = False

_SCOPES_ABOVE_NAMESPACE = frozenset({"function_definition", "compound_statement", "lambda_expression", "field_declaration_list", "parameter_list"})
_WRAPPERS_OF_DEFINITION = frozenset({"template_declaration"})
_EXPRESSION_PARENTS = frozenset({"argument_list", "call_expression", "parenthesized_expression", "comma_expression", "cast_expression", "assignment_expression"})


SPAN_MODES = ("broad", "paper")
_PAPER_KINDS = frozenset({"kernel_body", "launch_config"})


def detect(code: str | bytes | None, mode: str = "broad") -> list[Span]:
    """CUDA-sensitive spans of `code`, sorted by (start, end, kind), duplicates removed.

    `code`: the response text (str), or raw bytes decoded as UTF-8 with replacement
    characters, in which case offsets refer to ``code.decode("utf-8", "replace")``.
    Never raises: unparsable input gives whatever the parser and fallback recover, empty
    input gives ``[]``. See the module docstring for what each kind and mode covers.
    """
    if mode not in SPAN_MODES:
        raise ValueError(f"span mode {mode!r}: use one of {', '.join(SPAN_MODES)}")
    text = decode(code)
    found: set[tuple[str, int, int]] = set()
    if not text or grammar.CUDA_MARKERS.search(text) is None:
        return []
    for segment in code_segments(text):
        piece = text[segment.start:segment.end]
        try:
            spans = _detect_code(piece, mode=mode)
        except Exception:  # a parser/grammar surprise must not kill a training run
            if RAISE_INTERNAL_ERRORS:
                raise
            log.warning("span detection failed on a %d-character code block; skipped", len(piece), exc_info=True)
            continue
        found.update((kind, start + segment.start, end + segment.start) for kind, start, end in spans)
    return sorted((Span(kind, start, end) for kind, start, end in found if end > start), key=span_sort_key)


def _detect_code(code: str, *, in_macro: bool = False, mode: str = "broad") -> set[tuple[str, int, int]]:
    """Spans (kind, start, end) in character offsets of `code`, a piece of CUDA/C++."""
    if grammar.CUDA_MARKERS.search(code) is None:
        return set()
    paper = mode == "paper"
    data = encode(code)
    tree = grammar.parser().parse(data)
    root = tree.root_node
    byte_spans = _Spans()
    captures = grammar.cursor(grammar.MAIN_QUERY).captures(root)
    _kernels(captures, byte_spans, global_only=paper)
    if not paper:
        _variables(captures, byte_spans)
    launches = _calls_and_launches(captures, byte_spans)
    _thread_indices(captures, byte_spans)
    if launches:
        _launch_slices(launches, root, byte_spans, transitive=not paper)
    to_char = ByteToChar(code, data)
    spans = {(kind, to_char(start), to_char(end)) for kind, start, end in byte_spans.items}
    if not in_macro:
        for body in captures.get("macro_body", ()):
            start, end = to_char(body.start_byte), to_char(body.end_byte)
            body_code = _macro_as_code(code[start:end])
            spans.update((k, s + start, e + start) for k, s, e in _detect_code(body_code, in_macro=True, mode=mode))
    spans.update(recover(code, spans, captures, root, to_char, global_only=paper))
    if paper:
        spans = {span for span in spans if span[0] in _PAPER_KINDS}
    return _outermost_kernel_bodies(spans)


def _macro_as_code(body: str) -> str:
    """A #define body made parsable without moving any character: token pasting and
    stringizing (`scale_##T`, `#x`) would start a preprocessor line for the parser, and
    line continuations are just whitespace."""
    return body.replace("#", " ").replace("\\\n", " \n").replace("\\\r\n", " \r\n")


def _outermost_kernel_bodies(spans: set[tuple[str, int, int]]) -> set[tuple[str, int, int]]:
    """Drop kernel_body spans inside another one (a __device__ lambda in a kernel, or a
    __shared__ declaration that only looked namespace-level because the parser lost the
    enclosing kernel, which the fallback then recovered)."""
    bodies = sorted(((s, e) for k, s, e in spans if k == "kernel_body"), key=lambda r: (r[0], -r[1]))
    if len(bodies) < 2:
        return spans
    nested = set()
    outer_end = -1
    for start, end in bodies:  # by start, longest first: a nested one ends within the outer
        if end <= outer_end:
            nested.add(("kernel_body", start, end))
        else:
            outer_end = end
    return spans - nested


class _Spans:
    """Byte-offset spans of one parse."""

    __slots__ = ("items",)

    def __init__(self):
        self.items: set[tuple[str, int, int]] = set()

    def add(self, kind: str, node) -> None:
        self.items.add((kind, node.start_byte, node.end_byte))

    def add_range(self, kind: str, start: int, end: int) -> None:
        self.items.add((kind, start, end))


def _declared_global(function) -> bool:
    """`__global__` among the specifiers before the function's body."""
    body = function.child_by_field_name("body")
    head = function.text[:body.start_byte - function.start_byte] if body is not None else function.text
    return b"__global__" in head


def _kernels(captures: dict, spans: _Spans, *, global_only: bool = False) -> None:
    for function in captures.get("kernel_function", ()):
        if global_only and not _declared_global(function):
            continue
        start = function.start_byte
        parent = function.parent
        while parent is not None and parent.type in _WRAPPERS_OF_DEFINITION:
            start = parent.start_byte
            parent = parent.parent
        if parent is not None and parent.type == "linkage_specification" and parent.child_by_field_name("body") == function:
            start = parent.start_byte  # extern "C" __global__ void k(...) { ... }
        spans.add_range("kernel_body", start, function.end_byte)
    for error in () if global_only else captures.get("lambda_error", ()):
        if error.text in (b"__device__", b"__host__ __device__", b"__device__ __host__"):
            spans.add("kernel_body", error.parent)


def _at_namespace_scope(node) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.type in _SCOPES_ABOVE_NAMESPACE:
            return False
        parent = parent.parent
    return True


def _declares_function(declaration) -> bool:
    declarator = declaration.child_by_field_name("declarator")
    return declarator is not None and declarator.type == "function_declarator"


def _variables(captures: dict, spans: _Spans) -> None:
    for declaration in captures.get("device_variable", ()):
        if not _declares_function(declaration) and _at_namespace_scope(declaration):
            spans.add("kernel_body", declaration)
    for declaration in captures.get("space_variable", ()):
        spans.add("memory_space", declaration)
        if _at_namespace_scope(declaration):
            spans.add("kernel_body", declaration)
    for qualifier in captures.get("restrict", ()):
        spans.add("memory_space", qualifier)


def _callee_kind(callee) -> tuple[str | None, bytes]:
    """(kind, name) of a called function node, or (None, name) if it is not CUDA-sensitive."""
    kind_of_node = callee.type
    if kind_of_node == "field_expression":
        field = callee.child_by_field_name("field")
        name = field.text if field is not None else b""
        return grammar.METHODS.get(name.decode("utf-8", "replace")), name
    scope = None
    node = callee
    while node is not None and node.type in ("qualified_identifier", "template_function"):
        if node.type == "qualified_identifier":
            scope_node = node.child_by_field_name("scope")
            scope = scope_node.text if scope_node is not None else scope
        node = node.child_by_field_name("name")
    if node is None or node.type != "identifier":
        return None, b""
    name = node.text
    text = name.decode("utf-8", "replace")
    if scope is not None and scope.rsplit(b"::", 1)[-1].decode("utf-8", "replace") in grammar.GROUP_NAMESPACES:
        kind = grammar.GROUP_FUNCTIONS.get(text)
        if kind is not None:
            return kind, name
    match = grammar.FREE_FUNCTIONS.fullmatch(text)
    return (match.lastgroup if match else None), name


def _calls_and_launches(captures: dict, spans: _Spans) -> list[tuple[object, list]]:
    """Spans of classified calls and chevrons; returns the launch sites with their
    configuration nodes, for the backward slice."""
    launches: list[tuple[object, list]] = []
    for chevrons in captures.get("chevrons", ()):
        spans.add("launch_config", chevrons)
        launches.append((chevrons, [chevrons]))
    for callee in captures.get("callee", ()):
        kind, name = _callee_kind(callee)
        if kind is None:
            continue
        call = callee.parent
        if kind == "thread_index":
            spans.add(kind, _grow_arithmetic(call))
            continue
        spans.add(kind, call)
        if kind == "launch_config":
            arguments = call.child_by_field_name("arguments")
            if arguments is None:
                continue
            values = [a for a in arguments.named_children if a.type != "comment"]
            chosen = grammar.LAUNCH_CONFIG_ARGUMENTS.get(name.decode("utf-8", "replace"), ())
            launches.append((call, [values[i] for i in chosen if i < len(values)]))
    return launches


def _grow_arithmetic(node):
    """The largest arithmetic expression around `node` (see thread_index)."""
    while True:
        parent = node.parent
        if parent is None:
            return node
        kind = parent.type
        if kind in ("parenthesized_expression", "cast_expression"):
            node = parent
        elif kind in ("binary_expression", "unary_expression"):
            operator = parent.child_by_field_name("operator")
            if operator is None or operator.type not in grammar.ARITHMETIC_OPERATORS:
                return node
            node = parent
        else:
            return node


def _thread_indices(captures: dict, spans: _Spans) -> None:
    for builtin in captures.get("builtin", ()):
        parent = builtin.parent
        atom = parent if parent is not None and parent.type == "field_expression" else builtin
        spans.add("thread_index", _grow_arithmetic(atom))


def _scope_of(node, root):
    """The function containing `node`; failing that (a launch the parser could not place
    in a function), the outermost ERROR node around it, or the whole parse."""
    outermost_error = None
    parent = node.parent
    while parent is not None:
        if parent.type == "function_definition":
            return parent
        if parent.type == "ERROR":
            outermost_error = parent
        parent = parent.parent
    return outermost_error if outermost_error is not None else root


def _statement_of(site):
    if site.type == "init_declarator":
        parent = site.parent
        return parent if parent is not None and parent.type == "declaration" else site
    if site.type == "declaration":
        return site
    node = site
    while node.parent is not None and node.parent.type in _EXPRESSION_PARENTS:
        node = node.parent
    parent = node.parent
    return parent if parent is not None and parent.type == "expression_statement" else site


def _names_in(node) -> list[bytes]:
    """Variables read by `node`, except those only used as an array index: in
    ``<<<g, b, 0, streams[c]>>>`` the stream array matters, the loop counter `c` does not."""
    found = grammar.cursor(grammar.NAMES_QUERY).captures(node).get("name", ())
    return [n.text for n in found if not _inside_index(n, node)]


def _inside_index(name, top) -> bool:
    parent = name.parent
    while parent is not None and parent != top:
        if parent.type == "subscript_argument_list":
            return True
        parent = parent.parent
    return False


_ROOT_FIELDS = {
    "field_expression": "argument", "subscript_expression": "argument", "pointer_expression": "argument",
    "pointer_declarator": "declarator", "array_declarator": "declarator", "reference_declarator": None,
    "function_declarator": "declarator", "init_declarator": "declarator", "parenthesized_expression": None,
    "parenthesized_declarator": None,
}


def _root_variable(target) -> bytes | None:
    """The variable written through `target`: grid for ``grid.x``, attrs for
    ``attrs[0].val.x``, p for ``*p``, the declared name of a declarator."""
    node = target
    for _ in range(32):
        if node is None:
            return None
        kind = node.type
        if kind == "identifier":
            return node.text
        if kind not in _ROOT_FIELDS:
            return None
        field = _ROOT_FIELDS[kind]
        node = node.child_by_field_name(field) if field else (node.named_children[0] if node.named_children else None)
    return None


def _assignments(scope) -> dict[bytes, list[tuple[object, object]]]:
    """Variable name -> [(statement, value node or None)] for every statement of `scope`
    that gives the variable (or one of its fields or elements) a value."""
    index: dict[bytes, list[tuple[object, object]]] = {}
    for _, match in grammar.cursor(grammar.ASSIGN_QUERY).matches(scope):
        name = _root_variable(match["target"][0])
        if name is None:
            continue
        values = match.get("value")
        index.setdefault(name, []).append((_statement_of(match["site"][0]), values[0] if values else None))
    return index


def _launch_slices(launches: list[tuple[object, list]], root, spans: _Spans, *, transitive: bool = True) -> None:
    by_scope: dict[tuple[int, int], tuple[object, list[bytes]]] = {}
    for site, configuration in launches:
        scope = _scope_of(site, root)
        key = (scope.start_byte, scope.end_byte)
        names = by_scope.setdefault(key, (scope, []))[1]
        for node in configuration:
            names.extend(_names_in(node))
    for scope, names in by_scope.values():
        if not names:
            continue
        index = _assignments(scope)
        seen = set(names)
        pending = list(seen)
        while pending:
            for statement, value in index.get(pending.pop(), ()):
                spans.add("launch_config", statement)
                if value is None or not transitive:
                    continue
                for name in _names_in(value):
                    if name not in seen:
                        seen.add(name)
                        pending.append(name)

