"""`cuset carry`: move a long run (a demo, a study, a map) to another machine a finished step at a time."""

from __future__ import annotations

from pathlib import Path

import typer

from cuset.cli.common import console, out

CARRY_HELP = (
    "Write CARRY_DIR from RUN_DIR: every finished cell whole, an unfinished cell's training when it finished, and "
    "the run's own files, without caches or checkpoints (cuset.experiment.carry). Re-running refreshes CARRY_DIR "
    "and rewrites only what changed, so it can be committed while the run goes on. With --restore, rebuild RUN_DIR "
    "from CARRY_DIR (each file checked against its sha256); the run's own command then resumes there.")


def register(root: typer.Typer) -> None:
    root.command("carry", help=CARRY_HELP, no_args_is_help=True)(carry_command)


def carry_command(
    first: Path = typer.Argument(..., metavar="RUN_DIR", help="The run to carry (with --restore: the carry directory)."),
    second: Path = typer.Argument(..., metavar="CARRY_DIR", help="Where to write it (with --restore: the run directory "
                                                                 "to rebuild, absent or empty)."),
    restore_run: bool = typer.Option(False, "--restore", help="Rebuild a run from a carry directory: "
                                                              "`cuset carry --restore CARRY_DIR RUN_DIR`."),
):
    """Carry a run directory to another machine, or restore one (--restore)."""
    from cuset.experiment.carry import carry, restore

    if restore_run:
        n = restore(first, second)
        console.print(f"restored {n} files into {second}; resume with the run's own command and --out {second}")
        return
    manifest = carry(first, second)
    files = manifest["files"]
    left = {reason: len(paths) for reason, paths in manifest["left_out"].items()}
    stored = sum(p.stat().st_size for p in (second / "files").rglob("*") if p.is_file())
    cells = manifest["cells"]
    out.print(f"{len(cells['finished'])} finished cells, {len(cells['trained'])} trained only; "
              f"{len(files)} files ({sum(f['bytes'] for f in files.values()) / 1e6:.1f} MB, {stored / 1e6:.1f} MB "
              f"stored) in {second}; left out: " + (", ".join(f"{n} {reason}" for reason, n in left.items()) or "nothing"),
              highlight=False)
