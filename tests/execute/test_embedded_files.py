"""Issue 59: directives that put a file's bytes into a build are refused in every source an
extension or a CUDA program compiles (`.incbin` inside `cpp_sources` used to build)."""

from __future__ import annotations

import json

import pytest

from cuset.execute.cpu import CpuBackend
from cuset.execute.cpu.features import find_embedded_files
from cuset.execute.cpu.lexer import tokenize
from cuset.execute.kernelbench.build import ExtensionBuilder, ExtensionSpec
from cuset.execute.result import Status

INCBIN = 'asm(".section .rodata\\n.globl blob\\nblob: .incbin \\"/etc/hostname\\"\\n.previous");\n'
EMBED = 'static const char blob[] = {\n#embed "/etc/hostname"\n};\n'
DIRECTIVE = {INCBIN: "assembler directive .section", EMBED: "preprocessor directive #embed"}


@pytest.mark.parametrize("source", [INCBIN, EMBED], ids=["incbin", "embed"])
def test_cpp_sources_of_an_extension_are_checked(tmp_path, source):
    spec = ExtensionSpec("embeds", (source + "int f() { return 1; }\n",), (), ("f",))
    outcome = ExtensionBuilder().compile(json.dumps(spec.to_json()), tmp_path / "build", 120.0)
    assert outcome.status is Status.UNSUPPORTED, outcome.detail
    assert outcome.detail.startswith(f"cpp_sources use {DIRECTIVE[source]}"), outcome.detail


@pytest.mark.parametrize("source", [INCBIN, EMBED], ids=["incbin", "embed"])
def test_cuda_sources_and_programs_are_checked(tmp_path, source):
    outcome = CpuBackend().compile(source + "int main() { return 0; }\n", tmp_path / "build", 120.0)
    assert outcome.status is Status.UNSUPPORTED and DIRECTIVE[source] in outcome.detail, outcome.detail


def test_embed_is_found_as_a_directive_only():
    def found(src):
        return [u.feature.split(" (")[0] for u in find_embedded_files(tokenize(src))]

    assert found('#  embed <data.bin>\n') == ["preprocessor directive #embed"]
    assert found('int embed = 1; // #embed "x"\nconst char* s = "#embed";\n') == []
