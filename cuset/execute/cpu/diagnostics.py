"""Reading what the CPU runtime and g++ say.

The runtime reports its own findings as one line on stderr,

    CUSET-CPU: <word>: <detail>

with <word> one of `runtime_error`, `unsupported`, `warp_sync`, `race` (fatal:
the process exits with 90/91/92/94) or `launch_error` (a kernel launch the GPU
would refuse; the program goes on and may check cudaGetLastError) and
`note` (informational). The last fatal line decides a failed run's status.
At exit the runtime also records which path each kernel took (`path`,
`kernel_paths`), on the diagnostics channel only.

Under the evaluation pipeline the runtime also writes these lines to a
diagnostics file the harness opened (StepResult.diagnostics, see
runtime/src/diag.cpp); then only that channel is believed: marker lines a program
prints on stderr itself, or one of the exit codes alone, decide nothing.
"""

from __future__ import annotations

import re

from cuset.execute.result import Status, StepResult

MARKER = "CUSET-CPU:"
_MARKER_RE = re.compile(r"^CUSET-CPU: (runtime_error|unsupported|warp_sync|race|launch_error|note): (.*)$", re.M)
_STATUS = {
    "runtime_error": Status.RUNTIME_ERROR,
    "launch_error": Status.RUNTIME_ERROR,
    "unsupported": Status.UNSUPPORTED,
    "warp_sync": Status.WARP_SYNC,
    "race": Status.RACE,
}
EXIT_CODES = {90: Status.RUNTIME_ERROR, 91: Status.UNSUPPORTED, 92: Status.WARP_SYNC, 94: Status.RACE}


def runtime_markers(text: str) -> list[tuple[str, str]]:
    """All (word, detail) marker lines in a log, in order."""
    return [(m.group(1), m.group(2).strip()) for m in _MARKER_RE.finditer(text or "")]


_PATH_RE = re.compile(r"^CUSET-CPU: path: kernel '(.*)': (block loop with barrier regions|block loop and fibers|block loop|fibers), (.*)$", re.M)


def kernel_paths(text: str) -> dict[str, str]:
    """kernel -> `block loop`, `block loop with barrier regions`, `fibers` or `block loop and
    fibers`, from the lines the runtime writes at exit on the diagnostics channel
    (runtime/src/paths.cpp)."""
    return {m.group(1): m.group(2) for m in _PATH_RE.finditer(text or "")}


_PROOF_RE = re.compile(r"^CUSET-CPU: order-proof: (.*)$", re.M)
_PROOF_SUMMARY_RE = re.compile(r"^(\d+) of (\d+) launches independent, (\d+) kernels, token ([0-9a-f]+)$")


def order_proof_result(channel: str | None, secret: str) -> str:
    """Why the other thread orders cannot change this run's outputs ("every launch proven
    order-independent (3 kernels, 12 launches)"), or "" when that was not shown: the
    runtime's lines on the diagnostics channel only (runtime/src/order_proof.cpp), exactly
    one summary, carrying this run's secret, counting every launch as independent, and no
    other verdict (a kernel launched after the summary, a launch not proven)."""
    if channel is None or not secret:
        return ""  # no channel: what the program printed proves nothing
    lines = [m.group(1) for m in _PROOF_RE.finditer(channel)]
    summaries = [m for m in (_PROOF_SUMMARY_RE.match(line) for line in lines) if m]
    if len(summaries) != 1:
        return ""
    independent, launches, kernels, token = summaries[0].groups()
    if token != secret or independent != launches:
        return ""
    kernel_lines = [line for line in lines if not _PROOF_SUMMARY_RE.match(line)]
    if len(kernel_lines) != int(kernels) or any(
            not re.fullmatch(r"kernel '.*': (\d+) of \1 launch(es)? independent", line) for line in kernel_lines):
        return ""
    if launches == "0":
        return "no kernel launched"
    return f"every launch proven order-independent ({kernels} kernel{'s' if kernels != '1' else ''}, " \
           f"{launches} launch{'es' if launches != '1' else ''})"


def classify_run(step: StepResult) -> tuple[Status, str] | None:
    """Status and detail of a failed run from the runtime's marker lines, or
    None when the runtime reported nothing (the program failed on its own)."""
    if step.timed_out:
        return None
    channel = step.diagnostics is not None
    markers = [(w, d) for w, d in runtime_markers(step.diagnostics if channel else step.stderr) if w != "note"]
    if not markers:
        if channel:  # the runtime said nothing: an exit code of 90-94 is the program's own
            return None
        status = EXIT_CODES.get(step.returncode or 0)
        if status is not None:
            return status, "the CPU runtime reported an error (its message was cut from the log)"
        return None
    fatal = [(w, d) for w, d in markers if w != "launch_error"]
    word, detail = fatal[-1] if fatal else markers[-1]
    if word == "launch_error":
        detail = f"kernel launch failed: {detail}"
    return _STATUS[word], detail


def summarize_compile_errors(stderr: str, user_file: str, limit: int = 3) -> str:
    """The first errors of a g++ log, preferring those in the user's file."""
    lines = stderr.splitlines()
    errors = [ln for ln in lines if ": error:" in ln or ": fatal error:" in ln]
    # The linker's errors carry no "error:" of their own ("collect2: error: ld returned 1"
    # only says that it failed): name what it could not resolve.
    unresolved = [ln for ln in lines if "undefined reference to" in ln]
    if unresolved:
        errors = [ln.split("): ", 1)[-1] for ln in unresolved] + [ln for ln in errors if "collect2" not in ln]
    if not errors:
        tail = [ln for ln in lines if ln.strip()]
        return " | ".join(tail[-limit:]) if tail else "g++ failed without a message"
    mine = [ln for ln in errors if ln.startswith(user_file + ":")]
    chosen = (mine or errors)[:limit]
    if not mine:
        # An error inside the runtime headers: name the user's line that led there.
        where = [ln for ln in lines if ln.startswith(user_file + ":")]
        if where:
            chosen.append(f"(from {where[0].split(': ', 1)[0]})")
    return " | ".join(_shorten(ln) for ln in chosen)


def _shorten(line: str) -> str:
    return re.sub(r"/\S*/cuset/execute/cpu/runtime/include/", "<cuset-cpu>/", line)
