"""Parametrised task families, one module per domain, looked up by name.

    from cuset.curation.families import get_family, all_families
    task = get_family("relu").make({"kind": "relu"}, {"n": 262144}, task_id=0)

The bundled suite (suites/) uses each family's `suite_variant` at its
`suite_sizes`; the task factory (`cuset.curation.synth`) uses the other variants and sizes.
"""

from __future__ import annotations

import difflib
import importlib

from cuset.curation.families.base import DOMAINS, Family, Params, TaskParts, Tensor, param_key, task_seed

# Registry order = suite order: by domain, then as each module lists its families.
_MODULES = (
    "elementwise",
    "reduction",
    "normalization",
    "linalg",
    "stencil",
    "pooling",
    "transpose",
    "histogram",
    "sorting",
    "sparse",
    "graph",
    "attention",
    "image",
    "scientific",
)


def _load() -> dict[str, Family]:
    registry: dict[str, Family] = {}
    for module in _MODULES:
        for fam in importlib.import_module(f"cuset.curation.families.{module}").FAMILIES:
            if fam.name in registry:
                raise RuntimeError(f"family {fam.name!r} is registered twice (module {module})")
            registry[fam.name] = fam
    return registry


REGISTRY: dict[str, Family] = _load()


def all_families() -> list[Family]:
    return list(REGISTRY.values())


def family_names() -> list[str]:
    return list(REGISTRY)


def get_family(name: str) -> Family:
    """The family called `name`; an unknown name raises KeyError with close matches."""
    try:
        return REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(name, REGISTRY, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known families: {', '.join(REGISTRY)}"
        raise KeyError(f"unknown task family {name!r}{hint}") from None


def families_in_domain(domain: str) -> list[Family]:
    if domain not in DOMAINS:
        raise KeyError(f"unknown domain {domain!r}; domains: {', '.join(DOMAINS)}")
    return [f for f in REGISTRY.values() if f.domain == domain]


__all__ = [
    "DOMAINS", "Family", "Params", "REGISTRY", "TaskParts", "Tensor",
    "all_families", "families_in_domain", "family_names", "get_family", "param_key", "task_seed",
]
