"""What a macro's expansion does to variables and memory, read from its parse.

The planners and the order proof see a macro's use, not its expansion: `SET(out[0], v)`
with `#define SET(x, v) ((x) = (v))` writes out[0] with no assignment in the kernel's
tree, `LD(in + i)` with `#define LD(p) (*(p))` reads in[i] with no subscript in it, and
`#define INC k++` changes a local the analyses would take for unwritten. So the
expansion is parsed (as the body of a function) and its effects named here. A macro
that writes a variable or takes an address, or reaches memory through one of its
parameters (dereferences it, subscripts it, passes it to anything but a pure
function), keeps the kernel on the fibers (block_loop `_check_macro`); memory it
reaches through names it spells itself (`#define AT(i) data[i]`) is any memory to the
analyses (region_memory, barrier_regions). An expansion that does not parse counts as
doing everything.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from cuset.spans.grammar import parser


@dataclass(frozen=True)
class MacroEffects:
    writes_variable: bool          # assigns or increments a variable, or takes an address (did not parse: True)
    memory: bool                   # a subscript, `*p`, `&x` or `p->f` (did not parse: True)
    through_parameters: bool       # a parameter dereferenced, subscripted or assigned (did not parse: True)
    parameter_calls: frozenset[str]  # the names it calls with a parameter among the arguments


_EVERYTHING = MacroEffects(True, True, True, frozenset())


@lru_cache(maxsize=4096)
def effects_of(expansion: str, parameters: tuple[str, ...] = ()) -> MacroEffects:
    """The effects of a macro's replacement text (`parameters`: a function-like macro's)."""
    if not expansion.strip():
        return MacroEffects(False, False, False, frozenset())
    data = b"void cuset_macro() { " + expansion.encode() + b" ; }"
    root = parser().parse(data).root_node
    if root.has_error:
        return _EVERYTHING

    def text(n) -> str:
        return data[n.start_byte:n.end_byte].decode(errors="replace")

    def names_parameter(n) -> bool:
        todo = [n]
        while todo:
            m = todo.pop()
            if m.type == "identifier" and text(m) in parameters:
                return True
            todo.extend(m.children)
        return False

    writes_variable = memory = through = False
    calls = set()
    todo = [root]
    while todo:
        n = todo.pop()
        todo.extend(n.children)
        t = n.type
        if t in ("assignment_expression", "update_expression"):
            target = n.child_by_field_name("left") or n.child_by_field_name("argument")
            while target is not None and target.type in ("parenthesized_expression", "field_expression") \
                    and not any(c.type == "->" for c in target.children):
                target = target.child_by_field_name("argument") if target.type == "field_expression" \
                    else (target.named_children[0] if target.named_children else None)
            if target is None or target.type == "identifier":
                writes_variable = True
            through |= target is not None and target.type == "identifier" and text(target) in parameters
        elif t in ("subscript_expression", "pointer_expression") or (
                t == "field_expression" and any(c.type == "->" for c in n.children)):
            memory = True
            operator = n.child_by_field_name("operator")
            if t == "pointer_expression" and operator is not None and text(operator) == "&":
                writes_variable = True   # the address may be written through
            base = n.child_by_field_name("argument")
            through |= base is not None and names_parameter(base)
        elif t == "call_expression":
            f = n.child_by_field_name("function")
            args = n.child_by_field_name("arguments")
            if args is not None and names_parameter(args):
                calls.add(text(f) if f is not None else "?")
    return MacroEffects(writes_variable, memory, through, frozenset(calls))
