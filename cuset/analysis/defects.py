"""The benchmark-defects section of `cuset report`: tasks a `cuset tasks check` file lists
as defective (reference fails, checker cannot fail), excluded from every number or
flagged next to them.

    check = load_check("runs/check/task_check.json")
    runs = load_runs(paths, exclude_tasks=check.defective())      # mode "exclude"
    section = defects_section(check, "exclude", runs)             # -> report.json / report.md
"""

from __future__ import annotations

from typing import Sequence

from cuset.analysis.mdsafe import code, inline
from cuset.analysis.results import RunResults
from cuset.evaluate.taskcheck.record import CheckFile

MODES = ("exclude", "flag")


def defects_section(check: CheckFile, mode: str, runs: Sequence[RunResults]) -> dict:
    """What the report says about the defective tasks: which, why, and per run what was
    excluded (mode exclude) or how much of function@1 the flagged tasks carry (mode flag)."""
    if mode not in MODES:
        raise ValueError(f"defective-task mode must be one of {', '.join(MODES)}, got {mode!r}")
    defective = check.defective()
    per_run = []
    for i, r in enumerate(runs, 1):
        if mode == "exclude":
            per_run.append({"run": i, "excluded": list(r.counts.get("excluded_tasks", []))})
            continue
        scored = {t: m.get("function@1") for t, m in r.task_metrics.items() if t in defective}
        values = [v for v in scored.values() if v is not None]
        n_tasks = r.counts.get("n_tasks") or 0
        per_run.append({"run": i, "flagged": sorted(scored),
                        "function@1_points": 100 * sum(values) / n_tasks if n_tasks and values else 0.0})
    return {"file": check.path, "tasks_file": check.tasks_file, "mode": mode, "runs": per_run,
            "tasks": [{"task_id": t, "task_name": c.task_name, "defects": list(c.defects), "why": c.why()}
                      for t, c in defective.items()]}


def defects_markdown(section: dict) -> list[str]:
    tasks, mode = section["tasks"], section["mode"]
    lines = [f"## Benchmark defects ({len(tasks)} task(s) of {code(section['tasks_file'])}, {mode}d)", "",
             f"From the task check {code(section['file'])} (`cuset tasks check`): these tasks' own reference fails the "
             "evaluation, or their checker accepts corrupted outputs. "
             + ("Their samples are left out of every number in this report." if mode == "exclude" else
                "They are counted in every number in this report; the table below says how much they carry."), ""]
    if not tasks:
        return lines + ["The check lists no defective task.", ""]
    lines += ["| task | name | defects | why |", "|---|---|---|---|"]
    lines += [f"| {inline(t['task_id'])} | {inline(t['task_name'])} | {inline(', '.join(t['defects']))} | "
              f"{inline(' '.join(t['why'].split())[:300])} |" for t in tasks]
    lines.append("")
    if mode == "exclude":
        lines += [f"- run {r['run']}: excluded {len(r['excluded'])} task(s)"
                  + (f" ({inline(', '.join(r['excluded']))})" if r["excluded"] else "") for r in section["runs"]]
    else:
        lines += [f"- run {r['run']}: scores {len(r['flagged'])} flagged task(s)"
                  + (f" ({inline(', '.join(r['flagged']))})" if r["flagged"] else "")
                  + f"; they carry {r['function@1_points']:.1f} points of its function@1" for r in section["runs"]]
    return lines + [""]
