"""Making the demo's base model, deterministically.

Every byte of a built base follows from this module, `cuset.demo.pretrain` and
`cuset.train.tiny` (their sha256 are part of the base's recipe, cuset.demo.base), the
settings in BASE_SETTINGS and the corpus: the same recipe gives the same files on the
same torch build and CPU. Torch runs on one thread with deterministic algorithms while
a base is built (a reduction split over threads may add in another order).
Keep this module small: any edit changes the recipe, and the shipped base is rebuilt.
"""

from __future__ import annotations

import json
import random
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

# The DemoConfig fields a base depends on besides its corpus.
BASE_SETTINGS = ("seed", "vocab_size", "hidden", "layers", "pretrain_steps", "pretrain_lr", "seq_len")


@dataclass(frozen=True)
class BaseCorpus:
    """What a base pretrains on: raw programs of the pretraining families and chat-formatted
    prompt/program pairs (each a tuple of {"role", "content"} messages, the reply last)."""
    programs: tuple[str, ...]
    conversations: tuple[tuple[tuple[str, str], ...], ...]

    def tokenizer_texts(self) -> list[str]:
        """The BPE's training texts: every program and message (the chat markup is special tokens)."""
        return list(self.programs) + [content for conv in self.conversations for _, content in conv]

    def sha256(self) -> str:
        import hashlib

        doc = {"programs": list(self.programs), "conversations": [list(map(list, c)) for c in self.conversations]}
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def base_corpus(pretrain_tasks: list, instruct_tasks: list, level: int = 1) -> BaseCorpus:
    """The corpus of the demo's base from its pretraining and instruction tasks: each instruction
    task as its level-`level` prompt and the fenced reply the fine-tuning data renders."""
    from cuset.tasks import render_prompt
    from cuset.train.data.records import wrap_response

    conversations = []
    for task in instruct_tasks:
        reply, _ = wrap_response(task.bench_cu, "fenced", "cuda")
        messages = [(m["role"], m["content"]) for m in render_prompt(task, level).messages()]
        conversations.append(tuple(messages + [("assistant", reply)]))
    return BaseCorpus(tuple(t.bench_cu for t in pretrain_tasks), tuple(conversations))


@contextmanager
def deterministic_torch():
    """One torch thread and deterministic algorithms inside; the caller's settings restored after."""
    import torch

    threads, strict = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(strict)
        torch.set_num_threads(threads)


def build_base(target: Path, corpus: BaseCorpus, settings: dict,
               progress: Callable[[int, float], None] | None = None) -> list[float]:
    """Tokenizer + randomly initialised Qwen2 model, pretrained on `corpus`, saved in `target`
    (with pretrain_log.json); returns the loss per step."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cuset.demo.pretrain import pretrain
    from cuset.train.tiny import build_tiny_model

    s = {k: settings[k] for k in BASE_SETTINGS}
    target = Path(target)
    with deterministic_torch():
        build_tiny_model(target, corpus.tokenizer_texts(), vocab_size=s["vocab_size"], hidden_size=s["hidden"],
                         num_layers=s["layers"], num_heads=4, num_kv_heads=2, intermediate_size=3 * s["hidden"],
                         seed=s["seed"])
        torch.manual_seed(s["seed"])
        tokenizer = AutoTokenizer.from_pretrained(target)
        model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32)
        documents = list(corpus.programs) + [
            tokenizer.apply_chat_template([{"role": r, "content": c} for r, c in conv], tokenize=False)
            for conv in corpus.conversations]
        random.Random(s["seed"]).shuffle(documents)
        losses = pretrain(model, tokenizer, documents, steps=s["pretrain_steps"], seq_len=s["seq_len"],
                          batch_size=max(1, 4096 // s["seq_len"]), lr=s["pretrain_lr"], seed=s["seed"],
                          progress=progress)
        model.save_pretrained(target)
    (target / "pretrain_log.json").write_text(json.dumps({"loss": losses}))
    return losses
