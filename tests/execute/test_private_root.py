"""The unshare fallback builds bubblewrap's world itself (cuset.execute.private_root): the
same root, the same masks, nothing else of the host, and a set-up that refuses what it does
not understand before it mounts anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cuset.execute import private_root
from cuset.execute.sandbox import SandboxPolicy, run_sandboxed
from sandbox_tools import EVERY_MODE, HAVE_BWRAP, missing_tool

needs_unshare = pytest.mark.skipif(missing_tool("unshare") is not None, reason=f"unshare: {missing_tool('unshare')}")

# What a run step can see: the top of the root, /dev, /etc and /tmp, its own capabilities,
# and what it reads of a planted 0644 file outside its run dir, of a file in a read-only
# path it is given, and of a file under a hidden dir inside that path.
SURVEY = r"""
import json, os, sys
seen = {d: sorted(os.listdir(d)) for d in ("/", "/dev", "/etc", "/tmp")}
seen["caps"] = open("/proc/self/status").read().split("CapEff:")[1].split()[0]
for name, path in zip(("planted", "shown", "hidden"), sys.argv[1:]):
    try:
        seen[name] = open(path).read()
    except OSError as e:
        seen[name] = type(e).__name__
print(json.dumps(seen))
"""


@pytest.fixture
def scene(tmp_path):
    """(run dir, the files the survey reads, the read-only dir, the hidden dir inside it)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "survey.py").write_text(SURVEY)
    shown = tmp_path / "shown"
    (shown / "secret").mkdir(parents=True)
    files = (tmp_path / "planted.txt", shown / "open.txt", shown / "secret" / "hidden.txt")
    for path in files:
        path.write_text(path.stem.upper())
        os.chmod(path, 0o644)
    return run_dir, files, shown, shown / "secret"


def _survey(mode: str, scene) -> dict:
    run_dir, files, shown, secret = scene
    step = run_sandboxed("survey", [sys.executable, "survey.py", *map(str, files)], run_dir=run_dir, timeout=60,
                         policy=SandboxPolicy(mode=mode, hide=(str(secret),)), readonly=(shown,))
    assert step.returncode == 0, step.stderr
    return json.loads(step.stdout)


@pytest.mark.parametrize("mode", EVERY_MODE)
def test_a_step_sees_its_world_only(scene, mode):
    """A hidden dir inside a read-only path given to the step is masked too, although it lies
    below /tmp (a mask of the host's root that a minimal root does not need)."""
    seen = _survey(mode, scene)
    assert (seen["planted"], seen["shown"], seen["hidden"]) == ("FileNotFoundError", "OPEN", "FileNotFoundError")
    assert seen["caps"] == "0000000000000000"
    assert "home" not in seen["/"] and "srv" not in seen["/"]
    assert seen["/tmp"] == sorted({scene[0].parents[len(scene[0].parents) - 3].name})   # the run dir's own path


@needs_unshare
@pytest.mark.skipif(not HAVE_BWRAP, reason=f"bubblewrap: {missing_tool('bwrap')}")
def test_both_modes_build_the_same_world(scene):
    assert _survey("unshare", scene) == _survey("bwrap", scene)


def test_options_it_does_not_build_are_refused_before_anything_is_mounted():
    for ops, why in ((["--bogus"], "'--bogus'"), (["--ro-bind", "/usr"], "'--ro-bind'"), ("/usr", "not a list")):
        with pytest.raises(private_root.SetupError, match=why):
            private_root.parse(ops)


def test_it_refuses_to_run_outside_a_mount_namespace_of_its_own():
    """Run by hand on the host it would remount the host's root: it stops first."""
    done = subprocess.run([sys.executable, "-I", "-S", private_root.__file__, os.readlink("/proc/self/ns/mnt"),
                           json.dumps(["--tmpfs", "/x"]), "--", "true"], capture_output=True, text=True, timeout=60)
    assert done.returncode == private_root.SETUP_FAILED
    assert done.stderr.startswith(private_root.MARKER) and "mount namespace of its own" in done.stderr
