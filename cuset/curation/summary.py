"""summary.md of a build: the funnel, every reason, and what decontamination removed."""

from __future__ import annotations

from pathlib import Path

from cuset.io import atomic_write_text, read_jsonl

STAGE_TITLES = [("sources", "1. sources"), ("synthesis", "2. task synthesis (LLM)"), ("validation", "3. validation"),
                ("dedup", "4a. deduplication"), ("decontamination", "4b. decontamination")]
MAX_LISTED = 50


def _stage_row(name: str, title: str, s: dict) -> str:
    if name == "sources":
        n_in, n_out, reasons = s["seen"], s["candidates"], s["skipped"]
    else:
        n_in, n_out = s["in"], s["out"]
        reasons = {**s.get("rejected", {}), **s.get("removed", {}),
                   **{f"{k} (deferred)": v for k, v in s.get("deferred", {}).items()}}
    why = ", ".join(f"{k}: {v}" for k, v in reasons.items()) or "-"
    return f"| {title} | {n_in} | {n_out} | {why} |"


def render_summary(manifest: dict, run_dir: Path) -> str:
    st = manifest["stages"]
    lines = [f"# Dataset build: {st['output']['tasks']} tasks", ""]
    if not manifest["complete"]:
        lines += ["**Incomplete:** the LLM budget ran out before every program was sent; "
                  "raise `llm.max_requests` / `llm.max_total_tokens` and run the build again to continue.", ""]
    lines += ["| stage | in | out | removed, by reason |", "|---|---:|---:|---|"]
    lines += [_stage_row(name, title, st[name]) for name, title in STAGE_TITLES]
    rs = st.get("reasoning")
    if rs is not None:
        lines.append(_stage_row("reasoning", f"5. reasoning answers ({rs['select']})",
                                {"in": rs["in"], "out": rs["out"], "deferred": rs["deferred"],
                                 "removed": {"no passing answer": rs["no_passing_answer"]} if rs["no_passing_answer"] else {}}))
    llm = manifest["llm"]
    lines += ["", "Sources by kind: " + (", ".join(f"{k}: {v}" for k, v in st["sources"]["by_kind"].items()) or "none"),
              f"LLM `{llm['model']}`, this run: {llm['requests_sent']} requests sent ({llm['retries']} retries), "
              f"{llm['cache_hits']} cached replies reused, {llm['prompt_tokens']} prompt + "
              f"{llm['completion_tokens']} completion tokens.", ""]
    if rs is not None:
        lines += _reasoning_lines(rs)
    lines += _listing("Rejected in task synthesis", read_jsonl(run_dir / "2_synthesis.jsonl"),
                      lambda r: r["status"] != "ok", lambda r: (r["origin"], r["reason"], r["detail"]))
    lines += _listing("Rejected in validation", read_jsonl(run_dir / "3_validation.jsonl"),
                      lambda r: r["status"] != "passed", lambda r: (r.get("origin", r["key"]), r["status"], r["detail"]))
    lines += _listing("Removed by decontamination", read_jsonl(run_dir / "4_decontamination.jsonl"),
                      lambda r: True, lambda r: (r["origin"], r["reason"], r["detail"]))
    lines += _listing("Removed as duplicates", read_jsonl(run_dir / "4_dedup.jsonl"),
                      lambda r: True, lambda r: (r["origin"], r["reason"],
                                                  f"of {r['matched_origin']} (similarity {r['similarity']:.2f})"))
    return "\n".join(lines) + "\n"


def _reasoning_lines(rs: dict) -> list[str]:
    statuses = ", ".join(f"{k}: {v}" for k, v in rs["statuses"].items()) or "none"
    mean = lambda v: "-" if v is None else f"{v:,.1f}"  # noqa: E731
    return ["## Reasoning answers (stage 5)", "",
            f"{rs['candidates']} answers to {rs['in']} tasks ({statuses}); {rs['tasks_with_a_pass']} tasks have a "
            f"passing answer; `{rs['select']}` kept {rs['out']} -> `{rs['path']}`. Mean reasoning length "
            f"({rs['token_unit']}): {mean(rs['mean_reasoning_tokens_passing'])} over passing answers, "
            f"{mean(rs['mean_reasoning_tokens_kept'])} over kept ones. LLM: {rs['llm']['requests_sent']} requests "
            f"sent, {rs['llm']['cache_hits']} cached replies reused.", ""]


def _listing(title, rows, keep, cells) -> list[str]:
    picked = [cells(r) for r in rows if keep(r)]
    if not picked:
        return []
    out = [f"## {title} ({len(picked)})", "", "| item | reason | detail |", "|---|---|---|"]
    for item, reason, detail in picked[:MAX_LISTED]:
        out.append(f"| {_cell(item)} | {reason} | {_cell(detail)} |")
    if len(picked) > MAX_LISTED:
        out.append(f"| ... | | {len(picked) - MAX_LISTED} more in the JSONL |")
    return out + [""]


def _cell(text: str) -> str:
    text = " ".join(str(text).split())
    text = (text[:200] + "...") if len(text) > 200 else text
    return text.replace("|", "\\|")


def write_summary(path: Path, manifest: dict, run_dir: Path) -> None:
    atomic_write_text(path, render_summary(manifest, run_dir))
