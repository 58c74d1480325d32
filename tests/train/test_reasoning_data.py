"""Reasoning traces in training data: records, chat-template rendering, the CUDA mask
never on the trace, reasoning_weight (drop or down-weight), truncation alignment."""

from __future__ import annotations

import pytest
import torch

from cuset.losses import LossConfig, compute_loss
from cuset.train.data import (IGNORE_INDEX, DataConfig, PadCollator, RecordOptions, build_dataset, parse_record,
                              response_spans, tokenize_example)
from cuset.tasks.io import Problem

from .conftest import RELU, write_jsonl

PROMPT = [{"role": "user", "content": "Write a relu kernel."}]
# the trace quotes CUDA code, a kernel launch and a fenced block: none of it may carry the CUDA mask
TRACE = ("I could write relu<<<16, 256>>>(x, n) with\n```cuda\n__global__ void relu(float* x, int n) "
         "{ x[threadIdx.x] = 0; }\n```\nbut a grid-stride loop is cleaner.")
ANSWER = f"Here it is:\n```cuda\n{RELU.strip()}\n```"

# A Qwen3-style template: the trace of the assistant turn goes in its own field.
FIELD_TEMPLATE = (
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' }}"
    "{% if m['role'] == 'assistant' and m.get('reasoning_content') %}"
    "{{ '<think>\\n' + m['reasoning_content'].strip() + '\\n</think>\\n\\n' + m['content'].lstrip() }}"
    "{% else %}{{ m['content'] }}{% endif %}{{ '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


@pytest.fixture(scope="module")
def field_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tok.chat_template = FIELD_TEMPLATE
    return tok


def supervised(tok, out) -> str:
    return tok.decode([t for t, lab in zip(out["input_ids"], out["labels"]) if lab != IGNORE_INDEX])


def tokens_where(tok, out, column) -> str:
    return tok.decode([t for t, f in zip(out["input_ids"], out[column]) if f])


# --- records ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("record", [
    {"messages": [*PROMPT, {"role": "assistant", "content": ANSWER, "reasoning_content": TRACE}]},
    {"messages": [*PROMPT, {"role": "assistant", "content": ANSWER, "reasoning": TRACE}]},
    {"messages": [*PROMPT, {"role": "assistant", "content": f"<think>\n{TRACE}\n</think>\n\n{ANSWER}"}]},
    {"prompt": PROMPT[0]["content"], "completion": ANSWER, "reasoning": TRACE},
    {"instruction": PROMPT[0]["content"], "output": f"<think>{TRACE}</think>{ANSWER}"},
], ids=["reasoning_content", "reasoning", "inline", "prompt_completion", "alpaca_inline"])
def test_records_keep_the_trace_apart_from_the_answer(record):
    ex = parse_record(record, RecordOptions(), "f.jsonl", 3)
    assert ex.reasoning.strip() == TRACE and ex.response.strip() == ANSWER


@pytest.mark.parametrize("record, field, reason", [
    ({"messages": [*PROMPT, {"role": "assistant", "content": f"<think>{TRACE}"}]}, "messages[1].content",
     "unterminated_reasoning"),
    ({"messages": [*PROMPT, {"role": "assistant", "content": f"<think>{TRACE}</think>\n"}]}, "messages[1].content",
     "empty_response"),
    ({"prompt": "p", "completion": ANSWER, "reasoning": 7}, "reasoning", "bad_type"),
])
def test_bad_traces_are_problems_naming_the_field(record, field, reason):
    p = parse_record(record, RecordOptions(), "f.jsonl", 9)
    assert isinstance(p, Problem) and (p.line, p.field, p.reason) == (9, field, reason)


def test_a_record_without_a_trace_is_unchanged():
    ex = parse_record({"prompt": "p", "completion": ANSWER}, RecordOptions(), "f.jsonl", 1)
    assert ex.reasoning is None and ex.response == ANSWER


# --- tokenisation ------------------------------------------------------------------------------------

