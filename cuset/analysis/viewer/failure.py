"""What a results record says about where a sample failed, read from its detail and steps.

Nothing here is guessed: each fact is read from what the evaluation wrote: the
record's `mismatch` (the rejected outputs against the reference, element by element,
cuset.evaluate.strict.mismatch_record), else parsed from the messages of
cuset.evaluate.cudabench, cuset.evaluate.strict and the KernelBench compare; absent
when the record holds neither (e.g. a results file written before `mismatch` existed,
where compare.py printing only 'F' says nothing about which element differed).
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
class MismatchElement:
    index: str
    got: str
    expected: str
    abs_error: float | None = None
    rel_error: float | None = None


@dataclass(frozen=True)
class Mismatch:
    """How one output differs: the count and its first differing elements, as recorded."""

    output: str
    n_bad: int
    n_total: int
    elements: tuple[MismatchElement, ...]
    rule: str = ""
    max_abs_error: str = ""
    reference: str = ""

    def _first(self, name: str):
        return getattr(self.elements[0], name) if self.elements else None

    index = property(lambda self: self._first("index"))
    got = property(lambda self: self._first("got"))
    expected = property(lambda self: self._first("expected"))
    abs_error = property(lambda self: self._first("abs_error"))
    rel_error = property(lambda self: self._first("rel_error"))


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
    mismatches: tuple[Mismatch, ...] = ()
    mismatch_source: str = ""         # where `mismatches` come from, in words
    not_compared: tuple[str, ...] = ()  # outputs the recorded comparison could not read, and why
    race: RaceFacts | None = None

    @property
    def mismatch(self) -> Mismatch | None:
        return self.mismatches[0] if self.mismatches else None

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
        return Mismatch(m.group("output"), int(m.group("bad")), int(m.group("total")),
                        (MismatchElement(m.group("index"), got, expected, *_errors(got, expected)),), m.group("rule"))
    m = _KERNELBENCH.search(detail)
    if m:
        got, expected = m.group("got"), m.group("expected")
        return Mismatch(m.group("output"), int(m.group("bad")), int(m.group("total")),
                        (MismatchElement(m.group("index"), got, expected, *_errors(got, expected)),),
                        m.group("rule"), max_abs_error=m.group("max").strip())
    return None


def _number_or_none(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _recorded_output(d) -> Mismatch | None:
    """One output of a record's `mismatch`; None when it is not in the shape the evaluation writes."""
    if not isinstance(d, dict) or not isinstance(d.get("n_bad"), int) or not isinstance(d.get("n_total"), int):
        return None
    first = d.get("first") if isinstance(d.get("first"), list) else []
    elements = tuple(MismatchElement(str(e.get("at", e.get("index", "?"))), str(e.get("got", "?")),
                                     str(e.get("expected", "?")), _number_or_none(e.get("abs_error")),
                                     _number_or_none(e.get("rel_error")))
                     for e in first if isinstance(e, dict))
    max_abs = _number_or_none(d.get("max_abs_error"))
    return Mismatch(str(d.get("output", "?")), d["n_bad"], d["n_total"], elements,
                    f"{d.get('dtype', '')}, {d.get('rule', '')}".strip(", "),
                    f"{max_abs:.4g}" if max_abs is not None else "", str(d.get("reference", "")))


def recorded_mismatch(record: SampleResult) -> tuple[tuple[Mismatch, ...], str, tuple[str, ...]]:
    """(outputs, where they come from, outputs not compared) of the record's `mismatch`;
    empty when it has none (or none in the shape the evaluation writes)."""
    m = record.mismatch
    if not isinstance(m, dict):
        return (), "", ()
    outputs = tuple(o for o in map(_recorded_output, m.get("outputs") or ()) if o is not None)
    not_compared = tuple(str(n) for n in (m.get("not_compared") or ()) if isinstance(n, str))
    where = ", ".join(f"{k} {m[k]}" for k in ("case", "order") if k in m)
    source = (f"recorded at evaluation ({m.get('verdict', '?')} verdict{', ' + where if where else ''}; "
              f"outputs rejected by {m.get('check', '?')}, compared with the reference by the strict rule)")
    return outputs, source, not_compared


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
    mismatches, source, not_compared = recorded_mismatch(record)
    if not mismatches:
        parsed = parse_mismatch(detail)
        mismatches, source = ((parsed,), "parsed from the detail (its first element only)") if parsed else ((), "")
    return FailureFacts(
        failed_step=step.name if step is not None else None, case=int(case.group("case")) if case else None,
        order=race.failing_order if race else (order.group("order") if order else None),
        diagnostics=tuple(diagnostics), mismatches=mismatches, mismatch_source=source, not_compared=not_compared,
        race=race)
