import pytest

from cuset.curation import stats as S
from cuset.tasks import load_tasks

from conftest import FIXTURES

MANIFEST = {"stages": {
    "sources": {"skipped": {"binary": 2, "oversized": 1}},
    "synthesis": {"rejected": {"bad_json": 3}, "deferred": {"llm_budget_exhausted": 4}},
    "validation": {"rejected": {"compile_error": 5}},
    "dedup": {"removed": {"exact_duplicate": 1}},
    "decontamination": {"removed": {}},
}}


def words(text):  # a counter whose numbers are easy to check by hand
    return len(text.split())


def test_compute_stats_counts_by_hand():
    tasks, _ = load_tasks(FIXTURES / "eval_tasks.jsonl")
    st = S.compute_stats(tasks, ("words", words), level=3)
    assert st.n_tasks == 2 and st.tokenizer == "words"
    assert st.response_tokens == [len(t.bench_cu.split()) for t in tasks]
    from cuset.tasks import render_prompt

    p = render_prompt(tasks[1], 3)
    assert st.prompt_tokens[1] == len((p.system + "\n" + p.user).split())
    assert st.families == {"Leaky_ReLU": 1, "Matrix_Transpose": 1}  # no family field: the task name
    assert st.input_dtypes == {"float32": 2} and st.output_dtypes == {"float32": 2}


def test_rejection_counts_follow_the_pipeline():
    assert S.rejection_counts(MANIFEST) == [
        ("sources", "binary", 2), ("sources", "oversized", 1), ("synthesis", "bad_json", 3),
        ("synthesis", "llm_budget_exhausted (deferred)", 4), ("validation", "compile_error", 5),
        ("dedup", "exact_duplicate", 1)]
    assert S.rejection_counts({}) == []


def test_tables_and_plots(tmp_path):
    tasks, _ = load_tasks(FIXTURES / "eval_tasks.jsonl")
    st = S.compute_stats(tasks, S.lexer_token_counter())
    titles = [t.title for t in S.tables(st, MANIFEST)]
    assert titles == ["Token lengths (lexer tokens) over 2 tasks", "Families (2)", "Tensors by dtype",
                      "Removed, by stage and reason"]
    paths = S.write_plots(st, tmp_path, MANIFEST)
    assert [p.name for p in paths] == ["token_lengths.png", "families.png", "dtypes.png", "rejections.png"]
    assert all(p.stat().st_size > 5000 for p in paths)
    assert S.write_plots(S.compute_stats([], S.lexer_token_counter()), tmp_path / "empty", None) == []


def test_many_families_are_folded_into_one_bar(tmp_path, monkeypatch):
    st = S.DatasetStats("t", prompt_tokens=[1] * 40, response_tokens=[2] * 40)
    for i in range(40):
        st.families[f"fam{i:02d}"] += 1
    st.input_dtypes["float32"] = st.output_dtypes["int32"] = 40
    seen = {}
    import matplotlib.axes

    real = matplotlib.axes.Axes.barh
    monkeypatch.setattr(matplotlib.axes.Axes, "barh", lambda self, y, w, **kw: seen.update(y=list(y), w=list(w)) or real(self, y, w, **kw))
    S.plot_families(st, tmp_path / "f.png")
    assert len(seen["y"]) == S.MAX_FAMILY_BARS + 1 and seen["y"][0] == "10 other families" and seen["w"][0] == 10


def test_missing_tokenizer_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="cannot load a tokenizer from"):
        S.hf_token_counter(str(tmp_path / "no-tokenizer"))
