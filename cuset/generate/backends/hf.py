"""transformers backend: batched sampling on CPU or GPU, left-padded prompts."""

from __future__ import annotations

import time
from typing import Iterator, Sequence

from cuset.generate.backends.interface import Completion, GenerationError, GenRequest
from cuset.localpath import require_existing


def count_generated(row: Sequence[int], eos_ids: set[int], pad_id: int | None) -> tuple[int, str]:
    """Generated tokens of one row of new ids (EOS included, padding after it not) and why it stopped."""
    for i, tok in enumerate(row):
        if tok in eos_ids:
            return i + 1, "stop"
    n = len(row)
    if pad_id is not None and pad_id not in eos_ids:
        while n and row[n - 1] == pad_id:
            n -= 1
    return n, "length"


def render_chat(tokenizer, messages) -> str:
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
    # No template (base models): plain text turns, the model continues after "assistant".
    return "".join(f"{m['role']}:\n{m['content']}\n\n" for m in messages) + "assistant:\n"


class HFGenerator:
    def __init__(self, model, tokenizer, *, model_name: str, batch_size: int = 8, temperature: float = 0.8,
                 top_p: float = 0.95, max_new_tokens: int = 4096, seed: int = 0):
        self.model, self.tokenizer = model, tokenizer
        self.model_name = model_name
        self.batch_size, self.temperature, self.top_p = batch_size, temperature, top_p
        self.max_new_tokens, self.seed = max_new_tokens, seed
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "left"  # decoder-only: new tokens must follow the prompt directly

    @classmethod
    def from_config(cls, cfg) -> "HFGenerator":
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if not cfg.model:
            raise GenerationError("set model=<path or name> for the hf backend")
        device = cfg.hf.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[cfg.hf.dtype]
        try:
            require_existing(cfg.model, "model", "a model directory")
            if cfg.tokenizer:
                require_existing(cfg.tokenizer, "tokenizer", "a tokenizer directory")
            if cfg.hf.adapter:
                require_existing(cfg.hf.adapter, "hf.adapter", "a PEFT adapter directory")
        except FileNotFoundError as e:
            raise GenerationError(str(e)) from None
        try:
            tokenizer = AutoTokenizer.from_pretrained(cfg.tokenizer or cfg.model)
            model = AutoModelForCausalLM.from_pretrained(cfg.model, dtype=dtype).to(device)
        except (OSError, ValueError) as e:
            raise GenerationError(f"cannot load model {cfg.model!r}: {e}") from None
        if cfg.hf.adapter:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, cfg.hf.adapter)
        model.eval()
        s = cfg.sampling
        return cls(model, tokenizer, model_name=cfg.model, batch_size=cfg.hf.batch_size, temperature=s.temperature,
                   top_p=s.top_p, max_new_tokens=s.max_new_tokens, seed=s.seed)

    def _eos_ids(self) -> set[int]:
        ids = self.model.generation_config.eos_token_id
        ids = set(ids if isinstance(ids, (list, tuple)) else [ids] if ids is not None else [])
        if self.tokenizer.eos_token_id is not None:
            ids.add(self.tokenizer.eos_token_id)
        return ids

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` with the model's tokenizer (a reasoning trace's share of n_tokens)."""
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def generate(self, requests: Sequence[GenRequest]) -> Iterator[tuple[GenRequest, Completion]]:
        import torch

        eos = self._eos_ids()
        device = next(self.model.parameters()).device
        for start in range(0, len(requests), self.batch_size):
            batch = requests[start:start + self.batch_size]
            texts = [render_chat(self.tokenizer, r.messages) for r in batch]
            enc = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
            torch.manual_seed(self.seed + start)  # reproducible for a given request order
            sample = self.temperature > 0
            t0 = time.perf_counter()
            with torch.no_grad():
                out = self.model.generate(
                    **enc, do_sample=sample, max_new_tokens=self.max_new_tokens,
                    temperature=self.temperature if sample else None, top_p=self.top_p if sample else None,
                    pad_token_id=self.tokenizer.pad_token_id, eos_token_id=sorted(eos) or None,
                )
            seconds = (time.perf_counter() - t0) / len(batch)
            new = out[:, enc["input_ids"].shape[1]:].tolist()
            for req, row in zip(batch, new):
                n, reason = count_generated(row, eos, self.tokenizer.pad_token_id)
                text = self.tokenizer.decode(row[:n], skip_special_tokens=True)
                yield req, Completion(text, n, reason, seconds)
