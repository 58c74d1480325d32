"""Where code is looked for (markdown fences) and byte -> character offsets."""

from __future__ import annotations

import pytest

from cuset.spans import detect
from cuset.spans.text import ByteToChar, code_segments, encode


def pieces(text: str) -> list[str]:
    return [text[s.start:s.end] for s in code_segments(text)]


def test_no_fence_means_the_whole_text():
    assert pieces("__global__ void k() {}") == ["__global__ void k() {}"]
    assert pieces("") == []


def test_fenced_blocks_by_info_string():
    text = (
        "Intro.\n```cuda\nA\n```\nMiddle prose.\n~~~ cpp title=x\nB\n~~~\n"
        "```bash\nnvcc k.cu\n```\n```python\nprint(1)\n```\n```\nC\n```\n```{.cuda}\nD\n```\n"
    )
    assert pieces(text) == ["A\n", "B\n", "C\n", "D\n"]


def test_unclosed_fence_runs_to_the_end_and_longer_fences_nest_shorter_ones():
    assert pieces("Text\n```cuda\nint x;\n__global__ void k(") == ["int x;\n__global__ void k("]
    assert pieces("````md\n```cuda\nX\n```\n````\n") == []  # a markdown block quoting a fence: not code
    assert pieces("````\n```\nX\n````\n") == ["```\nX\n"]


def test_code_between_fences_is_parsed_only_when_it_looks_like_code():
    text = "Prose with `k<<<1, 1>>>()` inline.\n```cuda\nA\n```\n#include <cstdio>\nint main() { k<<<1, 1>>>(); }\n"
    assert pieces(text) == ["A\n", "\n#include <cstdio>\nint main() { k<<<1, 1>>>(); }\n"]
    assert [s.text(text) for s in detect(text)] == ["<<<1, 1>>>"]
    assert text.index("<<<") < detect(text)[0].start  # not the inline one in the prose


def test_byte_to_char_map():
    text = "a\u00e9\u20ac\U0001d518b"  # 1, 2, 3 and 4 UTF-8 bytes
    data = encode(text)
    to_char = ByteToChar(text, data)
    assert [to_char(b) for b in (0, 1, 3, 6, 10, 11)] == [0, 1, 2, 3, 4, 5]
    ascii_map = ByteToChar("abc", b"abc")
    assert ascii_map(2) == 2


def test_lone_surrogates_keep_offsets_consistent():
    text = "x\ud800y __global__ void k() {}"
    spans = detect(text)
    assert [(s.kind, s.text(text)) for s in spans] == [("kernel_body", "__global__ void k() {}")]


@pytest.mark.parametrize("text, launches", [
    ("We launch kernel<<<grid, block>>> with one block per row.", []),           # prose
    ("Then call k<<<n / 256, 256>>>.\nEach thread adds one element.", []),
    ("kernel<<<grid, block>>>(x, n);", ["<<<grid, block>>>"]),                   # unfenced code
    ("int main() { k<<<g, b>>>\n    (x, n); }", ["<<<g, b>>>"]),                  # arguments on the next line
    ("int main() { k<<<g, b", ["<<<g, b"]),                                      # truncated answers still count
    ("int main() { k<<<g, b>>>", ["<<<g, b>>>"]),
])
def test_chevrons_in_prose_are_not_launches(text, launches):
    from cuset.spans import detect

    assert [text[s.start:s.end] for s in detect(text) if s.kind == "launch_config"] == launches
