"""Pad a list of tokenised examples into a batch, every per-token column alike."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from cuset.train.data.tokenize import IGNORE_INDEX


@dataclass
class PadCollator:
    """Right-pads input_ids (pad id), labels (-100), cuda_mask (0), loss_weight (0, when the
    examples carry one) and builds attention_mask.

    Every per-token column is padded to the same length, so position i of each
    column always describes the same token.
    """

    pad_token_id: int
    pad_to_multiple_of: int | None = None

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        lengths = [len(r["input_ids"]) for r in rows]
        for r, n in zip(rows, lengths):
            if len(r["labels"]) != n or len(r.get("cuda_mask", r["labels"])) != n \
                    or len(r.get("loss_weight", r["labels"])) != n:
                raise ValueError("per-token columns differ in length within an example "
                                 f"(input_ids {n}, labels {len(r['labels'])}, cuda_mask {len(r.get('cuda_mask', []))})")
        width = max(lengths)
        if self.pad_to_multiple_of:
            width = -(-width // self.pad_to_multiple_of) * self.pad_to_multiple_of
        batch = {
            "input_ids": torch.full((len(rows), width), self.pad_token_id, dtype=torch.long),
            "attention_mask": torch.zeros((len(rows), width), dtype=torch.long),
            "labels": torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long),
            "cuda_mask": torch.zeros((len(rows), width), dtype=torch.float32),
        }
        weighted = "loss_weight" in rows[0]
        if weighted:
            batch["loss_weight"] = torch.zeros((len(rows), width), dtype=torch.float32)
        for i, (r, n) in enumerate(zip(rows, lengths)):
            batch["input_ids"][i, :n] = torch.as_tensor(r["input_ids"], dtype=torch.long)
            batch["attention_mask"][i, :n] = 1
            batch["labels"][i, :n] = torch.as_tensor(r["labels"], dtype=torch.long)
            if "cuda_mask" in r:
                batch["cuda_mask"][i, :n] = torch.as_tensor(r["cuda_mask"], dtype=torch.float32)
            if weighted:
                batch["loss_weight"][i, :n] = torch.as_tensor(r["loss_weight"], dtype=torch.float32)
        return batch
