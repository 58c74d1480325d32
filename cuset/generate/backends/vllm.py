"""vLLM backend (GPU). vLLM is optional: `pip install -e '.[vllm]'`."""

from __future__ import annotations

import time
from typing import Iterator, Sequence

from cuset.generate.backends.interface import Completion, GenerationError, GenRequest
from cuset.generate.seeds import sample_seed


def import_vllm():
    try:
        import vllm
    except ImportError as e:
        raise GenerationError(
            f"the vllm backend needs vLLM, which is not installed ({e}). Install it on a GPU machine with "
            "`pip install -e '.[vllm]'`, or use backend=hf (transformers) or backend=openai "
            "(e.g. against `vllm serve`).") from None
    return vllm


class VLLMGenerator:
    def __init__(self, llm, *, model_name: str, temperature: float, top_p: float, max_new_tokens: int, seed: int):
        self.llm, self.model_name = llm, model_name
        self.temperature, self.top_p, self.max_new_tokens, self.seed = temperature, top_p, max_new_tokens, seed

    @classmethod
    def from_config(cls, cfg) -> "VLLMGenerator":
        vllm = import_vllm()
        if not cfg.model:
            raise GenerationError("set model=<path or name> for the vllm backend")
        v = cfg.vllm
        kwargs = dict(model=cfg.model, tensor_parallel_size=v.tensor_parallel_size, dtype=v.dtype,
                      gpu_memory_utilization=v.gpu_memory_utilization, seed=cfg.sampling.seed)
        if cfg.tokenizer:
            kwargs["tokenizer"] = cfg.tokenizer
        if v.max_model_len:
            kwargs["max_model_len"] = v.max_model_len
        s = cfg.sampling
        return cls(vllm.LLM(**kwargs), model_name=cfg.model, temperature=s.temperature, top_p=s.top_p,
                   max_new_tokens=s.max_new_tokens, seed=s.seed)

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` with the engine's tokenizer (an inline reasoning trace's share of n_tokens)."""
        return len(self.llm.get_tokenizer().encode(text, add_special_tokens=False))

    def generate(self, requests: Sequence[GenRequest]) -> Iterator[tuple[GenRequest, Completion]]:
        vllm = import_vllm()
        # One SamplingParams per request: a distinct seed per (task, sample) keeps
        # the samples of a task different yet reproducible, in any run that asks for them.
        params = [vllm.SamplingParams(n=1, temperature=self.temperature, top_p=self.top_p,
                                      max_tokens=self.max_new_tokens, seed=sample_seed(self.seed, r.task_id, r.sample))
                  for r in requests]
        t0 = time.perf_counter()
        outputs = self.llm.chat([list(r.messages) for r in requests], params, use_tqdm=True)
        seconds = (time.perf_counter() - t0) / max(1, len(requests))
        for req, out in zip(requests, outputs):
            o = out.outputs[0]
            yield req, Completion(o.text, len(o.token_ids), o.finish_reason, seconds)
