"""A fake `vllm` module for machines without vLLM: the engine is the only thing faked.

`fake_vllm_module(respond)` returns a module with vLLM's offline names (`LLM`,
`SamplingParams`, `RequestOutput`, `CompletionOutput`) that behave as vLLM's do where
cuset's backend touches them: `LLM(model=..., tokenizer=...)` loads the model's
Hugging Face tokenizer; `LLM.chat(conversations, sampling_params)` renders each
conversation with the tokenizer's chat template, takes one SamplingParams per
conversation (or one for all), and returns one RequestOutput per conversation, in
order, whose text is `respond(prompt, params)` cut at `max_tokens` tokens (finish
"length"), else followed by the EOS token (finish "stop", EOS counted in token_ids and
left out of the text). SamplingParams takes vLLM's keyword names only and checks
their ranges, so a misspelt or out-of-range parameter fails here as it would there.
Every engine and call is recorded on the module (`engines`, `engine.calls`).
"""

import types


class CompletionOutput:
    def __init__(self, index, text, token_ids, finish_reason):
        self.index, self.text, self.token_ids, self.finish_reason = index, text, token_ids, finish_reason
        self.cumulative_logprob, self.logprobs, self.stop_reason = None, None, None


class RequestOutput:
    def __init__(self, request_id, prompt, prompt_token_ids, outputs):
        self.request_id, self.prompt, self.prompt_token_ids, self.outputs = request_id, prompt, prompt_token_ids, outputs
        self.finished = True


class SamplingParams:
    def __init__(self, *, n=1, temperature=1.0, top_p=1.0, max_tokens=16, seed=None):
        if n < 1 or temperature < 0 or not 0 < top_p <= 1 or max_tokens < 1:
            raise ValueError(f"bad sampling parameters n={n} temperature={temperature} top_p={top_p} "
                             f"max_tokens={max_tokens}")
        if seed is not None and (type(seed) is not int or not -2**63 <= seed < 2**64):
            raise ValueError(f"seed must be an integer torch.Generator takes, got {seed!r}")
        self.n, self.temperature, self.top_p, self.max_tokens, self.seed = n, temperature, top_p, max_tokens, seed


def fake_vllm_module(respond):
    module = types.ModuleType("vllm")
    module.engines = []

    class LLM:
        def __init__(self, model, *, tokenizer=None, tensor_parallel_size=1, dtype="auto", seed=0,
                     gpu_memory_utilization=0.9, max_model_len=None):
            from transformers import AutoTokenizer

            self.kwargs = dict(model=model, tokenizer=tokenizer, tensor_parallel_size=tensor_parallel_size,
                               dtype=dtype, seed=seed, gpu_memory_utilization=gpu_memory_utilization,
                               max_model_len=max_model_len)
            self._tokenizer = AutoTokenizer.from_pretrained(tokenizer or model)
            self.calls = []   # (prompts, params) per chat() call
            module.engines.append(self)

        def get_tokenizer(self):
            return self._tokenizer

        def chat(self, messages, sampling_params=None, use_tqdm=True):
            tok = self._tokenizer
            conversations = messages if messages and isinstance(messages[0], list) else [messages]
            params = sampling_params if isinstance(sampling_params, list) else [sampling_params or SamplingParams()] * len(conversations)
            if len(params) != len(conversations):
                raise ValueError(f"{len(conversations)} conversations but {len(params)} sampling params")
            prompts = [tok.apply_chat_template(c, add_generation_prompt=True, tokenize=False) for c in conversations]
            self.calls.append((prompts, params))
            outputs = []
            for i, (prompt, p) in enumerate(zip(prompts, params)):
                ids = tok.encode(respond(prompt, p), add_special_tokens=False)
                if len(ids) >= p.max_tokens:
                    ids, reason = ids[:p.max_tokens], "length"
                    text = tok.decode(ids)
                else:
                    text, reason = tok.decode(ids), "stop"
                    ids = ids + [tok.eos_token_id]
                prompt_ids = tok.encode(prompt, add_special_tokens=False)
                outputs.append(RequestOutput(str(i), prompt, prompt_ids, [CompletionOutput(0, text, ids, reason)]))
            return outputs

    module.LLM, module.SamplingParams = LLM, SamplingParams
    module.RequestOutput, module.CompletionOutput = RequestOutput, CompletionOutput
    return module
