"""A tiny random chat model and byte-level BPE tokenizer, built locally (no hub), and fake
OpenAI-compatible servers."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # openai_fakes, vllm_fakes

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = [
    "```cuda\n__global__ void add(const float* a, float* b, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; }\n```",
    "int main() { cudaMalloc(&d, n * sizeof(float)); cudaMemcpy(d, h, n, cudaMemcpyHostToDevice); return 0; }",
    "You are an expert CUDA engineer. Write one complete program. Task Name Input Output GPU",
] * 20


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    out = tmp_path_factory.mktemp("tiny-model")
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(CORPUS, vocab_size=400, min_frequency=1,
                            special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  chat_template=CHAT_TEMPLATE)
    tok.save_pretrained(out)
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, tie_word_embeddings=True)
    Qwen2ForCausalLM(cfg).save_pretrained(out)
    return out


@pytest.fixture
def server_factory():
    """Fake OpenAI-compatible servers (openai_fakes.FakeServer), closed after the test."""
    from openai_fakes import FakeServer

    servers = []

    def make(**kw):
        s = FakeServer(**kw)
        servers.append(s)
        return s
    yield make
    for s in servers:
        s.close()
