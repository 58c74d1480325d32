"""docs/performance.md, written from the records in bench/results: one source per number.

    .venv/bin/python docs/tools/perf_table.py            # rewrite docs/performance.md
    .venv/bin/python docs/tools/perf_table.py --check    # exit 1 when it differs, or a page misquotes

Each row of the table is one record (`bench/_record.py` wrote it): the numbers come out of
the record's `results`, next to the record's own verdict (its `verdict*` fields,
`meets_target`, or a table's "-> MISSES target" lines, in the record's words), its commit,
date, machine and load. A row is *stale* once a commit after the record's own touched a path
the bench script declares in its module-level `MEASURES` (read with `ast`, without importing
the script and its torch); it is *flagged* when the record names a path of its own commit's
tree that the tree no longer has (a suite that moved). The note names the first such commit,
which stays the same while later commits pile up, so the page changes only when a record
goes stale or is re-measured.

Prose pages quote a row as a link to its anchor, `[60/60 pass](docs/performance.md#cpu_suite)`:
every number in the link's text must appear in that row, and the README may not quote a row
that is not current (`problems_in_page`; tests/docs/test_performance_table.py).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path("bench/results")
PAGE = Path("docs/performance.md")
# the pages that quote measurements (docs/performance.md itself is written here)
QUOTING_PAGES = ("README.md", "docs/*.md", "cuset/execute/cpu/README.md")


# -- numbers -----------------------------------------------------------------------------

def _n(x: float, digits: int = 1) -> str:
    """A number as the table shows it: fixed digits, thousands separated."""
    return f"{x:,.{digits}f}"


def _span(values: list[float], digits: int = 2, scale: float = 1.0) -> str:
    """'0.83-0.96' for a range, one number where both ends round alike."""
    lo, hi = (_n(min(values) * scale, digits), _n(max(values) * scale, digits))
    return lo if lo == hi else f"{lo}-{hi}"


# a number starts a word, or follows a lone `x` (x1.055: a ratio written before its number)
NUMBER = re.compile(r"(?:(?<=\bx)|(?<![\w.]))(\d+(?:,\d{3})*(?:\.\d+)?)(?=x\b|\b)")


def numbers(text: str) -> set[str]:
    """The numbers a text states, thousands separators dropped: '1,975 tests, 1.43x' -> {'1975', '1.43'}.
    Sizes written as 4096x1024 and commit hashes are not measurements and are skipped."""
    found = set()
    for m in NUMBER.finditer(text):
        end = m.end()
        if text[end:end + 1] == "x" and text[end + 1:end + 2].isdigit():
            continue                                   # 4096x1024: a size
        found.add(m.group(1).replace(",", ""))
    return found


# -- rows --------------------------------------------------------------------------------

def _task(name: str) -> str:
    return name.split(" ", 1)[-1]                      # "79 Bitonic_Sort" -> "Bitonic_Sort"


def _spans(r: dict) -> str:
    return (f"{_n(r['samples_per_cpu_s'], 0)} samples per CPU-second; {_n(r['samples_per_s'], 0)} samples/s "
            f"wall clock ({_n(r['cpu_s'])} s CPU in {_n(r['wall_s'])} s); p50 {_n(r['p50_ms'])} ms, "
            f"p99 {_n(r['p99_ms'])} ms per sample")


def _eval(r: dict) -> str:
    return "; ".join(f"{p['compile_judge']}: {_n(p['cold_speedup'], 2)}x faster cold, {_n(p['warm_speedup'])}x warm "
                     f"(harness {_n(p['harness_s'])} s, cuset {_n(p['cold_s'])} s cold / {_n(p['warm_s'])} s warm; "
                     f"{p['cold_passed']} of {r['samples']} passed on every side)" for p in r["pairs"])


def _ray(r: dict) -> str:
    s = {(x["executor"], x["phase"]): x["seconds"] for x in r["runs"]}
    return (f"Ray over local: {_n(r['ray_over_local']['cold'], 2)}x cold, {_n(r['ray_over_local']['warm'], 2)}x warm "
            f"(local {_n(s['local', 'cold'])} s / {_n(s['local', 'warm'])} s, Ray {_n(s['ray', 'cold'])} s / "
            f"{_n(s['ray', 'warm'])} s); Ray start-up {_n(r['ray_startup_s'])} s apart")


def _task_scripts(r: dict) -> str:
    s = {(x["scripts"], x["phase"]): x["per_sample_s"] for x in r["runs"]}
    return (f"sandboxed over trusted: {_n(r['sandboxed_over_trusted']['cold'], 2)}x cold, "
            f"{_n(r['sandboxed_over_trusted']['warm'], 2)}x warm (per sample: sandboxed {_n(s['sandboxed', 'cold'], 3)} s / "
            f"{_n(s['sandboxed', 'warm'], 3)} s, trusted {_n(s['trusted', 'cold'], 3)} s / {_n(s['trusted', 'warm'], 3)} s); "
            f"verdicts agree: {'yes' if r['verdicts_agree'] else 'no'}")


def _cpu_suite(r: dict) -> str:
    slow = "; ".join(f"{_task(s['task'])} {_n(s['run_total_s'])} s ({' / '.join(_n(v) for v in s['runs'].values())})"
                     for s in r["slowest_samples"])
    return (f"{r['passed']}/{r['tasks']} pass, {r['samples_forward_only']} of them in their forward run alone "
            f"(the order proof); slowest samples, run time over the orders ({' / '.join(r['run_orders'])}): {slow}")


def _proof(r: dict) -> str:
    return "; ".join(f"{p['label']}: {_n(p['all_orders_sample_s'])} -> {_n(p['proof_sample_s'])} s wall "
                     f"({_n(p['all_orders_sample_cpu_s'])} -> {_n(p['proof_sample_cpu_s'])} s CPU; the proof's samples "
                     f"{_span(p['proof_forward_cpu_runs'], 1)} s CPU)" for p in r["proof"]) \
        + f"; medians of {r['proof'][0]['repeats']}"


def _block_order(r: dict) -> str:
    return "; ".join(f"{_task(b['task'])}: {_n(b['random_whole_grid_cpu_s'])} -> {_n(b['random_chunks_cpu_s'])} s "
                     f"(forward {_n(b['forward_cpu_s'])} s; {_n(b['whole_grid_over_forward_cpu'], 2)}x -> "
                     f"{_n(b['chunks_over_forward_cpu'], 2)}x forward)" for b in r["block_order"]) \
        + f"; CPU time, medians of {r['block_order'][0]['repeats']}, chunks of {r['chunk_blocks']} blocks"


def _barrier_paths(r: dict) -> str:
    out = []
    for b in r["barrier_paths"]:
        if "fibers_sample_s" in b:
            out.append(f"{b['label']}: fibers {_n(b['fibers_sample_s'])} s, regions {_n(b['regions_sample_s'])} s per "
                       f"sample ({_n(b['speedup_sample'], 2)}x; outputs bit-identical: "
                       f"{'yes' if b['bit_identical'] else 'no'})")
        else:
            out.append(f"{b['label']}: fibers {_n(b['fibers_forward_s'])} s forward, {_n(b['fibers_random:1_s'])} s "
                       f"random:1; regions {_n(b['regions_forward_s'])} s and {_n(b['regions_random:1_s'])} s "
                       f"(random {_n(b['regions_random_over_forward'], 2)}x forward)")
    return "; ".join(out)


def _order_cost(r: dict) -> str:
    rows = r["order_cost"]
    return ", ".join(f"{o['order']} {_n(o['over_index_order'], 2)}x" for o in rows[1:]) \
        + f" the index order's time ({_n(rows[0]['seconds'], 2)} s; {rows[0]['rows']} rows)"


def _paths(r: dict) -> str:
    return "; ".join(f"{p['label']}: fibers / chunked block loops / threads innermost {_n(p['fibers_sample_s'])} / "
                     f"{_n(p['chunks_sample_s'])} / {_n(p['loops_sample_s'])} s per sample ({_n(p['speedup'], 2)}x "
                     f"over the fibers)" for p in r["paths"])


def _paths_loops(r: dict) -> str:
    return "; ".join(f"{p['label']}: {_n(p['loops_sample_cpu_s'])} s CPU per sample (forward "
                     f"{_n(p['loops_forward_cpu_s'])}, random:1 {_n(p['loops_random:1_cpu_s'])}, parallel:1 "
                     f"{_n(p['loops_parallel:1_cpu_s'])}), {_n(p['loops_sample_s'], 0)} s wall" for p in r["paths"])


def _paths_scale2(r: dict) -> str:
    return "; ".join(
        f"{p['label']}: fibers / chunked block loops / threads innermost {_n(p['fibers_sample_s'])} / "
        f"{_n(p['chunks_sample_s'])} / {_n(p['loops_sample_s'])} s wall, {_n(p['fibers_sample_cpu_s'])} / "
        f"{_n(p['chunks_sample_cpu_s'])} / {_n(p['loops_sample_cpu_s'])} s CPU ({_n(p['cpu_speedup_over_chunks'])}x "
        f"over the chunks, {_n(p['cpu_speedup'])}x over the fibers)" for p in r["paths"])


def _robust(r: dict) -> str:
    return (f"{r['passed_plain_and_robust']}/{r['tasks']} pass plain and robust ({r['cases']} cases each, "
            f"{r['workers']} workers, {_n(r['seconds'], 0)} s; suite `{r['suite']}`)")


def _synth(r: dict) -> str:
    m = r["median_step_seconds"]
    return (f"{r['passed']} of {r['n']} pass; {_n(r['tasks_validated_per_minute'])} tasks validated per minute; "
            f"median seconds per task: compile {_n(m['compile'])}, run {_n(m['run'])}, gen.py {_n(m['gen'])}, "
            f"compare.py {_n(m['compare'])}")


def _loss(r: dict) -> str:
    f, t = r["ranges"]["frozen"], r["ranges"]["trainable"]
    objectives = " and ".join(o.upper() if o == "sft" else o for o in r["args"]["objectives"].split(","))
    return (f"{objectives}, chunked over full logits, frozen / trainable head: memory "
            f"{_span(f['mem_ratio'], 1, 100)}% / {_span(t['mem_ratio'], 1, 100)}%; CPU time {_span(f['cpu_ratio'])}x / "
            f"{_span(t['cpu_ratio'])}x; wall {_span(f['time_ratio'])}x / {_span(t['time_ratio'])}x; cuset over chunked "
            f"SFT: CPU {_span(f['cuset_vs_sft_cpu'])}x / {_span(t['cuset_vs_sft_cpu'])}x, memory "
            f"{_span(f['cuset_vs_sft_mem'])}x / {_span(t['cuset_vs_sft_mem'])}x, wall {_span(f['cuset_vs_sft_wall'])}x / "
            f"{_span(t['cuset_vs_sft_wall'])}x (load {_span([x['loadavg'] for x in r['rows']], 1)} during the cases)")


def _sharded(r: dict) -> str:
    return (f"{_n(r['fsdp_over_unsharded'], 2)}x ({_n(r['fsdp_worst_mib'], 0)} vs "
            f"{_n(r['unsharded']['train_peak_mib'], 0)} MiB, worst rank; {_n(r['parameters'] / 1e6)}M parameters)")


def _suite_time(r: dict) -> str:
    counts = ", ".join(f"{_n(v, 0)} {k}" for k, v in r["counts"].items())
    slow = r["slowest_files"][0]
    return (f"{_n(r['wall_min'])} min ({_n(r['wall_s'], 0)} s), exit code {r['exit_code']}; {counts}; the tests' "
            f"seconds summed over the workers {_n(r['tests_seconds_summed'], 0)} s; slowest file {slow['file']} "
            f"{_n(slow['seconds'])} s")


def _viewer(r: dict) -> str:
    b = r["builds"]
    load = r["browser_load"]
    return ("; ".join(f"{x['jobs']} process{'es' if x['jobs'] > 1 else ''}: {_n(x['seconds'])} s wall "
                      f"({_n(x['cpu_seconds'])} s CPU)" for x in b)
            + f"; {_n(b[0]['total_mb'])} MB in all, index.html {_n(b[0]['index_html_mb'], 2)} MB, sample pages "
              f"{_n(b[0]['sample_page_kb']['median'])} kB median ({_n(b[0]['sample_page_kb']['largest'])} kB largest); "
              f"in Chromium index.html {_n(load['index_html']['median_ms'], 0)} ms, its table ready at "
              f"{_n(load['index_table_ready']['median_ms'], 0)} ms, the largest sample page "
              f"{_n(load['largest_sample_page']['median_ms'], 0)} ms (medians); requests outside the site: "
              f"{len(load['requests_outside_site'])}")


def _worker_threads(r: dict) -> str:
    return (f"two `cuset demo --fast` side by side: {_n(r['pair_default_threads_s'], 0)} s with torch's default "
            f"threads, {_n(r['pair_one_thread_s'], 0)} s with one thread each ({_n(r['ratio'], 2)}x)")


def _verdicts_match(r: dict) -> str:
    pairs = r["pairs"]
    return (f"{sum(p['same'] for p in pairs)} of {sum(p['samples'] for p in pairs)} samples with the same status "
            f"over {len(pairs)} pairs of evaluations; all identical: {'yes' if r['all_identical'] else 'no'}")


def _proof_trust(r: dict) -> str:
    parts = []
    for group, label in (("all", "all"), ("proven", "the samples the proof let skip orders")):
        g = r["summary"][group]
        parts.append(f"{label} ({g['samples']}): cold {_n(g['cold']['reference_s'])} -> {_n(g['cold']['answer_s'])} s "
                     f"(x{_n(g['cold']['answer_over_reference'], 3)}), compile cached {_n(g['warm']['reference_s'])} -> "
                     f"{_n(g['warm']['answer_s'])} s (x{_n(g['warm']['answer_over_reference'], 2)})")
    return "per sample, believed proof -> every order run: " + "; ".join(parts)


def _cpu_fuzz(r: dict) -> str:
    kinds = ", ".join(f"{n} {what}" for what, n in sorted(Counter(d["what"] for d in r["disagreement_list"]).items()))
    verdicts = " / ".join(f"{n:,} {v}" for v, n in r["reference_verdicts"].items())
    covered = sum(1 for n in r["features"].values() if n)
    return (f"{r['kernels_generated']:,} of {r['kernels_requested']:,} kernels checked "
            f"({'complete' if r['complete'] else 'incomplete'}), {r['disagreements']} disagreement(s)"
            + (f" ({kinds})" if kinds else "") + f"; the fibers' verdicts {verdicts}; "
            f"{covered} of {len(r['features'])} features covered; {r['proven_kernels']:,} kernels proven by the "
            f"order proof; {_n(r['seconds'], 0)} s wall, {_n(r['kernels_per_s'], 2)} kernels/s ({r['jobs']} jobs)")


def _speed_vs(r: dict) -> str:
    worst = r["worst"][0]
    return (f"{r['samples']} samples, old ({r['old_commit'][:7]}) {_n(r['old_s'])} s -> new {_n(r['new_s'])} s in all "
            f"(x{_n(r['new_over_old'], 3)}, median per sample x{_n(r['median_ratio'], 3)}); the largest ratio "
            f"{worst['sample']} x{_n(worst['ratio'], 2)} ({_n(worst['old_s'])} -> {_n(worst['new_s'])} s)")


def _speed_vs(r: dict) -> str:
    worst = r["worst"][0]
    return (f"{r['samples']} samples, old ({r['old_commit'][:7]}) {_n(r['old_s'])} s -> new {_n(r['new_s'])} s in all "
            f"(x{_n(r['new_over_old'], 3)}, median per sample x{_n(r['median_ratio'], 3)}); the largest ratio "
            f"{worst['sample']} x{_n(worst['ratio'], 2)} ({_n(worst['old_s'])} -> {_n(worst['new_s'])} s)")


def _demo_time(r: dict) -> str:
    steps = ", ".join(f"{k} {_n(v, 0)}" for k, v in r["steps_s"].items() if v >= 30)
    models = "; ".join(f"{m['method']}: compile@1 {_n(m['compile@1'])}%, function@1 {_n(m['function@1'])}%"
                       for m in r["models"].values() if m["compile@1"] is not None)
    return (f"{_n(r['wall_min'])} min wall ({_n(r['wall_s'], 0)} s), {_n(r['cpu_s'], 0)} CPU s, the demo's share of "
            f"the machine's CPU {_n(100 * r['demo_share_of_machine_cpu'], 0)}%; steps over 30 s (s): {steps}; {models}")


def _demo_same(r: dict) -> str:
    return (f"{r['fields_compared']} fields compared, {len(r['result_differences'])} results differ, "
            f"{len(r['bookkeeping_differences'])} bookkeeping fields differ; identical results: "
            f"{'yes' if r['identical_results'] else 'no'} (before: {r['before_code'].split(' ', 1)[0]}, "
            f"after: {r['after_code'].split(' ', 1)[0]})")


@dataclass(frozen=True)
class Row:
    """One record's row: what was measured, against which target, and its numbers from `results`."""

    record: str                             # path under bench/results
    what: str
    target: str
    measured: Callable[[dict], str]

    @property
    def anchor(self) -> str:
        """The row's link target: the record's name, `cpu_backend.proof` for cpu_backend.proof.json."""
        return Path(self.record).name.removesuffix(".json").removesuffix(".record")


