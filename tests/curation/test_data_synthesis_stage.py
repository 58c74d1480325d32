from collections import Counter

import pytest

from cuset.curation.config import LLMConfig
from cuset.curation.llm import ChatClient, LLMFatalError
from cuset.curation.llm_stage import synthesize_candidates
from cuset.curation.runstore import StageStore
from cuset.io import read_jsonl
from cuset.curation.sources import scan_sources
from cuset.tasks import Task

from llm_fakes import FakeLLMServer

SETTINGS = {"model": "fake-coder"}
LLM_CANDIDATES = 11  # 10 programs from the directory + 1 pair


@pytest.fixture
def candidates(build_config):
    cfg = build_config()
    return scan_sources(cfg.sources, cfg.max_file_bytes).candidates


def run_stage(cands, run_dir, server_url, cache_dir, **llm):
    client = ChatClient(LLMConfig(base_url=server_url, model="fake-coder", backoff_s=0, **llm), cache_dir)
    store = StageStore(run_dir, "2_synthesis", SETTINGS)
    try:
        return synthesize_candidates(cands, store, client, concurrency=3, max_program_chars=40_000), client
    finally:
        client.close()


def test_programs_become_tasks_or_rejections(candidates, tmp_path, fake_llm):
    outcome, client = run_stage(candidates, tmp_path / "run", fake_llm.base_url, tmp_path / "cache")
    recs = outcome.records
    assert [r["key"] for r in recs] == [c.key for c in candidates]  # one record per candidate, in order
    assert fake_llm.requests == LLM_CANDIDATES and client.stats()["requests_sent"] == LLM_CANDIDATES
    by_origin = {r["origin"].rsplit("/", 1)[-1]: r for r in recs}
    assert by_origin["bad_reply.cu"]["reason"] == "bad_json"
    assert by_origin["incomplete_reply.cu"]["reason"] == "missing_field"
    assert "gen_py" in by_origin["incomplete_reply.cu"]["detail"]
    assert Counter((r["status"], r["reason"]) for r in recs) == Counter({
        ("ok", "synthesized"): 9, ("ok", "given"): 1, ("rejected", "bad_json"): 1, ("rejected", "missing_field"): 1})
    cube = Task.from_json(by_origin["pairs.jsonl:1"]["task"])
    assert cube.task_name == "Cube" and "cube_kernel" in cube.bench_cu
    given = next(r for r in recs if r["reason"] == "given")
    assert given["task"]["task_name"] == "Vector_Negate" and given["request_key"] is None
    # the stage file is the inspectable record of the same thing
    assert read_jsonl(tmp_path / "run" / "2_synthesis.jsonl") == recs


def test_resume_sends_nothing_and_fresh_run_dir_uses_the_reply_cache(candidates, tmp_path, fake_llm):
    run_stage(candidates, tmp_path / "run", fake_llm.base_url, tmp_path / "cache")
    assert fake_llm.requests == LLM_CANDIDATES
    again, client = run_stage(candidates, tmp_path / "run", fake_llm.base_url, tmp_path / "cache")
    assert fake_llm.requests == LLM_CANDIDATES and client.stats()["cache_hits"] == 0  # stage records reused
    fresh, client = run_stage(candidates, tmp_path / "other_run", fake_llm.base_url, tmp_path / "cache")
    assert fake_llm.requests == LLM_CANDIDATES and client.stats()["cache_hits"] == LLM_CANDIDATES
    strip = lambda rs: [{k: v for k, v in r.items() if k != "cached"} for r in rs]  # noqa: E731
    assert strip(fresh.records) == strip(again.records)
    assert all(r["cached"] for r in fresh.records if r["request_key"])


def test_budget_defers_the_rest_to_the_next_run(candidates, tmp_path, fake_llm):
    first, _ = run_stage(candidates, tmp_path / "run", fake_llm.base_url, tmp_path / "cache", max_requests=4)
    assert fake_llm.requests == 4
    assert first.deferred == Counter({"llm_budget_exhausted": LLM_CANDIDATES - 4})
    assert len(first.records) == 1 + 4  # the given task + the four answered
    second, _ = run_stage(candidates, tmp_path / "run", fake_llm.base_url, tmp_path / "cache")
    assert not second.deferred and len(second.records) == len(candidates)
    assert fake_llm.requests == LLM_CANDIDATES  # nothing asked twice


def test_fatal_server_error_keeps_finished_items(candidates, tmp_path):
    with FakeLLMServer() as ok_server:
        run_stage(candidates[:3], tmp_path / "run", ok_server.base_url, tmp_path / "cache")
    with FakeLLMServer(failures=[(401, None)] * 50) as bad:
        with pytest.raises(LLMFatalError, match="HTTP 401"):
            run_stage(candidates, tmp_path / "run", bad.base_url, tmp_path / "cache2")
        assert bad.requests <= 3  # the other workers stop instead of hammering the server
    kept = read_jsonl(tmp_path / "run" / "2_synthesis.jsonl")
    assert {r["key"] for r in kept} >= {c.key for c in candidates[:3]}


def test_changed_llm_settings_start_the_stage_afresh(candidates, tmp_path, fake_llm):
    run_stage(candidates[:2], tmp_path / "run", fake_llm.base_url, tmp_path / "cache")
    StageStore(tmp_path / "run", "2_synthesis", {"model": "another"})
    assert not (tmp_path / "run" / "2_synthesis.jsonl").exists()


def test_too_long_programs_are_not_sent(candidates, tmp_path, fake_llm):
    client = ChatClient(LLMConfig(base_url=fake_llm.base_url), tmp_path / "cache")
    store = StageStore(tmp_path / "run", "2_synthesis", SETTINGS)
    out = synthesize_candidates(candidates, store, client, concurrency=2, max_program_chars=1000)
    long = [r for r in out.records if r["reason"] == "too_long_for_llm"]
    assert len(long) == sum(len(c.code) > 1000 for c in candidates if c.kind != "task") == 6
    assert fake_llm.requests == LLM_CANDIDATES - 6
