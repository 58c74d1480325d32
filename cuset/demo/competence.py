"""Competence against model size and training: every committed base, before fine-tuning (issue 60).

Each demo, study or map level that evaluated its untuned base (`vanilla`) and keeps the per-sample
results its numbers come from is one row: the base's size and how it was made (parameters, hidden size and layers, pretraining steps and instruction
pairs, warm-up steps on the fine-tuning families), its compile@1 and function@1 on that run's
evaluation tasks with their 95% intervals (as the run's own report computed them), its NLL and
low-token shares on the fine-tuning set, SFT's function@1 after fine-tuning where the run has an
SFT arm, and whether it passes the competence gate. `competence_markdown` writes the table the
docs commit (docs/competence.md, by `docs/tools/competence_table.py`), so the gate's numbers are
read back from the committed per-sample files, never typed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cuset.demo.regime import base_competence
from cuset.demo.report import interval_text


@dataclass(frozen=True)
class BaseRow:
    """One evaluated base, as its run's committed report.json describes it."""
    source: str                 # the report's directory, relative to the page
    parameters: int
    hidden: int
    layers: int
    pretrain_steps: int
    instruct_pairs: int
    warmup_steps: int
    given: str                  # the model the run started from (`pretrained=`, its last three path parts), or ""
    n_tasks: int
    compile_at_1: dict          # {"mean", "low", "high"} (fractions)
    function_at_1: dict
    nll: float | None
    low_shares: dict | None     # share_low, share_low_sensitive, share_low_neutral
    sft_function_at_1: dict | None
    finetune: str               # how the run fine-tuned, e.g. "full 0.003"

    def passes(self, min_compile: float, min_function: float) -> bool:
        return self.compile_at_1["mean"] >= min_compile and self.function_at_1["mean"] >= min_function


def _interval(stat: dict | None) -> dict | None:
    return None if not stat else {k: stat.get(k) for k in ("mean", "low", "high", "run_variance") if k in stat}


def base_row(report_path: Path, relative_to: Path) -> BaseRow | None:
    """The row of one report.json, or None when its run did not evaluate the untuned base or
    does not keep the per-sample results its numbers come from (an early study's report)."""
    report = json.loads(report_path.read_text())
    if "vanilla" not in report.get("methods", {}) or "base_model" not in report:
        return None
    if not all("results" in run for run in report.get("runs", {}).values()):
        return None
    cfg = report["config"]
    vanilla = report["methods"]["vanilla"]
    fit = (report.get("base_nll") or {}).get("mechanism", {}).get("fit")
    sft = report["methods"].get("sft", {}).get("function@1")
    return BaseRow(source=report_path.parent.relative_to(relative_to).as_posix(),
                   parameters=report["base_model"]["parameters"], hidden=cfg["hidden"], layers=cfg["layers"],
                   pretrain_steps=cfg["pretrain_steps"], instruct_pairs=cfg.get("n_instruct", 0),
                   warmup_steps=cfg.get("warmup_steps") or 0, given="/".join(Path(cfg.get("pretrained") or "").parts[-3:]), n_tasks=base_competence(report)["n_tasks"],
                   compile_at_1=_interval(vanilla["compile@1"]), function_at_1=_interval(vanilla["function@1"]),
                   nll=(report.get("base_nll") or {}).get("nll"),
                   low_shares=None if not fit else {k: fit[k] for k in
                                                   ("share_low", "share_low_sensitive", "share_low_neutral")},
                   sft_function_at_1=_interval(sft),
                   finetune=f"{cfg.get('finetune', 'full')} {cfg.get('finetune_lr', 0):g}")


def committed_rows(docs: Path) -> list[BaseRow]:
    """Every base evaluated under `docs` (any report.json with a vanilla run), smallest and least
    trained first."""
    rows = [row for path in sorted(docs.rglob("report.json")) if (row := base_row(path, docs)) is not None]
    return sorted(rows, key=lambda r: (r.parameters, r.pretrain_steps, r.instruct_pairs, r.warmup_steps, r.source))


def _competence_key(row: BaseRow) -> tuple[float, float]:
    """Lower 95% bounds of function@1 and compile@1 (the mean where there is no interval): a
    base measured on 20 tasks must not outrank one measured on 128 by a mean it may not keep."""
    def bound(stat: dict) -> float:
        return stat["mean"] if stat.get("low") is None else stat["low"]

    return bound(row.function_at_1), bound(row.compile_at_1)


def competence_markdown(rows: list[BaseRow], *, min_compile: float, min_function: float) -> str:
    """The committed page: the table, the gate and which base is the most competent."""
    lines = ["# Competence of every committed base, before fine-tuning", "",
             "Written by `python docs/tools/competence_table.py` from the committed report.json of every demo, "
             "study and map level that evaluated its untuned base (cuset.demo.competence); "
             "tests/demo/test_competence_docs.py checks this page against those files.", "",
             f"Competence gate: compile@1 >= {100 * min_compile:.0f}% and function@1 >= {100 * min_function:.0f}% on "
             "the run's evaluation tasks before fine-tuning (the paper's bases: 69-80% and 35-42% on CUDABench "
             "Level 1, its Table 2). Pass@1 in percent with the run's 95% interval (* one run: over tasks only; "
             "n/a: not run). Warm-up: steps of SFT on the fine-tuning families at points neither the fine-tuning nor "
             "the evaluation set holds. Low tokens: share of the fine-tuning references' tokens at p <= 0.1 under "
             "the base (all / CUDA-sensitive / neutral). SFT: the same run's SFT arm after fine-tuning (full or LoRA, "
             "at its learning rate). Pretraining \"given (...)\": the run started from that model (`pretrained=`, "
             "e.g. a map's shared base or a level's warmed-up model) and warmed it up for the steps shown.", "",
             "| Run | Parameters | Hidden x layers | Pretraining steps (instruction pairs) | Warm-up steps | Tasks | "
             "compile@1 | function@1 | NLL | Low tokens | SFT fine-tuning | SFT function@1 | Gate |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        low = ("-" if not r.low_shares else " / ".join(f"{100 * r.low_shares[k]:.1f}%" for k in
                                                      ("share_low", "share_low_sensitive", "share_low_neutral")))
        lines.append(f"| [{r.source}]({r.source}/report.md) | {r.parameters:,} | {r.hidden} x {r.layers} | "
                     f"{f'given ({r.given})' if r.given else f'{r.pretrain_steps} ({r.instruct_pairs})'} | "
                     f"{r.warmup_steps} | {r.n_tasks} | "
                     f"{interval_text(r.compile_at_1)} | {interval_text(r.function_at_1)} | "
                     f"{'-' if r.nll is None else f'{r.nll:.3f}'} | {low} | "
                     f"{r.finetune if r.sft_function_at_1 else 'n/a'} | {interval_text(r.sft_function_at_1)} | "
                     f"{'passes' if r.passes(min_compile, min_function) else 'below'} |")
    passed = [r.source for r in rows if r.passes(min_compile, min_function)]
    best = max(rows, key=_competence_key, default=None)
    lines += ["", (f"Bases that pass the gate: {', '.join(passed)}." if passed else
                   f"No base passes the gate ({len(rows)} evaluated).")]
    if best is not None:
        lines.append(f"The most competent base (the highest lower 95% bound of function@1, then of compile@1; a "
                     f"base measured on few tasks ranks by what they show at least): {best.source}, compile@1 "
                     f"{interval_text(best.compile_at_1)}, function@1 {interval_text(best.function_at_1)} over {best.n_tasks} tasks.")
    return "\n".join(lines) + "\n"
