"""Is a name a local path or a Hugging Face hub id?

Models, tokenizers and task sets are given as one string that may be either. A
hub id is `name` or `namespace/name`; a name that cannot be one (absolute, `./`,
`~`, two or more slashes, a data-file suffix) is a local path, and when it does
not exist it is a typo to report at once, not a hub id to try for half a minute
of network retries with a message about repo ids.
"""

from __future__ import annotations

from pathlib import Path

from cuset.errors import CusetError

_FILE_SUFFIXES = (".jsonl", ".json", ".py", ".parquet", ".csv", ".yaml", ".yml", ".safetensors", ".bin")


def is_local_path(name: str) -> bool:
    """True if `name` can only mean a local file or directory."""
    return (name.startswith(("/", ".", "~")) or name.count("/") >= 2
            or name.lower().endswith(_FILE_SUFFIXES))


class MissingPath(CusetError, FileNotFoundError):
    """A file, directory or program that a config, the command line or the run needs and that is not
    there. A CusetError (one line in the CLI) and a FileNotFoundError (for callers that catch those)."""


def require_existing(name: str, what: str, expected: str) -> None:
    """Raise MissingPath (a FileNotFoundError) naming `what` (the key or argument) if `name` is a local path that does
    not exist; `expected` says what should be there (e.g. "a model directory")."""
    if is_local_path(name) and not Path(name).expanduser().exists():
        raise MissingPath(f"{what}: {name}: no such file or directory (expected {expected}, "
                                "or a Hugging Face hub name such as org/name)")
