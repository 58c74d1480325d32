"""Generation backends by name; each is imported only when chosen.

    gen = get_generator("hf", cfg)
    for request, completion in gen.generate(requests): ...
"""

from __future__ import annotations

import importlib

from cuset.errors import CusetError
from cuset.generate.backends.interface import Generator

# name -> "module:class"; a backend's module (torch, vllm, httpx ...) loads only when chosen
GENERATORS = {
    "hf": "cuset.generate.backends.hf:HFGenerator",
    "vllm": "cuset.generate.backends.vllm:VLLMGenerator",
    "openai": "cuset.generate.backends.openai:OpenAIGenerator",
}


class UnknownGenerator(CusetError, ValueError):
    """A generation backend name that is not registered."""


def get_generator(name: str, cfg) -> Generator:
    if name not in GENERATORS:
        raise UnknownGenerator(f"unknown generation backend {name!r}: use {', '.join(list(GENERATORS)[:-1])} or {list(GENERATORS)[-1]}")
    module, cls = GENERATORS[name].split(":")
    return getattr(importlib.import_module(module), cls).from_config(cfg)