@pytest.mark.parametrize("template", ["inline", "field"])
def test_trace_is_supervised_and_never_cuda_masked(tokenizer, field_tokenizer, template):
    tok = tokenizer if template == "inline" else field_tokenizer
    out = tokenize_example(tok, PROMPT, ANSWER, max_length=4096, spans=response_spans(ANSWER), reasoning=TRACE)
    # the assistant's whole output is supervised: <think>, the trace, </think>, the answer, end of turn
    assert supervised(tok, out) == f"<think>\n{TRACE}\n</think>\n\n{ANSWER}<|im_end|>"
    reasoning = [i for i, r in enumerate(out["reasoning_mask"]) if r]
    assert reasoning == list(range(out["n_prompt_tokens"], reasoning[-1] + 1))  # one block, right after the prompt
    assert tokens_where(tok, out, "reasoning_mask") == f"<think>\n{TRACE}\n</think>\n\n"
    assert not any(out["cuda_mask"][i] for i in reasoning)  # the quoted kernel and launch are not marked
    cuda_text = tokens_where(tok, out, "cuda_mask")
    assert "<<<16, 256>>>" in cuda_text and "fmaxf(x[i], 0.0f)" in cuda_text
    assert "loss_weight" not in out  # weight 1: the trace trains like the answer, no column needed


def test_the_cuda_mask_of_the_answer_is_the_same_with_or_without_a_trace(tokenizer):
    spans = response_spans(ANSWER)
    plain = tokenize_example(tokenizer, PROMPT, ANSWER, max_length=4096, spans=spans)
    traced = tokenize_example(tokenizer, PROMPT, ANSWER, max_length=4096, spans=spans, reasoning=TRACE)
    assert tokens_where(tokenizer, plain, "cuda_mask") == tokens_where(tokenizer, traced, "cuda_mask")
    assert sum(plain["cuda_mask"]) == sum(traced["cuda_mask"]) > 0


def test_reasoning_weight_zero_removes_the_trace_from_the_labels(tokenizer):
    out = tokenize_example(tokenizer, PROMPT, ANSWER, max_length=4096, spans=response_spans(ANSWER),
                           reasoning=TRACE, reasoning_weight=0.0)
    assert supervised(tokenizer, out) == f"{ANSWER}<|im_end|>"
    assert all(lab == IGNORE_INDEX for lab, r in zip(out["labels"], out["reasoning_mask"]) if r)
    assert sum(out["reasoning_mask"]) > 0 and "loss_weight" not in out


def test_a_fractional_weight_is_a_loss_weight_column(tokenizer):
    out = tokenize_example(tokenizer, PROMPT, ANSWER, max_length=4096, reasoning=TRACE, reasoning_weight=0.25)
    assert supervised(tokenizer, out) == f"<think>\n{TRACE}\n</think>\n\n{ANSWER}<|im_end|>"
    assert out["loss_weight"] == [0.25 if r else 1.0 for r in out["reasoning_mask"]]
    assert out["loss_weight"].count(0.25) == sum(out["reasoning_mask"]) > 10
    plain = tokenize_example(tokenizer, PROMPT, ANSWER, max_length=4096, reasoning_weight=0.25)
    assert set(plain["loss_weight"]) == {1.0}  # same columns for examples without a trace


