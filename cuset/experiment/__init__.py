"""Orchestration: running models through the stages, above `analysis` and `data`.

- `cell`: one model through train -> generate -> evaluate, resumable (`Cell`, `run_cell`,
  and `StepLog`, the one way a finished step is recorded and skipped);
- `sweep`: `cuset sweep`, a grid of cells run as `Cell`s, then a report;
- `scoring`: teacher-forced token confidences of responses under a model (the
  `ScoredSample`s that `cuset.analysis.confidence` reads).

The demo (`cuset.demo`) sits on top of this; `analysis` and `data` never import it.
"""

from cuset.experiment.cell import STEPS, Cell, CellError, StepLog, run_cell, step_seconds, trained_model

__all__ = ["STEPS", "Cell", "CellError", "StepLog", "run_cell", "step_seconds", "trained_model"]
