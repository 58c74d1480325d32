"""Evaluation: run generated programs through the pipeline and compute Pass@k.

Library entry points:
- `evaluate_program(task, code, backend=...) -> ExecResult`: one program, one task.
- `evaluate_file(tasks, generations_path, results_path, config) -> Summary`: a whole run.
"""

from cuset.evaluate.config import EvalConfig, ExecutionConfig, SandboxConfig
from cuset.evaluate.metrics import Summary, official_pass_at_k, pass_at_k, summarize
from cuset.evaluate.options import EvalOptions, Timeouts
from cuset.evaluate.pipeline import evaluate_program
from cuset.evaluate.records import SampleResult, load_results, save_results
from cuset.evaluate.runner import evaluate_file
from cuset.evaluate.workspace import Workspace

__all__ = [
    "EvalConfig", "ExecutionConfig", "SandboxConfig", "Summary", "official_pass_at_k", "pass_at_k", "summarize",
    "EvalOptions", "Timeouts", "evaluate_program", "SampleResult", "load_results", "save_results",
    "evaluate_file", "Workspace",
]