@pytest.mark.parametrize("cut_in", ["trace", "answer"])
def test_truncation_keeps_every_column_aligned(tokenizer, cut_in):
    kw = dict(spans=response_spans(ANSWER), reasoning=TRACE, reasoning_weight=0.5)
    full = tokenize_example(tokenizer, PROMPT, ANSWER, max_length=4096, **kw)
    n_trace = int(sum(full["reasoning_mask"]))
    limit = full["n_prompt_tokens"] + (n_trace // 2 if cut_in == "trace" else n_trace + 20)
    cut = tokenize_example(tokenizer, PROMPT, ANSWER, max_length=limit, **kw)
    assert cut["truncated"]
    for key in ("input_ids", "labels", "cuda_mask", "reasoning_mask", "loss_weight", "offsets"):
        assert cut[key] == full[key][:limit], key
    if cut_in == "answer":  # the first answer tokens are kept, with their CUDA flags
        assert sum(cut["reasoning_mask"]) == n_trace and sum(cut["cuda_mask"]) < sum(full["cuda_mask"])


def test_template_that_drops_the_trace_is_an_error(tiny_model_dir):
    from transformers import AutoTokenizer

    from cuset.train.data import TemplateError

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tok.chat_template = FIELD_TEMPLATE.replace("m['reasoning_content'].strip()", "''")
    with pytest.raises(TemplateError, match="reasoning trace"):
        tokenize_example(tok, PROMPT, ANSWER, max_length=4096, reasoning=TRACE)


def test_reasoning_weight_out_of_range_is_a_config_error():
    with pytest.raises(ValueError, match="reasoning_weight must be in"):
        DataConfig(paths=["x.jsonl"], reasoning_weight=1.5)


# --- the dataset and the loss --------------------------------------------------------------------------

def _records():
    return [{"messages": [*PROMPT, {"role": "assistant", "content": ANSWER, "reasoning_content": TRACE}]},
            {"prompt": "Write relu.", "completion": ANSWER}]


def test_dataset_carries_the_weight_column_and_counts_trace_tokens(tokenizer, tmp_path):
    path = write_jsonl(tmp_path / "r.jsonl", _records())
    ds, report = build_dataset(DataConfig(paths=[str(path)], reasoning_weight=0.5, cache_dir=str(tmp_path / "c")),
                               tokenizer, progress=False)
    assert ds.column_names == ["input_ids", "labels", "cuda_mask", "loss_weight"]
    assert report.reasoning_examples == 1 and report.reasoning_tokens == ds[0]["loss_weight"].count(0.5) > 10
    assert set(ds[1]["loss_weight"]) == {1.0}
    batch = PadCollator(pad_token_id=0)([ds[0], ds[1]])
    assert batch["loss_weight"].shape == batch["labels"].shape
    assert float(batch["loss_weight"][1, len(ds[1]["input_ids"]):].abs().sum()) == 0.0  # padding weighs 0
    again, report2 = build_dataset(DataConfig(paths=[str(path)], reasoning_weight=0.5, cache_dir=str(tmp_path / "c")),
                                   tokenizer, progress=False)
    assert report2.cache_hit and report2.reasoning_tokens == report.reasoning_tokens
    one, _ = build_dataset(DataConfig(paths=[str(path)], cache_dir=str(tmp_path / "c")), tokenizer, progress=False)
    assert one.column_names == ["input_ids", "labels", "cuda_mask"]  # another weight, another cache entry


def _tiny_lm():
    import transformers

    torch.manual_seed(0)
    cfg = transformers.Qwen2Config(vocab_size=32, hidden_size=16, intermediate_size=24, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32,
                                   tie_word_embeddings=False, attn_implementation="eager")
    return transformers.Qwen2ForCausalLM(cfg).double()


def test_loss_weight_scales_each_token_term_exactly():
    model = _tiny_lm()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 32, (2, 10), generator=g)
    labels = ids.clone()
    labels[:, :3] = IGNORE_INDEX
    weight = torch.ones(2, 10, dtype=torch.float64)
    weight[:, 3:6] = 0.25  # the "trace" of each row
    batch = {"input_ids": ids, "labels": labels, "attention_mask": torch.ones_like(ids)}
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits[:, :-1], -1)
    tgt = labels[:, 1:]
    mask = tgt != IGNORE_INDEX
    nll = -logp.gather(2, tgt.clamp(min=0)[..., None])[..., 0]
    want = float((nll * weight[:, 1:])[mask].sum() / mask.sum())
    loss, _ = compute_loss(model, {**batch, "loss_weight": weight}, LossConfig(name="sft"))
    assert float(loss) == pytest.approx(want, rel=1e-10)
    # weight 0 on a token == no label on it, when both divide by the same token count
    dropped = labels.clone()
    dropped[:, 3:6] = IGNORE_INDEX
    zero = weight.clone()
    zero[:, 3:6] = 0.0
    n = int(mask.sum())
    a, _ = compute_loss(model, {**batch, "loss_weight": zero}, LossConfig(name="sft"), num_items_in_batch=n)
    b, _ = compute_loss(model, {**batch, "labels": dropped}, LossConfig(name="sft"), num_items_in_batch=n)
    assert float(a) == pytest.approx(float(b), rel=1e-12)
    ga = torch.autograd.grad(compute_loss(model, {**batch, "loss_weight": zero}, LossConfig(name="cuset", cuda_mask=False),
                                          num_items_in_batch=n)[0], model.lm_head.weight)[0]
    assert torch.isfinite(ga).all()


def test_negative_loss_weight_is_rejected():
    model = _tiny_lm()
    ids = torch.randint(0, 32, (1, 6))
    with pytest.raises(ValueError, match="loss_weight must not be negative"):
        compute_loss(model, {"input_ids": ids, "labels": ids, "loss_weight": -torch.ones(1, 6)}, LossConfig(name="sft"))

