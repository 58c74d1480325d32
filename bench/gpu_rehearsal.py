"""A rehearsal of the whole pipeline on one GPU, as a user runs it: one command, no network.

    python bench/gpu_rehearsal.py --out runs/rehearsal          # one GPU, about 8 minutes at most
    python bench/gpu_rehearsal.py --dry-run --out DIR            # the same stages on the CPU
    python bench/gpu_rehearsal.py --print-commands --out runs/rehearsal   # the command lines, nothing run
    python bench/gpu_rehearsal.py --only eval-kernelbench,train-step --out runs/rehearsal   # rerun some stages
    python bench/gpu_rehearsal.py --lease --out runs/lease      # one GPU lease: the never-measured first
    python bench/gpu_rehearsal.py --lease --dry-run --print-order   # the lease's order, nothing run
    python bench/gpu_rehearsal.py --prepare .whl                # here, on the CPU: the wheels the GPU needs

It builds a small Qwen2-architecture model and a byte-level BPE tokenizer locally
(cuset.train.tiny; on the GPU about 150M parameters) whose chat template opens a `<think>` block
in the generation prompt, as reasoning models' templates do, and briefly pretrains it on the
reference answers of the evaluation slice and of the training tasks, each a short trace, then
the fenced program: generation then yields reasoning traces to count and code to evaluate.
Then it runs every stage as its own subprocess through the CLI, with the repository's configs
and `key=value` overrides:

  data                    cuset data synth (training tasks)
  setup                   the model, the tokenizer, the evaluation slices and the reference answers
  train-lora-cuset        cuset train, LoRA, CuSeT (paper config, bf16), adapter merged
  train-lora-sft          the same with the SFT baseline
  train-full-cuset        full fine-tuning, CuSeT
  train-full-sft          full fine-tuning, SFT
  train-zero3             accelerate launch with configs/accelerate/deepspeed-zero3.yaml (one process)
  train-fsdp              accelerate launch with configs/accelerate/fsdp.yaml, accelerate's FSDP plugin
  train-qlora             QLoRA (4-bit base through bitsandbytes)
  generate-hf             cuset generate with transformers, from the merged LoRA model
  generate-vllm           cuset generate with vLLM (when importable)
  train-step              bench/train_step.py: steps/s and peak memory, chunked head vs full logits (vs TRL)
  eval-kernelbench        cuset eval on a KernelBench slice: each task's correct and wrong bundled answer
  eval-kernelbench-robust the same with robust=true
  eval-cudabench          cuset eval on a slice of suites/cuset-bench.jsonl: the reference programs
  eval-cudabench-robust   the same with robust=true
  eval-generated          cuset eval of generate-hf's samples
  gpu-tests               pytest -m gpu (per-test timeouts, JUnit XML)
  kernelbench-speedups    bench/kernel_perf.py --suites kernelbench: the bundled answers timed against eager
                          PyTorch (speedups, geometric mean, fast_1; bench/results/kernel_perf.json)

`--lease` (one short lease of a GPU, docs/gpu.md#one-lease) runs the
same stages in LEASE_PRIORITY order, the numbers no run has measured yet first (the GPU tests,
KernelBench speedups, the training step against the peers, the CUDABench slice plain and
robust, generation, then the rest), each stage preceded by the stages it needs; it stops
starting stages at --budget-s (default LEASE_BUDGET_S) and cuts the last one's timeout to the
time left, and rewrites summary.json/summary.md after every stage (`complete`: false until
the end), so a lease cut short still leaves every finished stage's record. `--prepare DIR`
(on the CPU machine, with network) downloads the wheels the GPU image lacks (see
`prepare_wheels`) and writes DIR/lease.sh, the one command a lease runs.

Each stage has its own timeout (the process group is killed when it runs out) and a stage
that fails does not stop the others; a stage that needs a failed one is skipped. The GPU run
spends at most --budget-s seconds (default 420) on stages: a stage that would start after the
budget is spent is skipped, so the command ends within 8 minutes. The dry run (`--dry-run`)
hides any GPU and runs the CPU substitutes: a tiny model, fp32, `--backend cpu` for eval;
stages without one (vLLM, the GPU tests) are skipped with the reason, and so are stages whose
CPU run is already a test of `make test` (the SFT twins of the CuSeT training stages, QLoRA,
`accelerate launch` with DeepSpeed ZeRO-3 and with the FSDP plugin, the robust twins of the
eval stages: each reason names its test), so that CI runs each CPU path once.

Writes into --out (default runs/rehearsal, or runs/rehearsal-dry-run):

  summary.json   {"format": "cuset-gpu-rehearsal/1", "profile": "gpu" | "dry-run",
                  "started", "finished" (UTC ISO 8601), "seconds", "budget_s",
                  "machine": {date, python, platform, cpus, memory_gib, load_start, load_end,
                              git: {commit, branch, dirty, source: git | CUSET_COMMIT | unknown},
                              gpu: {name, driver, memory_mib} | null,
                              torch: {version, cuda, cuda_available, device, capability, bf16},
                              nvcc, packages: {name: version | null}, unmet_requirements: [...]},
                  "counts": {"ok": n, "failed": n, "skipped": n},
                  "stages": [{"name", "what", "status": "ok" | "failed" | "skipped",
                              "reason" (why it failed or was skipped, e.g. stopped when the
                              budget ran out; null when ok),
                              "seconds", "cpu_s" (CPU time of the processes it waited for;
                              sandboxed programs' may be missing), "timeout_s",
                              "exit_code", "command" (as a user types it),
                              "argv" (as run), "log" (the whole output), "output_tail",
                              "numbers": {...}}]}
  summary.md     the machine, one row per stage (status, seconds, the headline numbers, the
                 reason), then each stage's command line and, for failures, its output tail.
  logs/STAGE.log every stage's whole output; data/, model/, train/, gen/, eval/, train-step/
                 what the stages wrote.

The numbers: train stages `steps`, `loss_first`, `loss`, `nll`, `steps_per_s` (steps over
the Trainer's runtime), `tokens_per_s`, `peak_memory_mib` (run_summary.json: peak RSS and
torch's peak CUDA allocated/reserved), `strategy`, `trainable_parameters`; generate stages
`samples`, `with_code`, `tokens`, `avg_tokens`, `with_trace`, `reasoning_tokens` (samples
counted, total, average), `finish_reasons`, `tokens_per_s`; eval stages from summary.json
`n_tasks`, `n_samples`, `compile@1`, `function@1`, `compile@3`, `function@3`,
`robust_function@1` (with robust=true), `statuses`, `infra_errors`; train-step each case's
`steps_per_s` and peak memory. A stage is `failed` when its command exits non-zero, runs out
of time, or its outputs contradict what must hold: a train run that did not take every step,
a non-finite loss or another strategy than asked for; generations missing samples, or a
reasoning trace without its token count; evaluations of known answers that do not score as
known (references: function@1 = 1; KernelBench correct + wrong answer per task:
function@1 = 0.5), or with samples lost to infrastructure errors.
"""

from __future__ import annotations

# What this script measures (the whole pipeline, one stage per part of the package): a record in bench/results is stale once a commit
# after its own touches one of these paths (docs/tools/perf_table.py).
MEASURES = ("cuset",)

import argparse
import datetime as dt
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
FORMAT = "cuset-gpu-rehearsal/1"
SUITE = ROOT / "suites" / "cuset-bench.jsonl"
KERNELBENCH = ROOT / "suites" / "kernelbench"
TRAIN_CONFIGS = ROOT / "configs" / "train" / "qwen2.5-coder-7b-instruct"
ACCELERATE = ROOT / "configs" / "accelerate"
# What every pretraining document's answer opens with: generation then yields a trace to count.
TRACE = "Plan: one thread per element; read the inputs, launch the kernel, write the outputs."
THINK_OPEN = "<think>\n"  # what the generation prompt ends with
PACKAGES = ("torch", "transformers", "peft", "accelerate", "datasets", "tokenizers", "deepspeed", "bitsandbytes",
            "vllm", "trl", "tree-sitter", "tree-sitter-cuda")
