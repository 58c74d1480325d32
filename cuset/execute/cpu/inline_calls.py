"""Device functions with barriers or warp shuffles, inlined into the kernel that calls them,
so that the barrier planner (barrier_regions.py) can split the kernel at their barriers and
shuffles.

A kernel that calls a block-wide reduction helper (`float s = block_reduce(acc, sdata);`)
has its barriers inside the helper, where no region can be split: it ran on the fibers
(so did one calling a warp reduction, `v = warp_sum(v);`). Here such a call, standing as
a statement in the kernel's body, is replaced by the helper's statements at that same
place (in braces where it was the body of a braceless `if` or loop; a helper's own calls
of such helpers in the next round):

    float s = block_reduce(acc, sdata);
->  float cuset_i0_acc = (acc); float* cuset_i0_sdata = (sdata);
    <the helper's statements, every parameter and local renamed cuset_i0_...>
    float s = (<the helper's returned expression, renamed>);

which is what the call does: the arguments evaluated once into the parameters, the body
run, the value returned. `__shared__` arrays the helper declares become the kernel's (a
block has one of each either way). Only what can be inlined exactly is: a helper defined
once in the file (a template only where the call names every template argument, which
replace the template's parameters), not recursive, with parameters by value (scalars or
pointers), whose only `return` is its last statement (none for `void`), and a call that is
the whole statement: `T x = f(...);`, `x = f(...);` or `f(...);`, or the one call in a value
that around it reads no memory and changes nothing (`T x = 1.0f / f(...);`). Anything else
stays as it was (and the kernel on the fibers). Whether the inlined kernel can run as
regions is the planner's question: a helper inlined under a condition still has its
barrier there.

The result is only the text the planner reads to write the kernel's block-loop variant;
the fibers' version of the kernel keeps calling the helper.
"""

from __future__ import annotations

import re

from cuset.execute.cpu.plan_ir import (
    PURE_FUNCTIONS, TYPE_WORDS, Unit, declared_names, function_declarator, meets, unwrap, walk,
)
from cuset.execute.cpu.syntax_tree import declared_identifier, operator_text
from cuset.spans.grammar import parser

PREFIX = "cuset_i"


ROUNDS = 4  # helpers calling helpers: inlined round after round, this deep
# The inlined text may grow to this many times the source (and 64 KB more): helpers that
# call others many times would grow it exponentially; past it the kernel keeps the fibers.
GROWTH = 4


def inline_barrier_calls(unit: Unit, kernel) -> tuple[str, int] | None:
    """The source with the kernel's calls of helpers with barriers or warp shuffles inlined
    (statements anywhere in its body; a helper's own calls of such helpers in the next
    round), and how many calls were; None when there is none to inline."""
    data, count = unit.data, 0
    original = len(data)
    for _ in range(ROUNDS):
        edits = []
        for stmt in walk(kernel.child_by_field_name("body")):
            if stmt.type not in ("declaration", "expression_statement"):
                continue
            found = _call_statement(unit, stmt)
            if found is None:
                continue
            call, before, after = found
            helper = _helper(unit, call)
            if helper is None:
                continue
            text = _inlined(unit, *helper, call, before, after, count + len(edits))
            if text is None:
                continue
            if stmt.parent is None or stmt.parent.type != "compound_statement":
                if stmt.type == "declaration":
                    continue   # `if (c) T x = f();` declares nothing usable
                text = "{ " + text + " }"   # the body of a braceless if or loop stays one statement
            edits.append((stmt.start_byte, stmt.end_byte, text))
        if not edits:
            break
        for start, end, text in reversed(edits):
            data = data[:start] + text.encode() + data[end:]
        if len(data) > GROWTH * original + 65536:
            return None
        count += len(edits)
        # the edits are all inside the kernel's body: it starts where it did
        unit = Unit(data, parser().parse(data).root_node)
        [kernel] = [k for k in unit.kernels if k.start_byte == kernel.start_byte]
    return (data.decode(errors="replace"), count) if count else None


