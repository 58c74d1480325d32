"""The locally built tiny model's tokenizer encodes the same before and after a save/load."""

from transformers import AutoTokenizer

from cuset.train.tiny import build_tiny_model, build_tokenizer

TEXT = ("constexpr int N = 65536;\n__global__ void k(float* y) {\n"
        "    int i = blockIdx.x * 256 + threadIdx.x;  // café\n    y[i] = 1.5e-3f;\n}\n")


def test_saved_tokenizer_loads_as_built(tmp_path):
    """AutoTokenizer loads a Qwen2-config directory as Qwen2Tokenizer, which imposes its own
    pre-tokenisation; the merges must have been trained under it, or multi-digit merges
    become unreachable and the two tokenizers disagree."""
    build_tiny_model(tmp_path, [TEXT] * 20, vocab_size=400)
    built = build_tokenizer([TEXT] * 20, vocab_size=400)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert built.tokenize(TEXT) == loaded.tokenize(TEXT)
    assert built(TEXT)["input_ids"] == loaded(TEXT)["input_ids"]
    # digits are single tokens, as in Qwen2
    assert [t for t in loaded.tokenize(" = 65536;") if t.strip("Ġ").isdigit()] == list("65536")
    assert loaded.decode(loaded(TEXT)["input_ids"]) == TEXT