EXTRAS = ("test", "bench", "vllm", "deepspeed", "qlora")


# --- what runs where ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Profile:
    """Sizes and settings of one run: the GPU rehearsal or its CPU dry run."""

    name: str
    device: str                          # cuda | cpu
    hidden: int                          # the setup model
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    bpe_vocab: int                       # tokens the BPE may learn (a small corpus gives fewer)
    pretrain_steps: int
    pretrain_seq: int                    # tokens of each document trained on (its start)
    pretrain_batch: int
    pretrain_lr: float
    train_tasks: int                     # synthesized training tasks
    train_steps: int                     # optimizer steps per cuset train run
    train_overrides: tuple[str, ...]     # on top of the paper configs
    gen_samples: int
    gen_overrides: tuple[str, ...]
    cudabench_ids: tuple[int, ...]       # slice of suites/cuset-bench.jsonl
    kernelbench_ids: tuple[str, ...]     # slice of suites/kernelbench
    eval_config: str
    eval_backend: str
    eval_workers: int
    train_step_args: tuple[str, ...]     # bench/train_step.py's arguments
    budget_s: float                      # seconds for all stages (0: no limit)
    timeout_scale: float = 1.0           # stage timeouts are multiplied by it
    env: tuple[tuple[str, str], ...] = ()


GPU = Profile(
    name="gpu", device="cuda", hidden=1024, layers=12, heads=16, kv_heads=4, intermediate=2816, bpe_vocab=8192,
    pretrain_steps=150, pretrain_seq=2048, pretrain_batch=8, pretrain_lr=1e-3,
    train_tasks=32, train_steps=10, train_overrides=(),
    gen_samples=2, gen_overrides=("sampling.max_new_tokens=1536",),
    cudabench_ids=(0, 1, 2, 3, 4, 5), kernelbench_ids=("kb_relu", "kb_softmax", "kb_matmul_square"),
    eval_config="configs/eval/gpu.yaml", eval_backend="gpu", eval_workers=8,
    train_step_args=("--device", "cuda", "--precision", "bf16", "--objectives", "cuset", "--finetune", "lora,full",
                     "--steps", "8", "--warmup", "2", "--repeats", "1"),
    budget_s=420.0,  # + the machine facts + at most one stopped stage's grace: under 8 minutes
)

DRY_RUN = Profile(
    name="dry-run", device="cpu", hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, bpe_vocab=2048,
    pretrain_steps=120, pretrain_seq=448, pretrain_batch=4, pretrain_lr=1e-2,  # 448: prompt, trace, some code
    train_tasks=6, train_steps=3,
    train_overrides=("precision=fp32", "model.dtype=float32", "data.max_length=1024"),
    gen_samples=2, gen_overrides=("sampling.max_new_tokens=64", "hf.device=cpu", "hf.dtype=float32"),
    cudabench_ids=(0, 2), kernelbench_ids=("kb_relu",),  # relu: backward, shape and value variants
    eval_config="configs/eval/cpu.yaml", eval_backend="cpu", eval_workers=2,
    train_step_args=("--device", "cpu", "--objectives", "cuset", "--finetune", "lora", "--steps", "3",
                     "--warmup", "1", "--repeats", "1", "--seq", "128", "--vocab", "4096"),
    budget_s=0.0, timeout_scale=4.0,  # a shared CPU box may be many times slower than an idle one
    # the dry run is the same everywhere: no GPU, one thread per process (a shared box)
    env=(("CUDA_VISIBLE_DEVICES", ""), ("OMP_NUM_THREADS", "1"), ("MKL_NUM_THREADS", "1")),
)

PROFILES = {p.name: p for p in (GPU, DRY_RUN)}


@dataclass(frozen=True)
class Plan:
    """A profile and the run directory: every path a stage reads or writes."""

    profile: Profile
    out: Path

    @property
    def dry_run(self) -> bool:
        return self.profile.device == "cpu"

    def path(self, *parts: str) -> Path:
        return self.out.joinpath(*parts)

    @property
    def train_data(self) -> Path:
        return self.path("data", "train.jsonl")

    @property
    def model(self) -> Path:
        return self.path("model")

    @property
    def cudabench(self) -> Path:
        return self.path("data", "cudabench-slice.jsonl")

    @property
    def cudabench_refs(self) -> Path:
        return self.path("data", "cudabench-references.jsonl")

    @property
    def kernelbench(self) -> Path:
        return self.path("data", "kernelbench-slice")

    @property
    def kernelbench_answers(self) -> Path:
        return self.path("data", "kernelbench-answers.jsonl")

    def train_dir(self, name: str) -> Path:
        return self.path("train", name)

    def generations(self, backend: str) -> Path:
        return self.path("gen", f"{backend}.jsonl")

    def eval_dir(self, name: str) -> Path:
        return self.path("eval", name)

    @property
    def generation_model(self) -> Path:
        """The merged LoRA model of train-lora-cuset (README step 2 generates from `merged/`)."""
        return self.train_dir("lora-cuset") / "merged"


class CheckFailed(Exception):
    """A stage's outputs contradict what must hold (the message says what and by how much)."""


@dataclass(frozen=True)
class Stage:
    name: str
    what: str
    argv: Callable[[Plan], list[str]]
    read: Callable[[Plan], dict]                    # numbers from the outputs; raises CheckFailed
    marker: Callable[[Plan], Path]                  # exists once the stage has done its work
    needs: tuple[str, ...] = ()
    skip: Callable[[Plan], str | None] = lambda plan: None
    timeout_s: float = 300.0


@dataclass
class StageResult:
    name: str
    what: str
    status: str                 # ok | failed | skipped
    reason: str | None = None
    seconds: float | None = None
    cpu_s: float | None = None  # CPU time (user + system) of the processes the stage waited for: steadier than
    #                             seconds on a loaded machine; sandboxed programs' own time may be missing
    timeout_s: float | None = None
    exit_code: int | None = None
    command: str = ""
    argv: list[str] = field(default_factory=list)
    log: str | None = None
    output_tail: str = ""
    numbers: dict = field(default_factory=dict)


# --- command lines -------------------------------------------------------------------------------

PY = sys.executable


def cuset(*args) -> list[str]:
    return [PY, "-m", "cuset.cli.main", *map(str, args)]


def accelerate_launch(config: str, *args) -> list[str]:
    # --num_processes 1: the configs are written for 8 GPUs; port 0: accelerate picks a free one
    return [PY, "-m", "accelerate.commands.launch", "--config_file", str(ACCELERATE / config), "--num_processes", "1",
            "--main_process_port", "0", "-m", "cuset.cli.main", *map(str, args)]


def shown(argv: list[str], root: Path = ROOT) -> str:
    """The command line as a user types it: `cuset ...`, `accelerate launch ...`, `python ...`, and
    paths relative to the repository root."""
    def rel(arg: str) -> str:  # also inside key=value and key=[value]
        return arg.replace(str(root) + os.sep, "")

    if argv[:3] == [PY, "-m", "cuset.cli.main"]:
        head, rest = ["cuset"], argv[3:]
    elif argv[:3] == [PY, "-m", "accelerate.commands.launch"]:
        head, rest = ["accelerate", "launch"], argv[3:]
    elif argv[:1] == [PY]:
        head, rest = ["python"], argv[1:]
    else:
        head, rest = [], argv
    return shlex.join(head + [rel(a) for a in rest])


def train_argv(plan: Plan, name: str, objective: str, *extra: str, launch: str | None = None) -> list[str]:
    args = ["train", TRAIN_CONFIGS / f"{objective}.yaml", f"model.name_or_path={plan.model}",
            f"data.paths=[{plan.train_data}]", f"output_dir={plan.train_dir(name)}",
            f"optim.max_steps={plan.profile.train_steps}", "save_steps=0", "report_to=[]", "progress=false",
            *extra, *plan.profile.train_overrides]
    return accelerate_launch(launch, *args) if launch else cuset(*args)


