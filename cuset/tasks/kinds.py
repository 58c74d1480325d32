"""Task kinds: the benchmark formats cuset reads, looked up by name.

A task record's `kind` field (absent: "cudabench") names its `TaskKind`: the record
class, the check of a decoded JSON record, the generation prompt and the task's source
files. Loading (cuset.tasks.io), prompting and `cuset tasks show` go through this table,
never through a test of the name.

The layers above keep their own per-kind tables keyed by the same names: the code
extractors (cuset.generate.extract) and the evaluators (cuset.evaluate.kinds). Each is
built with `per_kind`, which refuses a table that misses a kind or names an unknown one,
so a kind without an extractor or an evaluator is an error when the module loads, not a
KeyError in the middle of a run.

A third benchmark format is then: a module here with its record class (a frozen
dataclass with a `kind` class attribute, `id`, `task_name`, `family_name`, `to_json`,
`from_json`), its record check and its prompt, and one `TaskKind` in `KINDS`; its
extractors (one entry in cuset.generate.extract) and its evaluator (a module in
cuset.evaluate, one entry in cuset.evaluate.kinds).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, TypeVar

from cuset.errors import CusetError
from cuset.tasks.kernelbench import KernelBenchTask, validate_kernelbench_record
from cuset.tasks.kernelbench_prompts import render_kernelbench_prompt
from cuset.tasks.prompts import render_cudabench_prompt
from cuset.tasks.schema import RenderedPrompt, Task, validate_record

Problems = list[tuple[str, str, str]]   # (field, message, reason) of one record


@dataclass(frozen=True)
class TaskKind:
    """One benchmark format, as the tasks layer knows it."""

    name: str                                    # the records' `kind` value
    record: type                                 # the frozen dataclass of one task; record.kind == name
    validate: Callable[[object], Problems]       # every problem of a decoded JSON record
    render_prompt: Callable[..., RenderedPrompt]  # (task, level, *, compat, gpu) -> the generation prompt
    about: str                                   # what its tasks are, for listings
    files: tuple[tuple[str, str], ...] = ()      # (file name, record attribute) of its sources (`cuset tasks show`)

    def __post_init__(self) -> None:
        if getattr(self.record, "kind", None) != self.name:
            raise TypeError(f"task kind {self.name!r}: its record class {self.record.__name__} has "
                            f"kind {getattr(self.record, 'kind', None)!r}")

    def parse(self, record: dict):
        """The task of a JSON record in which `validate` found no problem."""
        return self.record.from_json(record)

    def file(self, task, name: str) -> str:
        """The text of the task's source file `name` (one of `files`)."""
        attribute = dict(self.files).get(name)
        if attribute is None:
            raise KeyError(f"a {self.name} task has no file {name!r}: it has {', '.join(n for n, _ in self.files)}")
        return getattr(task, attribute)


DEFAULT_KIND = "cudabench"   # the kind of a record without a `kind` field (the CUDABench release's files)
KINDS: dict[str, TaskKind] = {kind.name: kind for kind in (
    TaskKind("cudabench", Task, validate_record, render_cudabench_prompt,
             "a CUDA program with gen.py inputs and a compare.py checker (the CUDABench format)",
             (("bench.cu", "bench_cu"), ("gen.py", "gen_py"), ("compare.py", "compare_py"))),
    TaskKind("kernelbench", KernelBenchTask, validate_kernelbench_record, render_kernelbench_prompt,
             "a PyTorch Model to rewrite as ModelNew with load_inline CUDA kernels (the KernelBench format)",
             (("reference", "reference_src"),)),
)}


class UnknownTaskKind(CusetError, ValueError):
    """A task kind that is not registered."""


def known_kinds() -> str:
    """The registered names as an error message offers them: "cudabench (the default) or kernelbench"."""
    names = [f"{n} (the default)" if n == DEFAULT_KIND else n for n in KINDS]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def find_kind(name: object) -> TaskKind | None:
    """The kind registered under `name` (any value read from a record), else None."""
    return KINDS.get(name) if isinstance(name, str) else None


def get_kind(name: str) -> TaskKind:
    """The kind registered under `name`; `UnknownTaskKind` naming the known ones otherwise."""
    kind = find_kind(name)
    if kind is None:
        raise UnknownTaskKind(f"unknown task kind {name!r}: use {known_kinds()}")
    return kind


def record_kind(record: object) -> object:
    """The `kind` a decoded JSON record declares (absent, or not an object: the default)."""
    return record.get("kind", DEFAULT_KIND) if isinstance(record, dict) else DEFAULT_KIND


def render_prompt(task, level: int = 1, *, compat: bool = False, gpu: str | None = None) -> RenderedPrompt:
    """The system + user prompt asking a model to solve `task` at prompt `level` (1, 2 or 3).

    `compat=True` reproduces the benchmark's own harness text. `gpu` is the GPU label
    (the CUDABench prompt defaults to the official harness's label; see each kind's
    prompt module). A KernelBench task has one prompt: `level` does not apply to it.
    """
    return get_kind(task.kind).render_prompt(task, level, compat=compat, gpu=gpu)


V = TypeVar("V")


def per_kind(table: Mapping[str, V], what: str) -> dict[str, V]:
    """`table` (task kind -> a higher layer's handler) checked to cover exactly the
    registered kinds; `what` names the table in the error (e.g. "code extractors"). A
    table that does not is a bug of cuset's (LookupError), not a user's input."""
    missing = [name for name in KINDS if name not in table]
    unknown = [name for name in table if name not in KINDS]
    if missing or unknown:
        said = ([f"no entry for {', '.join(missing)}"] if missing else []) + \
               ([f"entries for unregistered kinds {', '.join(unknown)}"] if unknown else [])
        raise LookupError(f"the {what} must cover every task kind in cuset.tasks.kinds.KINDS "
                              f"({', '.join(KINDS)}): {'; '.join(said)}")
    return {name: table[name] for name in KINDS}
