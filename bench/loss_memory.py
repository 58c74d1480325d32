"""Peak memory and time of loss + backward through the LM head: chunked head vs full logits.

For every objective and for a frozen LM head (the paper's LoRA setting: only the
gradient w.r.t. the hidden states is needed) and a trainable one, runs

  full     the plain path: logits [tokens, vocab] = hidden @ W^T, log_softmax,
           gather, the objective, autograd backward (`cuset.losses.reference`);
  chunked  the training path: `cuset.losses.compute.head_loss_sum`, exactly what
           `compute_loss` runs after the decoder.

Defaults: vocabulary 151,936, hidden 896 (Qwen2.5-0.5B's head), 4,096 target
tokens in one sample, fp32 on CPU.

How memory is measured: each case runs in its own fresh Python process. After
building the inputs and one small warm-up pass (BLAS/OpenMP pools, allocator), the
process resets its resident-set high-water mark (`echo 5 > /proc/self/clear_refs`,
Linux >= 4.0) and notes its current RSS; after the timed runs it reads VmHWM from
/proc/self/status. Peak = VmHWM - RSS before the run: every byte the case touched
on top of its inputs (logits, softmax buffers, saved tensors, gradients, and
allocator slack), as the kernel counts it. torch's CPU allocator has no cache,
and each case process runs with MALLOC_MMAP_THRESHOLD_=1 MiB so glibc serves
every block of 1 MiB or more with its own mmap and unmaps it on free: otherwise
glibc's sliding threshold keeps freed blocks of up to 32 MiB resident in its heap,
and the high-water mark of the second repeat carries the first one's fragments
(measured: +30..55 MiB of noise). (tracemalloc does not see torch's allocations;
RSS high-water marks do.)

Time: forward + backward, the minimum over --repeats runs, as wall clock and as
the process's CPU time (all its threads). On a shared machine wall clock mostly
measures the other jobs; CPU time is what the implementation itself costs (both
are printed, with the load average, so the reader can judge).

    .venv/bin/python bench/loss_memory.py                     # the full table (~30-40 min on 2 cores)
    .venv/bin/python bench/loss_memory.py --tokens 512 --objectives sft,cuset --repeats 1   # quick look

Writes runs/bench/loss_memory/results.{json,md} and prints the table.
"""

from __future__ import annotations

# What this script measures (the objectives and the chunked LM head): a record in bench/results is stale once a commit
# after its own touches one of these paths (docs/tools/perf_table.py).
MEASURES = ("cuset/losses",)

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

TARGETS = {"frozen_time": 1.05, "trainable_time": 1.35, "memory": 0.30, "cuset_vs_sft": 1.05}


# --- one case, in its own process ------------------------------------------------------------------

def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _reset_peak():
    Path("/proc/self/clear_refs").write_text("5")


def _inputs(args, tokens):
    import torch

    from cuset.losses.tokens import select_targets

    g = torch.Generator().manual_seed(args.seed)
    hidden = torch.randn(1, tokens, args.hidden, generator=g)
    weight = torch.randn(args.vocab, args.hidden, generator=g) * 0.05
    labels = torch.randint(0, args.vocab, (1, tokens), generator=g)
    cuda = (torch.rand(1, tokens, generator=g) > 0.5).float()
    ref_hidden = hidden + 0.1 * torch.randn(1, tokens, args.hidden, generator=g)
    targets = select_targets(labels, vocab_size=args.vocab, cuda_mask=cuda)
    return hidden, weight, labels, cuda, ref_hidden, targets