def generate_argv(plan: Plan, backend: str, *extra: str) -> list[str]:
    return cuset("generate", ROOT / "configs" / "generate" / f"{backend}.yaml", f"model={plan.generation_model}",
                 f"tasks={plan.cudabench}", f"out={plan.generations(backend)}", f"n_samples={plan.profile.gen_samples}",
                 "progress=false", *extra, *plan.profile.gen_overrides)


def eval_argv(plan: Plan, name: str, tasks: Path, generations: Path, *extra: str) -> list[str]:
    return cuset("eval", tasks, generations, ROOT / plan.profile.eval_config, "--out", plan.eval_dir(name),
                 "--backend", plan.profile.eval_backend, f"execution.workers={plan.profile.eval_workers}", "progress=false", *extra)


# --- reading what a stage wrote ------------------------------------------------------------------

def _json(path: Path) -> dict:
    if not path.is_file():
        raise CheckFailed(f"{path.name} was not written ({path})")
    return json.loads(path.read_text())


def _jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        raise CheckFailed(f"{path.name} was not written ({path})")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def read_data(plan: Plan) -> dict:
    n = len(_jsonl(plan.train_data))
    if n != plan.profile.train_tasks:
        raise CheckFailed(f"{n} training tasks written, asked for {plan.profile.train_tasks}")
    return {"tasks": n}


def read_setup(plan: Plan) -> dict:
    facts = _json(plan.path("setup.json"))
    if not _finite(facts.get("pretrain_loss_last")):
        raise CheckFailed(f"pretraining loss is not finite: {facts.get('pretrain_loss_last')}")
    return facts


