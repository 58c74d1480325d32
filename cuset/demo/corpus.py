"""The base's training tasks: the other families' programs and the instruction families'
prompt/program pairs (their content is part of the base's recipe through the corpus's
sha256, cuset/demo/base.py)."""

from __future__ import annotations

from cuset.demo.config import DemoConfig


def base_tasks(cfg: DemoConfig) -> tuple[list, list]:
    """(pretraining tasks, instruction tasks) of the base: the other families' programs and the
    instruction families' prompt/program pairs, laid out as `layout` says."""
    from cuset.curation.synth import synthesize

    instruct = synthesize(cfg.n_instruct, cfg.seed, families=cfg.instruct_family_list()) if cfg.n_instruct else []
    pretrain = synthesize(cfg.n_pretrain, cfg.seed, families=cfg.pretrain_family_list()) if cfg.n_pretrain else []
    if cfg.layout == "kernels_first":
        instruct, pretrain = kernels_first_layout(instruct), kernels_first_layout(pretrain)
    return pretrain, instruct


def kernels_first_layout(tasks: list) -> list:
    """The tasks with their programs' host helpers moved before main() where they can be."""
    from dataclasses import replace

    from cuset.curation.families.base import kernels_first

    out = []
    for task in tasks:
        try:
            out.append(replace(task, bench_cu=kernels_first(task.bench_cu)))
        except ValueError:  # a helper used before main(): the program keeps its layout
            out.append(task)
    return out
