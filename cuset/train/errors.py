"""Errors a user can fix (bad setup), reported by the CLI as one line instead of a traceback."""

from cuset.errors import CusetError


class SetupError(CusetError, RuntimeError):
    """The requested training setup cannot run here (e.g. QLoRA without a GPU)."""


class RunExistsError(SetupError):
    """output_dir already holds a run and --resume was not given."""
