"""The committed tree holds no leftovers of a merge: conflict markers in a docstring or a
doc still import and render, so nothing else would catch them."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^(<{7}|>{7})( |$)|^={7}$", re.M)


def _tracked_text_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        names = [n for n in out.decode().split("\0") if n]
    except (OSError, subprocess.CalledProcessError):   # a copy without .git: every file under the tree
        names = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and ".venv" not in p.parts]
    suffixes = {".py", ".md", ".yaml", ".yml", ".toml", ".cu", ".cuh", ".h", ".cpp", ".txt", ".json", ".cfg"}
    return [ROOT / n for n in names if Path(n).suffix in suffixes or Path(n).name in ("Makefile", "run")]


def test_no_merge_conflict_markers_are_committed():
    found = []
    for path in _tracked_text_files():
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for m in MARKER.finditer(text):
            found.append(f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}")
    assert not found, "merge conflict markers:\n" + "\n".join(found)


def test_the_marker_pattern_finds_a_conflict():
    sample = "a\n<<<<<<< HEAD\nx\n=======\ny\n>>>>>>> branch\n"
    assert len(MARKER.findall(sample)) == 3
    assert not MARKER.search("a = '<<<<<<<<'\n# ======== rule\n")


NOTES_OUTSIDE = re.compile(r"\bshared/notes/")


def test_code_and_tests_cite_nothing_outside_the_repository():
    """A reader of the code (or of a failing test) has only the repository: pointers to the
    lab's own notes (shared/notes/..., not committed here) lead nowhere."""
    found = [f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
             for path in _tracked_text_files()
             if path.suffix in (".py", ".yaml", ".yml", ".cu", ".toml") and path != Path(__file__).resolve()
             for text in [path.read_text(errors="replace")] for m in NOTES_OUTSIDE.finditer(text)]
    assert found == []
    assert NOTES_OUTSIDE.search("(see ../shared/notes/method.md)") and not NOTES_OUTSIDE.search("cache_dir=/shared/cuset")