def _saved_tensors(directory: Path) -> int:
    """Tensors in the safetensors files of a saved model or adapter (0 when there are none)."""
    from safetensors import safe_open

    total = 0
    for f in sorted(directory.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as weights:
            total += len(list(weights.keys()))
    return total


def train_reader(name: str, *, finetune: str, strategy: str = "single", zero_stage: int | None = None):
    def read(plan: Plan) -> dict:
        s = _json(plan.train_dir(name) / "run_summary.json")
        log = _jsonl(plan.train_dir(name) / "train_log.jsonl")
        losses = [r["loss"] for r in log if "loss" in r]
        final = s.get("final_metrics") or {}
        runtime = s.get("train_runtime_s")
        numbers = {
            "finetune": s["finetune"], "objective": s["objective"], "steps": s["steps"],
            "loss_first": losses[0] if losses else None, "loss": final.get("loss"), "nll": final.get("nll"),
            "train_runtime_s": runtime, "steps_per_s": s["steps"] / runtime if runtime else None,
            "tokens_per_s": final.get("tokens_per_s"), "peak_memory_mib": s.get("peak_memory_mib"),
            "strategy": s["strategy"], "world_size": s["world_size"],
            "trainable_parameters": s["trainable_parameters"], "outputs": sorted(s["outputs"]),
        }
        weights = plan.train_dir(name) / ("adapter" if finetune in ("lora", "qlora") else "model")
        numbers["saved_tensors"] = _saved_tensors(weights)
        problems = []
        if numbers["saved_tensors"] == 0:  # PEFT under FSDP once wrote an empty adapter and said nothing
            problems.append(f"{weights.relative_to(plan.out)} holds no tensor")
        if s["steps"] != plan.profile.train_steps:
            problems.append(f"took {s['steps']} steps, asked for {plan.profile.train_steps}")
        if not losses or not all(_finite(x) for x in losses):
            problems.append(f"loss not finite: {losses}")
        if s["finetune"] != finetune:
            problems.append(f"finetune {s['finetune']}, asked for {finetune}")
        got = s["strategy"]
        if got.get("kind") != strategy or (zero_stage is not None and got.get("zero_stage") != zero_stage):
            problems.append(f"strategy {got}, asked for {strategy}" + (f" ZeRO-{zero_stage}" if zero_stage else ""))
        if problems:
            raise CheckFailed("; ".join(problems))
        return numbers
    return read


def generation_reader(backend: str):
    def read(plan: Plan) -> dict:
        records = _jsonl(plan.generations(backend))
        expected = len(plan.profile.cudabench_ids) * plan.profile.gen_samples
        tokens = [r["n_tokens"] for r in records if r.get("n_tokens") is not None]
        traced = [r for r in records if r.get("reasoning") is not None]
        counted = [r["reasoning_tokens"] for r in traced if r.get("reasoning_tokens") is not None]
        seconds = sum(r["seconds"] for r in records)
        numbers = {
            "model": records[0]["model"] if records else None, "samples": len(records),
            "with_code": sum(r.get("code") is not None for r in records), "tokens": sum(tokens),
            "avg_tokens": sum(tokens) / len(tokens) if tokens else None,
            "with_trace": len(traced), "reasoning_tokens_counted": len(counted),
            "reasoning_tokens": sum(counted), "avg_reasoning_tokens": sum(counted) / len(counted) if counted else None,
            "finish_reasons": dict(Counter(r.get("finish_reason") for r in records)),
            "seconds": seconds, "tokens_per_s": sum(tokens) / seconds if seconds else None,
        }
        problems = []
        if len(records) != expected:
            problems.append(f"{len(records)} samples, expected {expected}")
        if len(tokens) != len(records):
            problems.append(f"{len(records) - len(tokens)} sample(s) without a token count")
        if len(counted) != len(traced):
            problems.append(f"{len(traced) - len(counted)} reasoning trace(s) without a token count")
        if problems:
            raise CheckFailed("; ".join(problems))
        return numbers
    return read


PASS_KEYS = ("compile@1", "function@1", "compile@3", "function@3", "robust_function@1", "robust_function@3")


def eval_reader(name: str, n_tasks: Callable[[Plan], int], n_samples: Callable[[Plan], int],
                expect: dict[str, float] | None = None):
    def read(plan: Plan) -> dict:
        s = _json(plan.eval_dir(name) / "summary.json")
        o = s["overall"]
        numbers = {"n_tasks": o["n_tasks"], "n_samples": o["n_samples"],
                   **{k: o[k] for k in PASS_KEYS if k in o}, "statuses": o["statuses"],
                   "infra_errors": len(s.get("infra_errors", [])), "skipped_tasks": len(s.get("skipped_tasks", [])),
                   "robust_failures": o.get("robust_failures")}
        problems = []
        if o["n_tasks"] != n_tasks(plan) or o["n_samples"] != n_samples(plan):
            problems.append(f"scored {o['n_tasks']} tasks / {o['n_samples']} samples, expected "
                            f"{n_tasks(plan)} / {n_samples(plan)}")
        if numbers["infra_errors"] or numbers["skipped_tasks"]:
            problems.append(f"{numbers['infra_errors']} infrastructure error(s), {numbers['skipped_tasks']} skipped task(s)")
        for key in PASS_KEYS:
            value = o.get(key)
            if value is not None and not 0.0 <= value <= 1.0:
                problems.append(f"{key} = {value} outside [0, 1]")
        for key, want in (expect or {}).items():
            if o.get(key) is None or abs(o[key] - want) > 1e-9:
                problems.append(f"{key} = {o.get(key)}, expected {want}")
        if problems:
            raise CheckFailed("; ".join(problems))
        return numbers
    return read


def read_train_step(plan: Plan) -> dict:
    written = _json(plan.path("train-step", "results.json"))
    results = written["results"]
    cases = {case: {"steps_per_s": r["steps_per_s"], "peak_cuda_mib": r.get("peak_cuda_mib"),
                    "peak_rss_mib": r["peak_rss_mib"]} for case, r in results.items()}
    bad = [c for c, r in cases.items() if not (_finite(r["steps_per_s"]) and r["steps_per_s"] > 0)]
    if not cases or bad:
        raise CheckFailed(f"no steps/s for {bad or 'any case'}")
    return {"runners": written.get("runners"), "cases": cases}


# --- the stages ------------------------------------------------------------------------------------

def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def skip_unless(module: str, *, in_dry_run: str | None = None):
    """A stage that needs `module`; `in_dry_run`: the reason the dry run skips it anyway."""
    def skip(plan: Plan) -> str | None:
        if plan.dry_run and in_dry_run:
            return in_dry_run
        if not _importable(module):
            return f"{module} not importable"
        return None
    return skip


def skip_in_dry_run(why_not_on_cpu: str):
    """A stage the dry run skips: `why_not_on_cpu` says which test of `make test` runs its CPU path."""
    return lambda plan: why_not_on_cpu if plan.dry_run else None


def train_step_argv(plan: Plan) -> list[str]:
    # runners auto: trainer, cuset, and TRL's SFTTrainer where trl is installed (results.json names them)
    return [PY, str(ROOT / "bench" / "train_step.py"), "--runners", "auto", *plan.profile.train_step_args,
            "--out", str(plan.path("train-step"))]


def _cb_tasks(plan: Plan) -> int:
    return len(plan.profile.cudabench_ids)


def _kb_tasks(plan: Plan) -> int:
    return len(plan.profile.kernelbench_ids)


def _gen_samples(plan: Plan) -> int:
    return _cb_tasks(plan) * plan.profile.gen_samples


def _summary_of(name: str) -> Callable[[Plan], Path]:
    return lambda plan: plan.eval_dir(name) / "summary.json"


def _train_marker(name: str) -> Callable[[Plan], Path]:
    return lambda plan: plan.train_dir(name) / "run_summary.json"


GPU_TESTS_ON_CPU = "no CPU substitute: the tests marked gpu need an NVIDIA GPU (`make test` runs the others)"
GPU_TEST_TIMEOUT_S = 150   # per test (pytest-timeout): a hung test fails with its traceback, the rest still run


def gpu_tests_argv(plan: Plan) -> list[str]:
    # per-test timeouts where pytest-timeout is installed: on the first GPU run the whole pytest was
    # stopped from outside and its log ended before it named the failing tests
    per_test = ["--timeout", str(GPU_TEST_TIMEOUT_S)] if _importable("pytest_timeout") else []
    return [PY, "-m", "pytest", "-m", "gpu", "-v", "-rfE", "-p", "no:cacheprovider", *per_test,
            f"--junitxml={plan.path('gpu-tests.xml')}", *map(str, gpu_test_files())]


def gpu_test_files() -> list[Path]:
    """The test files with tests marked gpu: collecting only these keeps a GPU machine without the
    test extras (ray, selenium) from failing on other files' imports."""
    return sorted(p for p in (ROOT / "tests").rglob("test_*.py") if "pytest.mark.gpu" in p.read_text())


def read_gpu_tests(plan: Plan) -> dict:
    """Counts from pytest's JUnit XML; a failed or erroring test, or none run, fails the stage."""
    import xml.etree.ElementTree as ET

    root = ET.parse(plan.path("gpu-tests.xml")).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    cases = suite.findall("testcase") if suite is not None else []
    bad, skipped = [], 0
    for case in cases:
        problem = case.find("failure") if case.find("failure") is not None else case.find("error")
        if problem is not None:
            bad.append(f"{case.get('classname', '')}::{case.get('name', '')}: {(problem.get('message') or '')[:200]}")
        elif case.find("skipped") is not None:
            skipped += 1
    numbers = {"tests": len(cases), "passed": len(cases) - len(bad) - skipped, "failed": len(bad), "skipped": skipped}
    if bad:
        raise CheckFailed(f"{len(bad)} of {len(cases)} GPU test(s) failed: " + "; ".join(bad))
    if numbers["passed"] == 0:
        raise CheckFailed(f"no GPU test passed ({skipped} skipped): is the GPU visible to pytest?")
    return numbers


KB_SPEEDUPS_ON_CPU = "no CPU substitute: speedups are GPU time (the CPU verifies the same answers: eval-kernelbench)"
KB_SPEEDUP_TRIALS = 30      # timed forward calls per side and answer: a lease cannot pay KernelBench's 100
KB_SPEEDUP_BUDGET_S = 180   # bench/kernel_perf.py's own hard limit


def kernel_perf_argv(plan: Plan) -> list[str]:
    return [PY, str(ROOT / "bench" / "kernel_perf.py"), "--suites", "kernelbench", "--trials", str(KB_SPEEDUP_TRIALS),
            "--budget-s", str(KB_SPEEDUP_BUDGET_S)]


def kernel_perf_record(plan: Plan) -> Path:
    return ROOT / "bench" / "results" / "kernel_perf.json"


def read_kernel_perf(plan: Plan) -> dict:
    """KernelBench's speedup summary from the record bench/kernel_perf.py wrote (fails when no answer was timed)."""
    written = _json(kernel_perf_record(plan))
    kb = (written.get("summary") or {}).get("kernelbench")
    if not kb:
        raise CheckFailed(f"no KernelBench answer was timed ({kernel_perf_record(plan).name}: suites "
                          f"{written.get('suites')})")
    return {"kernelbench": kb, "suites": written.get("suites"), "seconds": written.get("seconds")}


FSDP_ON_CPU = ("run on the CPU by tests/train/test_sharded.py::test_fsdp_plugin_lora_adapter_holds_the_trained_tensors "
               "(this launch and config, LoRA, CuSeT, 1 and 2 processes over gloo; cuset train itself refuses the "
               "plugin without CUDA, where accelerate would silently fall back to DDP)")
ZERO3_ON_CPU = ("run on the CPU by tests/train/test_sharded.py::test_zero_two_processes_match_one_process "
                "(this launch and config, cuset train, LoRA and full, 2 processes over gloo)")
QLORA_ON_CPU = ("run on the CPU by tests/train/test_qlora.py::test_qlora_trains_a_4bit_base_on_the_cpu "
                "(cuset train's own train(): NF4 base through bitsandbytes, LoRA, merged)")
KB_ROBUST_ON_CPU = ("run on the CPU by tests/evaluate/test_kernelbench_bundled.py::test_every_correct_answer_passes_plain_and_robust "
                    "(every bundled task robust; their wrong answers fail: test_every_wrong_answer_fails)")
CB_ROBUST_ON_CPU = ("run on the CPU by tests/evaluate/test_robust.py::test_every_bundled_reference_passes_robust_on_the_cpu_backend "
                    "(records and report: test_evaluate_file_records_and_reports_both_verdicts)")
SFT_ON_CPU = ("the dry run trains the CuSeT stage of each kind; this one differs in its config's loss.name only "
              "(every shipped config loads: tests/train/test_configs_cli.py; SFT through cuset train: tests/train/)")
VLLM_ON_CPU = "no CPU substitute: vLLM runs on GPUs (its engine is faked in tests/generate/test_vllm.py)"
TRAIN = ("data", "setup")

STAGES: tuple[Stage, ...] = (
    Stage("data", "cuset data synth: training tasks (CUDABench format)",
          lambda p: cuset("data", "synth", "--n", p.profile.train_tasks, "--seed", 0, "--split", "train",
                          "--out", p.train_data),
          read_data, lambda p: p.train_data, timeout_s=120),
    Stage("setup", "local Qwen2 model + BPE tokenizer (pretrained on the slice's answers), eval slices, known answers",
          lambda p: [PY, str(Path(__file__).resolve()), "--internal-setup", "--profile", p.profile.name,
                     "--out", str(p.out)],
          read_setup, lambda p: p.path("setup.json"), needs=("data",), timeout_s=240),
    Stage("train-lora-cuset", "cuset train: LoRA, CuSeT, the paper's config, adapter merged",
          lambda p: train_argv(p, "lora-cuset", "cuset"), train_reader("lora-cuset", finetune="lora"),
          _train_marker("lora-cuset"), needs=TRAIN, timeout_s=180),
    Stage("train-lora-sft", "cuset train: LoRA, SFT baseline",
          lambda p: train_argv(p, "lora-sft", "sft"), train_reader("lora-sft", finetune="lora"),
          _train_marker("lora-sft"), needs=TRAIN, skip=skip_in_dry_run(SFT_ON_CPU), timeout_s=180),
    Stage("train-full-cuset", "cuset train: full fine-tuning, CuSeT",
          lambda p: train_argv(p, "full-cuset", "cuset", "finetune=full"), train_reader("full-cuset", finetune="full"),
          _train_marker("full-cuset"), needs=TRAIN, timeout_s=180),
    Stage("train-full-sft", "cuset train: full fine-tuning, SFT baseline",
          lambda p: train_argv(p, "full-sft", "sft", "finetune=full"), train_reader("full-sft", finetune="full"),
          _train_marker("full-sft"), needs=TRAIN, skip=skip_in_dry_run(SFT_ON_CPU), timeout_s=180),
    Stage("train-zero3", "accelerate launch + DeepSpeed ZeRO-3 (configs/accelerate/deepspeed-zero3.yaml), full, CuSeT",
          lambda p: train_argv(p, "zero3", "cuset", "finetune=full", launch="deepspeed-zero3.yaml"),
          train_reader("zero3", finetune="full", strategy="deepspeed", zero_stage=3),
          _train_marker("zero3"), needs=TRAIN, skip=skip_unless("deepspeed", in_dry_run=ZERO3_ON_CPU), timeout_s=300),
    Stage("train-fsdp", "accelerate launch + accelerate's FSDP plugin (configs/accelerate/fsdp.yaml), LoRA, CuSeT",
          lambda p: train_argv(p, "fsdp", "cuset", launch="fsdp.yaml"),
          train_reader("fsdp", finetune="lora", strategy="fsdp"),
          _train_marker("fsdp"), needs=TRAIN, skip=skip_unless("accelerate", in_dry_run=FSDP_ON_CPU), timeout_s=300),
    Stage("train-qlora", "cuset train: QLoRA (NF4 base through bitsandbytes), CuSeT",
          lambda p: train_argv(p, "qlora", "cuset", "finetune=qlora"), train_reader("qlora", finetune="qlora"),
          _train_marker("qlora"), needs=TRAIN, skip=skip_unless("bitsandbytes", in_dry_run=QLORA_ON_CPU),
          timeout_s=240),
    Stage("generate-hf", "cuset generate, transformers backend, from the merged LoRA model",
          lambda p: generate_argv(p, "hf"), generation_reader("hf"), lambda p: p.generations("hf"),
          needs=("setup", "train-lora-cuset"), timeout_s=240),
    Stage("generate-vllm", "cuset generate, vLLM backend, from the merged LoRA model",
          lambda p: generate_argv(p, "vllm", "vllm.gpu_memory_utilization=0.5", "vllm.max_model_len=4096"),
          generation_reader("vllm"), lambda p: p.generations("vllm"),
          needs=("setup", "train-lora-cuset"), skip=skip_unless("vllm", in_dry_run=VLLM_ON_CPU), timeout_s=300),
    Stage("train-step", "bench/train_step.py: steps/s and peak memory, chunked LM head vs full logits (and TRL)",
          train_step_argv, read_train_step, lambda p: p.path("train-step", "results.json"), timeout_s=300),
    Stage("eval-kernelbench", "cuset eval on the KernelBench slice: each task's correct and wrong answer",
          lambda p: eval_argv(p, "kernelbench", p.kernelbench, p.kernelbench_answers),
          eval_reader("kernelbench", _kb_tasks, lambda p: 2 * _kb_tasks(p), {"function@1": 0.5}),
          _summary_of("kernelbench"), needs=("setup",), timeout_s=300),
    Stage("eval-kernelbench-robust", "the same, robust=true (seeds, shapes, values, backward)",
          lambda p: eval_argv(p, "kernelbench-robust", p.kernelbench, p.kernelbench_answers, "robust=true"),
          eval_reader("kernelbench-robust", _kb_tasks, lambda p: 2 * _kb_tasks(p),
                      {"function@1": 0.5, "robust_function@1": 0.5}),
          _summary_of("kernelbench-robust"), needs=("setup",), skip=skip_in_dry_run(KB_ROBUST_ON_CPU), timeout_s=300),
    Stage("eval-cudabench", "cuset eval on a slice of suites/cuset-bench.jsonl: the reference programs",
          lambda p: eval_argv(p, "cudabench", p.cudabench, p.cudabench_refs),
          eval_reader("cudabench", _cb_tasks, _cb_tasks, {"compile@1": 1.0, "function@1": 1.0}),
          _summary_of("cudabench"), needs=("setup",), timeout_s=240),
    Stage("eval-cudabench-robust", "the same, robust=true (3 input cases, every output element)",
          lambda p: eval_argv(p, "cudabench-robust", p.cudabench, p.cudabench_refs, "robust=true"),
          eval_reader("cudabench-robust", _cb_tasks, _cb_tasks, {"function@1": 1.0, "robust_function@1": 1.0}),
          _summary_of("cudabench-robust"), needs=("setup",), skip=skip_in_dry_run(CB_ROBUST_ON_CPU), timeout_s=300),
    Stage("eval-generated", "cuset eval of generate-hf's samples on the slice",
          lambda p: eval_argv(p, "generated", p.cudabench, p.generations("hf")),
          eval_reader("generated", _cb_tasks, _gen_samples), _summary_of("generated"),
          needs=("setup", "generate-hf"), timeout_s=240),
    Stage("gpu-tests", "pytest -m gpu: the tests that need a GPU (each with its own timeout, results as JUnit XML)",
          gpu_tests_argv, read_gpu_tests, lambda p: p.path("gpu-tests.xml"),
          skip=skip_in_dry_run(GPU_TESTS_ON_CPU), timeout_s=420),
    Stage("kernelbench-speedups", "bench/kernel_perf.py: the bundled KernelBench answers timed against eager PyTorch",
          kernel_perf_argv, read_kernel_perf, kernel_perf_record, skip=skip_in_dry_run(KB_SPEEDUPS_ON_CPU),
          timeout_s=KB_SPEEDUP_BUDGET_S + 60),
)
STAGE_NAMES = tuple(s.name for s in STAGES)

# --lease: what no GPU run has measured yet comes first (docs/gpu.md#what-ran-on-a-gpu, 2026-11-27):
# `pytest -m gpu` never passed, no KernelBench speedup, the training step against the peers once
# (fused head since), the CUDABench slice plain and robust never, generation's evaluation never.
LEASE_PRIORITY = ("gpu-tests", "kernelbench-speedups", "train-step", "data", "setup", "eval-cudabench",
                  "eval-cudabench-robust", "eval-kernelbench", "eval-kernelbench-robust", "train-lora-cuset",
                  "generate-hf", "eval-generated", "generate-vllm", "train-full-cuset", "train-fsdp", "train-zero3",
                  "train-qlora", "train-lora-sft", "train-full-sft")
# the lease's one command may run 600 s: the machine facts, the wheels' install and one stopped
# stage's grace (15 s + 15 s) fit in the rest
LEASE_BUDGET_S = 480.0


def lease_order(stages: tuple[Stage, ...], priority: tuple[str, ...] = LEASE_PRIORITY) -> tuple[Stage, ...]:
    """The stages in `priority` order, each preceded by the stages it needs (depth first); stages
    the priority does not name come last in their own order."""
    by_name = {s.name: s for s in stages}
    unknown = [n for n in priority if n not in by_name]
    if unknown:
        raise ValueError(f"LEASE_PRIORITY names unknown stage(s) {unknown}; stages: {', '.join(by_name)}")
    ordered: dict[str, Stage] = {}

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in ordered:
            return
        if name in path:
            raise ValueError(f"stages need each other in a circle: {' -> '.join(path + (name,))}")
        for need in by_name[name].needs:
            visit(need, path + (name,))
        ordered[name] = by_name[name]

    for name in (*priority, *by_name):
        visit(name, ())
    return tuple(ordered.values())


# --- running ---------------------------------------------------------------------------------------

def stage_env(profile: Profile) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    # no network: everything is local; quiet tokenizers in forked workers; output as it happens
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               PYTHONUNBUFFERED="1", **dict(profile.env))
    return env


