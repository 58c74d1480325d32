"""Token-level attribution: the first token where a failing program leaves every correct program
of its task, and the cause there (base probability vs tau, CUDA mask), on hand-built token lists
and through the demo's step on a byte-level tokenizer (one character = one token, so positions
are counted by hand)."""

import json
from pathlib import Path

import numpy as np
import pytest

from cuset.analysis.attribution import (CAUSES, Attribution, CorrectProgram, attribute, cause_table,
                                        first_divergence, table_lines)


def test_first_divergence_is_the_longest_common_prefix_with_any_correct_program():
    reference = [1, 2, 3, 4, 5]
    passing = [1, 2, 9, 9, 9, 9]
    # leaves the reference at index 3 (4 -> 7), the passing sample at index 2: L = 3, the reference followed
    d = first_divergence([1, 2, 3, 7, 5], [reference, passing])
    assert (d.position, d.followed) == (3, 0)
    # follows the passing sample longer: 1 2 9 9 | 8
    d = first_divergence([1, 2, 9, 9, 8], [reference, passing])
    assert (d.position, d.followed) == (4, 1)
    # diverges at the first token
    assert first_divergence([6, 2, 3], [reference, passing]) == type(d)(0, 0)
    # a tie at L = 2 goes to the first program in the order given (the reference)
    assert first_divergence([1, 2, 0], [reference, [1, 2, 8]]).followed == 0
    # a sample that stops early diverges where it stops; one identical to a correct program does not
    assert first_divergence([1, 2], [reference]).position == 2
    assert first_divergence(list(passing), [reference, passing]) is None
    with pytest.raises(ValueError, match="at least one correct program"):
        first_divergence([1], [])


def _program(source, ids, p, mask):
    return CorrectProgram(source, tuple(ids), tuple(f"t{i}" for i in ids), tuple(p), tuple(mask))


def test_the_cause_is_read_at_the_reference_token_of_the_program_followed_longest():
    reference = _program("reference", [1, 2, 3, 4], [0.9, 0.9, 0.05, 0.9], [False, False, True, False])
    passing = _program("sft sample 0", [1, 2, 5, 6], [0.9, 0.8, 0.3, 0.2], [False, False, False, True])
    at = lambda ids, **kw: attribute(ids, tuple(f"t{i}" for i in ids or ()), [reference, passing], task_id=7, sample=1,
                                     status="wrong", **kw)
    # leaves both at index 2; the reference is followed (tie, first): its token 3 has p 0.05 <= 0.1, inside the mask
    a = at([1, 2, 9], tau=0.1)
    assert (a.cause, a.position, a.followed, a.reference_token, a.sample_token, a.p_base, a.in_mask) == (
        "low_inside", 2, "reference", "t3", "t9", 0.05, True)
    # p <= tau: at p == tau the token is low (the confidence mask drops it), just above it is high
    assert at([1, 2, 9], tau=0.05).cause == "low_inside"
    assert at([1, 2, 9], tau=0.0499).cause == "high_inside"
    # follows the passing sample to index 3: its token 6 has p 0.2 > 0.1, inside its mask
    assert at([1, 2, 5, 0], tau=0.1).cause == "high_inside"
    # and the passing sample's index 2 (p 0.3, outside) when the reference is not the first
    b = attribute([1, 2, 5, 0][:3] + [9], ("a",) * 4, [passing, reference], tau=0.5, task_id=7, sample=1,
                  status="wrong")
    assert (b.cause, b.position, b.followed) == ("low_inside", 3, "sft sample 0")
    c = attribute([1, 2, 8], ("a",) * 3, [passing, reference], tau=0.25, task_id=7, sample=1, status="wrong")
    assert (c.cause, c.p_base) == ("high_outside", 0.3)
    # counted apart: no program, identical to a correct one, running past the end
    assert at(None, tau=0.1).cause == "no_program"
    assert at([1, 2, 3, 4], tau=0.1).cause == "same_as_correct"
    assert at([1, 2, 3, 4, 4], tau=0.1).cause == "past_end"


