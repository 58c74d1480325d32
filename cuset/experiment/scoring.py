"""Teacher-forced token confidence of responses under a causal LM (the model side).

For every example: render prompt + response with the model's chat template
(`cuset.train.data.tokenize_example`, the one home of that logic), run the model
once, and keep p(y_t | x, y_<t) for the tokens that overlap the response text
(the template's end-of-turn marker is supervised in training but is not code, so
it is left out here). Each token is labelled with the span kinds of
`cuset.spans.detect` on the response's code (`cuset.train.data.response_spans`).

The LM head is applied only at the scored positions, in chunks, so the full
[batch, length, vocab] logits never exist; the first batch is checked against the
model's own full forward and, for models whose head does more than a projection,
the full-logits path is used instead.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from cuset.analysis.confidence import ScoredSample
from cuset.errors import CusetError
from cuset.progress import progress_bar

log = logging.getLogger(__name__)

HEAD_CHUNK = 2048  # positions per LM-head chunk


class ModelLoadError(CusetError, ValueError):
    """A model, tokenizer, dtype or device that cannot be used (bad path or hub id, no GPU)."""


@dataclass(frozen=True)
class Encoded:
    """One tokenised example and which of its tokens are scored."""

    sample_id: str
    input_ids: list[int]
    positions: np.ndarray            # indices (into input_ids) of scored response tokens
    kinds: tuple[frozenset[str], ...]
    tokens: tuple[str, ...]
    char_ranges: tuple[tuple[int, int], ...] = ()   # each scored token's characters [a, b) in the response


def encode_example(tokenizer, example, *, sample_id: str, max_length: int, spans_mode: str = "broad") -> Encoded:
    """Tokenise one `cuset.train.data.Example` and label its response tokens with span kinds
    (`spans_mode`: the detector's broad or paper span set, as training's `cuda_spans`)."""
    from cuset.spans import token_kinds
    from cuset.train.data import response_spans, tokenize_example

    enc = tokenize_example(tokenizer, list(example.prompt), example.response, max_length=max_length)
    start = enc["response_start"]
    end = start + len(example.response)
    offsets = enc["offsets"]
    labels = enc["labels"]
    keep = [i for i, (lab, (a, b)) in enumerate(zip(labels, offsets))
            if lab != -100 and i > 0 and b > a and b > start and a < end]
    kinds_all = token_kinds(response_spans(example.response, example.code_range, spans_mode), offsets, response_start=start, response_end=end)
    text = enc["text"]
    return Encoded(
        sample_id=sample_id,
        input_ids=list(enc["input_ids"]),
        positions=np.asarray(keep, dtype=np.int64),
        kinds=tuple(frozenset(kinds_all[i]) for i in keep),
        tokens=tuple(text[offsets[i][0]:offsets[i][1]] for i in keep),
        char_ranges=tuple((offsets[i][0] - start, offsets[i][1] - start) for i in keep),
    )


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelLoadError(f"device {device!r} requested but torch sees no CUDA GPU; use --device cpu")
    return device


def _pad_batch(batch: Sequence[Encoded], pad_id: int, device):
    import torch

    width = max(len(e.input_ids) for e in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for row, e in enumerate(batch):
        ids[row, : len(e.input_ids)] = torch.tensor(e.input_ids, dtype=torch.long)
        mask[row, : len(e.input_ids)] = 1
    return ids.to(device), mask.to(device)


def _target_probs_from_hidden(model, hidden, batch: Sequence[Encoded], ids) -> list[np.ndarray]:
    """p(target) at each scored position: the head runs on the preceding positions only."""
    import torch

    head = model.get_output_embeddings()
    rows = torch.cat([torch.full((len(e.positions),), r, dtype=torch.long) for r, e in enumerate(batch)])
    pos = torch.cat([torch.as_tensor(e.positions, dtype=torch.long) for e in batch])
    rows, pos = rows.to(hidden.device), pos.to(hidden.device)
    states = hidden[rows, pos - 1]
    targets = ids[rows, pos]
    cap = getattr(model.config, "final_logit_softcapping", None)
    out = []
    for a in range(0, states.shape[0], HEAD_CHUNK):
        logits = head(states[a:a + HEAD_CHUNK]).float()
        if cap:
            logits = torch.tanh(logits / cap) * cap
        logp = torch.log_softmax(logits, dim=-1).gather(-1, targets[a:a + HEAD_CHUNK, None])[:, 0]
        out.append(logp.exp())
    probs = torch.cat(out).cpu().numpy().astype(np.float64) if out else np.zeros(0)
    return np.split(probs, np.cumsum([len(e.positions) for e in batch])[:-1])


def _target_probs_full(model, ids, mask, batch: Sequence[Encoded]) -> list[np.ndarray]:
    import torch

    logits = model(input_ids=ids, attention_mask=mask).logits
    out = []
    for r, e in enumerate(batch):
        pos = torch.as_tensor(e.positions, dtype=torch.long, device=logits.device)
        logp = torch.log_softmax(logits[r, pos - 1].float(), dim=-1).gather(-1, ids[r, pos][:, None])[:, 0]
        out.append(logp.exp().cpu().numpy().astype(np.float64))
    return out


def score_batches(model, tokenizer, encoded: Sequence[Encoded], *, batch_size: int = 4,
                  device: str = "cpu", progress: bool = True) -> list[ScoredSample]:
    """Teacher-forced confidences for already-encoded examples, in input order."""
    import torch

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    order = sorted(range(len(encoded)), key=lambda i: -len(encoded[i].input_ids))  # little padding
    results: dict[int, np.ndarray] = {}
    use_full = False
    checked = False
    model.eval()
    with torch.inference_mode(), progress_bar("scoring", len(encoded), enabled=progress) as bar:
        for a in range(0, len(order), batch_size):
            idx = order[a:a + batch_size]
            batch = [encoded[i] for i in idx]
            ids, mask = _pad_batch(batch, pad_id, device)
            if use_full:
                probs = _target_probs_full(model, ids, mask, batch)
            else:
                hidden = model.get_decoder()(input_ids=ids, attention_mask=mask).last_hidden_state
                probs = _target_probs_from_hidden(model, hidden, batch, ids)
                if not checked:
                    checked = True
                    ref = _target_probs_full(model, ids[:1], mask[:1], batch[:1])[0]
                    if not np.allclose(ref, probs[0], rtol=1e-3, atol=1e-5):
                        log.warning("the chunked LM head disagrees with the model's own forward "
                                    "(max |diff| %.2e); using full logits", float(np.abs(ref - probs[0]).max()))
                        use_full = True
                        probs = _target_probs_full(model, ids, mask, batch)
            for i, p in zip(idx, probs):
                results[i] = p
            bar.advance(len(batch))
    return [ScoredSample(e.sample_id, results[i], e.kinds, e.tokens) for i, e in enumerate(encoded)]


def encode_examples(tokenizer, items: Iterable, *, max_length: int, limit: int | None = None
                    ) -> tuple[list[Encoded], Counter, list[str]]:
    """Encode `cuset.train.data` Examples (the first `limit` usable ones); Problems and
    unusable examples are skipped and counted by reason (with one message each)."""
    from cuset.tasks.io import Problem
    from cuset.train.data import PromptTooLongError, TemplateError

    encoded: list[Encoded] = []
    skipped: Counter = Counter()
    messages: list[str] = []
    for item in items:
        if limit is not None and len(encoded) >= limit:
            break
        if isinstance(item, Problem):
            skipped[item.reason] += 1
            messages.append(f"{item.source}:{item.line}: {item.field}: {item.message}")
            continue
        where = f"{item.source}:{item.line}"
        try:
            e = encode_example(tokenizer, item, sample_id=where, max_length=max_length)
        except PromptTooLongError as err:
            skipped["prompt_too_long"] += 1
            messages.append(f"{where}: {err}")
            continue
        except (TemplateError, ValueError) as err:
            skipped["template_error"] += 1
            messages.append(f"{where}: {err}")
            continue
        if len(e.positions) == 0:
            skipped["no_response_tokens"] += 1
            messages.append(f"{where}: no response token left after truncation to {max_length}")
            continue
        encoded.append(e)
    return encoded, skipped, messages


def load_model(name_or_path: str, *, device: str, dtype: str = "auto"):
    """(model, tokenizer) from a local directory or hub name; a LoRA adapter directory
    is loaded on its base model and merged, so the analysis sees the tuned weights."""
    import json
    from pathlib import Path

    import torch
    from transformers import AutoModelForCausalLM

    from cuset.localpath import require_existing

    dtypes = {"auto": None, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if dtype not in dtypes:
        raise ModelLoadError(f"dtype must be one of {', '.join(dtypes)}, got {dtype!r}")
    torch_dtype = dtypes[dtype] or (torch.bfloat16 if device.startswith("cuda") else torch.float32)
    require_existing(name_or_path, "model", "a model or adapter directory")
    path = Path(name_or_path)
    adapter = path / "adapter_config.json"
    try:  # transformers answers a bad directory or hub id with OSError or ValueError
        if adapter.exists():
            from peft import AutoPeftModelForCausalLM

            model = AutoPeftModelForCausalLM.from_pretrained(str(path), dtype=torch_dtype).merge_and_unload()
            tok_src = str(path) if (path / "tokenizer_config.json").exists() else json.loads(adapter.read_text())["base_model_name_or_path"]
        else:
            model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=torch_dtype)
            tok_src = name_or_path
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"cannot load model {name_or_path!r}: {e}") from e
    return model.to(device), load_tokenizer(tok_src)


def load_tokenizer(name_or_path: str, what: str = "tokenizer"):
    """A tokenizer from a local directory (files only) or a hub name; `what` names the key or option
    in the error."""
    from pathlib import Path

    from transformers import AutoTokenizer

    from cuset.localpath import require_existing

    require_existing(name_or_path, what, "a tokenizer or model directory")
    try:
        return AutoTokenizer.from_pretrained(name_or_path, local_files_only=Path(name_or_path).exists())
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"{what} {name_or_path}: cannot load it ({e})") from e