def _step(args, objective, head, impl, data):
    """One loss + backward; returns nothing (gradients are dropped by the caller)."""
    import torch

    from cuset.losses import LossConfig, get_loss
    from cuset.losses.compute import head_loss_sum
    from cuset.losses.reference import full_logits_token_stats

    hidden, weight, labels, cuda, ref_hidden, targets = data
    cfg = LossConfig(name=objective, chunk_size=args.chunk_size)
    obj = get_loss(objective)
    h = hidden.detach().requires_grad_()
    w = weight.detach().requires_grad_(head == "trainable")
    ref = ref_hidden if obj.needs_kl(cfg) else None
    n = targets.n_tokens
    if impl == "full":
        stats = full_logits_token_stats(h, w, None, labels, cuda_mask=cuda, ref_hidden=ref,
                                        need_entropy_topk=cfg.eaft_topk if obj.needs_entropy else None)
        loss_sum, _ = obj(stats, cfg)
    else:
        loss_sum, _, _ = head_loss_sum(cfg, h[targets.mask], w, None, targets,
                                       ref_hidden=None if ref is None else ref[targets.mask])
    (loss_sum / n).backward()
    assert torch.isfinite(h.grad).all()


def run_case(args) -> dict:
    import torch

    objective, head, impl = args.case.split(":")
    torch.manual_seed(args.seed)
    _step(args, objective, head, impl, _inputs(args, min(256, args.tokens)))  # warm-up: thread pools, allocator
    data = _inputs(args, args.tokens)
    gc.collect()
    _reset_peak()
    base = _rss_kib("VmRSS")
    times, cpu = [], []
    for _ in range(args.repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        _step(args, objective, head, impl, data)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        gc.collect()
    peak = _rss_kib("VmHWM") - base
    return {"objective": objective, "head": head, "impl": impl, "time_s": min(times), "times_s": times,
            "cpu_s": min(cpu), "cpus_s": cpu, "peak_mib": peak / 1024, "threads": torch.get_num_threads(),
            "loadavg": os.getloadavg()[0]}


# --- the table -------------------------------------------------------------------------------------

def _spawn(args, case: str) -> dict:
    cmd = [sys.executable, __file__, "--case", case, "--tokens", str(args.tokens), "--vocab", str(args.vocab),
           "--hidden", str(args.hidden), "--chunk-size", str(args.chunk_size), "--repeats", str(args.repeats),
           "--seed", str(args.seed)]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]), MALLOC_MMAP_THRESHOLD_="1048576")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"case {case} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _rows(results: list[dict], objectives, heads) -> list[dict]:
    by = {(r["objective"], r["head"], r["impl"]): r for r in results}
    rows = []
    for head in heads:
        for obj in objectives:
            full, chunk = by[(obj, head, "full")], by[(obj, head, "chunked")]
            sft = by.get(("sft", head, "chunked"))
            rows.append({
                "objective": obj, "head": head,
                "full_s": full["time_s"], "chunked_s": chunk["time_s"], "time_ratio": chunk["time_s"] / full["time_s"],
                "full_cpu_s": full["cpu_s"], "chunked_cpu_s": chunk["cpu_s"],
                "cpu_ratio": chunk["cpu_s"] / full["cpu_s"],
                "full_mib": full["peak_mib"], "chunked_mib": chunk["peak_mib"],
                "mem_ratio": chunk["peak_mib"] / full["peak_mib"],
                "vs_sft_time": chunk["time_s"] / sft["time_s"] if sft else None,
                "vs_sft_cpu": chunk["cpu_s"] / sft["cpu_s"] if sft else None,
                "vs_sft_mem": chunk["peak_mib"] / sft["peak_mib"] if sft else None,
                "loadavg": max(full["loadavg"], chunk["loadavg"]),
            })
    return rows


def _ranges(rows: list[dict], heads) -> dict:
    """Per head, [min, max] over the objectives of each ratio (the README quotes these)."""
    out = {}
    for head in heads:
        mine = [r for r in rows if r["head"] == head]
        out[head] = {k: [min(r[k] for r in mine), max(r[k] for r in mine)]
                     for k in ("mem_ratio", "time_ratio", "cpu_ratio")}
        cuset = [r for r in mine if r["objective"] == "cuset" and r["vs_sft_cpu"] is not None]
        if cuset:
            out[head]["cuset_vs_sft_cpu"] = [cuset[0]["vs_sft_cpu"]] * 2
            out[head]["cuset_vs_sft_mem"] = [cuset[0]["vs_sft_mem"]] * 2
            out[head]["cuset_vs_sft_wall"] = [cuset[0]["vs_sft_time"]] * 2
    return out