def test_the_table_counts_causes_and_shares_among_attributed_samples():
    rows = [Attribution(1, i, "wrong", c) for i, c in enumerate(
        ["low_outside", "low_outside", "low_inside", "high_inside", "no_program", "past_end"])]
    t = cause_table(rows)
    assert (t["n_failing"], t["n_attributed"]) == (6, 4)
    assert t["counts"] == {"low_outside": 2, "low_inside": 1, "high_outside": 0, "high_inside": 1,
                           "no_program": 1, "same_as_correct": 0, "past_end": 1}
    assert t["shares"] == {"low_outside": 0.5, "low_inside": 0.25, "high_outside": 0.0, "high_inside": 0.25}
    assert cause_table([])["shares"] == dict.fromkeys(CAUSES)
    line = table_lines({"sft": t})[2]
    assert line.startswith("| sft | 6 | 4 | 2 (50.0%) | 1 (25.0%) | 0 (0.0%) | 1 (25.0%) | 1 | 0 | 1 |")
    with pytest.raises(ValueError, match="unknown attribution cause"):
        cause_table([Attribution(1, 0, "wrong", "mystery")])


# -- the demo's step, end to end on a byte-level tokenizer -----------------------------------------

@pytest.fixture(scope="module")
def byte_model(tmp_path_factory):
    """A tiny Qwen2 model whose tokenizer has no merges: every ASCII character is one token."""
    from cuset.train.tiny import build_tiny_model

    out = tmp_path_factory.mktemp("bytes") / "model"
    build_tiny_model(out, ["x"], vocab_size=259, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1)
    from transformers import AutoTokenizer

    assert len(AutoTokenizer.from_pretrained(out)) == 259
    return out


def _task():
    from cuset.curation.synth import synthesize

    return synthesize(1, 0, families=["saxpy"])[0]


