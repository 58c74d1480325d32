import json

import pytest

from cuset.curation.decontam import Decontaminator, load_eval_sets, ngrams
from cuset.curation.dedup import deduplicate, minhash, shingles
from cuset.curation.cudatext import code_tokens
from cuset.tasks import Task

from conftest import FIXTURES
from llm_fakes import CANNED

CUDA = FIXTURES / "cuda_mixed"


def code(name):
    return (CUDA / name).read_text()


def test_shingles():
    assert shingles(["a", "b", "c", "d"], 2) == {"a b", "b c", "c d"}
    assert shingles(["a"], 3) == {"a"} and shingles([], 3) == set()


def test_exact_and_near_duplicates_keep_the_first():
    items = [("add", code("vector_add.cu")), ("rows", code("row_sum.cu")), ("copy", code("vector_add_copy.cu")),
             ("checked", code("vector_add_checked.cu")), ("wrong", code("broken_wrong.cu"))]
    kept, removed = deduplicate(items, near_threshold=0.85)
    assert kept == ["add", "rows", "wrong"]
    got = {r.key: (r.reason, r.matched) for r in removed}
    assert got == {"copy": ("exact_duplicate", "add"), "checked": ("near_duplicate", "add")}
    near = next(r for r in removed if r.reason == "near_duplicate")
    assert 0.85 <= near.similarity < 1.0


def test_near_threshold_decides():
    a, b = code("vector_add.cu"), code("vector_add_checked.cu")
    ta, tb = code_tokens(a), code_tokens(b)
    true_j = len(shingles(ta, 5) & shingles(tb, 5)) / len(shingles(ta, 5) | shingles(tb, 5))
    est = minhash(shingles(ta, 5), 128).jaccard(minhash(shingles(tb, 5), 128))
    assert 0.85 < true_j < 0.97 and abs(est - true_j) < 0.08
    kept, _ = deduplicate([("a", a), ("b", b)], near_threshold=0.99)
    assert kept == ["a", "b"]


def _as_task(reply_name, program, tid=5):
    reply = CANNED[reply_name]
    return Task.from_json({
        "id": tid, "task_name": reply["task_name"], "task_description": "d", "inputs": reply["inputs"],
        "outputs": reply["outputs"], "gpu": "unknown", "bench.cu": program, "gen.py": reply["gen_py"],
        "compare.py": "print('T')", "level1_prompt": reply["level1_prompt"], "level2_prompt": reply["level2_prompt"],
        "level3_prompt": reply["level3_prompt"]})


@pytest.fixture
def deco():
    return Decontaminator(load_eval_sets([str(FIXTURES / "eval_tasks.jsonl")]), prompt_ngram=8, code_ngram=12,
                          threshold=0.5, boilerplate_share=0.1)


def test_copy_of_a_benchmark_task_is_caught(deco):
    hit = deco.check("k1", _as_task("leaky_relu_kernel", code("leaky_relu_copy.cu")))
    assert hit is not None and hit.reason == "prompt_and_code_overlap"
    assert hit.matched.endswith("eval_tasks.jsonl#id=0 Leaky_ReLU")
    assert hit.similarity == 1.0  # the code is the benchmark's, comments aside
    assert "of its 12-token code n-grams occur in" in hit.detail


def test_code_alone_or_prompt_alone_is_enough(deco):
    code_only = _as_task("vector_add", code("leaky_relu_copy.cu"))
    assert deco.check("k", code_only).reason == "code_overlap"
    prompt_only = _as_task("leaky_relu_kernel", code("vector_add.cu"))
    assert deco.check("k", prompt_only).reason == "prompt_overlap"


def test_unrelated_tasks_pass(deco):
    for name, program in (("vector_add", "vector_add.cu"), ("row_sum", "row_sum.cu"), ("cube_kernel", "vector_add.cu")):
        assert deco.check("k", _as_task(name, code(program))) is None


def test_overlap_share_is_per_task_and_counted_exactly():
    ev = Task.from_json(json.loads((FIXTURES / "eval_tasks.jsonl").read_text().splitlines()[1]))  # transpose
    d = Decontaminator([("ev", ev)], prompt_ngram=3, code_ngram=4, threshold=0.5, boilerplate_share=0.1)
    words = "Transpose the 64 x 32 float32 matrix a".lower().split()
    half = Task.from_json({**ev.to_json(), "bench.cu": "int x;", "level1_prompt": " ".join(words) + " one two three four five six seven",
                           "level2_prompt": "", "level3_prompt": ""})
    # 15 words -> 13 trigrams, the first 6 (from the 8 copied words) occur in the eval task's prompt
    assert len(ngrams(words + "one two three four five six seven".split(), 3)) == 13
    assert d.prompts.best(ngrams("transpose the 64 x 32 float32 matrix a one two three four five six seven".split(), 3)) == (0, 6 / 13)
    assert d.check("k", half) is None  # 46% < 50%


def test_boilerplate_shared_by_many_eval_tasks_is_ignored():
    shared = "static void read_all(const char* p, float* d, int n) { FILE* f = fopen(p, \"rb\"); fread(d, 4, n, f); fclose(f); }\n"
    evals = [("ev", Task.from_json({**json.loads((FIXTURES / "eval_tasks.jsonl").read_text().splitlines()[1]),
                                    "id": i, "bench.cu": shared + f"__global__ void k{i}(float* x) {{ x[{i}] = {i}.0f * x[{i} + 1]; }}"}))
             for i in range(8)]
    d = Decontaminator(evals, prompt_ngram=8, code_ngram=6, threshold=0.5, boilerplate_share=0.1)
    train = _as_task("vector_add", shared + "__global__ void mine(float* y) { y[0] = 1.0f; }")
    assert d.codes.best(ngrams(code_tokens(train.bench_cu), 6))[1] == 0.0  # the helper is in all 8 > max(5, 0.8)
    assert d.check("k", _as_task("vector_add", evals[3][1].bench_cu)) is not None  # a whole eval program still is


def test_missing_eval_set_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="decontam.eval_sets"):
        load_eval_sets([str(tmp_path / "nope.jsonl")])
