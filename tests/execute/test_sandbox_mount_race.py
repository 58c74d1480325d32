"""Sandboxes start while run dirs' quotas are mounted and unmounted (bubblewrap #650).

bwrap binds / recursively and then remounts every mount it listed; on a host whose /
has shared propagation, a quota unmounted in between made it fail with "Can't bind
mount /oldroot/ on /newroot/: Unable to apply mount flags" (seen in CI: a reference
program came out as compile_error). Two defences, each tested on its own: the run dirs'
parent is a private mount (nothing propagates into a starting sandbox), and a bwrap
that failed its set-up is started again.
"""

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cuset.execute import disk_quota
from cuset.execute import sandbox
from cuset.execute.result import StepResult
from cuset.execute.sandbox import SandboxPolicy, _probe, run_sandboxed

SETUP_ERROR = ("bwrap: Can't bind mount /oldroot/ on /newroot/: Unable to apply mount flags: "
               'remount "/newroot/tmp/ws/runs/5375feb9": No such file or directory\n')

# Runs in a mount namespace of its own whose / has shared propagation (as on the CI
# host), with a thread mounting and unmounting tmpfs quotas under RUNS while sandboxed
# programs start; prints how many of them failed.
RACE = textwrap.dedent("""
    import sys, threading
    from pathlib import Path
    from cuset.execute import disk_quota
    from cuset.execute import sandbox
    root, isolate, attempts = Path(sys.argv[1]), sys.argv[2] == "isolate", int(sys.argv[3])
    sandbox.BWRAP_SETUP_ATTEMPTS = attempts
    runs = root / "runs"
    if isolate:
        disk_quota.isolate(runs)
    stop = threading.Event()
    def churn():
        quota = runs / "quota"
        quota.mkdir(exist_ok=True)
        while not stop.is_set():
            disk_quota.mount_tmpfs(quota, 1 << 20)
            disk_quota.unmount(quota)
    t = threading.Thread(target=churn)
    t.start()
    failed = 0
    try:
        for i in range(120):
            step = sandbox.run_sandboxed("run", ["/bin/true"], run_dir=root / "run", timeout=30,
                                         policy=sandbox.SandboxPolicy(mode="bwrap"))
            failed += step.returncode != 0
    finally:
        stop.set()
        t.join()
    if isolate:
        disk_quota.unmount(runs)
    print("failed", failed)
""")

needs_mounts = pytest.mark.skipif(
    _probe("bwrap") is not None or disk_quota.unavailable() is not None or shutil.which("unshare") is None,
    reason="needs bubblewrap, root (mount rights) and unshare")


def race(tmp_path: Path, isolate: bool, attempts: int) -> int:
    (tmp_path / "runs").mkdir()
    (tmp_path / "run").mkdir()
    out = subprocess.run(["unshare", "--mount", "--propagation", "shared", sys.executable, "-c", RACE,
                          str(tmp_path), "isolate" if isolate else "plain", str(attempts)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return int(out.stdout.split()[-1])


@needs_mounts
@pytest.mark.slow
def test_quotas_under_a_private_parent_never_disturb_a_starting_sandbox(tmp_path):
    assert race(tmp_path, isolate=True, attempts=1) == 0


@needs_mounts
@pytest.mark.slow
def test_a_sandbox_whose_setup_lost_the_race_is_started_again(tmp_path):
    assert race(tmp_path, isolate=False, attempts=sandbox.BWRAP_SETUP_ATTEMPTS) == 0


def test_setup_failures_are_retried_and_nothing_else_is(tmp_path, monkeypatch):
    outcomes = [StepResult("run", 1, 0.01, stderr=SETUP_ERROR)] * 2 + [StepResult("run", 0, 0.01, stdout="ok")]
    calls = []

    def once(*args):
        calls.append(args)
        return outcomes[len(calls) - 1]

    monkeypatch.setattr(sandbox, "resolve_mode", lambda mode: "bwrap")
    monkeypatch.setattr(sandbox, "_run_sandboxed_once", once)
    step = run_sandboxed("run", ["./prog"], run_dir=tmp_path, timeout=5, policy=SandboxPolicy(mode="bwrap"))
    assert (step.returncode, step.stdout, len(calls)) == (0, "ok", 3)

    # A program's own failure (output, several lines, another message, a timeout) runs once.
    for failure in (StepResult("run", 1, 0.01, stdout="x", stderr=SETUP_ERROR),
                    StepResult("run", 1, 0.01, stderr=SETUP_ERROR + "more\n"),
                    StepResult("run", 1, 0.01, stderr="bwrap: execvp ./prog: No such file or directory\n"),
                    StepResult("run", 2, 0.01, stderr=SETUP_ERROR),
                    StepResult("run", None, 5.0, timed_out=True, stderr=SETUP_ERROR)):
        calls.clear()
        outcomes = [failure]
        assert run_sandboxed("run", ["./prog"], run_dir=tmp_path, timeout=5, policy=SandboxPolicy()) == failure
        assert len(calls) == 1

    # A set-up that keeps failing gives up after BWRAP_SETUP_ATTEMPTS and says why.
    calls.clear()
    outcomes = [StepResult("run", 1, 0.01, stderr=SETUP_ERROR)] * sandbox.BWRAP_SETUP_ATTEMPTS
    step = run_sandboxed("run", ["./prog"], run_dir=tmp_path, timeout=5, policy=SandboxPolicy())
    assert len(calls) == sandbox.BWRAP_SETUP_ATTEMPTS and "Can't bind mount" in step.stderr


@pytest.mark.skipif(disk_quota.unavailable() is not None, reason="needs mount rights (root)")
def test_isolated_dir_is_a_mount_point_until_unmounted(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    assert not disk_quota.is_mounted(runs)
    disk_quota.isolate(runs)
    disk_quota.isolate(runs)            # a second call is a no-op, not a second layer
    assert disk_quota.is_mounted(runs)
    mounts = Path("/proc/self/mountinfo").read_text().split("\n")
    assert sum(line.split(" ")[4] == str(runs) for line in mounts if line) == 1
    disk_quota.unmount(runs)
    assert not disk_quota.is_mounted(runs)
    runs.rmdir()
