from cuset.curation.cudatext import code_tokens, has_main, kernel_names, normalize_code

from conftest import FIXTURES

CUDA = FIXTURES / "cuda_mixed"


def test_tokens_drop_comments_but_keep_strings_and_numbers():
    src = 'x = a+b; // add\n/* block\n comment */ s = "// not a comment"; f = 1.5e-3f; c = \'/\';'
    assert code_tokens(src) == ["x", "=", "a", "+", "b", ";", "s", "=", '"// not a comment"', ";",
                                "f", "=", "1.5e-3f", ";", "c", "=", "'/'", ";"]
    assert code_tokens("a /* never closed") == ["a"]


def test_layout_and_comments_do_not_change_the_normal_form():
    assert normalize_code("int  x=1;// one\n") == normalize_code("int x = 1 ; /* uno */") == "int x = 1 ;"
    a, b = (CUDA / "vector_add.cu").read_text(), (CUDA / "vector_add_copy.cu").read_text()
    assert a != b and normalize_code(a) == normalize_code(b)
    assert normalize_code(a) != normalize_code((CUDA / "vector_add_checked.cu").read_text())


def test_kernel_names():
    src = """
    template <int B> __global__ void __launch_bounds__(256, 2) tiled(float* a) {}
    extern "C" __global__ void plain(int n);
    __global__ void plain(int n) {}
    __device__ float helper(float x) { return x; }
    // __global__ void commented_out() {}
    """
    assert kernel_names(src) == ["tiled", "plain"]
    assert kernel_names((CUDA / "row_sum.cu").read_text()) == ["row_sum"]
    assert kernel_names((CUDA / "helpers.cuh").read_text()) == []


def test_has_main():
    assert has_main("int main() { return 0; }") and has_main("int main(int argc, char** argv) {}")
    assert not has_main("int domain(int x);") and not has_main("// int main()")


def test_pair_sources_take_the_program_the_evaluation_would_take():
    """Curation and evaluation judge a reply by one extractor: the block with main and a
    kernel wins over an earlier kernel-only snippet; prose with no program is no_code."""
    from cuset.curation.config import SourceConfig
    from cuset.curation.sources import _pair_candidate

    src = SourceConfig(kind="pairs_jsonl", path="pairs.jsonl")
    full = "#include <cstdio>\n__global__ void k(float* x) { x[0] = 1; }\nint main() { return 0; }\n"
    reply = ("The kernel:\n```cuda\n__global__ void k(float* x) { x[0] = 1; }\n```\n"
             f"The program:\n```cuda\n{full}```\n")
    got = _pair_candidate(src, "pairs.jsonl:1", {"prompt": "Write k.", "response": reply})
    assert got.code == full and got.kind == "pair"
    prose = _pair_candidate(src, "pairs.jsonl:2", {"prompt": "Write k.", "response": "A warp is 32 threads."})
    assert prose.reason == "no_code"
