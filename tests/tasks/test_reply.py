"""The one reader of model replies (cuset.tasks.reply) and its three users: code extraction
(evaluation), the span detector's segments (spans, the viewer) and the CUDA mask of
training must see the same fenced blocks on the replies where fence parsers differ."""

from __future__ import annotations

import pytest

from cuset.generate.extract import extract_code, extract_modelnew
from cuset.spans import detect
from cuset.spans.text import code_segments
from cuset.tasks.reply import CodeBlock, fenced_blocks
from cuset.train.data import response_spans

KERNEL = "__global__ void k(float* x) { x[0] = 1; }\n"
HOST = "#include <cstdio>\nint main() { k<<<1, 1>>>(nullptr); return 0; }\n"

SEVERAL = (f"Plan:\n```bash\nnvcc -o k k.cu\n```\nThe kernel:\n```cuda\n{KERNEL}```\nThe host:\n"
           f"```c++\n{HOST}```\n```cpp\nint helper() {{ return 0; }}\n```\n"
           "```\n__device__ int twice(int v) { return 2 * v; }\n```\n")
UNTERMINATED = f"Here it is:\n```cuda\n{KERNEL}int main() {{ k<<<1, 1>>>("
CRLF = f"Answer:\r\n```cuda\r\n{KERNEL.replace(chr(10), chr(13) + chr(10))}int main() {{ k<<<2, 32>>>(nullptr); }}\r\n```\r\nDone.\r\n"
QUOTED = f"````markdown\n```cuda\nk<<<9, 9>>>();\n```\n````\n~~~ cuda title=k.cu\n{KERNEL}~~~\n"


def bodies(text: str) -> list[tuple[str, str, bool]]:
    return [(b.language, b.body(text), b.closed) for b in fenced_blocks(text)]


def test_several_fences_with_language_tags():
    assert bodies(SEVERAL) == [
        ("bash", "nvcc -o k k.cu\n", True), ("cuda", KERNEL, True), ("c++", HOST, True),
        ("cpp", "int helper() { return 0; }\n", True), ("", "__device__ int twice(int v) { return 2 * v; }\n", True),
    ]
    first = fenced_blocks(SEVERAL)[0]
    assert first == CodeBlock(start=SEVERAL.index("nvcc"), end=SEVERAL.index("```\nThe kernel"), language="bash",
                              fence_start=SEVERAL.index("```bash"), fence_end=SEVERAL.index("\nThe kernel"), closed=True)


def test_an_unterminated_fence_runs_to_the_end():
    assert bodies(UNTERMINATED) == [("cuda", f"{KERNEL}int main() {{ k<<<1, 1>>>(", False)]
    assert fenced_blocks(UNTERMINATED)[0].fence_end == len(UNTERMINATED)
    assert fenced_blocks("text ```cuda") == []  # a fence must start its line
    assert fenced_blocks("```cuda") == [CodeBlock(7, 7, "cuda", 0, 7, False)]


def test_crlf_lines_close_their_fence():
    code = KERNEL.replace("\n", "\r\n") + "int main() { k<<<2, 32>>>(nullptr); }\r\n"
    assert bodies(CRLF) == [("cuda", code, True)]
    assert CRLF[fenced_blocks(CRLF)[0].fence_end:] == "\r\nDone.\r\n"


def test_a_longer_fence_quotes_a_shorter_one_and_tildes_fence_too():
    assert bodies(QUOTED) == [("markdown", "```cuda\nk<<<9, 9>>>();\n```\n", True), ("cuda", KERNEL, True)]
    assert fenced_blocks(None) == [] and fenced_blocks("no code here") == []


@pytest.mark.parametrize("reply, extracted, segments", [
    (SEVERAL, HOST, [KERNEL, HOST, "int helper() { return 0; }\n", "__device__ int twice(int v) { return 2 * v; }\n"]),
    (UNTERMINATED, f"{KERNEL}int main() {{ k<<<1, 1>>>(", [f"{KERNEL}int main() {{ k<<<1, 1>>>("]),
    (CRLF, bodies(CRLF)[0][1], [bodies(CRLF)[0][1]]),
    (QUOTED, KERNEL, [KERNEL]),  # the quoted ``` fence is markdown, not code
], ids=["several", "unterminated", "crlf", "quoted"])
def test_extraction_spans_and_the_training_mask_agree(reply, extracted, segments):
    found = [b.body(reply) for b in fenced_blocks(reply)]
    # evaluation compiles one of the blocks the reader found (the one with main, else a kernel)
    assert extract_code(reply) == extracted and extracted in found
    # the detector parses the C/C++/CUDA blocks among them (not bash, not markdown)
    assert [reply[s.start:s.end] for s in code_segments(reply)] == segments
    assert set(segments) <= set(found)
    # training masks what the detector finds on the whole reply: one split, the same spans
    spans = response_spans(reply)
    assert spans == detect(reply) and spans
    inside = [(s.start, s.end) for s in code_segments(reply)]
    assert all(any(a <= span.start and span.end <= b for a, b in inside) for span in spans)
    assert "<<<9, 9>>>" not in [span.text(reply) for span in spans]


def test_launches_are_found_in_every_reply_shape():
    launches = {name: [s.text(reply) for s in response_spans(reply) if s.kind == "launch_config"]
                for name, reply in (("several", SEVERAL), ("unterminated", UNTERMINATED), ("crlf", CRLF))}
    assert launches == {"several": ["<<<1, 1>>>"], "unterminated": ["<<<1, 1>>>"], "crlf": ["<<<2, 32>>>"]}


def test_kernelbench_extraction_reads_the_same_blocks():
    module = "import torch\r\nclass ModelNew(torch.nn.Module):\r\n    pass\r\n"
    reply = f"Draft:\r\n```python\r\nclass Model: pass\r\n```\r\nFinal:\r\n```python\r\n{module}```\r\n"
    assert extract_modelnew(reply) == module
