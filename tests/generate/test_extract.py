import pytest

from cuset.generate.extract import extract_code, extract_code_compat, fenced_bodies, get_extractor

PROGRAM = "#include <cstdio>\n__global__ void k(float* x) { x[0] = 1; }\nint main() { return 0; }\n"


def test_compat_takes_first_block_even_without_main():
    text = f"Helper:\n```cpp\nint helper();\n```\nProgram:\n```cpp\n{PROGRAM}```\n"
    assert extract_code_compat(text) == "int helper();\n"


def test_compat_keeps_cuda_word_after_cuda_fence():
    # The harness regex knows only cpp / c++; "cuda" stays in the code.
    assert extract_code_compat(f"```cuda\n{PROGRAM}```") == f"cuda\n{PROGRAM}"


def test_compat_strips_leading_whitespace_after_tag():
    assert extract_code_compat(f"```c++\n\n{PROGRAM}```") == PROGRAM
    assert extract_code_compat(f"```\n{PROGRAM}```") == PROGRAM


def test_compat_no_fence_or_empty_fence_is_no_code():
    assert extract_code_compat(PROGRAM) is None
    assert extract_code_compat("```cpp\n   \n```") is None
    assert extract_code_compat("") is None


def test_default_prefers_block_with_main_and_kernel():
    text = ("```bash\nnvcc a.cu\n```\n```cuda\n__global__ void only_kernel() {}\n```\n"
            f"```cuda\n{PROGRAM}```\n```cpp\nint main() {{ return 1; }}\n```")
    assert extract_code(text) == PROGRAM


def test_default_main_beats_kernel_only():
    text = "```cuda\n__global__ void k() {}\n```\n```cpp\nint main() { return 1; }\n```"
    assert extract_code(text) == "int main() { return 1; }\n"


def test_default_takes_kernel_block_when_no_main():
    text = "```bash\nls\n```\n```cuda\n__global__ void k() {}\n```"
    assert extract_code(text) == "__global__ void k() {}\n"


def test_default_falls_back_to_first_block():
    assert extract_code("```python\nprint(1)\n```\n```text\nhi\n```") == "print(1)\n"


def test_default_language_tag_is_not_code():
    assert extract_code(f"```cuda\n{PROGRAM}```") == PROGRAM


def test_default_unclosed_fence_runs_to_end():
    # A response cut by max_tokens: keep what there is.
    assert extract_code(f"Here:\n```cuda\n{PROGRAM}") == PROGRAM


def test_default_bare_program_without_fence():
    assert extract_code(PROGRAM) == PROGRAM
    assert extract_code("I cannot help with that.") is None
    assert extract_code("") is None and extract_code(None) is None


def test_fenced_bodies_in_order():
    assert fenced_bodies("a\n```x\n1\n```\nb\n```\n2\n```\n") == ["1\n", "2\n"]


def test_get_extractor_errors_name_choices():
    assert get_extractor("compat") is extract_code_compat
    with pytest.raises(ValueError, match="default, compat"):
        get_extractor("first")
