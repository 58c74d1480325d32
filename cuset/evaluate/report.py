"""summary.json and report.md of an evaluation run (tables shaped like the paper's Table 2/3)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from cuset.evaluate.metrics import Summary
from cuset.evaluate.perf.report import perf_section
from cuset.execute.result import WITHOUT_KERNEL
from cuset.io import atomic_write_text

COLUMNS = ("compile@1", "function@1", "compile@3", "function@3")
HEADER = ("| {scope} | Pass@1 Compilation | Pass@1 Function | Pass@3 Compilation | Pass@3 Function | Avg. tokens |\n"
          "|---|---:|---:|---:|---:|---:|")


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}"


def _row(label: str, metrics: dict, avg_tokens: float | None) -> str:
    cells = [pct(metrics.get(c)) for c in COLUMNS]
    tokens = "n/a" if avg_tokens is None else f"{avg_tokens:,.0f}"
    return f"| {label} | " + " | ".join(cells) + f" | {tokens} |"


def render_markdown(summary: Summary) -> str:
    o, meta = summary.overall, summary.meta
    lines = ["# Evaluation report", ""]
    if meta:
        lines.append(f"backend **{meta.get('backend', '?')}** (`{meta.get('fingerprint', '')}`), "
                     f"sandbox {meta.get('sandbox', '?')}, cases {meta.get('cases', [0])}, "
                     f"compat {meta.get('compat', False)}, code from {meta.get('extract', '?')}, "
                     + (f"robust verification on ({meta.get('robust_cases')} cases); " if meta.get("robust")
                        else "robust verification off; ") +
                     f"{o['n_tasks']} tasks, {o['n_samples']} samples.")
        lines += ["", judge_line(meta)]
        lines.append("")
    lines += ["## Overall", "", HEADER.format(scope="definition"),
              _row("unbiased pass@k (compilation = compiler succeeded)", o, o["avg_tokens"]),
              _row("official harness (compilation = compiled and exit 0)", o["compat"], o["avg_tokens"]),
              _row("official harness with its empty-sample quirk", o["compat_quirk"], o["avg_tokens"]), ""]
    if summary.families:
        lines += ["## Per family (unbiased pass@k)", "", HEADER.format(scope="family")]
        lines += [_row(f"{name} ({fam['n_tasks']} tasks)", fam, fam["avg_tokens"]) for name, fam in summary.families.items()]
        lines.append("")
    if "n_kernelbench" in o:
        lines += kernel_section(summary)
    if "n_robust_passed" in o:
        lines += robust_section(summary)
    if o.get("avg_reasoning_tokens") is not None:
        lines += [f"Generated tokens per sample: {o['avg_tokens']:,.0f} on average, of which reasoning "
                  f"{o['avg_reasoning_tokens']:,.0f} and answer (code and prose) {o['avg_answer_tokens']:,.0f} "
                  "(over the samples whose reasoning was counted).", ""]
    lines += perf_section(o.get("perf"))
    lines += ["## Outcomes", "", "| status | samples |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(o["statuses"].items(), key=lambda kv: -kv[1])]
    lines.append("")
    if summary.skipped_tasks:
        lines += [f"## Skipped tasks ({len(summary.skipped_tasks)}, not in any denominator)", ""]
        lines += [f"- {s['task_id']} {s['task_name']}: {s['reason']}" for s in summary.skipped_tasks]
        lines.append("")
    if meta.get("no_code_reasons", {}).get("unterminated_reasoning"):
        lines += [f"No code because the reasoning never ended (`<think>` not closed, token limit reached): "
                  f"{meta['no_code_reasons']['unterminated_reasoning']} sample(s) of the "
                  f"{sum(meta['no_code_reasons'].values())} without code.", ""]
    if summary.infra_errors:
        lines += [f"## Infrastructure failures ({len(summary.infra_errors)} samples, not in any denominator)", "",
                  "The evaluation's machinery failed on them (e.g. a Ray worker died on every retry); they say "
                  "nothing about the programs. Delete their lines from results.jsonl and re-run to evaluate them.", ""]
        lines += [f"- task {r['task_id']} {r['task_name']} sample {r['sample']}: {r['reason']}"
                  for r in summary.infra_errors]
        lines.append("")
    if summary.missing_tasks:
        how = ("**counted as failures** in every overall number (allow_missing=true)" if summary.missing_as_failed
               else "not in any denominator")
        lines += [f"## Tasks without samples ({len(summary.missing_tasks)}, {how})", "",
                  ", ".join(map(str, summary.missing_tasks)), ""]
    if summary.short_tasks:
        how = ("their missing samples count as failures" if summary.missing_as_failed
               else "Pass@k is n/a for them and so for the mean")
        lines += [f"## Tasks with fewer samples than k ({len(summary.short_tasks)}; {how})", ""]
        lines += [f"- {t['task_id']} {t['task_name']}: {t['n']} sample(s)" for t in summary.short_tasks]
        lines.append("")
    if meta.get("cuda_mapped_tasks"):
        lines += [f"## Scripts run with CUDA device requests mapped to the CPU ({len(meta['cuda_mapped_tasks'])} tasks)",
                  "", "gen.py/compare.py asked for a CUDA device and none answered; see each sample's `notes`: "
                  + ", ".join(map(str, meta["cuda_mapped_tasks"])), ""]
    return "\n".join(lines)


ROBUST_COLUMNS = ("function@1", "robust_function@1", "function@3", "robust_function@3")
ROBUST_HEADER = ("| {scope} | Pass@1 Function | Pass@1 Function (robust) | Pass@3 Function | Pass@3 Function (robust) |\n"
                 "|---|---:|---:|---:|---:|")
WITHOUT_KERNEL_LISTED = 50   # passes without a kernel listed by sample in report.md
ROBUST_LISTED = 20   # samples listed by name in report.md (all of them are in summary.json)
CHECK_MEANING = {"strict": "an output element the task's checker did not catch differs from the reference",
                 "cases": "another input case (seeds offset) failed"}


def robust_section(summary: Summary) -> list[str]:
    """Plain and robust Pass@k side by side, and what the robust checks caught."""
    o = summary.overall

    def row(label: str, m: dict) -> str:
        return f"| {label} | " + " | ".join(pct(m.get(c)) for c in ROBUST_COLUMNS) + " |"

    lines = ["## Plain and robust verification (unbiased pass@k)", "", ROBUST_HEADER.format(scope="scope"),
             row("overall", o)]
    lines += [row(f"{name} ({fam['n_tasks']} tasks)", fam) for name, fam in summary.families.items()]
    lines.append("")
    failures = o.get("robust_failures", {})
    total = sum(failures.values())
    lines.append(f"Passed the plain checks but failed robust verification: {total} sample(s)"
                 + (":" if total else "."))
    lines += [f"- {check}: {n} ({CHECK_MEANING.get(check, 'see robust_detail')})"
              for check, n in sorted(failures.items(), key=lambda kv: -kv[1])]
    if summary.robust_failed:
        lines += ["", f"First {min(len(summary.robust_failed), ROBUST_LISTED)} of them:"]
        lines += [f"- task {f['task_id']} {f['task_name']} sample {f['sample']} [{f['check']}]: {f['detail'][:300]}"
                  for f in summary.robust_failed[:ROBUST_LISTED]]
    if o.get("robust_not_applicable"):
        lines.append(f"\nNo new input case could be made for {o['robust_not_applicable']} robust pass(es) (gen.py "
                     "without constant seeds): only the strict check ran on them.")
    if o.get("n_robust_unknown"):
        lines.append(f"\n{o['n_robust_unknown']} sample(s) were evaluated without robust verification (older "
                     "results): robust Pass@k is n/a where they count; delete their lines and re-run.")
    lines.append("")
    return lines


OWN_REPORT = ("counted inside the candidate's process, which the candidate can rewrite: its own report, "
              "never evidence of a pass (docs/sandbox.md, \"Verdict channels\")")


def kernel_section(summary: Summary) -> list[str]:
    """KernelBench: what compilation means there, what the passes' own processes reported
    about their kernels, and what decided (never those counts: see `strict_kernel_line`)."""
    o = summary.overall
    without = o.get("passed_without_kernel", {})
    n_pass = o["n_passed_with_kernel"] + sum(without.values())
    lines = ["## KernelBench: what the passes ran", "",
             f"{o['n_kernelbench']} KernelBench sample(s) reached the harness. Compilation = every `load_inline` extension the answer "
             "asked for was built (an answer that asks for none compiles trivially); the official-harness "
             "compilation also needs its run to finish every trial.", "",
             f"Passed: {n_pass} sample(s). Their kernel launches are {OWN_REPORT}. By that report "
             f"{o['n_passed_with_kernel']} launched kernels of their own in the checked calls and "
             f"{sum(without.values())} none (`passed_without_kernel`)" + (":" if without else ".")]
    lines += [f"- {why}: {n} ({WITHOUT_KERNEL.get(why, 'see the results')})"
              for why, n in sorted(without.items(), key=lambda kv: -kv[1])]
    listed = o.get("passed_without_kernel_samples") or []
    if listed:
        lines += ["", "Which samples passed without a kernel of their own, by their own report"
                  + (f" (the first {WITHOUT_KERNEL_LISTED} of {sum(without.values())}; every record in results.jsonl "
                     "has `passed_without_kernel`)" if sum(without.values()) > WITHOUT_KERNEL_LISTED else "") + ":"]
        lines += [f"- {s['task_id']}" + (f" ({s['task_name']})" if s['task_name'] != str(s['task_id']) else "")
                  + f" sample {s['sample']}: {s['why']}" for s in listed[:WITHOUT_KERNEL_LISTED]]
    decided = strict_kernel_line(summary.meta, bool(without))
    lines += ["", decided] if decided else []
    lines.append("")
    return lines


def strict_kernel_line(meta: dict, any_without: bool) -> str:
    """What decided the KernelBench passes, in the words of docs/sandbox.md's "Verdict
    channels": under strict_kernels the evaluator's own run with the answer's kernel launches
    skipped (on the CPU by the runtime, on the GPU by a preloaded library), whose outputs it
    compares; without strict_kernels the outputs alone."""
    strict = meta.get("strict_kernels")
    if strict:
        how = ("by the CPU runtime (`CUSET_CPU_SKIP_LAUNCHES`)" if meta.get("backend") == "cpu" else
               "by a library preloaded into that run (`cuset.execute.kernelbench.launch_skip`: launches called "
               "from the answer's own code return unlaunched)")
        return ("strict_kernels=true: what decided is the evaluator's own run of each answer with its kernel "
                f"launches skipped {how}, whose outputs the evaluator compares: every pass "
                "above failed there. The counts could only fail an answer (none reported), never pass one; "
                "a pass without its own kernels is a failure here (counted under its failure status, not above).")
    if strict is not None and any_without:
        return ("strict_kernels=false: the outputs alone decided, and the counts nothing: every pass counts in "
                "every number above, as KernelBench counts them; strict_kernels=true also runs each answer without "
                "its kernel launches and fails those that still pass.")
    return ""


def judge_line(meta: dict) -> str:
    """Who judged compilation; in bold when it was not nvcc (not the paper's metric)."""
    if meta.get("kernelbench_compile_judge"):
        kb = f"KernelBench extensions compiled by {meta['kernelbench_compile_judge']}"
        if meta.get("kernelbench_only"):
            return kb
        return f"{_cudabench_judge(meta)}; {kb}"
    return _cudabench_judge(meta)


def _cudabench_judge(meta: dict) -> str:
    judge = meta.get("compile_judge")
    if judge is None:
        return "compilation judged by: not recorded"
    if judge == "nvcc":
        return "compilation judged by nvcc"
    return f"**compilation judged by {judge}, not nvcc: not the paper's compilation metric**"


def write_report(summary: Summary, out_dir: str | os.PathLike) -> tuple[Path, Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    js, md = out_dir / "summary.json", out_dir / "report.md"
    atomic_write_text(js, json.dumps(summary.to_json(), indent=2) + "\n")
    atomic_write_text(md, render_markdown(summary))
    return js, md