ROWS = (
    Row("spans_throughput.json", "span detection + token alignment (10,000 responses of ~2.5k chars, one core)",
        ">= 200 samples/s", _spans),
    Row("eval_throughput.json", "evaluation, 100 distinct programs (10 tasks) vs a sequential uncached "
        "harness-style loop doing the same compile work", "1.8x cold / 10x warm", _eval),
    Row("eval_throughput.ray.json", "`cuset eval` with executor=ray vs executor=local (60 distinct programs, "
        "local Ray cluster)", "<= 1.15x", _ray),
    Row("eval_throughput.task-scripts.json", "`cuset eval` with the tasks' gen.py and compare.py sandboxed (the "
        "default) vs trusted (`trust_task_scripts=true`), 100 distinct programs", "<= 1.10x", _task_scripts),
    Row("robust_suite.json", "robust verification of every reference of the bundled CPU suite",
        "all pass", _robust),
    Row("cpu_suite.json", "CPU backend, bundled suite at each family's LARGEST size through the pipeline "
        "(orders skipped where the order proof holds; 60 s per run)", "all pass; <= 60 s per sample", _cpu_suite),
    Row("cpu_backend.proof.json", "CPU backend, a whole sample (every order, block loops) vs the same sample "
        "with the order proof (forward run alone when every launch is proven order-independent)",
        "<= 15 s per sample", _proof),
    Row("cpu_backend.block-order.json", "CPU backend, the random order's block order: one affine permutation of "
        "the whole grid vs chunks of neighbouring blocks (bundled suite, largest sizes, random:1)", "-",
        _block_order),
    Row("cpu_backend.barrier-paths.json", "CPU backend, fibers vs barrier regions: 65536x1024 shared-memory row "
        "sort per order; the largest bundled attention as a whole sample (forward, random:1, parallel:1)",
        "<= 20 s per order, random <= 1.3x forward; <= 60 s per sample", _barrier_paths),
    Row("cpu_backend.order-cost.json", "CPU backend, a standalone replica of the row sort's barrier regions "
        "under each thread order, the backend's compiler flags", "-", _order_cost),
    Row("cpu_backend.paths-scale2.json", "CPU backend, fibers vs chunked block loops vs block loops with the "
        "threads innermost, naive batch-norm and matmul at half size, a whole sample, 2 workers", "-",
        _paths_scale2),
    Row("cpu_backend.paths-loops.json", "CPU backend, block loops with the threads innermost alone, naive "
        "batch-norm and matmul at full size, a whole sample, 2 workers", "-", _paths_loops),
    Row("cpu_backend.paths.json", "CPU backend, fibers vs chunked block loops vs block loops with the threads "
        "innermost (the default), naive batch-norm and matmul at full size, a whole sample, 2 workers", "-", _paths),
    Row("synth_throughput.json", "task factory validation (CPU backend, 2 cases x 2 thread orders, 2 workers)",
        "all pass", _synth),
    Row("loss_memory.json", "loss + backward through the LM head (vocab 151,936, hidden 896, 4,096 tokens, "
        "fp32), chunked vs full logits", "<= 30% memory; <= 1.05x / 1.35x time; cuset within 5% of SFT", _loss),
    Row("sharded_memory.json", "peak memory per process, full fine-tuning, 2-process FSDP FULL_SHARD vs 1 "
        "unsharded process", "below 1x", _sharded),
    Row("suite_time.json", "`make test` (pytest-xdist, one worker per core)", "<= 15 min", _suite_time),
    Row("viewer_build.json", "`cuset view` of 500 tasks x 3 samples: build and browser load", "<= 30 s build",
        _viewer),
    Row("worker_threads.json", "two torch-heavy test workers, torch's default threads vs one thread each",
        "-", _worker_threads),
    Row("verdicts_match.json", "the same generations evaluated before and after a refactoring, sample by sample",
        "the same status everywhere", _verdicts_match),
    Row("proof_trust.json", "CPU backend, the bundled CPU suite's references evaluated as trusted programs (the "
        "order proof believed) and as model answers (every order run), alternately", "<= 1.10x per honest sample",
        _proof_trust),
    Row("cpu_fuzz.json", "CPU backend, differential fuzzer: random CUDA kernels on the default paths and order "
        "proof vs the fibers in every order, verdicts and bytes per kernel", "0 disagreements in >= 10,000 kernels",
        _cpu_fuzz),
    Row("speed_vs_commit.suite.json", "CPU backend, `bench/cpu_suite.py` (every family's largest reference "
        "through the pipeline) at an older commit and at this one, back to back, empty caches",
        "<= 1.15x in all", _speed_vs),
    Row("speed_vs_commit.proof.json", "CPU backend, `bench/cpu_backend.py --proof --repeats 3` (a whole sample, "
        "every order vs the order proof) at an older commit and at this one, back to back", "<= 1.15x in all",
        _speed_vs),
    Row("demo_time.json", "`make demo` from a fresh cache (the shipped base; data, SFT and CuSeT, generate, "
        "evaluate, report)", "<= 15 min on 2 idle cores", _demo_time),
    Row("demo_same_numbers.json", "`cuset demo` with one config before and after a refactoring, field by field",
        "identical results", _demo_same),
)

