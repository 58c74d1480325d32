"""Tasks: the benchmark formats as a registry of task kinds (`kinds`: CUDABench records,
KernelBench modules), loading and validating task files, generation prompts, and reading a
model's reply to a task (`reasoning`: the trace; `reply`: the fenced code blocks)."""

from cuset.tasks.schema import (
    DTYPES, LEVELS, Task, TensorSpec, parse_shape, task_id_order, valid_task_id, validate_record,
)
from cuset.tasks.kernelbench import VALUE_VARIANTS, KernelBenchTask
from cuset.tasks.kinds import DEFAULT_KIND, KINDS, TaskKind, UnknownTaskKind, get_kind, render_prompt
from cuset.tasks.io import AnyTask, LoadReport, TaskValidationError, load_kernelbench_dir, load_tasks, save_tasks
from cuset.tasks.schema import RenderedPrompt

__all__ = [
    "DTYPES", "LEVELS", "Task", "TensorSpec", "parse_shape", "task_id_order", "valid_task_id",
    "VALUE_VARIANTS", "KernelBenchTask", "AnyTask",
    "DEFAULT_KIND", "KINDS", "TaskKind", "UnknownTaskKind", "get_kind",
    "LoadReport", "TaskValidationError", "load_kernelbench_dir", "load_tasks", "save_tasks", "validate_record",
    "RenderedPrompt", "render_prompt",
]
