"""Brief causal-LM pretraining of the demo's "vanilla" base model.

The model and tokenizer come from `cuset.train.tiny` (built here, no hub); this
module only gives them some knowledge of CUDA and of the chat reply format before
instruction tuning, so that token confidences mean something and fine-tuning starts
from an instruct code model, as in the paper.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable


def pack_stream(tokenizer, texts: Iterable[str], seq_len: int):
    """Concatenate tokenised texts, each followed by the EOS token, into [n, seq_len] rows."""
    import torch

    sep = tokenizer.eos_token_id
    ids: list[int] = []
    for text in texts:
        ids.extend(tokenizer(text, add_special_tokens=False)["input_ids"])
        ids.append(sep)
    n = len(ids) // seq_len
    if n == 0:
        raise ValueError(f"corpus of {len(ids)} tokens is shorter than one sequence of {seq_len}")
    return torch.tensor(ids[: n * seq_len]).view(n, seq_len)


def document_rows(tokenizer, texts: Iterable[str], seq_len: int):
    """One row per text from its first token (at most `seq_len` tokens), right-padded to the longest:
    (input_ids, attention_mask, labels), padding out of the attention and of the labels (-100)."""
    import torch

    ids = [tokenizer(text, add_special_tokens=False)["input_ids"][:seq_len] for text in texts]
    ids = [row for row in ids if row]
    if not ids:
        raise ValueError("no text has a token")
    width = max(map(len, ids))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    input_ids = torch.full((len(ids), width), pad)
    labels = torch.full((len(ids), width), -100)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for i, row in enumerate(ids):
        input_ids[i, :len(row)] = labels[i, :len(row)] = torch.tensor(row)
        mask[i, :len(row)] = 1
    return input_ids, mask, labels


def instruction_document(tokenizer, task, level: int = 1) -> str:
    """One chat-formatted prompt/program pair, rendered as the fine-tuning data renders it."""
    from cuset.tasks import render_prompt
    from cuset.train.data.records import wrap_response

    response, _ = wrap_response(task.bench_cu, "fenced", "cuda")
    messages = render_prompt(task, level).messages() + [{"role": "assistant", "content": response}]
    return tokenizer.apply_chat_template(messages, tokenize=False)


def pretrain(model, tokenizer, texts: list[str], *, steps: int, seq_len: int = 512, batch_size: int = 8,
             lr: float = 3e-3, seed: int = 0, progress: Callable[[int, float], None] | None = None,
             rows: str = "packed") -> list[float]:
    """AdamW with warm-up and cosine decay on random rows, on the model's device (bf16 autocast on a
    GPU); returns the loss per step. rows="packed": the texts concatenated and cut into rows of
    `seq_len` (pack_stream); "documents": each text its own row from its first token
    (document_rows), so that a text's every part is learnt in the context it has in the text."""
    import torch

    if rows == "packed":
        ids = pack_stream(tokenizer, texts, seq_len)
        mask, labels = None, ids
    elif rows == "documents":
        ids, mask, labels = document_rows(tokenizer, texts, seq_len)
    else:
        raise ValueError(f"rows must be packed or documents, not {rows!r}")
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.95))
    warmup = max(1, steps // 20)

    def lr_scale(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_scale)
    model.train()
    losses: list[float] = []
    for step in range(steps):
        pick = torch.randint(len(ids), (min(batch_size, len(ids)),), generator=gen)
        batch = {"input_ids": ids[pick].to(device), "labels": labels[pick].to(device)}
        if mask is not None:
            batch["attention_mask"] = mask[pick].to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if progress is not None:
            progress(step, losses[-1])
    model.eval()
    return losses
