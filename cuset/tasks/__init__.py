"""Tasks: the CUDABench-format record shared by data curation and evaluation, the KernelBench
record, and reading a model's reply to a task (`reasoning`: the trace; `reply`: the fenced
code blocks)."""

from cuset.tasks.schema import DTYPES, LEVELS, Task, TensorSpec, parse_shape, task_id_order, valid_task_id
from cuset.tasks.kernelbench import VALUE_VARIANTS, KernelBenchTask
from cuset.tasks.io import (
    AnyTask, LoadReport, TaskValidationError, load_kernelbench_dir, load_tasks, save_tasks, validate_record,
)
from cuset.tasks.prompts import RenderedPrompt, render_prompt

__all__ = [
    "DTYPES", "LEVELS", "Task", "TensorSpec", "parse_shape", "task_id_order", "valid_task_id",
    "VALUE_VARIANTS", "KernelBenchTask", "AnyTask",
    "LoadReport", "TaskValidationError", "load_kernelbench_dir", "load_tasks", "save_tasks", "validate_record",
    "RenderedPrompt", "render_prompt",
]
