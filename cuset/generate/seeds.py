"""The sampling seed of one (task, sample): the one place every generation backend gets it.

    sample_seed(0, "kb_softmax", 2)   # KernelBench ids are names
    sample_seed(0, 17, 2)             # CUDABench ids are integers

The seed is a function of (base seed, task id, sample) and nothing else: not of the
request's position in a run, so a resumed run or one over a subset of tasks asks for
the same seed as a full run, and not of Python's per-process `hash()` salt, so it is
the same in every process and Python version. It is a blake2b digest of a canonical
JSON text of the three values, where the integer 5 and the name "5" differ. An
arithmetic formula (base + 1000 * task id + sample) cannot take names and collides
(task 1 sample 1000 is task 2 sample 0).

The range, 0 <= seed < 2**31, is one every backend takes: vLLM's SamplingParams,
OpenAI-compatible servers (some keep the seed in a signed 32-bit integer) and
torch.manual_seed.
"""

from __future__ import annotations

import hashlib
import json

from cuset.tasks.schema import valid_task_id

SEED_LIMIT = 2**31          # seeds are in [0, SEED_LIMIT)
_DOMAIN = "cuset.generate.sample_seed/1"   # the text's first item: a new formula gets a new tag


def sample_seed(base: int, task_id: int | str, sample: int) -> int:
    """The seed for sample `sample` of task `task_id` in a run whose sampling seed is `base`."""
    if type(base) is not int:
        raise ValueError(f"sampling seed must be an integer, got {base!r}")
    if not valid_task_id(task_id):
        raise ValueError(f"task id must be an integer (CUDABench) or a non-empty string (KernelBench), "
                         f"got {task_id!r}")
    if type(sample) is not int or sample < 0:
        raise ValueError(f"sample must be an integer >= 0, got {sample!r}")
    text = json.dumps([_DOMAIN, base, task_id, sample], ensure_ascii=True, separators=(",", ":"))
    digest = hashlib.blake2b(text.encode("ascii"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % SEED_LIMIT
