"""`cuset generate` configuration (YAML + key=value overrides)."""

from __future__ import annotations

from dataclasses import dataclass

from cuset.config import option


@dataclass
class SamplingConfig:
    temperature: float = option(0.8, help="0 = greedy")
    top_p: float = option(0.95, help="nucleus sampling mass")
    max_new_tokens: int = option(4096, help="generated tokens per sample at most")
    seed: int = option(0, help="base sampling seed: each (task, sample) samples with a seed derived from it, "
                       "the task id and the sample (cuset.generate.seeds) for openai and vllm; hf seeds each batch with seed + its position in the run")

    def __post_init__(self):
        if self.temperature < 0:
            raise ValueError("temperature must be >= 0")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be >= 1")


@dataclass
class HFConfig:
    batch_size: int = option(8, help="prompts per generate() call")
    device: str = option("auto", help="cpu, cuda, cuda:1 or auto")
    dtype: str = option("auto", help="auto, float32, bfloat16 or float16", choices=("auto", "float32", "bfloat16", "float16"))
    adapter: str = option("", help="optional PEFT/LoRA adapter directory applied on top of the model")


@dataclass
class VLLMConfig:
    tensor_parallel_size: int = option(1, help="GPUs to shard the model over")
    gpu_memory_utilization: float = option(0.9, help="fraction of GPU memory vLLM may take")
    max_model_len: int | None = option(None, help="context length (default: the model's)")
    dtype: str = option("auto", help="auto, bfloat16 or float16")


@dataclass
class OpenAIConfig:
    base_url: str = option("http://127.0.0.1:8000/v1", help="OpenAI-compatible server, up to /v1")
    base_urls: list[str] = option(default_factory=list, help="several servers serving the same model (e.g. one "
                                  "`vllm serve` per node): requests are spread over them with `concurrency` slots "
                                  "each and fail over when one is down; overrides base_url")
    api_key_env: str = option("OPENAI_API_KEY", help="environment variable holding the API key (optional)")
    concurrency: int = option(8, help="requests in flight at most (per endpoint)")
    max_retries: int = option(6, help="retries on 429, 5xx and connection errors")
    backoff_initial: float = option(1.0, help="seconds before the first retry; doubles each time")
    backoff_max: float = option(60.0, help="longest wait between retries")
    request_timeout: float = option(600.0, help="seconds per request")


@dataclass
class GenerateConfig:
    tasks: str = option("", help="tasks JSONL (CUDABench format) or Hugging Face dataset name")
    out: str = option("", help="generations JSONL to write (appended; a re-run fills in missing samples)")
    backend: str = option("hf", help="hf (transformers), vllm, openai (any OpenAI-compatible server)",
                          choices=("hf", "vllm", "openai"))
    model: str = option("", help="model path or name (served model name for openai)")
    tokenizer: str = option("", help="tokenizer for token counts (default: the model's; openai: server usage)")
    n_samples: int = option(3, help="samples per task")
    level: int = option(1, help="prompt level 1, 2 or 3", choices=(1, 2, 3))
    compat: bool = option(False, help="official CUDABench prompt and first-fenced-block extraction")
    gpu: str = option("", help="GPU label in the prompt (default: the harness's RTX 4090)")
    task_ids: list[int | str] = option(default_factory=list, help="only these task ids (default: all; KernelBench ids are names)")
    limit: int = option(0, help="only the first N tasks (0 = all)")
    progress: bool = option(True, help="show a progress bar")
    sampling: SamplingConfig = option(default_factory=SamplingConfig, help="sampling settings")
    hf: HFConfig = option(default_factory=HFConfig, help="transformers backend")
    vllm: VLLMConfig = option(default_factory=VLLMConfig, help="vLLM backend")
    openai: OpenAIConfig = option(default_factory=OpenAIConfig, help="OpenAI-compatible HTTP backend")

    def __post_init__(self):
        if self.n_samples < 1:
            raise ValueError("n_samples must be >= 1")

    @property
    def extractor(self) -> str:
        return "compat" if self.compat else "default"
