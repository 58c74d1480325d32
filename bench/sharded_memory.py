"""Peak memory per process of full fine-tuning: 1 unsharded process vs 2 FSDP FULL_SHARD processes (gloo).

    python bench/sharded_memory.py                 # defaults: hidden 512, 8 layers, vocab 32,000 (~60M params)
    python bench/sharded_memory.py --hidden 768 --layers 12

Both runs train the same model for --steps AdamW steps with the CuSeT objective through
`cuset.losses.compute_loss` (the training path), on the same global batch of 2 sequences:
the unsharded process accumulates both, each FSDP rank takes one. FSDP is configured as
accelerate's FSDP plugin does from configs/accelerate/fsdp.yaml (a unit per decoder layer,
use_orig_params); accelerate enables that plugin only on GPUs, so it is applied here directly.

Memory: each process notes its RSS after imports (before the model exists), resets its
resident-set high-water mark after the model is built and wrapped (`/proc/self/clear_refs`),
and reads VmHWM after the last step. "train peak" = VmHWM - RSS after imports: weights,
gradients, optimizer state, activations and gather buffers, as the kernel counts them.
Processes run with MALLOC_MMAP_THRESHOLD_=1 MiB so freed large blocks leave the heap.
"""

from __future__ import annotations

# What this script measures (full fine-tuning, sharded and not): a record in bench/results is stale once a commit
# after its own touches one of these paths (docs/tools/perf_table.py).
MEASURES = ("cuset/train", "cuset/losses")

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def worker(model_dir: str, steps: int, seq: int, out: str) -> None:
    base_rss = _status_kib("VmRSS")
    import torch
    import torch.distributed as dist
    from transformers import AutoModelForCausalLM

    from cuset.losses import compute_loss, count_loss_items
    from cuset.losses.config import LossConfig

    sharded = "RANK" in os.environ
    if sharded:
        dist.init_process_group("gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if sharded else (0, 1)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    if sharded:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
        from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

        layer_cls = type(model.model.layers[0])
        model = FSDP(model, sharding_strategy=ShardingStrategy.FULL_SHARD, use_orig_params=True,
                     auto_wrap_policy=functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={layer_cls}),
                     device_id=torch.device("cpu"))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    cfg = LossConfig(name="cuset", tau=0.0, window=64, chunk_size=256)
    g = torch.Generator().manual_seed(0)
    rows = []
    for _ in range(2):
        ids = torch.randint(0, 1000, (1, seq), generator=g)
        rows.append({"input_ids": ids, "labels": ids.clone(), "attention_mask": torch.ones_like(ids),
                     "cuda_mask": (torch.rand(1, seq, generator=g) < 0.4).long()})
    n_items = sum(count_loss_items(r)["tokens"] for r in rows)
    mine = [rows[rank]] if sharded else rows
    Path("/proc/self/clear_refs").write_text("5")
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        opt.zero_grad()
        for row in mine:
            loss, _ = compute_loss(model, row, cfg, num_items_in_batch=n_items, world_size=world)
            loss.backward()
        opt.step()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    result = {"rank": rank, "world": world, "train_peak_mib": (_status_kib("VmHWM") - base_rss) / 1024,
              "base_rss_mib": base_rss / 1024, "wall_s": wall, "cpu_s": cpu}
    Path(out).with_suffix(f".{rank}.json").write_text(json.dumps(result))
    if sharded:
        dist.destroy_process_group()


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT), MALLOC_MMAP_THRESHOLD_="1048576", OMP_NUM_THREADS="1",
                TOKENIZERS_PARALLELISM="false")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--worker", nargs=4, metavar=("MODEL", "STEPS", "SEQ", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        model, steps, seq, out = args.worker
        return worker(model, int(steps), int(seq), out)
    from _record import start_record

    record = start_record(argv=None if argv is None else [__file__, *argv])
    from cuset.train.tiny import build_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_tiny_model(Path(tmp) / "model", ["__global__ void k(float* x) { x[0] = 1; }"] * 4,
                                     vocab_size=300, model_vocab_size=args.vocab, hidden_size=args.hidden,
                                     num_layers=args.layers, num_heads=8, num_kv_heads=2,
                                     intermediate_size=int(args.hidden * 2.75))
        import torch
        from transformers import AutoModelForCausalLM

        n_params = sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(model_dir).parameters())
        me = str(Path(__file__).resolve())
        common = [me, "--worker", str(model_dir), str(args.steps), str(args.seq)]
        subprocess.run([sys.executable, *common, f"{tmp}/plain"], env=_env(), check=True, cwd=ROOT)
        subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                        *common, f"{tmp}/fsdp"], env=_env(), check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        plain = json.loads(Path(f"{tmp}/plain.0.json").read_text())
        fsdp = [json.loads(Path(f"{tmp}/fsdp.{r}.json").read_text()) for r in (0, 1)]
    print(f"model: {n_params / 1e6:.1f}M parameters (fp32 {n_params * 4 / 2**20:.0f} MiB; with AdamW state and "
          f"gradients {n_params * 16 / 2**20:.0f} MiB), {args.seq} tokens per sequence, {args.steps} steps, "
          f"torch {torch.__version__}, load average {os.getloadavg()[0]:.2f}")
    print("| run | process | train peak MiB | wall s | CPU s |")
    print("|---|---|---|---|---|")
    print(f"| 1 process, unsharded | 0 | {plain['train_peak_mib']:.0f} | {plain['wall_s']:.2f} | {plain['cpu_s']:.2f} |")
    for r in fsdp:
        print(f"| 2 processes, FSDP FULL_SHARD | {r['rank']} | {r['train_peak_mib']:.0f} | {r['wall_s']:.2f} | "
              f"{r['cpu_s']:.2f} |")
    worst = max(r["train_peak_mib"] for r in fsdp)
    print(f"peak per process, FSDP / unsharded: {worst / plain['train_peak_mib']:.2f} (worst rank)")
    record.write({"parameters": n_params, "fp32_mib": n_params * 4 / 2**20, "with_adamw_mib": n_params * 16 / 2**20,
                  "hidden": args.hidden, "layers": args.layers, "vocab": args.vocab, "seq": args.seq,
                  "steps": args.steps, "unsharded": plain, "fsdp": fsdp, "fsdp_worst_mib": worst,
                  "fsdp_over_unsharded": worst / plain["train_peak_mib"]})


if __name__ == "__main__":
    main()