# -- git ---------------------------------------------------------------------------------

class HistoryMissing(Exception):
    """The clone lacks the history a record's staleness is computed from."""


def git(root: Path, *args: str, check: bool = True) -> str:
    out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=60)
    if check and out.returncode:
        raise RuntimeError(f"git {' '.join(args)} failed in {root}: {out.stderr.strip()}")
    return out.stdout if not out.returncode else ""


def has_commit(root: Path, commit: str) -> bool:
    """Is the commit in HEAD's history? Mere presence is not enough: a commit of a branch that was
    rebased stays in the object store of the clone that made it, and nowhere else."""
    return subprocess.run(["git", "merge-base", "--is-ancestor", commit, "HEAD"], cwd=root,
                          capture_output=True).returncode == 0


def measures(root: Path, script: str) -> tuple[str, ...]:
    """The paths a bench script declares it measures (its module-level MEASURES tuple)."""
    path = root / script
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "MEASURES" for t in node.targets):
            paths = ast.literal_eval(node.value)
            missing = [p for p in paths if not (root / p).exists()]
            if missing:
                raise ValueError(f"{script}: MEASURES names {missing}, not in the tree: name the paths it measures now")
            return tuple(paths)
    raise ValueError(f"{script} declares no MEASURES: add `MEASURES = (\"cuset/...\",)`, the paths it measures, "
                     f"after its imports")


