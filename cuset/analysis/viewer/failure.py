"""What a results record says about where a sample failed, read from its detail and steps.

Nothing here is guessed: each fact is parsed from text the evaluation wrote (the
messages of cuset.evaluate.pipeline, cuset.evaluate.strict and the KernelBench
compare), and is absent when the record does not hold it (e.g. compare.py printing
only 'F' says nothing about which element differed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cuset.evaluate.records import SampleResult
from cuset.execute.result import Status, StepResult


@dataclass(frozen=True)
class Diagnostic:
    """One compiler or runtime message about a line of a file."""

    file: str
    line: int
    severity: str
    message: str

    @property
    def in_program(self) -> bool:
        """About the evaluated program (its source is written as a .cu file), not a header."""
        return self.file.rsplit("/", 1)[-1].endswith(".cu")


@dataclass(frozen=True)
class Mismatch:
    """The first differing element of an output, as the comparison recorded it."""

    output: str
    n_bad: int
    n_total: int
    index: str
    got: str
    expected: str
    rule: str = ""
    abs_error: float | None = None
    rel_error: float | None = None
    max_abs_error: str = ""


@dataclass(frozen=True)
class RaceFacts:
    orders: tuple[str, ...]     # every thread order the case ran under
    failing_order: str          # the first order whose outputs were rejected
    passing: tuple[str, ...]    # orders under which the outputs passed
    why: str


@dataclass(frozen=True)
class FailureFacts:
    failed_step: str | None = None
    case: int | None = None
    order: str | None = None
    diagnostics: tuple[Diagnostic, ...] = ()
    mismatch: Mismatch | None = None
    race: RaceFacts | None = None

    def marked_lines(self) -> dict[int, str]:
        """Program line -> the messages about it (compile errors first), for the code view."""
        out: dict[int, list[str]] = {}
        for d in self.diagnostics:
            if d.in_program:
                out.setdefault(d.line, []).append(f"{d.severity}: {d.message}")
        return {line: "\n".join(msgs) for line, msgs in out.items()}


_COMPILER = re.compile(r"^(?P<file>[^\s:()]+)(?:\((?P<l1>\d+)\)|:(?P<l2>\d+)(?::\d+)?): "
                       r"(?P<sev>(?:fatal )?error|warning|note|remark)(?: #\S+)?: (?P<msg>.*)$")
_RUNTIME = re.compile(r"^(?:CUSET-CPU: )?(?P<sev>error|note|warning): (?P<msg>.*? at (?P<file>[\w./-]+\.cu):(?P<line>\d+).*)$")
_CASE = re.compile(r"\bcase (?P<case>\d+)\b")
_ORDER = re.compile(r"\border (?P<order>\S+?)(?=[:,;]?(?:\s|$))")   # order names hold ':' (random:1)
_RACE = re.compile(r"outputs differ between thread orders (?P<orders>[^;]+); order (?P<order>\S+?): "
                   r"(?P<why>.*?)(?: \(passes under (?P<passing>[^)]*)\))?$", re.S)
_STRICT = re.compile(r"output (?P<output>\S+): (?P<bad>\d+) of (?P<total>\d+) elements differ from \S+ "
                     r"\((?P<rule>[^)]*)\); first at index (?P<index>\d+(?: \([^)]*\))?): "
                     r"got (?P<got>.+?), expected (?P<expected>.+?)(?=$|[;\[]| \[)", re.S)
_KERNELBENCH = re.compile(r"(?P<output>[^\s:]+): (?P<bad>\d+) of (?P<total>\d+) elements differ beyond "
                          r"(?P<rule>atol=[^()]*?) \(max abs error (?P<max>[^;]+); first at (?P<index>\[[^\]]*\]): "
                          r"(?P<got>\S+) vs (?P<expected>\S+?)\)")
_NUMPY_SCALAR = re.compile(r"^np\.\w+\((?P<v>.*)\)$")


def _number(text: str) -> float | None:
    text = text.strip()
    m = _NUMPY_SCALAR.match(text)
    try:
        return float(m.group("v") if m else text)
    except ValueError:
        return None


def _errors(got: str, expected: str) -> tuple[float | None, float | None]:
    g, e = _number(got), _number(expected)
    if g is None or e is None:
        return None, None
    abs_error = abs(g - e)
    return abs_error, (abs_error / abs(e) if e != 0 else None)


def parse_mismatch(detail: str) -> Mismatch | None:
    """The first mismatching element a strict-check or KernelBench detail names."""
    m = _STRICT.search(detail)
    if m:
        got, expected = m.group("got").strip(), m.group("expected").strip()
        return Mismatch(m.group("output"), int(m.group("bad")), int(m.group("total")), m.group("index"),
                        got, expected, m.group("rule"), *_errors(got, expected))
    m = _KERNELBENCH.search(detail)
    if m:
        got, expected = m.group("got"), m.group("expected")
        return Mismatch(m.group("output"), int(m.group("bad")), int(m.group("total")), m.group("index"),
                        got, expected, m.group("rule"), *_errors(got, expected), max_abs_error=m.group("max").strip())
    return None


def parse_diagnostics(text: str) -> list[Diagnostic]:
    """Compiler (nvcc `f(12): error: ...`, g++ `f:12:3: error: ...`) and CPU-runtime
    (`note: ... at kernel.cu:12`) messages that name a line."""
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        m = _COMPILER.match(line)
        if m:
            out.append(Diagnostic(m.group("file"), int(m.group("l1") or m.group("l2")), m.group("sev"),
                                  m.group("msg").strip()))
            continue
        m = _RUNTIME.match(line)
        if m:
            out.append(Diagnostic(m.group("file"), int(m.group("line")), m.group("sev"), m.group("msg").strip()))
    return out


def _failed_step(record: SampleResult) -> StepResult | None:
    for step in record.steps:
        if step.timed_out or step.limit or step.returncode not in (0, None):
            return step
    if record.status in (Status.WRONG, Status.RACE):
        compares = [s for s in record.steps if s.name.startswith(("compare", "robust"))]
        return compares[-1] if compares else None
    return None


def failure_facts(record: SampleResult) -> FailureFacts:
    """Where `record` failed, as far as its detail and steps say; empty for a pass."""
    if record.status is Status.PASSED and not record.robust_detail:
        return FailureFacts()
    step = _failed_step(record)
    detail = record.detail if record.status is not Status.PASSED else record.robust_detail
    diagnostics: list[Diagnostic] = []
    seen: set[tuple[str, int, str]] = set()
    texts = [s.stderr + "\n" + s.stdout + "\n" + (s.diagnostics or "") for s in record.steps
             if s.name == "compile" or s is step or s.name.startswith("run[")]
    for d in parse_diagnostics("\n".join([*texts, detail.removeprefix("nvcc: ")])):
        key = (d.file, d.line, d.message)
        if key not in seen:
            seen.add(key)
            diagnostics.append(d)
    race = None
    m = _RACE.search(detail)
    if m:
        race = RaceFacts(tuple(o.strip() for o in m.group("orders").split(",")), m.group("order"),
                         tuple(o.strip() for o in (m.group("passing") or "").split(",") if o.strip()),
                         m.group("why").strip())
    case = _CASE.search(detail)
    order = _ORDER.search(detail)
    return FailureFacts(
        failed_step=step.name if step is not None else None, case=int(case.group("case")) if case else None,
        order=race.failing_order if race else (order.group("order") if order else None),
        diagnostics=tuple(diagnostics), mismatch=parse_mismatch(detail), race=race)