def _teacher_forced_p(model_dir: Path, task, code: str, position: int) -> float:
    """p of response token `position` under the model, computed here with a plain forward pass."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cuset.tasks import render_prompt
    from cuset.train.data.records import wrap_response

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    response, _ = wrap_response(code, "fenced", "cuda")
    messages = list(render_prompt(task, 1).messages()) + [{"role": "assistant", "content": response}]
    text = tok.apply_chat_template(messages, tokenize=False)
    start = text.index(response)
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    first = [a for a, _ in offsets].index(start)
    assert all(b - a == 1 for a, b in offsets[first:first + len(response)])  # one token per character
    at = first + position
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, at - 1]
    return float(torch.softmax(logits.double(), -1)[ids[at]])


def test_the_demo_step_finds_the_hand_counted_token_and_its_cause(byte_model, tmp_path):
    from cuset.demo.attribute import attribute_runs, read_attribution
    from cuset.evaluate.records import SampleResult, Status, save_results
    from cuset.generate.records import GenerationRecord, save_generations
    from cuset.tasks import save_tasks

    task = _task()
    ref = task.bench_cu.strip("\n")
    head = len("```cuda\n")                      # the fence before the program: 8 tokens
    kernel = ref.index("__global__")             # inside the kernel's definition: the CUDA mask
    constant = ref.rindex("int main")            # main's signature: outside it
    inside = ref[:kernel + 3] + "Z" + ref[kernel + 4:]                  # "__gZobal__": 4th char of the kernel line
    outside = ref[:constant + 1] + "Q" + ref[constant + 2:]             # "iQt main"
    passing = ref + "\n// ok"                                           # a passing sample: ends later
    save_tasks([task], tmp_path / "eval.jsonl")
    samples = [("wrong", inside), ("wrong", outside), ("passed", passing), ("compile_error", None),
               ("wrong", ref)]
    gens = [GenerationRecord(task.id, task.task_name, i, "m", 1, f"```cuda\n{c}\n```" if c else "", c, 10, "stop", 0.1)
            for i, (_, c) in enumerate(samples)]
    results = [SampleResult(task.id, task.task_name, task.family, i, Status(st), compiled=st != "compile_error",
                            passed=st == "passed") for i, (st, _) in enumerate(samples)]
    save_generations(tmp_path / "gens.jsonl", gens)
    save_results(tmp_path / "results.jsonl", results)
    out = tmp_path / "attribution"
    p_inside = _teacher_forced_p(byte_model, task, ref, head + kernel + 3)
    p_outside = _teacher_forced_p(byte_model, task, ref, head + constant + 1)
    for tau, low_in, low_out in ((1.0, True, True), (min(p_inside, p_outside) / 2, False, False)):
        found = attribute_runs(tasks_path=tmp_path / "eval.jsonl", base_model=byte_model, tau=tau, out=out,
                               runs={"arm": (tmp_path / "gens.jsonl", tmp_path / "results.jsonl", "paper")})
        rows = {r.sample: r for r in found["arm"]}
        assert set(rows) == {0, 1, 3, 4}  # the failing samples
        assert (rows[0].position, rows[0].followed, rows[0].reference_token, rows[0].sample_token) == (
            head + kernel + 3, "reference", "l", "Z")
        assert rows[0].in_mask is True and rows[0].p_base == pytest.approx(p_inside, rel=1e-4)
        assert rows[0].cause == ("low" if low_in else "high") + "_inside"
        assert (rows[1].position, rows[1].reference_token, rows[1].in_mask) == (head + constant + 1, "n", False)
        assert rows[1].p_base == pytest.approx(p_outside, rel=1e-4)
        assert rows[1].cause == ("low" if low_out else "high") + "_outside"
        assert rows[3].cause == "no_program" and rows[4].cause == "same_as_correct"
        assert read_attribution(tmp_path, "arm") == found["arm"]
    meta = json.loads((out / "meta.json").read_text())
    assert meta["correct_programs"] == {str(task.id): ["reference", "arm sample 2"]}


def test_an_arm_added_or_a_verdict_changed_makes_its_attribution_stale(tmp_path):
    from types import SimpleNamespace

    from cuset.demo.attribute import attribution_stale, inputs_digest

    def results(model: str) -> Path:
        return tmp_path / "cells" / model / "eval" / "results.jsonl"

    def row(status: str, **extra) -> str:
        return json.dumps({"task_id": 0, "task_name": "T", "family": "t", "sample": 0, "status": status,
                           "passed": status == "passed", **extra}) + "\n"

    run = SimpleNamespace(out=tmp_path, models=["vanilla", "sft"], eval_dir=lambda m: results(m).parent,
                          generations=lambda m: tmp_path / "cells" / m / "generations.jsonl")
    for model, status in (("vanilla", "wrong"), ("sft", "passed")):
        results(model).parent.mkdir(parents=True)
        results(model).write_text(row(status))
    assert not attribution_stale(run)  # never ran: the step log decides
    (tmp_path / "attribution").mkdir()
    digests = {m: inputs_digest(run.generations(m), results(m)) for m in run.models}
    (tmp_path / "attribution" / "meta.json").write_text(json.dumps({"inputs": digests}))
    assert not attribution_stale(run)
    results("sft").write_text(row("passed", judge="b", timings={"run": 9.0}))  # judged again, same verdict
    assert not attribution_stale(run)
    results("sft").write_text(row("wrong", judge="c"))                         # a verdict changed
    assert attribution_stale(run)
    results("sft").write_text(row("passed"))
    assert not attribution_stale(run)
    run.models.append("cuset")  # an arm added
    assert attribution_stale(run)
    (tmp_path / "attribution" / "meta.json").write_text(json.dumps({"spans": {"vanilla": "broad"}}))
    run.models.remove("cuset")
    assert attribution_stale(run)  # written before its inputs were recorded: computed again