@dataclass(frozen=True)
class Freshness:
    """Whether a record still measures the tree: `current`, `stale`, or `unknown` (history missing)."""

    state: str
    note: str


PATHLIKE = re.compile(r"[\w.-]+(?:/[\w.-]+)+/?")


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def gone_paths(root: Path, record: dict) -> list[str]:
    """Paths of the record's own commit that its command or results name and the tree no longer has."""
    named = {s.rstrip("/") for s in _strings([record.get("argv", []), record.get("results", {})])
             if PATHLIKE.fullmatch(s) and not s.startswith("/")}
    if not named:
        return []
    tree = set()
    for path in git(root, "ls-tree", "-r", "--name-only", record["commit"]).splitlines():
        parts = path.split("/")
        tree.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return sorted(p for p in named if p in tree and not (root / p).exists())


def freshness(root: Path, record: dict) -> Freshness:
    """Is the record current? Stale once a later commit touched what its script MEASURES."""
    commit, paths = record["commit"], measures(root, record["script"])
    if not has_commit(root, commit):
        if git(root, "rev-parse", "--is-shallow-repository").strip() == "true":
            raise HistoryMissing(f"commit {commit[:10]} of {record['script']}'s record is not in this shallow clone: "
                                 "`git fetch --unshallow` to tell whether it is stale")
        raise ValueError(f"{record['script']}'s record names commit {commit[:10]}, which is not in HEAD's history "
                         "(measured on a branch that was rebased?): re-measure it here")
    notes, state = [], "current"
    if paths:
        # prose beside the code (a package's README.md) changes no measured behaviour
        touched = git(root, "log", "--reverse", "--format=%H", f"{commit}..HEAD", "--", *paths,
                      ":(exclude,glob)**/*.md").split()
        if touched:
            state = "stale"
            notes.append(f"stale since {touched[0][:7]} ({', '.join(f'`{p}`' for p in paths)})")
    else:
        notes.append("measures no code of this tree")
    gone = gone_paths(root, record)
    if gone:
        state = "stale"
        notes.append("names " + ", ".join(f"`{p}`" for p in gone) + ", no longer in the tree")
    return Freshness(state, "; ".join(notes) or "current")