def _span(pair: list[float]) -> str:
    low, high = pair
    return f"{low:.3f}" if round(low, 3) == round(high, 3) else f"{low:.3f}-{high:.3f}"


def _markdown(rows: list[dict], args) -> str:
    lines = [
        f"Loss + backward through the LM head: {args.tokens} target tokens, vocab {args.vocab}, hidden {args.hidden}, "
        f"fp32 CPU, chunk {args.chunk_size}, min of {args.repeats} run(s). Peak = RSS high-water mark above the "
        "inputs. cpu = process CPU time (all threads); load = 1-min load average during the case.",
        "",
        "| objective | head | full wall s | chunked wall s | wall ratio | full cpu s | chunked cpu s | cpu ratio "
        "| full MiB | chunked MiB | mem ratio | vs chunked SFT cpu | vs chunked SFT mem | load |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    fmt = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
    for r in rows:
        lines.append(f"| {r['objective']} | {r['head']} | {r['full_s']:.2f} | {r['chunked_s']:.2f} | "
                     f"{r['time_ratio']:.3f} | {r['full_cpu_s']:.2f} | {r['chunked_cpu_s']:.2f} | {r['cpu_ratio']:.3f} | "
                     f"{r['full_mib']:.0f} | {r['chunked_mib']:.0f} | {r['mem_ratio']:.3f} | "
                     f"{fmt(r['vs_sft_cpu'])} | {fmt(r['vs_sft_mem'])} | {r['loadavg']:.1f} |")
    lines += ["", f"Targets: time ratio <= {TARGETS['frozen_time']} (frozen head), <= {TARGETS['trainable_time']} "
                  f"(trainable head); memory ratio <= {TARGETS['memory']}; CuSeT within "
                  f"{TARGETS['cuset_vs_sft'] - 1:.0%} of chunked SFT in time and memory."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--hidden", type=int, default=896)
    ap.add_argument("--chunk-size", type=int, default=None, help="default: LossConfig's chunk_size")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--objectives", default="sft,dft,eaft,asft,profit,cuset")
    ap.add_argument("--heads", default="frozen,trainable")
    ap.add_argument("--out", default="runs/bench/loss_memory")
    ap.add_argument("--case", default=None, help=argparse.SUPPRESS)  # internal: objective:head:impl
    args = ap.parse_args(argv)
    if args.chunk_size is None:
        from cuset.losses import LossConfig

        args.chunk_size = LossConfig().chunk_size
    if args.case:
        print(json.dumps(run_case(args)))
        return
    from rich.progress import track

    from _record import start_record

    record = start_record(argv=None if argv is None else [__file__, *argv])
    objectives, heads = args.objectives.split(","), args.heads.split(",")
    cases = [f"{o}:{h}:{i}" for h in heads for o in objectives for i in ("full", "chunked")]
    results = [_spawn(args, c) for c in track(cases, description="loss+backward cases")]
    rows = _rows(results, objectives, heads)
    table = _markdown(rows, args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"args": vars(args), "cases": results, "rows": rows}, indent=1))
    (out / "results.md").write_text(table)
    print(table)
    ranges = _ranges(rows, heads)
    for head, r in ranges.items():
        print(f"{head} head, chunked / full: memory {_span(r['mem_ratio'])}, wall {_span(r['time_ratio'])}, "
              f"cpu {_span(r['cpu_ratio'])}" + (f"; CuSeT / chunked SFT: cpu {_span(r['cuset_vs_sft_cpu'])}, "
                                                 f"memory {_span(r['cuset_vs_sft_mem'])}" if "cuset_vs_sft_cpu" in r else ""))
    record.write({"args": vars(args), "rows": rows, "ranges": ranges, "cases": results, "table_md": table})


if __name__ == "__main__":
    main()