def _call_statement(unit: Unit, stmt):
    """(call, text before it, text after it) of `T x = f(...);`, `x = f(...);` or `f(...);`,
    also where the value is an expression around the one call (`T x = 1.0f / f(...);`) that
    reads no memory and changes nothing: evaluated after the helper's barriers instead of
    in some order around the call, it computes the same."""
    if stmt.type == "declaration":
        declarators = stmt.children_by_field_name("declarator")
        if len(declarators) != 1 or declarators[0].type != "init_declarator":
            return None
        value = declarators[0].child_by_field_name("value")
    elif stmt.type == "expression_statement" and stmt.named_children:
        e = stmt.named_children[0]
        if e.type == "call_expression":
            return e, "(void)", ";"
        if e.type != "assignment_expression" or operator_text(unit, e) != "=" \
                or e.child_by_field_name("left").type != "identifier":
            return None
        value = e.child_by_field_name("right")
    else:
        return None
    call = value if value is not None and value.type == "call_expression" and not _pure_call(unit, value) \
        else _only_call(unit, value)
    if call is None:
        return None
    return (call, unit.data[stmt.start_byte:call.start_byte].decode(errors="replace"),
            unit.data[call.end_byte:stmt.end_byte].decode(errors="replace"))


# What the expression around an inlined call may hold: values of locals, constants and
# operators on them (no memory access, assignment, call or comma).
_PLAIN = frozenset({"identifier", "number_literal", "true", "false", "binary_expression", "unary_expression",
                    "parenthesized_expression", "cast_expression", "conditional_expression", "type_descriptor",
                    "primitive_type", "sized_type_specifier", "type_identifier", "type_qualifier"})


def _only_call(unit: Unit, value):
    """The one call of a function of the file in `value` when everything around it is plain
    (see _PLAIN; calls of pure math functions such as `rsqrtf(f(x) / n + EPS)` too), else None."""
    if value is None:
        return None
    calls = [n for n in walk(value) if n.type == "call_expression" and not _pure_call(unit, n)]
    if len(calls) != 1:
        return None
    call = calls[0]
    inside = {id(n) for n in walk(call)}
    for n in walk(value):
        if id(n) in inside or not n.is_named:
            continue
        if n.type in ("call_expression", "argument_list") or (n.type == "identifier" and n.parent is not None
                                                               and n.parent.type == "call_expression"):
            continue   # a pure function's call: its arguments are checked as the rest is
        if n.type not in _PLAIN or (n.type == "unary_expression" and operator_text(unit, n) in ("*", "&")):
            return None
        if n.type == "identifier" and unit.text(n) in unit.globals and unit.text(n) not in unit.constants:
            return None   # a file-scope variable is memory the helper may write
        if n.type == "identifier" and unit.text(n) in unit.macros and not _literal_macro(unit, unit.text(n), set()):
            return None   # `#define LOAD q[i]` reads memory
    return call


def _literal_macro(unit: Unit, name: str, seen: set[str]) -> bool:
    """A macro whose expansion is numbers, operators and such macros (`#define EPS 1e-5f`)."""
    if name in seen:
        return True   # seen in this expansion (a macro cannot expand itself)
    seen.add(name)
    value = unit.macros[name]
    if re.search(r"\[|->|[=*&]|\+\+|--|[A-Za-z_]\w*\s*\(", value.replace("==", "").replace("!=", "")):
        return False   # memory, an assignment or a call
    return all(w in TYPE_WORDS or (w in unit.macros and _literal_macro(unit, w, seen))
               for w in re.findall(r"[A-Za-z_]\w*", value) if not re.fullmatch(r"\d*[eE]?[fFuUlL]*", w))


def _pure_call(unit: Unit, call) -> bool:
    """A call of a pure math function (`rsqrtf`, `fmaxf`...), by name."""
    f = call.child_by_field_name("function")
    return f is not None and f.type == "identifier" and unit.text(f) in PURE_FUNCTIONS \
        and unit.text(f) not in unit.functions


