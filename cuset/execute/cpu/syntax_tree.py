"""Readers of the tree-sitter C++ tree that the kernel analyses share.

block_loop.py (with barrier_regions.py and order_proof.py on top of it) and
region_memory.py read declarators and operators alike; these readers live here,
with no analysis of their own, so that region_memory needs nothing of block_loop
(which imports it).
"""

from __future__ import annotations


def declared_identifier(d):
    """The identifier a declarator declares (through init/pointer/array declarators);
    None for any other declarator (a reference, a function pointer, ...)."""
    while d is not None and d.type != "identifier":
        if d.type not in ("init_declarator", "pointer_declarator", "array_declarator"):
            return None
        d = d.child_by_field_name("declarator")
    return d


def operator_text(unit, node) -> str:
    """The operator of an expression node (`&`, `*`, `->`, `+=`, ...); "" where it has none.
    `unit` is the tree's source (anything with `text(node)`)."""
    op = node.child_by_field_name("operator")
    return unit.text(op) if op is not None else ""
