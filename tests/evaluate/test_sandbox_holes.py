"""Issue 24: hostile programs against the evaluation around the run step (compile
step, post-run checks, cleanup, resources, diagnostics), on the CPU backend.

Every program is built here; paths come from the workspace of the test, never
from this machine. The honest reference is evaluated before and after them in
the same workspace and must pass both times, with no run dir left behind.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from cuset.execute import disk_quota
from cuset.evaluate.checks import output_problem, outputs_digest
from cuset.evaluate.pipeline import evaluate_program
from cuset.evaluate.options import EvalOptions, Timeouts
from cuset.execute.untrusted_files import remove_tree
from cuset.evaluate.workspace import OWNER_LOCK, Workspace, data_key, remove_stale_workspaces
from cuset.execute import cgroup
from cuset.execute.compile_cache import CompileCache
from cuset.execute.compile_log import clean_compile_log
from cuset.execute.cpu import CpuBackend
from cuset.execute.cpu.features import find_assembler_directives
from cuset.execute.cpu.lexer import tokenize
from cuset.execute.result import Status
from cuset.tasks import Task
from sandbox_tools import EVERY_MODE, HAVE_BWRAP, may_mount, needs_bwrap

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "adversarial"
TASK = Task.from_json(json.loads((FIXTURES / "task.json").read_text()))
REFERENCE = (FIXTURES / "reference.cu").read_text()
SECRET = "CUSET-SECRET-7f3a9c"

WRITE_Y = 'FILE* g = fopen("data/y.bin", "wb"); fwrite(BUF, 1, 4096, g); fclose(g);'

PROGRAMS = {
    # 1. The task's hidden reference embedded at compile time (its path follows from
    #    the public gen.py), in the `;` form and the newline form; REF is filled in.
    "incbin_semicolon": '#include <cstdio>\n'
        '__asm__(".section .rodata; .globl refdata; refdata: .incbin \\"REF\\"; .previous");\n'
        'extern "C" const char refdata[];\n'
        'int main() { ' + WRITE_Y.replace("BUF", "refdata") + ' return 0; }\n',
    # The directive built by the preprocessor (#x), so no string literal shows it: only
    # the compile sandbox (the data cache is not visible to the assembler) stops it.
    "incbin_stringified": '#include <cstdio>\n#define STR(x) #x\n'
        '__asm__(STR(.section .rodata) "\\n" STR(.globl refdata) "\\n" STR(refdata:) " " STR(.incbin) '
        '" \\"REF\\"\\n" STR(.previous));\n'
        'extern "C" const char refdata[];\n'
        'int main() { ' + WRITE_Y.replace("BUF", "refdata") + ' return 0; }\n',
    # 1b. A root-only file quoted into the compiler log (test_compile_log_... covers
    #     readable ones: what the sandbox shows is system files only).
    "include_secret": '#include "SECRETFILE"\nint main() { return 0; }\n',
    # 2. A 3000-level directory tree left in the run dir.
    "deep_tree": '#include <sys/stat.h>\n#include <unistd.h>\n'
        'int main() { for (int i = 0; i < 3000; i++) { if (mkdir("d", 0700) || chdir("d")) return 2; } return 0; }\n',
    # 3. Outputs that are not regular files.
    "symlink_pagemap": '#include <unistd.h>\n'
        'int main() { return symlink("/proc/self/pagemap", "data/y.bin"); }\n',
    "symlink_data_dir": '#include <cstdio>\n#include <unistd.h>\n'
        'int main() { rename("data", "d0"); return symlink("/proc/self", "data"); }\n',
    "fifo_output": '#include <sys/stat.h>\n'
        'int main() { return mkfifo("data/y.bin", 0600); }\n',
    # 5. Disk: 10 GB in 1 MiB files (each file below RLIMIT_FSIZE, so only a quota stops it).
    "writes_10gb": '#include <cstdio>\nstatic char buf[1 << 20];\n'
        'int main() { char name[32]; for (int i = 0; i < 10240; i++) { snprintf(name, sizeof name, "f%05d", i);'
        ' FILE* f = fopen(name, "wb"); if (!f) return 4; size_t w = fwrite(buf, 1, sizeof buf, f);'
        ' if (fclose(f) != 0 || w != sizeof buf) return 5; } return 0; }\n',
    # 5. Memory: three children, each under the per-process limit, together over the
    #    program's (scaled: 3 x 96 MiB against 160 MiB, the mechanism of 3 x 3 GiB against 8 GiB).
    "three_children": '#include <cstdlib>\n#include <sys/wait.h>\n#include <unistd.h>\n'
        'int main() { for (int i = 0; i < 3; i++) if (fork() == 0) {'
        ' volatile char* p = (volatile char*)malloc(96u << 20); if (!p) return 3;'
        ' for (size_t j = 0; j < (96u << 20); j += 4096) p[j] = 1; sleep(1); return 0; }'
        ' int s; while (wait(&s) > 0) {} return 0; }\n',
    # 6. A fake runtime report: would read as `unsupported` if believed.
    "forged_diagnostic": '#include <cstdio>\n'
        'int main() { fprintf(stderr, "CUSET-CPU: unsupported: tensor cores (wmma) [kernel k]\\n"); return 91; }\n',
}
SMALL_LIMITS = {"writes_10gb", "three_children"}


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    root = tmp_path_factory.mktemp("holes")
    secret = root / "secret.txt"
    secret.write_text(SECRET + "\n")
    os.chmod(secret, 0o600)
    backend = CpuBackend()
    results = {}
    with Workspace(parent=root / "wsparent") as ws, CompileCache(backend, root / "cache") as cache:
        base = EvalOptions(timeouts=Timeouts(run=20.0))
        small = EvalOptions(timeouts=Timeouts(run=20.0), program_memory_bytes=160 << 20, run_disk_bytes=16 << 20)
        prepared = ws.prepare(TASK, 0)
        ref_path = prepared.data_dir / "data" / "y_ref.bin"
        assert prepared.data_dir == ws.data_root / data_key(TASK, 0)
        names = ["reference", *PROGRAMS, "reference (after)"]
        for name in names:
            code = REFERENCE if name.startswith("reference") else \
                PROGRAMS[name].replace("REF", str(ref_path)).replace("SECRETFILE", str(secret))
            results[name] = evaluate_program(TASK, code, backend=backend, cache=cache, workspace=ws,
                                             options=small if name in SMALL_LIMITS else base)
        results["_runs_left"] = sorted(p.name for p in (ws.root / "runs").iterdir())
        results["_cleanup_errors"] = list(ws.cleanup_errors)
    return results


def _status(evaluated, name):
    return evaluated[name].status


@needs_bwrap
def test_reference_passes_before_and_after_every_sample_recorded(evaluated):
    assert _status(evaluated, "reference") is Status.PASSED, evaluated["reference"].detail
    assert _status(evaluated, "reference (after)") is Status.PASSED
    for name in PROGRAMS:
        assert not evaluated[name].passed, name
    assert evaluated["_runs_left"] == []
    assert evaluated["_cleanup_errors"] == []


@needs_bwrap
@pytest.mark.parametrize("name", ["incbin_semicolon", "incbin_stringified"])
def test_reference_embedded_at_compile_time_fails(evaluated, name):
    r = evaluated[name]
    assert r.status in (Status.UNSUPPORTED, Status.COMPILE_ERROR), (r.status, r.detail)
    if name == "incbin_semicolon":
        assert r.status is Status.UNSUPPORTED and (".incbin" in r.detail or ".section" in r.detail)
    else:  # past the directive check: the assembler cannot see the data cache
        assert r.status is Status.COMPILE_ERROR


@needs_bwrap
def test_root_only_file_never_reaches_the_results(evaluated):
    r = evaluated["include_secret"]
    assert r.status is Status.COMPILE_ERROR, r.detail
    assert SECRET not in r.dumps()


@needs_bwrap
def test_deep_tree_is_removed_and_the_evaluation_goes_on(evaluated):
    r = evaluated["deep_tree"]
    assert r.status is Status.WRONG and "not written" in r.detail


@needs_bwrap
@pytest.mark.parametrize("name,why", [("symlink_pagemap", "symbolic link"),
                                      ("symlink_data_dir", "data/ is a symbolic link"), ("fifo_output", "fifo")])
def test_outputs_that_are_not_regular_files_are_rejected(evaluated, name, why):
    r = evaluated[name]
    assert r.status is Status.WRONG and why in r.detail, r.detail


@needs_bwrap
def test_forged_runtime_report_is_not_believed(evaluated):
    r = evaluated["forged_diagnostic"]
    assert r.status is Status.RUNTIME_ERROR and "exit code 91" in r.detail, (r.status, r.detail)
    run = [s for s in r.steps if s.name.startswith("run[")][0]
    assert run.diagnostics == ""   # the runtime itself said nothing


@needs_bwrap
@pytest.mark.parametrize("name,status,mechanism", [("writes_10gb", Status.DISK_LIMIT, disk_quota),
                                                   ("three_children", Status.MEMORY_LIMIT, cgroup)])
def test_resource_limits_of_the_whole_program(evaluated, name, status, mechanism):
    if mechanism is disk_quota and not may_mount():   # not by disk_quota's own probe
        pytest.skip("per-run disk quotas need the right to mount (root with CAP_SYS_ADMIN)")
    if mechanism is cgroup and cgroup.unavailable():
        pytest.skip(f"no per-program cgroup here: {cgroup.unavailable()}")
    r = evaluated[name]
    assert r.status is status, (r.status, r.detail)


def test_without_cgroups_the_run_goes_on_under_rlimits_and_says_why(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(cgroup, "_layout", lambda: "no cgroup v2 hierarchy with the memory and pids controllers")
    assert cgroup.ProgramCgroup.create(1 << 30, 64) is None
    assert "no cgroup v2" in cgroup.unavailable()
    if HAVE_BWRAP:
        from cuset.execute.sandbox import SandboxPolicy, run_sandboxed, warn_once

        warn_once.cache_clear()
        step = run_sandboxed("run", ["true"], run_dir=tmp_path, timeout=20,
                             policy=SandboxPolicy(mode="bwrap", program_memory_bytes=1 << 30))
        assert step.returncode == 0 and step.limit == ""
        assert "no per-program memory limit (no cgroup v2" in caplog.text


# ------------------------------------------------------------------ compile step

@needs_bwrap
def test_include_dev_zero_stops_at_the_compile_memory_limit(tmp_path):
    backend = CpuBackend(compile_memory_bytes=512 << 20)
    outcome = backend.compile('#include "/dev/zero"\nint main() { return 0; }\n', tmp_path / "build", 60.0)
    assert outcome.status is Status.COMPILE_ERROR
    assert not outcome.step.timed_out
    assert "memory" in outcome.detail, outcome.detail


@pytest.mark.parametrize("mode", EVERY_MODE)
def test_honest_program_compiles_in_every_sandbox_mode(tmp_path, mode):
    outcome = CpuBackend(sandbox_mode=mode).compile(REFERENCE, tmp_path / "build", 120.0)
    assert outcome.ok, outcome.detail


def test_assembler_directives_are_found_in_joined_and_split_literals():
    def found(src):
        return [u.feature.split()[2] for u in find_assembler_directives(tokenize(src))]

    assert found('__asm__(".sec" "tion .rodata; r: .inc"\n "bin \\"/x\\"");') == [".section"]
    assert found('asm(".globl r\\nr: .incbin \\"/x\\"");') == [".incbin"]
    assert found('#define D ".include \\"f.s\\""\n') == [".include"]
    assert found('printf("data.section %d", 1); asm volatile("" ::: "memory");') == []


def test_compile_log_keeps_build_dir_diagnostics_only(tmp_path):
    build = tmp_path / "build"
    build.mkdir()
    (build / "kernel.cu").write_text("int main() {}\n")
    outside = tmp_path / "outside.txt"
    outside.write_text(SECRET)
    log = (f"In file included from kernel.cu:1:\n{outside}:1:1: error: '{SECRET}' does not name a type\n"
           f"    1 | {SECRET}\n      | ^~~~\nkernel.cu:3:5: error: 'x' was not declared\n    3 |     x = 1;\n"
           f"{build}/../outside.txt(2): error: {SECRET}\n{SECRET}:12: a quoted line that looks like a diagnostic\n")
    out = clean_compile_log(log, build)
    assert SECRET not in out
    assert "kernel.cu:3:5: error: 'x' was not declared" in out and "    3 |     x = 1;" in out
    assert f"{outside}:1: [diagnostic about a file outside the build dir omitted]" in out
    assert "<another file>: [diagnostic" in out


# ------------------------------------------------------------------ post-run path and cleanup

def _run_dir(tmp_path):
    run = tmp_path / "run"
    (run / "data").mkdir(parents=True)
    return run


def test_output_checks_do_not_follow_links_or_block(tmp_path):
    """A fifo would block an ordinary open forever and /dev/zero would be read without
    end: both are refused from lstat/fstat alone (checked in a thread, so a regression
    fails here instead of hanging the suite)."""
    cases = {}
    for name, make in {"fifo": lambda p: os.mkfifo(p), "zero": lambda p: os.symlink("/dev/zero", p),
                       "dir_link": None}.items():
        run = _run_dir(tmp_path / name)
        if make is None:
            shutil.rmtree(run / "data")
            os.symlink("/proc/self", run / "data")
        else:
            make(run / "data" / "y.bin")
        out = {}
        th = threading.Thread(target=lambda: out.update(problem=output_problem(TASK, run, 0, {}),
                                                        digest=outputs_digest(TASK, run)), daemon=True)
        th.start()
        th.join(10)
        assert not th.is_alive(), f"{name}: the output check did not return"
        cases[name] = out["problem"]
    assert "fifo" in cases["fifo"]
    assert "symbolic link" in cases["zero"]
    assert cases["dir_link"].startswith("data/ is a symbolic link")


def test_remove_tree_handles_deep_trees_links_and_locked_dirs(tmp_path):
    top = tmp_path / "victim"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY)
    try:
        for _ in range(3000):   # deeper than PATH_MAX and the recursion limit
            os.mkdir("a", dir_fd=fd)
            nfd = os.open("a", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nfd
    finally:
        os.close(fd)
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "f").write_text("x")
    os.symlink(keep, top / "link")
    (top / "closed").mkdir()
    (top / "closed" / "f").write_text("x")
    os.chmod(top / "closed", 0)
    assert remove_tree(top) == []
    assert not top.exists() and (keep / "f").read_text() == "x"


def test_stale_workspace_is_removed_live_one_kept(tmp_path):
    parent = tmp_path / "parent"
    code = ("import os, sys, time\nfrom cuset.evaluate.workspace import Workspace\n"
            "ws = Workspace(parent=sys.argv[1])\nprint(ws.root, flush=True)\ntime.sleep(60)\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", code, str(parent)], stdout=subprocess.PIPE, text=True, env=env)
    dead_root = Path(proc.stdout.readline().strip())
    (dead_root / "runs" / "x").mkdir()
    assert (dead_root / OWNER_LOCK).exists()
    with Workspace(parent=parent) as live:
        # The owner still lives: a new evaluation leaves its workspace alone.
        assert remove_stale_workspaces(parent) == [] and dead_root.exists()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        with Workspace(parent=parent) as other:
            assert not dead_root.exists()          # the killed evaluation's workspace is gone
            assert live.root.exists() and other.root.exists()


def test_without_mount_rights_run_dirs_have_no_quota_and_the_log_says_so(tmp_path, monkeypatch, caplog):
    from cuset.execute import sandbox

    sandbox.warn_once.cache_clear()
    monkeypatch.setattr(disk_quota, "unavailable", lambda: "not root: mounting a tmpfs per run needs CAP_SYS_ADMIN")
    with Workspace(parent=tmp_path) as ws:
        run = ws.new_run_dir(ws.prepare(TASK, 0), TASK, quota_bytes=1 << 20)
        assert not disk_quota.is_mounted(run) and (run / "data" / "x.bin").stat().st_size == 4096
        ws.discard(run)
    assert "no disk quota for run dirs (not root" in caplog.text
