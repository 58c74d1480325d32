"""Training-step speed and peak memory: `cuset train` per objective vs two peers, LoRA and full.

One small model (Qwen2 architecture, hidden 256, 4 layers, vocabulary 151,936, random
weights) and one synthetic data set (sequences of 1,024 tokens: a 256-token prompt
and a 768-token supervised response, a third of it in the CUDA mask), the same
settings everywhere (batch 1, fp32, AdamW lr 1e-4, LoRA r=8/alpha=16/dropout 0.05 on
all linear layers, logging every step, no trackers). Runners:

  cuset      cuset.train: CusetTrainer + cuset.losses (loss.head=auto: on CUDA the fused LM head,
             Cut Cross-Entropy, where it is installed and serves the objective, else the chunked
             head over target tokens only), once per objective (sft, dft, eaft, asft, profit, cuset)
  cuset-chunked  the same with loss.head=chunked: the chunked head beside the fused one
             (`--runners auto` adds it where the fused head would run: CUDA and the library)
  trl        TRL SFTTrainer with its default loss (completion-only NLL)
  trainer    transformers Trainer with the model's own loss (full [tokens, vocab] logits)

On a GPU (`--device cuda`, `--precision bf16` for mixed precision) every runner trains
on the GPU, steps are timed after a `torch.cuda.synchronize()`, and memory is the peak of
`torch.cuda.max_memory_allocated()` after the trainer is built (reset when training
begins, so it counts weights, optimizer state, activations and logits); the peak RSS is
reported beside it. `--device cpu` (the default) hides any GPU from the cases.

Each case runs in a fresh process. Speed: optimizer steps per second from the
median wall time of the steps after --warmup (timed step end to step end), the best
of --repeats processes: the machine is shared, and the median step of the least
disturbed process is the steadiest estimate. The median process CPU time per step
(all threads) is reported too: other processes' load inflates wall time, much less
CPU time. Memory: after the
trainer is built, the process resets its resident-set high-water mark
(`/proc/self/clear_refs`, Linux) and reads VmHWM after the last step: the peak
RSS while training (weights, optimizer state, activations, logits, allocator
slack), the number a user sees; "above start" subtracts the RSS when training began.

    .venv/bin/python bench/train_step.py                         # the full table
    .venv/bin/python bench/train_step.py --runners trainer,cuset --objectives cuset --finetune lora --steps 3
    python bench/train_step.py --device cuda --precision bf16        # on a GPU

Writes runs/bench/train_step/results.{json,md} and prints the table.
"""

from __future__ import annotations

# What this script measures (`cuset train`'s step): a record in bench/results is stale once a commit
# after its own touches one of these paths (docs/tools/perf_table.py).
MEASURES = ("cuset/train", "cuset/losses")

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OBJECTIVES = ("sft", "dft", "eaft", "asft", "profit", "cuset")
SEQ, PROMPT, VOCAB, HIDDEN, LAYERS = 1024, 256, 151_936, 256, 4


# --- one case, in its own process --------------------------------------------------------------

DEFAULT_OUT = ROOT / "runs" / "bench" / "train_step"

