"""The `data` section of a training config."""

from __future__ import annotations

from dataclasses import dataclass

from cuset.config import option
from cuset.train.data.records import FORMATS, WRAPS, RecordOptions


@dataclass
class DataConfig:
    paths: list[str] = option(default_factory=list, help="JSONL training files (one or more).")
    format: str = option("auto", help="Record format: cudabench (task records, response = bench.cu), messages "
                         "(chat with a final assistant turn), prompt_completion, alpaca, or auto (per record, by its keys).",
                         choices=FORMATS)
    prompt_level: int = option(1, help="CUDABench prompt level (1, 2 or 3) rendered as the prompt.", choices=(1, 2, 3))
    compat: bool = option(False, help="CUDABench: render the official harness prompt text instead of the clean one.")
    gpu: str | None = option(None, help="CUDABench: GPU label in the prompt (default: the record's, else the harness default).")
    response_wrap: str = option("fenced", help="CUDABench: the reference program as a fenced code block or raw text.", choices=WRAPS)
    fence_lang: str = option("cuda", help="Info string of the fence around the program (response_wrap=fenced).")
    system_prompt: str | None = option(None, help="System message for records that carry none (non-CUDABench formats).")
    chat_template_kwargs: dict = option(default_factory=dict, help="Extra variables for the chat template, e.g. {enable_thinking: false} for Qwen3.")
    max_length: int = option(4096, help="Tokens per example; input_ids, labels and the CUDA mask are truncated together.")
    cuda_mask: bool = option(True, help="Compute the CUDA-mask column with the span detector (off: all zeros).")
    cuda_spans: str = option("broad", help="What the CUDA mask covers: broad (kernel and __device__ bodies, device "
                             "variables, launch configurations with their whole backward slice, CUDA calls) or paper "
                             "(the paper's wording: __global__ bodies, <<<...>>> and the declarations used directly "
                             "by it).", choices=("broad", "paper"))
    reasoning_weight: float = option(1.0, help="Loss weight of reasoning-trace tokens (records with reasoning_content "
                                     "/ reasoning, or a leading <think> block): 1 trains on the trace like the answer, "
                                     "a value in (0, 1) down-weights it, 0 drops it from the loss (as if it were "
                                     "prompt). The CUDA mask never covers the trace.")
    strict: bool = option(True, help="Bad records (missing field, empty response, invalid UTF-8, prompt over max_length) "
                          "raise an error naming file:line; false skips them and counts them by reason.")
    cache_dir: str | None = option(None, help="Where tokenised datasets are cached (default $CUSET_CACHE or ~/.cache/cuset, /tokenized).")
    limit: int | None = option(None, help="Use only the first N good examples (smoke runs).")

    def __post_init__(self):
        if self.max_length < 2:
            raise ValueError(f"max_length must be at least 2, got {self.max_length}")
        if not 0.0 <= self.reasoning_weight <= 1.0:
            raise ValueError(f"reasoning_weight must be in [0, 1], got {self.reasoning_weight}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"limit must be positive, got {self.limit}")

    def record_options(self) -> RecordOptions:
        return RecordOptions(format=self.format, prompt_level=self.prompt_level, compat=self.compat, gpu=self.gpu,
                             response_wrap=self.response_wrap, fence_lang=self.fence_lang, system_prompt=self.system_prompt)
