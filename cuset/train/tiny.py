"""A tiny causal LM and tokenizer built locally, for CPU smoke runs, tests and benches.

Nothing is downloaded: a byte-level BPE is trained on the given texts (so any text
tokenises), wrapped as a Hugging Face fast tokenizer with a ChatML chat template, and
a randomly initialised Qwen2-architecture model of the requested size is saved
beside it. The directory loads with `from_pretrained` like any hub model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


# Qwen2's pre-tokenisation (one digit per token, words with their leading punctuation).
# AutoTokenizer loads a directory whose config says model_type "qwen2" as Qwen2Tokenizer,
# which rebuilds this pipeline whatever tokenizer.json holds; training the merges under
# the same pipeline keeps the tokenizer we build and the one that loads identical.
QWEN2_PRETOKENIZE_REGEX = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
                           r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")


def build_tokenizer(texts: Iterable[str], vocab_size: int = 512):
    """A byte-level BPE fast tokenizer with ChatML special tokens and chat template,
    pre-tokenised like Qwen2."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.normalizer = normalizers.NFC()
    core.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    core.train_from_iterator(list(texts), trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  bos_token=None, unk_token=None)
    tok.chat_template = CHATML_TEMPLATE
    return tok


def build_tiny_model(out_dir: str | Path, texts: Iterable[str], *, vocab_size: int = 512, model_vocab_size: int | None = None,
                     hidden_size: int = 64, num_layers: int = 2, num_heads: int = 4, num_kv_heads: int = 2,
                     intermediate_size: int | None = None, max_position_embeddings: int = 4096, seed: int = 0) -> Path:
    """Save a tiny randomly initialised Qwen2 causal LM and its tokenizer in `out_dir`.

    `model_vocab_size` (default: the tokenizer's size) lets a bench use a large
    embedding/LM head, e.g. 151,936 like Qwen, with a small tokenizer.
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    out = Path(out_dir)
    tok = build_tokenizer(texts, vocab_size)
    n_vocab = model_vocab_size or len(tok)
    if n_vocab < len(tok):
        raise ValueError(f"model_vocab_size {n_vocab} is smaller than the tokenizer ({len(tok)} tokens)")
    config = Qwen2Config(
        vocab_size=n_vocab, hidden_size=hidden_size, num_hidden_layers=num_layers, num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads, intermediate_size=intermediate_size or 2 * hidden_size,
        max_position_embeddings=max_position_embeddings, tie_word_embeddings=False,
        pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out