def tail(path: Path, chars: int = 4000) -> str:
    if not path.is_file():
        return ""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        fh.seek(max(0, fh.tell() - chars))
        return fh.read().decode("utf-8", "replace")


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_command(argv: list[str], log: Path, timeout: float, env: dict[str, str]) -> tuple[int | None, float, float]:
    """Run in its own process group (accelerate and the evaluator start children), output to `log`;
    past `timeout` the whole group is stopped. Returns (exit code or None on timeout, seconds, CPU
    seconds of the processes it waited for)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    started, cpu_before = time.perf_counter(), _children_cpu_s()
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
            _stop_group(proc)
        except BaseException:  # interrupted (Ctrl-C, SIGTERM): its own session would outlive us
            _stop_group(proc)
            raise
    return code, time.perf_counter() - started, _children_cpu_s() - cpu_before


def _stop_group(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=15)
            return
        except subprocess.TimeoutExpired:
            continue


def run_stage(stage: Stage, plan: Plan, timeout: float, env: dict[str, str], own_timeout: float | None = None) -> StageResult:
    """One stage; `own_timeout` is its own limit when the budget left cut `timeout` below it."""
    argv = stage.argv(plan)
    log = plan.path("logs", f"{stage.name}.log")
    result = StageResult(stage.name, stage.what, "ok", command=shown(argv), argv=argv, timeout_s=round(timeout, 1),
                         log=str(log))
    code, seconds, cpu = run_command(argv, log, timeout, env)
    result.seconds, result.cpu_s, result.exit_code, result.output_tail = round(seconds, 1), round(cpu, 1), code, tail(log)
    if code is None and own_timeout is not None and timeout < own_timeout:
        # not the stage's failure: the rehearsal had no more time for it (a GPU lease is short)
        result.status, result.reason = "skipped", (f"stopped after {timeout:.0f} s: the rehearsal's budget ran out "
                                                   f"(its own limit is {own_timeout:.0f} s); rerun it with --only {stage.name}")
        return result
    if code is None:
        result.status, result.reason = "failed", f"timed out after {timeout:.0f} s (process group stopped)"
        return result
    if code != 0:
        lines = [ln for ln in result.output_tail.splitlines() if ln.strip()]
        result.status, result.reason = "failed", f"exit {code}: {lines[-1][:300] if lines else 'no output'}"
        return result
    try:
        result.numbers = stage.read(plan)
    except CheckFailed as e:
        result.status, result.reason = "failed", f"check: {e}"
    except (KeyError, TypeError, ValueError, IndexError) as e:  # outputs not shaped as documented
        result.status, result.reason = "failed", f"reading its outputs: {type(e).__name__}: {e}"
    return result


CLOCK = time.perf_counter  # the rehearsal's clock (a test's fake one replaces it)
MIN_STAGE_START_S = 20.0   # a stage is not started with less of the budget left than this


def run_stages(stages: tuple[Stage, ...], plan: Plan, *, only: set[str] | None = None, budget_s: float = 0.0,
               report: Callable[[int, StageResult], None] = lambda i, r: None,
               clock: Callable[[], float] = time.perf_counter,
               run: Callable[..., StageResult] | None = None) -> list[StageResult]:
    """Every stage in order; a failing stage never stops the others. A stage is skipped when it was
    not selected (`only`), when a stage it needs did not succeed (or, not selected, left no output
    from an earlier run), when its own skip rule says so, or when the budget is spent.
    `clock` and `run` (run_stage's signature) are the tests' way in: a fake clock and stages."""
    run = run or run_stage
    env = stage_env(plan.profile)
    started = clock()
    by_name: dict[str, StageResult] = {}
    markers = {s.name: s.marker for s in stages}
    results = []
    interrupted = False
    for i, stage in enumerate(stages):
        reason = None
        if only is not None and stage.name not in only:
            reason = "not selected (--only)"
        for need in stage.needs:
            if reason:
                break
            done = by_name.get(need)
            if done is not None and done.status == "ok":
                continue
            if done is not None and done.reason == "not selected (--only)" and markers[need](plan).exists():
                continue  # done by an earlier run into the same --out
            reason = f"needs {need} ({done.status if done else 'unknown'})"
        reason = reason or stage.skip(plan)
        own_timeout = timeout = stage.timeout_s * plan.profile.timeout_scale
        if not reason and budget_s:
            left = budget_s - (clock() - started)
            if left < MIN_STAGE_START_S:
                reason = f"rehearsal budget of {budget_s:.0f} s spent"
            timeout = min(timeout, max(left, 0))
        if interrupted:
            reason = "not run: the rehearsal was interrupted"
        if reason:
            result = StageResult(stage.name, stage.what, "skipped", reason=reason, command=shown(stage.argv(plan)),
                                 argv=stage.argv(plan))
        else:
            try:
                result = run(stage, plan, timeout, env, own_timeout)
            except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: record it, skip the rest, still write the summary
                interrupted = True
                result = StageResult(stage.name, stage.what, "failed", reason=f"interrupted ({stop or 'SIGINT'}): stage stopped",
                                     command=shown(stage.argv(plan)), argv=stage.argv(plan),
                                     log=str(plan.path("logs", f"{stage.name}.log")),
                                     output_tail=tail(plan.path("logs", f"{stage.name}.log")))
        by_name[stage.name] = result
        results.append(result)
        report(i, result)
    return results


# --- the machine -----------------------------------------------------------------------------------

def _run_text(argv: list[str], env: dict | None = None, timeout: float = 60) -> str | None:
    try:
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def unmet_requirements() -> list[str]:
    """pyproject's dependencies and extras that this environment does not satisfy."""
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for extra in EXTRAS:
        wanted += project.get("optional-dependencies", {}).get(extra, [])
    unmet = []
    for spec in dict.fromkeys(wanted):
        req = Requirement(spec)
        have = _version(req.name)
        if have is None or not req.specifier.contains(have, prereleases=True):
            unmet.append(f"{spec} (installed: {have or 'none'})")
    return unmet


def git_facts() -> dict:
    """The checkout's commit; a copy without .git (a machine the tree was copied to) says so, and
    takes the commit from $CUSET_COMMIT when the copier set it."""
    commit = _run_text(["git", "rev-parse", "HEAD"])
    if commit is None:
        return {"commit": os.environ.get("CUSET_COMMIT"), "branch": None, "dirty": None,
                "source": "CUSET_COMMIT" if os.environ.get("CUSET_COMMIT") else "unknown: no git checkout"}
    status = _run_text(["git", "status", "--porcelain", "--untracked-files=no"])
    return {"commit": commit, "branch": _run_text(["git", "rev-parse", "--abbrev-ref", "HEAD"]),
            "dirty": None if status is None else bool(status), "source": "git"}


TORCH_FACTS = """
import json, torch
cuda = torch.cuda.is_available()
print(json.dumps({"version": torch.__version__, "cuda": torch.version.cuda, "cuda_available": cuda,
                  "device": torch.cuda.get_device_name(0) if cuda else None,
                  "capability": ".".join(map(str, torch.cuda.get_device_capability(0))) if cuda else None,
                  "bf16": torch.cuda.is_bf16_supported() if cuda else None}))
"""


def machine_facts(profile: Profile) -> dict:
    torch_facts = _run_text([PY, "-c", TORCH_FACTS], env=stage_env(profile))
    smi = None
    if shutil.which("nvidia-smi"):
        line = _run_text(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader,nounits"])
        if line:
            name, driver, memory = [x.strip() for x in line.splitlines()[0].split(",")]
            smi = {"name": name, "driver": driver, "memory_mib": int(float(memory))}
    nvcc = _run_text(["nvcc", "--version"]) if shutil.which("nvcc") else None
    meminfo = Path("/proc/meminfo").read_text().split() if Path("/proc/meminfo").is_file() else []
    return {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
        "memory_gib": round(int(meminfo[1]) / 2**20, 1) if meminfo[:1] == ["MemTotal:"] else None,
        "load_start": list(os.getloadavg()),
        "git": git_facts(),
        "gpu": smi,
        "torch": json.loads(torch_facts) if torch_facts else None,
        "nvcc": next((ln for ln in nvcc.splitlines() if "release" in ln), nvcc.splitlines()[-1]) if nvcc else None,
        "packages": {name: _version(name) for name in PACKAGES},
        "unmet_requirements": unmet_requirements(),
    }


# --- the summary -----------------------------------------------------------------------------------

def _fmt(x, digits: int = 3) -> str:
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def headline(result: StageResult) -> str:
    """The few numbers of a stage worth a table cell."""
    n = result.numbers
    if not n:
        return ""
    if "steps" in n and "loss" in n:
        mem = n.get("peak_memory_mib") or {}
        peak = (f"peak {mem['cuda_allocated']:.0f} MiB CUDA" if mem.get("cuda_allocated") is not None
                else f"peak RSS {mem.get('process_rss', 0):.0f} MiB")
        return (f"{n['steps']} steps, loss {_fmt(n['loss_first'])} -> {_fmt(n['loss'])}, "
                f"{_fmt(n['steps_per_s'])} steps/s, {peak}, {n['strategy']['kind']}")
    if "samples" in n:
        return (f"{n['samples']} samples, {n['with_code']} with code, avg {_fmt(n['avg_tokens'])} tokens, "
                f"{n['with_trace']} traces ({n['reasoning_tokens_counted']} counted, avg "
                f"{_fmt(n['avg_reasoning_tokens'])} tokens)")
    if "n_tasks" in n:
        parts = [f"{k} {_fmt(n[k])}" for k in PASS_KEYS if n.get(k) is not None]
        return f"{n['n_tasks']} tasks / {n['n_samples']} samples: " + ", ".join(parts)
    if "cases" in n:
        return "; ".join(f"{c} {_fmt(r['steps_per_s'])} steps/s, "
                         f"{_fmt(r['peak_cuda_mib'] if r['peak_cuda_mib'] is not None else r['peak_rss_mib'])} MiB"
                         for c, r in n["cases"].items())
    if "parameters" in n:
        return (f"{n['parameters'] / 1e6:.1f}M parameters, {n['tokenizer_tokens']} tokens, pretrain loss "
                f"{_fmt(n['pretrain_loss_first'])} -> {_fmt(n['pretrain_loss_last'])} on {n['device']}")
    return ", ".join(f"{k} {_fmt(v)}" for k, v in n.items())


def markdown(summary: dict) -> str:
    m = summary["machine"]
    gpu = m["gpu"] or {}
    torch_facts = m["torch"] or {}
    lines = [f"# cuset GPU rehearsal ({summary['profile']}), {m['date']}", "",
             f"- machine: {gpu.get('name') or 'no GPU'}" + (f", driver {gpu['driver']}, {gpu['memory_mib']} MiB" if gpu else "")
             + f"; {m['cpus']} CPUs, {m['memory_gib']} GiB; load {m['load_start'][0]:.1f} at start, "
             f"{m['load_end'][0]:.1f} at the end",
             f"- torch {torch_facts.get('version')} (CUDA {torch_facts.get('cuda')}, device: "
             f"{torch_facts.get('device') or 'none'}), nvcc: {m['nvcc'] or 'none'}, Python {m['python']}",
             f"- commit {m['git']['commit']} ({m['git']['branch'] or m['git']['source']}"
             f"{', uncommitted changes' if m['git']['dirty'] else ''})",
             "- packages: " + ", ".join(f"{k} {v or '-'}" for k, v in m["packages"].items()),
             f"- unmet requirements: {', '.join(m['unmet_requirements']) or 'none'}",
             f"- {summary['counts']['ok']} ok, {summary['counts']['failed']} failed, {summary['counts']['skipped']} "
             f"skipped in {summary['seconds']:.0f} s" + (f" (budget {summary['budget_s']:.0f} s)" if summary['budget_s'] else ""),
             "", "| stage | status | seconds | CPU s | numbers | reason |", "|---|---|---:|---:|---|---|"]
    for s in summary["stages"]:
        cell = (s["reason"] or "").replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {s['name']} | {s['status']} | {'' if s['seconds'] is None else s['seconds']} | "
                     f"{'' if s['cpu_s'] is None else s['cpu_s']} | {headline(StageResult(**s)).replace('|', '/')} | {cell} |")
    lines += ["", "## Commands", ""]
    for s in summary["stages"]:
        lines += [f"### {s['name']} ({s['status']})", "", s["what"], "", "```", s["command"], "```", ""]
        if s["status"] == "failed":
            lines += ["Output tail:", "", "```", s["output_tail"].rstrip()[-3000:], "```", ""]
    return "\n".join(lines) + "\n"


def write_summary(plan: Plan, results: list[StageResult], machine: dict, started: dt.datetime, seconds: float,
                  complete: bool = True) -> dict:
    """summary.json and summary.md; `complete` False: written after a stage, more may follow (a lease
    that ends early leaves every finished stage's record)."""
    machine = {**machine, "load_end": list(os.getloadavg())}
    summary = {"format": FORMAT, "profile": plan.profile.name, "complete": complete,
               "started": started.isoformat(timespec="seconds"),
               "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "seconds": round(seconds, 1),
               "budget_s": plan.profile.budget_s, "machine": machine,
               "counts": {k: sum(r.status == k for r in results) for k in ("ok", "failed", "skipped")},
               "stages": [asdict(r) for r in results]}
    plan.out.mkdir(parents=True, exist_ok=True)
    (plan.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (plan.out / "summary.md").write_text(markdown(summary))
    return summary


# --- setup (its own stage, in a child process) -----------------------------------------------------

def reasoning_template() -> str:
    """The tiny model's ChatML template with the generation prompt opening a `<think>` block, as
    reasoning models' templates do (DeepSeek-R1, QwQ): the output starts inside the trace."""
    from cuset.train.tiny import CHATML_TEMPLATE

    opened = CHATML_TEMPLATE.replace("<|im_start|>assistant\n{% endif %}", "<|im_start|>assistant\n" + THINK_OPEN + "{% endif %}")
    if opened == CHATML_TEMPLATE:
        raise SystemExit("cuset.train.tiny.CHATML_TEMPLATE changed: cannot open <think> in its generation prompt")
    return opened


def _chat_document(tokenizer, task) -> str:
    """The prompt a generation sees (the trace opened), then the trace and the fenced reference program."""
    from cuset.tasks import render_prompt
    from cuset.train.data.records import wrap_response

    program, _ = wrap_response(task.bench_cu, "fenced", "cuda")
    prompt = tokenizer.apply_chat_template(render_prompt(task, 1).messages(), add_generation_prompt=True, tokenize=False)
    return f"{prompt}{TRACE}\n</think>\n\n{program}{tokenizer.eos_token}\n"


def _write_slices(plan: Plan) -> tuple[list, list]:
    """The CUDABench slice (lines copied from the suite), the KernelBench slice (references and their
    metadata lines), and the known answers: each reference program; each KernelBench task's bundled
    correct (sample 0) and wrong (sample 1) answer."""
    from cuset.generate.records import GenerationRecord, save_generations
    from cuset.tasks import load_tasks

    p = plan.profile
    plan.cudabench.parent.mkdir(parents=True, exist_ok=True)
    wanted = set(p.cudabench_ids)
    lines = [ln for ln in SUITE.read_text().splitlines() if ln.strip() and json.loads(ln)["id"] in wanted]
    if len(lines) != len(wanted):
        raise SystemExit(f"{SUITE}: ids {sorted(wanted)} not all found")
    plan.cudabench.write_text("\n".join(lines) + "\n")
    cb_tasks, _ = load_tasks(plan.cudabench, strict=True)
    save_generations(plan.cudabench_refs, [
        GenerationRecord(t.id, t.task_name, 0, "reference", 1, f"```cuda\n{t.bench_cu}```", t.bench_cu, None, "stop", 0.0)
        for t in cb_tasks])

    plan.kernelbench.mkdir(parents=True, exist_ok=True)
    for task_id in p.kernelbench_ids:
        shutil.copy(KERNELBENCH / f"{task_id}.py", plan.kernelbench / f"{task_id}.py")
    meta = [ln for ln in (KERNELBENCH / "metadata.jsonl").read_text().splitlines()
            if ln.strip() and json.loads(ln)["id"] in p.kernelbench_ids]
    (plan.kernelbench / "metadata.jsonl").write_text("\n".join(meta) + "\n")
    kb_tasks, _ = load_tasks(plan.kernelbench, strict=True)
    answers = []
    for t in kb_tasks:
        for sample, which in enumerate(("correct", "wrong")):
            code = (KERNELBENCH / "solutions" / f"{t.id}.{which}.py").read_text()
            answers.append(GenerationRecord(t.id, t.task_name, sample, f"bundled-{which}", 1,
                                            f"```python\n{code}```", code, None, "stop", 0.0))
    save_generations(plan.kernelbench_answers, answers)
    return cb_tasks, kb_tasks


def setup(plan: Plan) -> dict:
    import torch
    from tokenizers import AddedToken
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cuset.demo.pretrain import pretrain
    from cuset.tasks import load_tasks
    from cuset.train.tiny import build_tiny_model, build_tokenizer

    started = time.perf_counter()
    p = plan.profile
    cb_tasks, _ = _write_slices(plan)
    train_tasks, _ = load_tasks(plan.train_data, strict=True)
    # the tokenizer learns from every document the model will see
    scratch = build_tokenizer(["x"], vocab_size=300)  # only to render the documents with the chat template
    scratch.chat_template = reasoning_template()
    corpus = [_chat_document(scratch, t) for t in cb_tasks + train_tasks]
    build_tiny_model(plan.model, corpus, vocab_size=p.bpe_vocab, hidden_size=p.hidden, num_layers=p.layers,
                     num_heads=p.heads, num_kv_heads=p.kv_heads, intermediate_size=p.intermediate,
                     max_position_embeddings=4096)
    tokenizer = AutoTokenizer.from_pretrained(plan.model)
    # The trace's tags as tokens of their own, as reasoning models have them; the opening with its
    # newline, so that the token the prompt ends with is followed by the trace alone (">\n" ends
    # every #include line: a tiny model would continue the prompt with code).
    tokenizer.add_tokens([AddedToken(THINK_OPEN, special=False, normalized=False),
                          AddedToken("</think>", special=False, normalized=False)])
    tokenizer.chat_template = reasoning_template()
    tokenizer.save_pretrained(plan.model)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = True
    model = AutoModelForCausalLM.from_pretrained(plan.model, dtype=torch.float32)
    model.resize_token_embeddings(len(tokenizer))
    model.to(device)
    texts = [_chat_document(tokenizer, t) for t in cb_tasks + train_tasks]
    # each document its own row: the answer opens where it opens at generation, which a tiny model
    # needs in order to learn it in a few steps
    losses = pretrain(model, tokenizer, texts, steps=p.pretrain_steps, seq_len=p.pretrain_seq,
                      batch_size=p.pretrain_batch, lr=p.pretrain_lr, rows="documents")
    model.to("cpu").save_pretrained(plan.model)
    facts = {"parameters": sum(x.numel() for x in model.parameters()), "tokenizer_tokens": len(tokenizer),
             "hidden": p.hidden, "layers": p.layers, "device": device, "pretrain_steps": len(losses),
             "pretrain_loss_first": losses[0], "pretrain_loss_last": losses[-1],
             "cudabench_ids": list(p.cudabench_ids), "kernelbench_ids": list(p.kernelbench_ids),
             "seconds": round(time.perf_counter() - started, 1)}
    (plan.out / "setup.json").write_text(json.dumps(facts, indent=2) + "\n")
    return facts


# --- the command -----------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="The summary format is in the module docstring (bench/gpu_rehearsal.py).")
    ap.add_argument("--dry-run", action="store_true", help="the CPU substitutes, small sizes (CI keeps this alive)")
    ap.add_argument("--out", type=Path, default=None, help="run directory (default runs/rehearsal[-dry-run])")
    ap.add_argument("--only", default=None, help=f"comma-separated stages to run ({', '.join(STAGE_NAMES)}); the "
                    "stages they need count as done when an earlier run into the same --out left their outputs")
    ap.add_argument("--budget-s", type=float, default=None, help="seconds for all stages; later ones are skipped "
                    "(default: 420 on the GPU, none for the dry run; 0: none)")
    ap.add_argument("--print-commands", action="store_true", help="print each stage's command line and exit")
    ap.add_argument("--lease", action="store_true", help="one short GPU lease: the stages in LEASE_PRIORITY order "
                    f"(never-measured numbers first), budget {LEASE_BUDGET_S:.0f} s unless --budget-s says otherwise")
    ap.add_argument("--print-order", action="store_true", help="print the stages in the order this run takes them, "
                    "and exit")
    ap.add_argument("--prepare", type=Path, default=None, metavar="DIR",
                    help="on the CPU machine: download into DIR the wheels the GPU image lacks and write DIR/lease.sh")
    ap.add_argument("--max-mib", type=float, default=30.0, help="--prepare: optional wheels (deepspeed, "
                    "bitsandbytes) are left out past this many MiB (a lease carries 64 MiB with the tree, about 25 MiB)")
    ap.add_argument("--internal-setup", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--profile", default=None, choices=sorted(PROFILES), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.prepare is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _lease_prepare import prepare

        return prepare(args.prepare, args.max_mib)
    profile = PROFILES[args.profile or ("dry-run" if args.dry_run else "gpu")]
    if args.budget_s is not None:
        profile = replace(profile, budget_s=args.budget_s)
    elif args.lease and profile is GPU:
        profile = replace(profile, budget_s=LEASE_BUDGET_S)
    stages = lease_order(STAGES) if args.lease else STAGES
    if args.print_order:
        for stage in stages:
            print(stage.name)
        return 0
    out = args.out or ROOT / "runs" / ("rehearsal-dry-run" if profile is DRY_RUN else "rehearsal")
    plan = Plan(profile, (out if out.is_absolute() else Path.cwd() / out).resolve())
    if args.internal_setup:
        print(json.dumps(setup(plan), indent=2))
        return 0
    if args.print_commands:
        for stage in STAGES:
            print(shown(stage.argv(plan)))
        return 0
    only = None
    if args.only:
        only = {s.strip() for s in args.only.split(",") if s.strip()}
        unknown = sorted(only - set(STAGE_NAMES))
        if unknown:
            ap.error(f"--only: unknown stage(s) {', '.join(unknown)}; stages: {', '.join(STAGE_NAMES)}")

    started_at = dt.datetime.now(dt.timezone.utc)
    t0 = CLOCK()
    machine = machine_facts(profile)
    torch_facts = machine["torch"] or {}
    print(f"rehearsal ({profile.name}) -> {plan.out}\n  torch {torch_facts.get('version')}, "
          f"device {torch_facts.get('device') or 'cpu'}, commit {machine['git']['commit']}", flush=True)
    if machine["unmet_requirements"]:
        print("  unmet requirements: " + "; ".join(machine["unmet_requirements"]), flush=True)
    if profile is GPU and not torch_facts.get("cuda_available"):
        print("  WARNING: torch sees no GPU: the GPU stages will fail (use --dry-run on a CPU)", flush=True)

    def report(i: int, r: StageResult) -> None:
        print(f"[{i + 1:2d}/{len(stages)}] {r.name:<24} {r.status:<7} "
              f"{'' if r.seconds is None else f'{r.seconds:6.1f} s'}  {r.reason or headline(r)}", flush=True)
        done.append(r)
        write_summary(plan, done, machine, started_at, CLOCK() - t0, complete=False)

    def stop(signum, frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, stop)  # a timeout(1) or a killed job: stop the stage, write the summary
    done: list[StageResult] = []
    results = run_stages(stages, plan, only=only, budget_s=profile.budget_s, report=report, clock=CLOCK)
    summary = write_summary(plan, results, machine, started_at, CLOCK() - t0)
    c = summary["counts"]
    print(f"{c['ok']} ok, {c['failed']} failed, {c['skipped']} skipped in {summary['seconds']:.0f} s: "
          f"{plan.out / 'summary.json'}, {plan.out / 'summary.md'}", flush=True)
    return 1 if c["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
