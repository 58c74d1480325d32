"""`CusetError`: the base of every problem the user can fix (bad input, a missing tool
or file, a refused setting), as opposed to a bug.

The CLI prints a CusetError as one line naming the file/key and the fix, and exits
2; any other exception is a bug and shows its traceback. Subclasses keep their
builtin base too (ValueError, RuntimeError), so `except ValueError` callers are
unchanged.
"""

from __future__ import annotations


class CusetError(Exception):
    """A problem with the user's input or environment, reported as one line."""
