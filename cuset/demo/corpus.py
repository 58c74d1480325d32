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


def demo_sets(cfg: DemoConfig) -> tuple[dict[str, list], dict[str, list]]:
    """(points, tasks) of the fine-tuning ("train"), evaluation ("eval") and, when warmup_steps > 0,
    warm-up ("warmup") sets: the points as drawn, the tasks laid out as `layout` says and, with
    `replaceable`, the fine-tuning programs varied."""
    from cuset.curation.synth import make_tasks, synthesize_points

    split = dict(holdout=cfg.holdout, families=cfg.family_list())
    points = {"train": synthesize_points(cfg.n_train, cfg.seed, split="train", **split),
              "eval": synthesize_points(cfg.n_eval, cfg.seed, split="eval", **split)}
    if cfg.warmup_steps:
        points["warmup"] = warmup_points(points["train"], points["eval"], cfg.n_warmup, cfg.seed)
    tasks = {name: make_tasks(p) for name, p in points.items()}
    if cfg.layout == "kernels_first":
        tasks = {name: kernels_first_layout(ts) for name, ts in tasks.items()}
    if cfg.replaceable:
        from cuset.curation.variation import vary_task

        tasks["train"] = [vary_task(t, cfg.seed) for t in tasks["train"]]
    return points, tasks


def warmup_points(train: list, evaluation: list, n: int, seed: int) -> list:
    """`n` (family, variant, size) points of the fine-tuning set's families, at every size, that
    neither the fine-tuning nor the evaluation set holds (with holdout=families the evaluation
    families stay unseen)."""
    from cuset.curation.synth import point_of, synthesize_points

    families = sorted({fam.name for fam, _, _ in train})
    used = [point_of(p) for p in (*train, *evaluation)]
    return synthesize_points(n, seed, families=families, size_scale="all", exclude_points=used)


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
