"""Benchmark defects found before any model is scored (`cuset tasks check`): tasks whose
own reference fails the evaluation, and tasks whose checker accepts corrupted outputs.

    from cuset.evaluate.taskcheck import check_tasks, load_check
    result = check_tasks("tasks.jsonl", "runs/check", EvalConfig(backend="cpu", robust=True))
    load_check("runs/check/task_check.json").defective()   # {task id: TaskCheck}
"""

from cuset.evaluate.taskcheck.record import (
    DEFECTS, CheckFile, CorruptionResult, TaskCheck, TaskCheckFileError, load_check,
)
from cuset.evaluate.taskcheck.run import CheckResult, TaskCheckError, check_tasks

__all__ = ["DEFECTS", "CheckFile", "CorruptionResult", "TaskCheck", "TaskCheckFileError", "load_check",
           "CheckResult", "TaskCheckError", "check_tasks"]