# -- the record's own words ------------------------------------------------------------

VERDICT_LINE = re.compile(r"^- (.+?) -> (.+? target)$", re.M)


def verdicts(results, label: str = "") -> list[str]:
    """What the record itself says of its target: `verdict*` fields, `meets_target`, '-> ... target' lines."""
    found = []
    if isinstance(results, dict):
        name = results.get("compile_judge") or results.get("label") or results.get("task") or label
        for key, value in results.items():
            if key == "verdict" or key.startswith("verdict_"):
                what = key.removeprefix("verdict").strip("_").replace("_", " ")
                found.append(f"{' '.join(x for x in (name, what) if x)}: {value}".lstrip(": "))
            elif key == "meets_target" and isinstance(value, bool):
                found.append(f"{name + ': ' if name else ''}{'met' if value else 'missed'}")
            elif isinstance(value, str):
                found += [f"{m.group(1)}: {m.group(2)}" for m in VERDICT_LINE.finditer(value)]
            else:
                found += verdicts(value, name)
    elif isinstance(results, list):
        for item in results:
            found += verdicts(item, label)
    return found


def _machine(m: dict) -> str:
    cpu = re.sub(r"\((R|TM)\)", "", m.get("cpu_model") or "?").replace(" Processor", "").strip()
    gpus = "; ".join(g.split(",")[0] for g in m.get("gpus") or [])
    return f"{cpu}, {m.get('cores')} cores" + (f", {gpus}" if gpus else "")


