"""task_check.md: what `cuset tasks check` found, defects first."""

from __future__ import annotations

from cuset.evaluate.taskcheck.corrupt import CORRUPTIONS
from cuset.evaluate.taskcheck.record import DEFECTS, TaskCheck

EXTRA_CORRUPTIONS = {"constant_answer": "KernelBench: the first trial's outputs given for every trial "
                                        "(a model that ignores its inputs)"}


def _cell(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[:limit] + " ..."


def _strict_words(check: TaskCheck) -> str:
    strict = check.strict_stronger
    if strict is True:
        return "rejects them all: the task's checker is weaker than cuset's strict check"
    if strict is False:
        return "accepts some of them too"
    if check.kind == "kernelbench":
        return "n/a (the checker is cuset's own comparison)"
    return "cannot check every one (no reference file identified)"


def render_markdown(doc: dict, checks: tuple[TaskCheck, ...]) -> str:
    c, s = doc["counts"], doc["settings"]
    lines = [f"# Task check: `{doc['tasks_file']}`", "",
             f"Each task's own reference solution through the evaluation (backend **{s['backend']}**, compilation "
             f"judged by {s['compile_judge']}, cases {s['cases']}, robust verification "
             + (f"on ({s['robust_cases']} cases)" if s["robust"] else "off") + "), then its checker on corrupted "
             "copies of the reference's outputs.", "",
             f"{c['tasks']} tasks: {c['ok']} without a defect, {c['reference_fails']} whose reference fails, "
             f"{c['reference_fails_robust']} whose reference fails only robust verification, "
             f"{c['checker_cannot_fail']} whose checker accepts corrupted outputs, {c['checker_not_measured']} whose "
             f"reference passed but whose checker could not be tried (see the notes; a re-run tries them again), "
             f"{c['not_checked']} not checked (skipped by the evaluation or lost to its infrastructure).", ""]
    failing = [x for x in checks if "reference_fails" in x.defects]
    if failing:
        lines += [f"## References that fail ({len(failing)})", "", "| id | task | status | why |", "|---|---|---|---|"]
        lines += [f"| {x.task_id} | {x.task_name} | {x.reference_status} | {_cell(x.reference_detail)} |"
                  for x in failing]
        lines.append("")
    robust = [x for x in checks if "reference_fails_robust" in x.defects]
    if robust:
        lines += [f"## References that fail robust verification only ({len(robust)})", "",
                  "Robust Pass@k of these tasks cannot be reached by any program.", "",
                  "| id | task | robust status | why |", "|---|---|---|---|"]
        lines += [f"| {x.task_id} | {x.task_name} | {x.robust_status} | {_cell(x.robust_detail)} |" for x in robust]
        lines.append("")
    weak = [x for x in checks if "checker_cannot_fail" in x.defects]
    if weak:
        lines += [f"## Checkers that cannot fail ({len(weak)})", "",
                  "A program whose outputs are wrong in the way named passes the task's checker. A checker that "
                  "accepts several valid answers (labels up to renaming, ties) may rightly accept one of these; "
                  "read the corruption before calling it a defect.", "",
                  "| id | task | checker | accepts | cuset's strict check (robust=true) |", "|---|---|---|---|---|"]
        lines += [f"| {x.task_id} | {x.task_name} | {_cell(x.checker)} | {', '.join(a.label for a in x.accepted)} | "
                  f"{_strict_words(x)} |" for x in weak]
        lines.append("")
    lines += ["## Every task", "",
              "| id | task | kind | reference | robust | corruptions rejected | verdict | note |",
              "|---|---|---|---|---|---:|---|---|"]
    for x in checks:
        tried = len(x.corruptions)
        rejected = f"{tried - len(x.accepted)} of {tried}" if tried else "-"
        lines.append(f"| {x.task_id} | {x.task_name} | {x.kind} | {x.reference_status} | {x.robust_status or '-'} | "
                     f"{rejected} | {x.verdict} | {_cell(x.checker_note, 160)} |")
    lines += ["", "## How the checkers were tried", "",
              "Each output of a task whose reference passed is corrupted in turn (the other outputs kept), and the "
              "task's checker judges it: compare.py run as every evaluation runs it (CUDABench format), or cuset's "
              "comparison with the task's atol/rtol (KernelBench format). compare.py must first accept the "
              "reference's own outputs again (the control). A corruption that would not change an output is not "
              "tried.", "", "| corruption | what changes |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in {**CORRUPTIONS, **EXTRA_CORRUPTIONS}.items()]
    lines += ["", "Defects: " + "; ".join(f"**{k}**: {v}" for k, v in DEFECTS.items()) + ".", ""]
    return "\n".join(lines)