def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _dataset(n: int, seq: int = SEQ, vocab: int = VOCAB, seed: int = 0):
    """n rows of `seq` random token ids; the first quarter is prompt, a third of the response is CUDA-masked."""
    import datasets
    import torch

    prompt = seq * PROMPT // SEQ
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (n, seq), generator=g)
    rows = {"input_ids": [], "labels": [], "cuda_mask": [], "completion_mask": []}
    for r in ids.tolist():
        rows["input_ids"].append(r)
        rows["labels"].append([-100] * prompt + r[prompt:])
        rows["cuda_mask"].append([0.0] * prompt + [1.0 if (i // 64) % 3 == 0 else 0.0 for i in range(seq - prompt)])
        rows["completion_mask"].append([0] * prompt + [1] * (seq - prompt))
    return datasets.Dataset.from_dict(rows)


class _StepClock:
    """Trainer callback: a timestamp at every step end; VmHWM (and on a GPU the CUDA allocator's
    peak) reset when training starts."""

    def __new__(cls, cuda: bool = False):
        import torch
        from transformers import TrainerCallback

        class Clock(TrainerCallback):
            def __init__(self):
                self.stamps: list[tuple[float, float]] = []  # (wall, process CPU) at each step end
                self.start_rss = 0
                self.start_cuda = 0

            def on_train_begin(self, args, state, control, **kw):
                Path("/proc/self/clear_refs").write_text("5")
                self.start_rss = _status_kib("VmRSS")
                if cuda:
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                    self.start_cuda = torch.cuda.memory_allocated()

            def on_step_end(self, args, state, control, **kw):
                if cuda:  # kernels run asynchronously: a step ends when the GPU is done with it
                    torch.cuda.synchronize()
                self.stamps.append((time.perf_counter(), time.process_time()))

        return Clock()


def _lora_config():
    from cuset.train.config import LoraOptions
    from cuset.train.model import lora_config

    return lora_config(LoraOptions())


def _common_args(out_dir: str, steps: int, device: str, precision: str) -> dict:
    return dict(output_dir=out_dir, per_device_train_batch_size=1, gradient_accumulation_steps=1, max_steps=steps,
                learning_rate=1e-4, lr_scheduler_type="constant", optim="adamw_torch", logging_steps=1,
                save_strategy="no", report_to="none", disable_tqdm=True, use_cpu=device == "cpu", seed=0, data_seed=0,
                bf16=precision == "bf16")


def _run_cuset(model_dir, finetune, objective, steps, out_dir, clock, sizes, head="auto"):
    from cuset.config import load_config
    from cuset.train.callbacks import JsonlLogCallback
    from cuset.train.config import TrainConfig
    from cuset.train.data import PadCollator
    from cuset.train.model import build_model
    from cuset.train.run import reference_model, training_arguments
    from cuset.train.trainer import CusetTrainer

    cfg = load_config(TrainConfig, None, [
        f"output_dir={out_dir}", f"model.name_or_path={model_dir}", "model.dtype=float32", f"finetune={finetune}",
        f"loss.name={objective}", f"optim.max_steps={steps}", "optim.lr_scheduler=constant", "optim.warmup_ratio=0.0",
        "save_steps=0", "report_to=[]", "progress=false", f"precision={sizes['precision']}", "seed=0",
        f"loss.head={head}"])
    args = training_arguments(cfg)  # on the GPU when one is visible (the parent hides it for --device cpu)
    model = build_model(cfg)
    data = _dataset(steps, sizes["seq"], sizes["vocab"]).remove_columns(["completion_mask"])
    trainer = CusetTrainer(model=model, args=args, train_dataset=data, data_collator=PadCollator(pad_token_id=0),
                           loss_config=cfg.loss, ref_model=reference_model(cfg, model),
                           callbacks=[clock, JsonlLogCallback(Path(out_dir) / "train_log.jsonl")])
    trainer.train()
    return _head_used(cfg.loss, sizes["device"])


def _head_used(loss_cfg, device: str) -> str:
    """Which LM head compute_loss takes for this objective on `device` ("fused:cce" or "chunked")."""
    import torch

    from cuset.losses import fused, get_loss

    obj = get_loss(loss_cfg.name)
    impl = fused.choose_impl(loss_cfg, torch.empty(0, device=device), needs_entropy=obj.needs_entropy,
                             needs_kl=obj.needs_kl(loss_cfg), has_bias=False)
    return "chunked" if impl is None else f"fused:{impl}"


def _run_trl(model_dir, finetune, steps, out_dir, clock, sizes):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype="float32")
    tok = AutoTokenizer.from_pretrained(model_dir)
    data = _dataset(steps, sizes["seq"], sizes["vocab"]).remove_columns(["labels", "cuda_mask"])
    args = SFTConfig(**_common_args(out_dir, steps, sizes["device"], sizes["precision"]), max_length=sizes["seq"],
                     packing=False, completion_only_loss=True,
                     remove_unused_columns=True)
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tok,
                         peft_config=_lora_config() if finetune == "lora" else None, callbacks=[clock])
    trainer.train()


def _run_trainer(model_dir, finetune, steps, out_dir, clock, sizes):
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    from cuset.train.data import PadCollator

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype="float32")
    model.config.use_cache = False
    if finetune == "lora":
        model = get_peft_model(model, _lora_config())
    data = _dataset(steps, sizes["seq"], sizes["vocab"]).remove_columns(["cuda_mask", "completion_mask"])
    collate = PadCollator(pad_token_id=0)
    args = TrainingArguments(**_common_args(out_dir, steps, sizes["device"], sizes["precision"]), remove_unused_columns=False)
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[clock],
                      data_collator=lambda rows: {k: v for k, v in collate(rows).items() if k != "cuda_mask"})
    trainer.train()