def _load(record: dict) -> str:
    return f"{_n(record['load_before']['1min'])} -> {_n(record['load_after']['1min'])}"


LONG_COMMAND = 120


def _cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


@dataclass(frozen=True)
class TableRow:
    """A row as written: its anchor, its cells' text, and whether it may be quoted as current."""

    anchor: str
    text: str
    freshness: Freshness


def table_rows(root: Path = ROOT) -> list[TableRow]:
    rows = []
    for row in ROWS:
        path = root / RESULTS / row.record
        record = json.loads(path.read_text())
        fresh = freshness(root, record)
        said = verdicts(record["results"])
        link = f"[{Path(row.record).name}](../{RESULTS / row.record})"
        command = record["command"].removeprefix("python ")
        if len(command) > LONG_COMMAND:     # paths of one machine's run dirs: the record keeps them
            command = f"{record['script']} ..."
        cells = [f'<a id="{row.anchor}"></a>{row.what}', f"`{command}`",
                 row.measured(record["results"]), row.target,
                 "; ".join(said) if said else "none in the record",
                 f"{link} {record['commit'][:7]}{' (uncommitted changes)' if record.get('dirty') else ''}, "
                 f"{record['date_utc'][:10]}", _machine(record["machine"]), _load(record),
                 f"**{fresh.note}**" if fresh.state != "current" else fresh.note]
        rows.append(TableRow(row.anchor, "| " + " | ".join(_cell(c) for c in cells) + " |", fresh))
    return rows


