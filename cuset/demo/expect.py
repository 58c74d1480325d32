"""How long each demo step should take, announced before it starts.

Rates per unit of work on the project's 2-core machine, from committed step times: the
study re-run's report (docs/study-2026-11-26-rerun/report.json, `timings_s`: 1000 training
and 64 evaluation tasks, 3 samples of at most 960 tokens) and the measurement behind
DemoConfig.micro_batch (500 SFT steps of 4 in passes of 1: 262 s). Their load was not
recorded, so the announcement is a guide; the report records what each step took, and
bench/demo_time.py what the whole demo took.
"""

from __future__ import annotations

# seconds per unit of work at the default model size (hidden 128, 4 layers) on 2 cores
SECONDS_PER = {
    "train_example": 0.13,        # one example's forward + backward pass, SFT: 262 s / (500 steps x 4)
    "generate_token": 0.0021,     # one token of max_new_tokens: the study's base, 383 s / (192 samples x 960)
    "evaluate_sample": 2.5,       # nvcc + a run on the CPU backend: the study's SFT run, 475.6 s / 192 samples
    "score_reference": 0.12,      # one teacher-forced reference: the study's base NLL, 7.7 s / 64
    "synth_task": 0.001,          # one synthesised task (the study's data step: 1.7 s for 4264)
}
# A loss's steps relative to SFT's, per fine-tuning mode. CuSeT's loss scores the batch's
# confidences and windows too: under full fine-tuning its steps are slower (the earlier default
# demo: 675.7 s against 421.4 s, docs/demo-2026-11-26-premise/report.json); under LoRA they cost
# what SFT's cost (248.5 s against 251.0 s, docs/demo-2026-12-06-lora/report.json). Other losses:
# OTHER_LOSS_FACTOR, unmeasured.
LOSS_FACTOR = {"full": {"sft": 1.0, "cuset": 1.6}, "lora": {"sft": 1.0, "cuset": 1.0}}
OTHER_LOSS_FACTOR = 1.3


def size_factor(cfg) -> float:
    """Compute per token relative to the default model (hidden 128, 4 layers), at least a twentieth:
    a smaller model's steps cost more than its size suggests (Python overhead)."""
    return max((cfg.hidden / 128) ** 2 * cfg.layers / 4, 0.05)


def minutes(seconds: float) -> str:
    return "under a minute" if seconds < 60 else f"about {seconds / 60:.0f} minute{'s' if seconds >= 90 else ''}"


def expected(cfg, step: str, method: str = "sft") -> float:
    """Expected seconds of `step` (data, base_nll, train, generate, evaluate, reference_fit, confidence)."""
    from cuset.demo.config import parse_method_spec

    if step == "data":
        return SECONDS_PER["synth_task"] * (cfg.n_train + cfg.n_eval + cfg.n_pretrain + cfg.n_instruct)
    if step in ("base_nll", "reference_fit", "confidence"):
        refs = min(64, cfg.n_train if step == "base_nll" else cfg.n_eval)
        return SECONDS_PER["score_reference"] * refs * size_factor(cfg)
    if step == "train":
        return (SECONDS_PER["train_example"] * cfg.finetune_steps * cfg.batch_size * size_factor(cfg)
                * LOSS_FACTOR.get(cfg.finetune, {}).get(parse_method_spec(method).loss, OTHER_LOSS_FACTOR))
    if step == "generate":
        return SECONDS_PER["generate_token"] * cfg.n_eval * cfg.samples * cfg.max_new_tokens * size_factor(cfg)
    if step == "evaluate":
        return SECONDS_PER["evaluate_sample"] * cfg.n_eval * cfg.samples
    raise ValueError(f"no expected time for step {step!r}")


def announce(cfg, step: str, method: str = "sft") -> str:
    """What `step` does and how long it should take, one line."""
    what = {
        "data": f"synthesise {cfg.n_train} training and {cfg.n_eval} evaluation tasks and the base's corpus",
        "base_nll": "score the base on fine-tuning references (NLL, tokens at p <= tau)",
        "train": f"fine-tune with {method}: {cfg.finetune_steps} steps of {cfg.batch_size} examples",
        "generate": f"sample {cfg.samples} programs for each of {cfg.n_eval} evaluation tasks "
                    f"(at most {cfg.max_new_tokens} tokens each)",
        "evaluate": f"compile {cfg.n_eval * cfg.samples} samples with nvcc and run them on the CPU backend",
        "reference_fit": "score the held-out reference programs teacher-forced",
        "confidence": "token confidence of the base (paper section 3)",
    }[step]
    return f"{what}, expected {minutes(expected(cfg, step, method))} on 2 idle cores"