def run_case(case: str, model_dir: str, steps: int, warmup: int, out_dir: str, sizes: dict) -> dict:
    import torch  # (loaded before timing)

    cuda = sizes["device"] == "cuda"
    if cuda and not torch.cuda.is_available():
        raise RuntimeError("--device cuda: torch sees no CUDA device")
    runner, finetune, objective = case.split(":")
    clock = _StepClock(cuda)
    head = None
    if runner in ("cuset", "cuset-chunked"):
        head = _run_cuset(model_dir, finetune, objective, steps, out_dir, clock, sizes,
                          head="chunked" if runner == "cuset-chunked" else "auto")
    elif runner == "trl":
        _run_trl(model_dir, finetune, steps, out_dir, clock, sizes)
    else:
        _run_trainer(model_dir, finetune, steps, out_dir, clock, sizes)
    stamps = clock.stamps
    if len(stamps) != steps or steps <= warmup + 1:
        raise RuntimeError(f"{case}: {len(stamps)} steps timed, need > warmup + 1 = {warmup + 1}")
    timed = stamps[warmup:]
    wall = sorted(b[0] - a[0] for a, b in zip(timed, timed[1:]))
    cpu = sorted(b[1] - a[1] for a, b in zip(timed, timed[1:]))
    return {"case": case, "head": head, "steps_per_s": 1.0 / wall[len(wall) // 2], "cpu_s_per_step": cpu[len(cpu) // 2],
            "step_times_s": wall, "peak_rss_mib": _status_kib("VmHWM") / 1024, "start_rss_mib": clock.start_rss / 1024,
            "peak_cuda_mib": torch.cuda.max_memory_allocated() / 2**20 if cuda else None,
            "start_cuda_mib": clock.start_cuda / 2**20 if cuda else None}


# --- the table ----------------------------------------------------------------------------------

def build_model(out: Path, seq: int = SEQ, vocab: int = VOCAB) -> Path:
    if (out / "config.json").is_file():
        return out
    from cuset.train.tiny import build_tiny_model

    corpus = ["__global__ void k(float* x) { x[threadIdx.x] = 0; }", "int main() { return 0; }"]
    return build_tiny_model(out, corpus * 4, vocab_size=300, model_vocab_size=vocab, hidden_size=HIDDEN,
                            num_layers=LAYERS, num_heads=4, num_kv_heads=2, intermediate_size=4 * HIDDEN,
                            max_position_embeddings=seq)


def cases(runners, objectives, finetunes) -> list[str]:
    out = []
    for ft in finetunes:
        for r in runners:
            out += [f"{r}:{ft}:{o}" for o in objectives] if r.startswith("cuset") else [f"{r}:{ft}:-"]
    return out


def measure(case, model_dir, args, work: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TOKENIZERS_PARALLELISM="false")
    if args.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # every runner on the CPU (cuset.train picks a visible GPU by itself)
    cmd = [sys.executable, __file__, "--case", case, "--model", str(model_dir), "--steps", str(args.steps),
           "--warmup", str(args.warmup), "--work", str(work / case.replace(":", "_")), "--device", args.device,
           "--precision", args.precision, "--seq", str(args.seq), "--vocab", str(args.vocab)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{case} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def peak_mib(r: dict) -> float:
    """The memory that counts: the GPU's peak on a GPU, else the process's peak RSS."""
    return r["peak_cuda_mib"] if r.get("peak_cuda_mib") is not None else r["peak_rss_mib"]


def start_mib(r: dict) -> float:
    return r["start_cuda_mib"] if r.get("peak_cuda_mib") is not None else r["start_rss_mib"]


def table(results: dict[str, dict], finetunes) -> str:
    cuda = any(r.get("peak_cuda_mib") is not None for r in results.values())
    memory = "peak CUDA MiB" if cuda else "peak RSS MiB"
    rows = [f"| finetune | runner | objective | steps/s | CPU s/step | {memory} | above start MiB | speed vs faster peer | "
            "CPU time vs leanest peer | memory vs leaner peer |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    verdicts = []
    for ft in finetunes:
        peers = {k: v for k, v in results.items() if k.split(":")[1] == ft and not k.startswith("cuset")}
        fast = max((v["steps_per_s"] for v in peers.values()), default=None)
        lean = min((peak_mib(v) for v in peers.values()), default=None)
        cheap = min((v["cpu_s_per_step"] for v in peers.values()), default=None)
        for case, r in results.items():
            runner, f, obj = case.split(":")
            if f != ft:
                continue
            speed = f"{r['steps_per_s'] / fast:.2f}x" if fast else "-"
            mem = f"{peak_mib(r) / lean:.2f}x" if lean else "-"
            cpu = f"{r['cpu_s_per_step'] / cheap:.2f}x" if cheap else "-"
            label = f"{runner} ({r['head']})" if r.get("head") else runner
            rows.append(f"| {ft} | {label} | {obj} | {r['steps_per_s']:.3f} | {r['cpu_s_per_step']:.2f} | {peak_mib(r):.0f} | "
                        f"{peak_mib(r) - start_mib(r):.0f} | {speed} | {cpu} | {mem} |")
            if runner.startswith("cuset") and fast and lean:
                ok = r["steps_per_s"] >= fast and peak_mib(r) <= lean
                verdicts.append(f"{ft} {obj} ({label}): speed {r['steps_per_s'] / fast:.2f}x of the faster peer, "
                                f"memory {peak_mib(r) / lean:.2f}x of the leaner peer -> {'meets' if ok else 'MISSES'} target")
    return "\n".join(rows) + "\n\nTarget: CuSeT >= 1.00x the faster peer's steps/s and <= 1.00x the leaner peer's peak memory.\n" + \
        "\n".join(f"- {v}" for v in verdicts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runners", default="trainer,trl,cuset",
                    help="comma-separated; auto = trainer, cuset and trl when it is installed")
    ap.add_argument("--objectives", default=",".join(OBJECTIVES))
    ap.add_argument("--finetune", default="lora,full")
    ap.add_argument("--steps", type=int, default=8, help="optimizer steps per process (the first --warmup are not timed)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2, help="processes per case; the fastest counts")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="where every runner trains")
    ap.add_argument("--precision", default="fp32", choices=("fp32", "bf16"), help="bf16: mixed precision (GPU only)")
    ap.add_argument("--seq", type=int, default=SEQ, help="tokens per sequence (a quarter of them prompt)")
    ap.add_argument("--vocab", type=int, default=VOCAB, help="vocabulary of the model (the LM head's width)")
    ap.add_argument("--out", default=str(DEFAULT_OUT),
                    help="results.json/.md go here; with a directory other than the default the run's record "
                         "(commit, machine, load) goes here too, not to bench/results/train_step.json")
    ap.add_argument("--case", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--model", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--work", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.precision == "bf16" and args.device != "cuda":
        ap.error("--precision bf16 needs --device cuda")
    if args.seq < 8 or args.seq % 4:
        ap.error("--seq must be a multiple of 4, at least 8")
    sizes = {"device": args.device, "precision": args.precision, "seq": args.seq, "vocab": args.vocab}
    if args.case:
        print(json.dumps(run_case(args.case, args.model, args.steps, args.warmup, args.work, sizes)))
        return
    from _record import start_record

    record = start_record(argv=None if argv is None else [__file__, *argv])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model_dir = build_model(out / f"model-v{args.vocab}-s{args.seq}", args.seq, args.vocab)
    finetunes = args.finetune.split(",")
    runners = args.runners.split(",")
    if args.runners == "auto":
        import importlib.util

        runners = ["trainer", "cuset"] + (["trl"] if importlib.util.find_spec("trl") else [])
        if args.device == "cuda" and importlib.util.find_spec("cut_cross_entropy"):
            runners.append("cuset-chunked")  # the fused head runs as `cuset`: the chunked one beside it
        print(f"runners: {', '.join(runners)}" + ("" if "trl" in runners else " (trl is not installed)"),
              file=sys.stderr, flush=True)
    todo = cases(runners, args.objectives.split(","), finetunes)
    results: dict[str, dict] = {}
    for rep in range(args.repeats):
        for case in todo:  # interleaved, so a burst of load on the shared machine hits every case alike
            r = measure(case, model_dir, args, out / "work")
            best = results.get(case)
            if best is None:
                results[case] = r
            else:
                if r["steps_per_s"] > best["steps_per_s"]:
                    best["steps_per_s"], best["step_times_s"] = r["steps_per_s"], r["step_times_s"]
                best["cpu_s_per_step"] = min(best["cpu_s_per_step"], r["cpu_s_per_step"])
                for peak, start in (("peak_rss_mib", "start_rss_mib"), ("peak_cuda_mib", "start_cuda_mib")):
                    if r.get(peak) is not None:
                        best[peak], best[start] = min((best[peak], best[start]), (r[peak], r[start]))
            print(f"[{rep + 1}/{args.repeats}] {case}: {r['steps_per_s']:.3f} steps/s, {r['cpu_s_per_step']:.2f} CPU s/step, "
                  f"peak {peak_mib(r):.0f} MiB",
                  file=sys.stderr, flush=True)
    md = table(results, finetunes)
    import torch

    device = torch.cuda.get_device_name(0) if args.device == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    header = (f"# Training step: cuset vs TRL SFTTrainer vs transformers Trainer\n\n"
              f"Model: Qwen2 hidden {HIDDEN}, {LAYERS} layers, vocab {args.vocab:,}; sequences {args.seq} tokens "
              f"({args.seq * PROMPT // SEQ} prompt); batch 1; {args.precision}; torch {torch.__version__}, {device}; "
              f"median of {args.steps - args.warmup - 1} timed steps per process, best of {args.repeats} processes.\n\n")
    (out / "results.json").write_text(json.dumps({"results": results, "args": vars(args), "runners": runners}, indent=2))
    (out / "results.md").write_text(header + md + "\n")
    print(header + md)
    # The committed result (bench/results/train_step.json) comes from a run with the default --out;
    # a run with its own --out (the GPU rehearsal, an experiment) keeps its record there instead.
    own_out = Path(args.out).resolve() != DEFAULT_OUT.resolve()
    record.write({"args": vars(args), "model": {"hidden": HIDDEN, "layers": LAYERS, "vocab": VOCAB, "seq": SEQ,
                                                "prompt": PROMPT}, "torch_threads": torch.get_num_threads(),
                  "results": results, "table_md": header + md}, path=out / "record.json" if own_out else None)


if __name__ == "__main__":
    main()