def _helper(unit: Unit, call):
    """(the called function, its template parameters bound to the call's template arguments)
    when it may be inlined: defined once here, with a barrier or warp operation in its body or in
    a helper it calls, and, if a template,
    called with every template argument spelled out (`f<BLOCK, true>(...)`, no deduction);
    else None."""
    f = call.child_by_field_name("function")
    targs = []
    if f is not None and f.type == "template_function":
        listed = f.child_by_field_name("arguments")
        targs = [unit.text(a) for a in listed.named_children] if listed is not None else []
        f = f.child_by_field_name("name")
    if f is None or f.type != "identifier":
        return None
    defined = unit.functions.get(unit.text(f), [])
    if len(defined) != 1:
        return None
    fn = defined[0]
    body = fn.child_by_field_name("body")
    if body is None or not meets(unit, body, set()):
        return None   # no barrier or warp operation in it, nor in a helper it calls
    tparams = []
    if fn.parent is not None and fn.parent.type == "template_declaration":
        listed = fn.parent.child_by_field_name("parameters")
        for p in listed.named_children if listed is not None else ():
            name = p.child_by_field_name("declarator") or p.child_by_field_name("name")
            if p.type not in ("parameter_declaration", "type_parameter_declaration") or name is None:
                return None   # defaults, packs, template template parameters: not here
            tparams.append(unit.text(name) if name.type in ("identifier", "type_identifier") else None)
    if None in tparams or len(tparams) != len(targs):
        return None
    return fn, dict(zip(tparams, targs))


def _inlined(unit: Unit, fn, bound: dict[str, str], call, before: str, after: str, k: int) -> str | None:
    name = unit.function_name(fn)
    body = fn.child_by_field_name("body")
    stmts = unwrap(body)
    returns = [n for n in walk(body) if n.type == "return_statement"]
    last = stmts[-1] if stmts else None
    returns_value = bool(returns)
    if returns and (len(returns) != 1 or returns[0] is not last or not last.named_children):
        return None   # a return before the end, or `return;` in the middle
    if any(n.type == "call_expression" and unit.text(n.child_by_field_name("function") or n) == name
           for n in walk(body)):
        return None   # recursion
    if any(n.type == "storage_class_specifier" and unit.text(n) == "static" for n in walk(body)):
        return None   # a static local keeps its value between calls
    params = [p for p in function_declarator(fn).child_by_field_name("parameters").named_children
              if p.type == "parameter_declaration"]
    args = call.child_by_field_name("arguments").named_children
    if len(params) != len(args):
        return None
    renamed: dict[str, str] = {}
    declarations = []
    for p, a in zip(params, args):
        d = p.child_by_field_name("declarator")
        ident = declared_identifier(d)
        if ident is None or d.type == "array_declarator" or any(n.type == "reference_declarator" for n in walk(p)):
            return None   # by reference, an array or a function pointer: not a plain copy
        new = f"{PREFIX}{k}_{unit.text(ident)}"
        renamed[unit.text(ident)] = new
        declarations.append(f"{_replaced(unit, p, {ident.start_byte: (ident.end_byte, new)})} = ({unit.text(a)});")
    for s in walk(body):
        for local in declared_names(unit, s):
            renamed.setdefault(local, f"{PREFIX}{k}_{local}")
    cuts = {n.start_byte: (n.end_byte, renamed[unit.text(n)]) for n in walk(body)
            if n.type == "identifier" and unit.text(n) in renamed}
    # the template's parameters, as the call spelled them (a type where a type stands)
    cuts.update({n.start_byte: (n.end_byte, f"({bound[unit.text(n)]})" if n.type == "identifier" else bound[unit.text(n)])
                 for n in (*walk(body), *params) if n.type in ("identifier", "type_identifier")
                 and unit.text(n) in bound and unit.text(n) not in renamed})
    parts = [" ".join(declarations)]   # lines kept: a `//` comment in the helper ends at its newline
    for s in stmts[:-1] if returns_value else stmts:
        parts.append(_replaced(unit, s, cuts))
    if returns_value:
        parts.append(f"{before}({_replaced(unit, last.named_children[0], cuts)}){after}")
    elif before != "(void)":
        return None   # a void helper's value assigned
    return "\n".join(parts)


def _replaced(unit: Unit, node, cuts: dict[int, tuple[int, str]]) -> str:
    """The node's source with `cuts` (start byte -> (end byte, text)) applied."""
    out, pos = [], node.start_byte
    for start in sorted(c for c in cuts if node.start_byte <= c < node.end_byte):
        end, text = cuts[start]
        out.append(unit.data[pos:start].decode(errors="replace"))
        out.append(text)
        pos = end
    out.append(unit.data[pos:node.end_byte].decode(errors="replace"))
    return "".join(out)
