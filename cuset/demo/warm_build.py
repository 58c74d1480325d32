"""Warming a pretrained base up, deterministically: the base-strength axis (issue 60).

A warmed base is a pretrained base after `warmup_steps` optimizer steps of supervised training
on prompt/program pairs (the loss on the reply only, as SFT trains). It runs here, in one small
loop on one thread with deterministic algorithms (cuset.demo.base_build.deterministic_torch),
rather than through cuset.train: every byte of a warmed base then follows from this module,
base_build.py, the pretrained base's files, the settings in WARM_SETTINGS and the pairs, so
a warmed base can be shipped, cached under its recipe and re-made bit for bit
(cuset.demo.base). The optimisation is the fine-tuning runs' (cuset.train's defaults):
AdamW (betas 0.9/0.999, no weight decay), linear warm-up over 5% of the steps then cosine
decay to 0, gradients clipped to norm 1, each step's loss normalised over its reply tokens.
Keep this module small: any edit changes the recipe, and the shipped warmed base is rebuilt.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Callable

# The DemoConfig fields a warmed base depends on besides its pretrained base and its pairs.
WARM_SETTINGS = ("seed", "warmup_steps", "warmup_lr", "batch_size")
MAX_TOKENS = 2048          # as the fine-tuning data's max_length: longer pairs are cut
WARMUP_FRACTION = 0.05     # of the steps, linear from 0 (the fine-tuning runs' warmup_ratio)
log = logging.getLogger(__name__)

LOG_NAME = "warmup_log.json"
# Files of the pretrained base a warmed base does not take over: its own log replaces them.
NOT_COPIED = ("manifest.json", "pretrain_log.json")


def reply_rows(tokenizer, conversations, max_tokens: int = MAX_TOKENS) -> tuple[list[tuple[list[int], list[int]]], dict]:
    """(input ids, labels) of each conversation (tuples of (role, content), the reply last), rendered
    with the chat template: the prompt's tokens, the assistant header included, labelled -100; and
    the pairs left out, counted by reason (a prompt that fills the first `max_tokens` tokens leaves
    its reply nothing to learn from)."""
    rows, skipped = [], {}
    for i, conv in enumerate(conversations):
        messages = [{"role": role, "content": content} for role, content in conv]
        if len(messages) < 2 or messages[-1]["role"] != "assistant":
            raise ValueError(f"warm-up pair {i}: the last message must be the assistant's reply, after a prompt")
        prompt = tokenizer.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True)
        full = tokenizer.apply_chat_template(messages, tokenize=False)
        if not full.startswith(prompt):
            raise ValueError(f"warm-up pair {i}: the chat template renders the prompt differently with the reply "
                             "after it; the reply's tokens cannot be told apart")
        head = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        reply = tokenizer(full[len(prompt):], add_special_tokens=False)["input_ids"]
        ids, labels = (head + reply)[:max_tokens], ([-100] * len(head) + reply)[:max_tokens]
        if any(x != -100 for x in labels[1:]):
            rows.append((ids, labels))
        else:
            reason = f"no reply token within the first {max_tokens} tokens"
            skipped[reason] = skipped.get(reason, 0) + 1
    if not rows:
        raise ValueError(f"no warm-up pair has a reply token within the first {max_tokens} tokens")
    if skipped:
        log.warning("warm-up: %d of %d pairs left out (%s)", sum(skipped.values()), len(conversations),
                    "; ".join(f"{n}: {why}" for why, n in skipped.items()))
    return rows, skipped


def warm_up(model, rows: list[tuple[list[int], list[int]]], *, steps: int, batch_size: int, lr: float, seed: int,
            on_step: Callable[[int, float], None] | None = None) -> list[float]:
    """`steps` optimizer steps of `batch_size` rows each, drawn epoch by epoch in a seeded order,
    one forward pass per row (no padding); returns the loss (mean NLL per reply token) per step.
    `on_step(step, loss)` runs after each step (1-based), the model updated."""
    import torch
    from transformers import get_cosine_schedule_with_warmup

    gen = torch.Generator().manual_seed(seed)
    order: list[int] = []
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched = get_cosine_schedule_with_warmup(opt, round(WARMUP_FRACTION * steps), steps)
    model.train()
    losses = []
    for step in range(1, steps + 1):
        while len(order) < batch_size:
            order += torch.randperm(len(rows), generator=gen).tolist()
        pick, order = order[:batch_size], order[batch_size:]
        n_tokens = sum(sum(x != -100 for x in rows[i][1][1:]) for i in pick)
        total = 0.0
        for i in pick:
            ids, labels = (torch.tensor([v]) for v in rows[i])
            logits = model(input_ids=ids).logits[0, :-1]
            loss = torch.nn.functional.cross_entropy(logits, labels[0, 1:], ignore_index=-100, reduction="sum")
            (loss / n_tokens).backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        losses.append(total / n_tokens)
        if on_step is not None:
            on_step(step, losses[-1])
    model.eval()
    return losses


def build_warm_base(target: Path, pretrained: Path, conversations, settings: dict,
                    on_step: Callable[[int, float], None] | None = None) -> list[float]:
    """The pretrained base in `pretrained` warmed up on `conversations`, saved in `target` (its
    tokenizer unchanged, with warmup_log.json); returns the loss per step."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cuset.demo.base_build import deterministic_torch

    s = {k: settings[k] for k in WARM_SETTINGS}
    target = Path(target)
    shutil.copytree(pretrained, target, ignore=shutil.ignore_patterns(*NOT_COPIED))
    with deterministic_torch():
        torch.manual_seed(s["seed"])
        tokenizer = AutoTokenizer.from_pretrained(target)
        model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32)
        rows, skipped = reply_rows(tokenizer, conversations)
        losses = warm_up(model, rows, steps=s["warmup_steps"], batch_size=s["batch_size"], lr=s["warmup_lr"],
                         seed=s["seed"], on_step=on_step)
        model.save_pretrained(target)
    (target / LOG_NAME).write_text(json.dumps({"loss": losses, "pairs": len(rows), "skipped": skipped}))
    return losses