HEADER = """\
# Performance

Written by `docs/tools/perf_table.py` from the records in `bench/results/`: do not edit by
hand; after a bench run or a change to what a script measures, run
`.venv/bin/python docs/tools/perf_table.py` and commit the page with the record.

Every script in `bench/` writes what it measured to `bench/results/<script>[.<mode>].json`
(`bench/_record.py`): the commit and whether the tree had uncommitted changes, the UTC date,
the machine, the 1-minute load average before and after, the command line and every number
the script printed; a re-run overwrites it (`git log -p bench/results/` keeps the history).
The machines are shared: a load of 2 keeps both cores of the 2-core machine busy and inflates
wall-clock times; CPU-time figures and ratios measured side by side in one run are what to
compare. *verdict* is the record's own, in its words ("none in the record" where the script
wrote none; the *target* column is the page's). A row is **stale** once a commit after the
record's touched a path its script declares in `MEASURES` (the note names the first such
commit), or when the record names a path the tree no longer has. Other pages link a row
(`performance.md#<record>`) instead of repeating its numbers; a number they quote in such a
link must be in the row, and the README may quote only current rows
(`tests/docs/test_performance_table.py`).

| what | command | measured | target | verdict (the record's) | record, commit, date | machine | load (1-min, before -> after) | current? |
|---|---|---|---|---|---|---|---|---|
"""


