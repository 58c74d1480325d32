"""A map level's low-token shares per replaceable-token condition: the base scored teacher-forced
on the first references of the fine-tuning set as written (`off`) and of its replaceable variant
(`on`, the `:repl` arms' training set), each with the share of its p <= tau tokens that are
CUDA-sensitive, neutral and replaceable (`cuset.analysis.low_tokens`). Written to
`<level>/low_tokens.json` by `cuset demo --regime`."""

from __future__ import annotations

import json
from pathlib import Path

from cuset.io import atomic_write_text

LOW_TOKENS = "low_tokens.json"


def condition_shares(model_dir: Path, tasks_path: Path, *, tau: float, limit: int, spans_mode: str,
                     progress: bool = False) -> dict:
    """The low-token shares of one fine-tuning set's references under the model in `model_dir`."""
    import numpy as np

    from cuset.analysis.low_tokens import low_token_shares, touches
    from cuset.curation.variation import replaceable_ranges
    from cuset.experiment.scoring import encode_example, load_model, score_batches
    from cuset.spans import CUSET_KINDS
    from cuset.tasks.io import Problem
    from cuset.train.data import RecordOptions, read_examples

    model, tokenizer = load_model(str(model_dir), device="cpu", dtype="float32")
    examples = [e for e in read_examples(tasks_path, RecordOptions(format="cudabench", prompt_level=1))
                if not isinstance(e, Problem)][:limit]
    encoded = [encode_example(tokenizer, e, sample_id=f"{e.source}:{e.line}", max_length=2048, spans_mode=spans_mode)
               for e in examples]
    scored = score_batches(model, tokenizer, encoded, batch_size=8, progress=progress)
    kinds = frozenset(CUSET_KINDS)
    p, sensitive, replaceable = [], [], []
    for example, enc, s in zip(examples, encoded, scored):
        start, end = example.code_range
        ranges = [(a + start, b + start) for a, b in replaceable_ranges(example.response[start:end])]
        p.append(s.confidences)
        sensitive.append([bool(k & kinds) for k in enc.kinds])
        replaceable.append(touches(enc.char_ranges, ranges))
    shares = low_token_shares(np.concatenate(p), np.concatenate(sensitive), np.concatenate(replaceable), tau=tau)
    return {**shares, "n_examples": len(examples), "data": str(tasks_path), "spans": spans_mode}


def level_low_tokens(run) -> dict:
    """Both conditions of a finished level (a `cuset.demo.run.DemoRun`), written to its low_tokens.json."""
    from cuset.demo.run import SCORED_REFERENCES

    cfg = run.cfg
    doc = {"tau": cfg.tau, "conditions": {}}
    # replaceable=true: the fine-tuning set itself has them, and no set without them was written
    sets = {"on": run.train_tasks} if cfg.replaceable else {"off": run.train_tasks, "on": run.replaceable_train_set()}
    for name, path in sets.items():
        doc["conditions"][name] = condition_shares(run.vanilla, path, tau=cfg.tau, limit=SCORED_REFERENCES,
                                                   spans_mode=cfg.cuda_spans, progress=cfg.progress)
        doc["conditions"][name]["data"] = str(Path(path).relative_to(run.out))
    atomic_write_text(run.out / LOW_TOKENS, json.dumps(doc, indent=1))
    return doc
