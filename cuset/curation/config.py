"""The `cuset data build` config: where data come from, the LLM that turns raw code
into tasks, validation, deduplication and decontamination.

Relative paths are relative to the directory `cuset data build` runs in.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar

from cuset.config import option
from cuset.evaluate.config import ExecutionConfig

SOURCE_KINDS = ("cuda_dir", "pairs_jsonl", "tasks_jsonl", "hf")
HF_FORMATS = ("tasks", "pairs", "code")


@dataclass
class SourceConfig:
    kind: str = option("cuda_dir", "cuda_dir: a directory of .cu/.cuh files; pairs_jsonl: JSONL of "
                       "prompt/response pairs; tasks_jsonl: CUDABench-format tasks; hf: a Hugging Face dataset",
                       choices=SOURCE_KINDS)
    path: str = option("", "File or directory (cuda_dir, pairs_jsonl, tasks_jsonl), or dataset name (hf).")
    label: str = option("", "Name used in reports; defaults to the path.")
    split: str = option("train", "Split of a Hugging Face dataset.")
    format: str = option("tasks", "What the rows of a Hugging Face dataset are.", choices=HF_FORMATS)
    prompt_field: str = option("prompt", "Field holding the prompt (pairs).")
    response_field: str = option("response", "Field holding the response with the CUDA program (pairs).")
    code_field: str = option("code", "Field holding the CUDA source (hf code rows).")
    extensions: list[str] = option(default_factory=lambda: [".cu", ".cuh"], help="File endings read from a cuda_dir.")

    def __post_init__(self):
        if not self.path:
            raise ValueError(f"source of kind {self.kind!r} needs a `path`")

    @property
    def name(self) -> str:
        return self.label or self.path


@dataclass
class LLMConfig:
    base_url: str = option("http://127.0.0.1:8000/v1", "OpenAI-compatible server (the part before /chat/completions).")
    model: str = option("Qwen/Qwen3-Coder-30B-A3B-Instruct", "Model name sent to the server.")
    api_key_env: str = option("OPENAI_API_KEY", "Environment variable holding the API key (never stored).")
    temperature: float = option(0.0, "Sampling temperature; 0 makes replies reproducible where the server allows.")
    max_tokens: int = option(8192, "Largest reply per request, in tokens.")
    json_mode: bool = option(False, "Send response_format={type: json_object} (OpenAI, vLLM; not every server has it).")
    concurrency: int = option(4, "Requests in flight at once.")
    max_requests: int = option(1000, "Most HTTP requests one build may send, retries included; cached replies are free.")
    max_total_tokens: int = option(20_000_000, "Most tokens (prompt + completion, as the server reports) one build may spend.")
    max_retries: int = option(4, "Retries after a connection error, a 429 or a 5xx reply.")
    backoff_s: float = option(1.0, "First retry delay; doubles every retry (capped at 60 s); Retry-After wins when given.")
    timeout_s: float = option(300.0, "Seconds to wait for one reply.")
    cache_dir: str = option("", "Reply cache (one JSON file per request hash); default <out_dir>/llm_cache.")
    max_program_chars: int = option(40_000, "Programs longer than this are not sent (rejected as too_long_for_llm).")

    def __post_init__(self):
        for name in ("concurrency", "max_requests", "max_total_tokens", "max_tokens", "max_program_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"llm.{name} must be at least 1")
        if self.max_retries < 0 or self.backoff_s < 0:
            raise ValueError("llm.max_retries and llm.backoff_s must not be negative")


@dataclass
class ValidationConfig:
    # the keys this section had before it embedded the evaluation's execution section
    RENAMED: ClassVar[dict[str, str]] = {
        "backend": "execution.backend", "workers": "execution.workers", "executor": "execution.executor",
        "ray_address": "execution.ray_address", "ray_max_retries": "execution.ray_max_retries",
        "gen_timeout_s": "execution.timeout_gen", "compile_timeout_s": "execution.timeout_compile",
        "run_timeout_s": "execution.timeout_run", "compare_timeout_s": "execution.timeout_compare"}

    cases: list[int] = option(default_factory=lambda: [0, 1, 2, 3, 4], help="Input cases (CUSET_CASE values) every program must pass.")
    execution: ExecutionConfig = option(default_factory=ExecutionConfig,
                                        help="How and where the reference programs run: the same section as "
                                             "`cuset eval`'s `execution` (backend, compile judge, workers, executor, "
                                             "timeouts, sandbox), so a program is judged as evaluation judges it.")

    def __post_init__(self):
        if not self.cases:
            raise ValueError("validation.cases must name at least one case")


@dataclass
class DedupConfig:
    near_threshold: float = option(0.85, "Estimated Jaccard similarity of code shingles at or above which a task is a near-duplicate.")
    num_perm: int = option(128, "MinHash permutations.")
    shingle_tokens: int = option(5, "Tokens per shingle.")

    def __post_init__(self):
        if not 0 < self.near_threshold <= 1:
            raise ValueError("dedup.near_threshold must be in (0, 1]")
        if self.shingle_tokens < 1 or self.num_perm < 16:
            raise ValueError("dedup.shingle_tokens must be >= 1 and dedup.num_perm >= 16")


@dataclass
class DecontamConfig:
    eval_sets: list[str] = option(default_factory=list, help="Evaluation task files (JSONL paths or Hugging Face names) no training task may overlap.")
    prompt_ngram: int = option(8, "Words per prompt n-gram.")
    code_ngram: int = option(12, "Tokens per code n-gram (comments and layout ignored).")
    threshold: float = option(0.5, "Remove a task when this share of its prompt n-grams, or of its code n-grams, occurs in one evaluation task.")
    boilerplate_share: float = option(0.1, "Ignore n-grams found in more than this share of evaluation tasks (and in more than 5): shared boilerplate is not contamination.")

    def __post_init__(self):
        if not 0 < self.threshold <= 1:
            raise ValueError("decontam.threshold must be in (0, 1]")
        if self.prompt_ngram < 1 or self.code_ngram < 1:
            raise ValueError("decontam n-gram sizes must be >= 1")


SELECT_RULES = ("concise", "first", "all")


@dataclass
class ReasoningConfig:
    enabled: bool = option(False, "Stage 5 (ConCuR-style): ask the LLM (llm.base_url, a reasoning model) to solve every "
                           "final task n_candidates times, validate each answer's kernel, and write train_reasoning.jsonl "
                           "with (prompt, reasoning trace, answer) of the passing ones. `reasoning: true` turns it on.")
    n_candidates: int = option(4, "Answers requested per task (each its own request with seed = seed + i).")
    select: str = option("concise", "Which passing answers are kept: concise (the shortest reasoning among those that "
                         "pass, ties by code length), first (the first that passes), all.", choices=SELECT_RULES)
    model: str = option("", "Model name for this stage; default llm.model.")
    temperature: float = option(0.7, "Sampling temperature of the answers (> 0 so the candidates differ).")
    max_tokens: int = option(16384, "Largest answer (trace + code) in tokens; a trace cut here has no code (no_code).")
    seed: int = option(0, "Seed of candidate 0; candidate i sends seed + i (servers without seeds ignore it).")
    prompt_level: int = option(1, "CUDABench prompt level (1, 2 or 3) the tasks are asked at.", choices=(1, 2, 3))
    tokenizer: str = option("", "Local Hugging Face tokenizer directory to count reasoning tokens with; empty = a "
                            "lexer count (named 'lexer tokens' in the outputs).")
    tasks: list[str] = option(default_factory=list, help="More tasks to ask for after the built ones: task JSONL "
                              "files or KernelBench directories, of either kind (e.g. suites/kernelbench: "
                              "PyTorch reference -> ModelNew with CUDA kernels, ConCuR's format).")

    def __post_init__(self):
        if self.n_candidates < 1 or self.max_tokens < 1:
            raise ValueError("reasoning.n_candidates and reasoning.max_tokens must be at least 1")
        if self.temperature < 0:
            raise ValueError("reasoning.temperature must not be negative")


@dataclass
class DataBuildConfig:
    out_dir: str = option("runs/data", "Run directory: every stage's JSONL, the LLM cache, train.jsonl, manifest.json, summary.md.")
    sources: list[SourceConfig] = option(default_factory=list, help="Where programs and tasks come from (a list of source entries).")
    max_file_bytes: int = option(1_000_000, "Files (and records) larger than this are skipped as oversized.")
    llm: LLMConfig = option(default_factory=LLMConfig, help="The LLM that turns raw programs into tasks.")
    validation: ValidationConfig = option(default_factory=ValidationConfig, help="Compile-and-run checks.")
    dedup: DedupConfig = option(default_factory=DedupConfig, help="Exact and near-duplicate removal.")
    decontam: DecontamConfig = option(default_factory=DecontamConfig, help="Removal of tasks overlapping evaluation sets.")
    progress: bool = option(True, help="Progress bars.")
    reasoning: ReasoningConfig = option(default_factory=ReasoningConfig, help="Stage 5: reasoning traces and answers "
                                        "for the final tasks (off by default).")

    def __post_init__(self):
        if not self.sources:
            raise ValueError("no sources: add at least one entry under `sources:`")
        if self.max_file_bytes < 1:
            raise ValueError("max_file_bytes must be positive")

    @property
    def llm_cache_dir(self) -> str:
        return self.llm.cache_dir or os.path.join(self.out_dir, "llm_cache")