def page(root: Path = ROOT) -> str:
    return HEADER + "\n".join(r.text for r in table_rows(root)) + "\n"


# -- quotes on other pages ---------------------------------------------------------------

QUOTE = re.compile(r"\[([^\]]+)\]\(([^)\s]*performance\.md)#([^)\s]+)\)")
RECORD_LINK = re.compile(r"\]\(([^)\s]*bench/results/[^)\s/]+\.json)\)")


def quoting_pages(root: Path = ROOT) -> list[Path]:
    pages = [p for pattern in QUOTING_PAGES for p in sorted(root.glob(pattern))]
    return [p for p in pages if p.resolve() != (root / PAGE).resolve()]


def problems_in_page(text: str, name: str, rows: dict[str, TableRow], *, current_only: bool) -> list[str]:
    """What a page gets wrong about the table: a quoted number the row does not have, an anchor
    no row has, a link straight to a record (link the row), and, with current_only, a row
    quoted with numbers while it is not current."""
    problems = []
    for m in QUOTE.finditer(text):
        quoted, anchor = m.group(1), m.group(3)
        row = rows.get(anchor)
        if row is None:
            problems.append(f"{name}: [{quoted}] links performance.md#{anchor}, which no row has")
            continue
        wrong = sorted(numbers(quoted) - numbers(row.text))
        if wrong:
            problems.append(f"{name}: [{quoted}] quotes {', '.join(wrong)}, which the row #{anchor} does not have "
                            f"(the record says otherwise: quote the row as docs/performance.md writes it)")
        if current_only and numbers(quoted) and row.freshness.state != "current":
            problems.append(f"{name}: [{quoted}] quotes row #{anchor} as current, but it is "
                            f"{row.freshness.state} ({row.freshness.note}): re-measure it or quote no number")
    for m in RECORD_LINK.finditer(text):
        problems.append(f"{name}: links the record {m.group(1)} directly: link its row, "
                        f"performance.md#{Path(m.group(1)).name.removesuffix('.json')}")
    return problems


def check(root: Path = ROOT) -> list[str]:
    """Every disagreement between the committed pages and the records."""
    problems = []
    written = page(root)
    if (root / PAGE).read_text() != written:
        problems.append(f"{PAGE} is not what the records give: run `.venv/bin/python docs/tools/perf_table.py` "
                        "and commit it")
    listed = {row.record for row in ROWS}
    problems += [f"{RESULTS / p.name} has no row: add one to ROWS in docs/tools/perf_table.py"
                 for p in sorted((root / RESULTS).glob("*.json")) if p.name not in listed]
    rows = {r.anchor: r for r in table_rows(root)}
    for p in quoting_pages(root):
        problems += problems_in_page(p.read_text(), str(p.relative_to(root)), rows,
                                     current_only=p.name == "README.md" and p.parent == root)
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 on any disagreement")
    args = ap.parse_args(argv)
    if args.check:
        problems = check()
        print("\n".join(problems) or "docs/performance.md and the pages quoting it agree with bench/results")
        return 1 if problems else 0
    (ROOT / PAGE).write_text(page())
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
