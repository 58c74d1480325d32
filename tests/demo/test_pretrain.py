"""The base model's pretraining rows: packed (the demo) or one document per row (the GPU rehearsal)."""

import copy

import pytest
import torch

from cuset.demo.pretrain import document_rows, pack_stream, pretrain

TEXTS = ["__global__ void k(float* x) { x[threadIdx.x] = 0; }", "int main() { return 0; }",
         "<|im_start|>assistant\n<think>\nplan\n</think>\n```cuda\nint main() {}\n```<|im_end|>"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cuset.train.tiny import build_tiny_model

    path = build_tiny_model(tmp_path_factory.mktemp("tiny") / "m", TEXTS * 3, vocab_size=300, hidden_size=32,
                            num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32), AutoTokenizer.from_pretrained(path)


def test_document_rows_start_each_text_at_its_first_token(tiny):
    _, tok = tiny
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in TEXTS]
    seq_len = max(map(len, ids)) - 3  # the longest text is cut, a shorter one padded
    assert min(map(len, ids)) < seq_len
    input_ids, mask, labels = document_rows(tok, TEXTS, seq_len)
    assert input_ids.shape == mask.shape == labels.shape == (3, seq_len)
    for row, want in enumerate(ids):
        n = min(len(want), seq_len)
        assert input_ids[row, :n].tolist() == labels[row, :n].tolist() == want[:n]
        assert mask[row].tolist() == [1] * n + [0] * (seq_len - n)
        assert labels[row, n:].tolist() == [-100] * (seq_len - n)
        assert input_ids[row, n:].tolist() == [tok.pad_token_id] * (seq_len - n)
    with pytest.raises(ValueError, match="no text has a token"):
        document_rows(tok, ["", ""], 8)


def test_a_padded_row_scores_as_its_text_alone(tiny):
    """Padding is out of the attention and of the labels: a short text's loss in a padded row is
    its loss alone, so document rows train every text as it is."""
    model, tok = tiny
    input_ids, mask, labels = document_rows(tok, TEXTS, 64)
    alone = torch.tensor([tok(TEXTS[1], add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        padded = model(input_ids=input_ids[1:2], attention_mask=mask[1:2], labels=labels[1:2]).loss
        plain = model(input_ids=alone, labels=alone).loss
    torch.testing.assert_close(padded, plain, rtol=1e-5, atol=1e-6)


def test_pretrain_documents_first_step_is_the_plain_loss_and_it_learns(tiny):
    model, tok = tiny
    model = copy.deepcopy(model)
    ids = torch.tensor([tok(TEXTS[2], add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        before = model(input_ids=ids, labels=ids).loss.item()
    losses = pretrain(model, tok, [TEXTS[2]], steps=30, seq_len=256, batch_size=4, lr=1e-2, rows="documents")
    assert len(losses) == 30 and losses[0] == pytest.approx(before, rel=1e-5)  # one text: every row is it
    assert losses[-1] < 0.5 * losses[0]
    assert not model.training  # left in eval mode, as with packed rows


def test_pretrain_rows_are_named(tiny):
    model, tok = tiny
    with pytest.raises(ValueError, match="rows must be packed or documents, not 'pack'"):
        pretrain(model, tok, TEXTS, steps=1, rows="pack")


def test_packed_rows_are_the_stream_cut_at_fixed_places(tiny):
    _, tok = tiny
    stream = [i for t in TEXTS for i in tok(t, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]]
    rows = pack_stream(tok, TEXTS, 8)
    assert rows.shape == (len(stream) // 8, 8) and rows.flatten().tolist() == stream[: rows.numel()]
