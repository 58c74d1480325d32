"""The sandbox against hostile plain C programs (no GPU or CUDA needed)."""

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from cuset.execute import sandbox
from cuset.execute.sandbox import UID_BASE, SandboxPolicy, SandboxUnavailable, resolve_mode, run_sandboxed
from sandbox_tools import AUTO_MODE, EVERY_MODE, needs_a_sandbox, needs_bwrap, needs_seccomp_machine

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")


def build(tmp_path, source, name="prog"):
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    exe = tmp_path / "run" / name
    exe.parent.mkdir(exist_ok=True)
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(src)], check=True)
    return exe.parent


def run(run_dir, mode, timeout=20, **policy):
    return run_sandboxed("run", ["./prog"], run_dir=run_dir, timeout=timeout, policy=SandboxPolicy(mode=mode, **policy))


@pytest.mark.parametrize("mode", EVERY_MODE)
def test_network_is_unreachable(tmp_path, mode):
    d = build(tmp_path, r'''
#include <stdio.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
int main() {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0}; a.sin_family = AF_INET; a.sin_port = htons(53);
    inet_pton(AF_INET, "8.8.8.8", &a.sin_addr);
    int rc = connect(s, (struct sockaddr*)&a, sizeof a);
    printf("connect=%d\n", rc);
    return rc == 0 ? 0 : 7;
}''')
    r = run(d, mode)
    assert r.returncode == 7 and "connect=-1" in r.stdout


@needs_bwrap
def test_only_run_dir_is_writable_and_hidden_paths_are_empty(tmp_path):
    secret_dir = tmp_path / "secret"
    secret_dir.mkdir()
    (secret_dir / "ref.bin").write_text("reference")
    outside = tmp_path / "outside.txt"
    d = build(tmp_path, r'''
#include <stdio.h>
int main() {
    printf("ref=%d\n", fopen("SECRET/ref.bin", "r") != NULL);
    printf("outside=%d\n", fopen("OUTSIDE", "w") != NULL);
    printf("tmp=%d\n", fopen("/tmp/x", "w") != NULL);
    printf("shm=%d\n", fopen("/dev/shm/x", "w") != NULL);
    printf("here=%d\n", fopen("mine.txt", "w") != NULL);
    return 0;
}'''.replace("SECRET", str(secret_dir)).replace("OUTSIDE", str(outside)))
    r = run(d, "bwrap", hide=(str(secret_dir),))
    assert r.returncode == 0, r.stderr
    assert "ref=0" in r.stdout and "outside=0" in r.stdout and "tmp=0" in r.stdout and "shm=0" in r.stdout
    assert "here=1" in r.stdout
    assert not outside.exists()
    assert (d / "mine.txt").exists()
    assert (secret_dir / "ref.bin").read_text() == "reference"


@pytest.mark.parametrize("mode", EVERY_MODE)
@pytest.mark.timeout(120)  # a step that outlived its bomb would hang here, not pass
def test_fork_bomb_is_capped_and_killed(tmp_path, mode):
    d = build(tmp_path, r'''
#include <stdio.h>
#include <unistd.h>
int main() { for (;;) fork(); }''')
    r = run(d, mode, timeout=3, processes=32)
    assert r.timed_out, r  # ended by its timeout (the bomb never ends by itself)
    # Nothing of the bomb survives the return, without waiting: the sandbox waits for
    # its namespace to empty (bwrap) or kills the tree itself (no namespace).
    left = subprocess.run(["pgrep", "-f", str(d / "prog")], capture_output=True, text=True).stdout.split()
    left += [p for p in subprocess.run(["pgrep", "-x", "prog"], capture_output=True, text=True).stdout.split()]
    assert left == []


@pytest.mark.parametrize("mode", EVERY_MODE)
def test_cannot_kill_parent_and_harness_survives(tmp_path, mode):
    d = build(tmp_path, r'''
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
int main() {
    int a = kill(getppid(), SIGKILL);
    int b = kill(-1, SIGKILL);  /* everything we may signal: only ourselves */
    printf("survived %d %d\n", a, b);
    return 0;
}''')
    r = run(d, mode)
    assert r.returncode in (0, -9)  # killing itself via -1 is allowed
    assert os.getpid() > 0  # we are still here
    r2 = run(d, mode)  # and can run again
    assert r2.returncode in (0, -9)


@pytest.mark.parametrize("mode", EVERY_MODE)
def test_memory_limit_makes_huge_allocation_fail(tmp_path, mode):
    d = build(tmp_path, r'''
#include <stdio.h>
#include <stdlib.h>
int main() { void* p = malloc(100ULL << 30); printf("%s\n", p ? "got" : "null"); return p ? 0 : 3; }''')
    r = run(d, mode, memory_bytes=1 << 30)
    assert r.returncode == 3 and "null" in r.stdout


@pytest.mark.parametrize("mode", EVERY_MODE)
def test_cpu_time_and_file_size_limits(tmp_path, mode):
    d = build(tmp_path, r'''
#include <stdio.h>
#include <string.h>
int main(int argc, char** argv) {
    static char buf[1 << 16]; memset(buf, 'x', sizeof buf);
    FILE* f = fopen("big.bin", "wb");
    for (int i = 0; i < 1000; ++i) fwrite(buf, 1, sizeof buf, f);
    fclose(f);
    return 0;
}''')
    r = run(d, mode, file_size_bytes=1 << 20)
    assert r.returncode == -25  # SIGXFSZ
    assert (d / "big.bin").stat().st_size <= 1 << 20
    d2 = build(tmp_path, "int main() { volatile unsigned long x = 0; for (;;) x++; }", name="prog")
    r2 = run(d2, mode, timeout=30, cpu_seconds=1)
    assert r2.returncode in (-24, -9) and not r2.timed_out  # SIGXCPU (or SIGKILL at the hard limit)


@pytest.mark.parametrize("mode", EVERY_MODE)
def test_environment_is_clean(tmp_path, mode, monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    d = build(tmp_path, r'''
#include <stdio.h>
#include <stdlib.h>
int main() { printf("token=%s home=%s\n", getenv("SECRET_TOKEN") ? "set" : "unset", getenv("HOME")); return 0; }''')
    r = run_sandboxed("run", ["./prog"], run_dir=d, timeout=20, policy=SandboxPolicy(mode=mode), env={"EXTRA": "1"})
    assert "token=unset" in r.stdout
    assert f"home={d.resolve()}" in r.stdout


@pytest.mark.parametrize("mode", EVERY_MODE)
def test_a_sandboxed_program_is_told_who_it_is(tmp_path, mode, monkeypatch):
    """The throw-away uid has no passwd entry, so the sandbox names the user in $USER and $LOGNAME
    (where getpass.getuser() and other tools look first), never the host's name."""
    monkeypatch.setenv("USER", "host-user")
    d = build(tmp_path, r'''
#include <stdio.h>
#include <stdlib.h>
int main() { printf("%s %s\n", getenv("USER"), getenv("LOGNAME")); return 0; }''')
    r = run_sandboxed("run", ["./prog"], run_dir=d, timeout=20, policy=SandboxPolicy(mode=mode))
    assert r.stdout.split() == [sandbox.SANDBOX_USER] * 2


@needs_bwrap
def test_a_sandboxed_python_can_ask_who_it_is(tmp_path):
    """getpass.getuser() (torch.compile's cache directory) raised KeyError inside the sandbox on the
    throw-away uid until $USER was set (found timing KernelBench on an H200)."""
    import sys

    r = run_sandboxed("run", [sys.executable, "-I", "-c", "import getpass, os; print(getpass.getuser(), os.getuid())"],
                      run_dir=tmp_path, timeout=30, policy=SandboxPolicy(mode="bwrap"))
    assert r.returncode == 0, r.stderr[-2000:]
    user, uid = r.stdout.split()
    assert user == sandbox.SANDBOX_USER
    if os.geteuid() == 0:
        assert int(uid) >= UID_BASE


@needs_a_sandbox
def test_daemonised_child_dies_with_the_step(tmp_path):
    mode = AUTO_MODE
    marker = tmp_path / "run" / "alive"
    d = build(tmp_path, r'''
#include <stdio.h>
#include <unistd.h>
int main() {
    if (fork() == 0) { setsid(); for (int i = 0; i < 50; ++i) { FILE* f = fopen("alive", "a"); fputs("x", f); fclose(f); usleep(100000); } return 0; }
    return 0;
}''')
    r = run(d, mode)
    assert r.returncode == 0
    size = marker.stat().st_size if marker.exists() else 0
    time.sleep(0.6)
    assert (marker.stat().st_size if marker.exists() else 0) == size  # nobody writes any more


def test_bad_mode_and_missing_tools_are_clear_errors(monkeypatch):
    with pytest.raises(ValueError, match="bwrap, unshare, none"):
        resolve_mode("docker")
    import cuset.execute.sandbox as sb

    sb._probe.cache_clear()
    monkeypatch.setattr(sb.shutil, "which", lambda name: None)
    try:
        with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
            resolve_mode("auto")
    finally:
        sb._probe.cache_clear()



@needs_bwrap
def test_bubblewrap_works_where_it_is_installed(tmp_path):
    """`make` and .ci/run install bubblewrap: where it is installed cuset must find it usable,
    pick it for mode=auto, and a program in it runs in namespaces of its own, not ours."""
    sandbox._probe.cache_clear()  # a probe of its own, not one cached by an earlier test
    assert sandbox._probe("bwrap") is None
    assert resolve_mode("auto") == "bwrap"
    step = run_sandboxed("ns", ["/bin/sh", "-c", "cat /proc/sys/kernel/hostname; "
                                "readlink /proc/self/ns/net /proc/self/ns/pid; id -u"],
                         run_dir=tmp_path, timeout=30, policy=SandboxPolicy(mode="bwrap"))
    assert step.returncode == 0, step.stderr
    hostname, net, pid, uid = step.stdout.split()
    assert hostname == "sandbox"
    assert net != os.readlink("/proc/self/ns/net") and pid != os.readlink("/proc/self/ns/pid")
    assert int(uid) >= UID_BASE if os.geteuid() == 0 else int(uid) == os.geteuid()

@needs_bwrap
def test_an_interpreter_under_tmp_stays_usable_but_its_neighbours_stay_hidden(tmp_path, monkeypatch):
    """A checkout (and its .venv) under /tmp: /tmp is an empty tmpfs in the sandbox, so the
    Python installation is bound back, with traversable parents, and nothing beside it."""
    import sys

    env = tmp_path / "checkout" / ".venv"
    env.mkdir(parents=True)
    (env / "marker.txt").write_text("interpreter files\n")
    os.chmod(tmp_path, 0o755)  # as a clone's parents would be
    (tmp_path / "checkout" / "secret.txt").write_text("reference outputs\n")
    monkeypatch.setattr(sys, "prefix", str(env))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    policy = SandboxPolicy(mode="bwrap")
    seen = run_sandboxed("cat", ["/bin/cat", str(env / "marker.txt")], run_dir=run_dir, timeout=20, policy=policy)
    assert seen.returncode == 0 and seen.stdout == "interpreter files\n", seen.stderr
    hidden = run_sandboxed("cat", ["/bin/cat", str(tmp_path / "checkout" / "secret.txt")], run_dir=run_dir,
                           timeout=20, policy=policy)
    assert hidden.returncode != 0 and "No such file" in hidden.stderr


@needs_a_sandbox
def test_paths_below_a_closed_directory_stay_reachable(tmp_path):
    """A Python installation (or a readonly path) below a 0700 directory that is not the
    home dir (CI with HOME elsewhere and Python in /root/.pyenv): the throw-away sandbox uid
    could not traverse it, so the closed directory is masked and the path bound back."""
    import tempfile

    from cuset.execute.sandbox import _closed_ancestors

    closed = tmp_path / "closed"
    (closed / "python" / "include").mkdir(parents=True)
    closed.chmod(0o700)
    found = _closed_ancestors([closed / "python" / "include"])
    assert closed in found and closed / "python" not in found
    assert all(not p.stat().st_mode & 0o001 for p in found)
    # end to end where no mask covers it already (the checkout's own directory; in a clone
    # under /tmp that is masked anyway and this shows only that the path stays reachable)
    outer = Path(tempfile.mkdtemp(prefix=".closed-", dir=Path(__file__).parent))
    try:
        outer.chmod(0o700)
        include = outer / "python" / "include"
        include.mkdir(parents=True)
        (include / "Python.h").write_text("/* header */\n")
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        seen = run_sandboxed("cat", ["/bin/cat", str(include / "Python.h")], run_dir=run_dir, timeout=20,
                             policy=SandboxPolicy(mode=AUTO_MODE), readonly=(include,))
        assert seen.returncode == 0 and seen.stdout == "/* header */\n", seen.stderr
    finally:
        shutil.rmtree(outer)


# ---------------------------------------------------------------- issue 24: sockets, userns, cgroup

SOCKET_CLIENT = r'''
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
int main(int argc, char** argv) {
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {0};
    a.sun_family = AF_UNIX;
    strncpy(a.sun_path, argv[1], sizeof a.sun_path - 1);
    int rc = s < 0 ? -1 : connect(s, (struct sockaddr*)&a, sizeof a);
    if (rc == 0) write(s, "LEAK", 4);
    printf("socket=%d connect=%d\n", s >= 0, rc);
    return rc == 0 ? 0 : 7;
}'''


def _listen(path):
    import socket

    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(1)
    srv.settimeout(0.2)
    return srv


def _received(srv) -> bytes:
    import socket

    try:
        conn, _ = srv.accept()
    except socket.timeout:
        return b""
    with conn:
        conn.settimeout(0.5)
        return conn.recv(100)


@needs_bwrap
def test_host_socket_under_run_receives_nothing(tmp_path):
    import tempfile

    if not os.access("/run", os.W_OK):
        pytest.skip("/run is not writable here: cannot plant a host socket")
    d = build(tmp_path, SOCKET_CLIENT)
    sock_dir = tempfile.mkdtemp(prefix="cuset-test-", dir="/run")
    try:
        srv = _listen(os.path.join(sock_dir, "s"))
        os.chmod(sock_dir, 0o755)
        os.chmod(os.path.join(sock_dir, "s"), 0o777)
        r = run_sandboxed("run", ["./prog", os.path.join(sock_dir, "s")], run_dir=d, timeout=20,
                          policy=SandboxPolicy(mode="bwrap"))
        assert r.returncode == 7, r
        assert _received(srv) == b""
        srv.close()
    finally:
        shutil.rmtree(sock_dir, ignore_errors=True)


@needs_bwrap
@needs_seccomp_machine
def test_unix_sockets_denied_even_where_the_socket_is_visible(tmp_path):
    """A socket in a dir bound into the sandbox (as any unmasked dir would be): the
    seccomp filter refuses AF_UNIX sockets altogether."""
    from cuset.execute import seccomp

    assert seccomp.program() is not None  # x86-64 and aarch64 have a filter
    d = build(tmp_path, SOCKET_CLIENT)
    sock_dir = tmp_path / "sockets"
    sock_dir.mkdir()
    srv = _listen(sock_dir / "s")
    os.chmod(sock_dir, 0o755)
    os.chmod(sock_dir / "s", 0o777)
    r = run_sandboxed("run", ["./prog", str(sock_dir / "s")], run_dir=d, timeout=20,
                      policy=SandboxPolicy(mode="bwrap"), readonly=(sock_dir,))
    assert r.returncode == 7 and "socket=0" in r.stdout, r
    assert _received(srv) == b""
    srv.close()


@needs_bwrap
@needs_seccomp_machine
def test_gpu_sandboxes_create_unix_sockets_but_reach_no_masked_one(tmp_path):
    """GPU sandboxes allow socket(AF_UNIX) (the CUDA driver creates one at start-up), so a
    host socket is out of reach only where a mask hides it: one under /tmp stays unreachable."""
    from cuset.execute import seccomp

    assert seccomp.program() is not None  # x86-64 and aarch64 have a filter
    assert seccomp.program(allow_unix_sockets=True) != seccomp.program()
    d = build(tmp_path, SOCKET_CLIENT)
    sock_dir = tmp_path / "sockets"
    sock_dir.mkdir()
    srv = _listen(sock_dir / "s")
    os.chmod(sock_dir / "s", 0o777)
    r = run_sandboxed("run", ["./prog", str(sock_dir / "s")], run_dir=d, timeout=20,
                      policy=SandboxPolicy(mode="bwrap", gpu_devices=True))
    assert r.returncode == 7 and "socket=1 connect=-1" in r.stdout, r
    assert _received(srv) == b""
    srv.close()


@needs_bwrap
def test_no_nested_user_namespaces(tmp_path):
    d = build(tmp_path, r'''
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
int main() {
    int rc = unshare(CLONE_NEWUSER);
    printf("unshare=%d\n", rc);
    return rc == 0 ? 0 : 7;
}''')
    r = run(d, "bwrap")
    assert r.returncode == 7 and "unshare=-1" in r.stdout, r


THREE_CHILDREN = r'''
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char** argv) {
    size_t mib = (size_t)atoi(argv[1]);
    for (int i = 0; i < 3; i++) {
        if (fork() == 0) {
            volatile char* p = malloc(mib << 20);
            if (!p) return 3;
            for (size_t j = 0; j < (mib << 20); j += 4096) p[j] = 1;   /* resident: counted */
            sleep(1);
            return 0;
        }
    }
    int status, killed = 0;
    while (wait(&status) > 0)
        if (WIFSIGNALED(status)) killed++;
    printf("killed=%d\n", killed);
    return 0;
}'''


@needs_bwrap
def test_children_share_one_memory_limit(tmp_path):
    """Three children of 96 MiB each against a 160 MiB program budget (the mechanism
    of 3 x 3 GiB against 8 GiB, scaled down): each is under the per-process
    RLIMIT_AS, together they are over, and the kernel kills within the tree."""
    from cuset.execute import cgroup

    if cgroup.unavailable():
        pytest.skip(f"no per-program cgroup here: {cgroup.unavailable()}")
    d = build(tmp_path, THREE_CHILDREN)
    r = run_sandboxed("run", ["./prog", "96"], run_dir=d, timeout=30,
                      policy=SandboxPolicy(mode="bwrap", memory_bytes=1 << 30, program_memory_bytes=160 << 20))
    assert r.limit == "memory_limit", r
    assert "killed=0" not in r.stdout
    # The same program within its budget runs to the end.
    ok = run_sandboxed("run", ["./prog", "16"], run_dir=d, timeout=30,
                       policy=SandboxPolicy(mode="bwrap", memory_bytes=1 << 30, program_memory_bytes=160 << 20))
    assert ok.limit == "" and "killed=0" in ok.stdout, ok


def test_concurrent_first_cgroup_probes_agree_with_a_single_probe():
    """Evaluation threads creating their first cgroups at once must not race on the probe
    (before the fix: 28 of 30 rounds gave "File exists" and cached "unavailable" for the process)."""
    import threading

    from cuset.execute import cgroup

    cgroup._probe_layout.cache_clear()
    single = cgroup.unavailable()
    for _ in range(10):
        cgroup._probe_layout.cache_clear()
        barrier, seen = threading.Barrier(8), []

        def probe():
            barrier.wait()
            seen.append(cgroup.unavailable())

        threads = [threading.Thread(target=probe) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert seen == [single] * 8
    assert single is None or "File exists" not in single


@needs_bwrap
def test_each_program_gets_a_cpu_share_of_its_own(tmp_path):
    """Issue 37: a program's tree is one scheduling entity (its own cpu cgroup at the default
    weight), so children that call setsid() (each a new autogroup of the kernel otherwise) take
    no more CPU from honest runs. Two sandboxes at once are in two different groups."""
    from cuset.execute import cgroup

    if cgroup.cpu_unavailable():
        pytest.skip(f"no per-program cpu cgroup here: {cgroup.cpu_unavailable()}")
    policy = SandboxPolicy(mode="bwrap", program_memory_bytes=1 << 30)
    groups = []
    for _ in range(2):
        r = run_sandboxed("run", ["setsid", "cat", "/proc/self/cgroup"], run_dir=tmp_path, timeout=30, policy=policy)
        lines = dict(line.split(":", 2)[1:] for line in r.stdout.splitlines())
        # v1: the cpu hierarchy's line; v2: the one unified line (cpu enabled for the group's parent)
        groups.append(lines.get("cpu") or lines.get("cpu,cpuacct") or lines[""])
    assert all("/cuset-" in g for g in groups) and groups[0] != groups[1], groups


@needs_bwrap
@pytest.mark.parametrize("compile_step", [False, True])
def test_pid_1_shows_no_host_paths(tmp_path, compile_step):
    """Issue 37: bwrap's options (every bind and mask, with their host paths) are read from
    an fd; /proc/1/cmdline inside holds `bwrap --args N` and the program's own command."""
    from cuset.execute.sandbox import compile_policy

    hidden = tmp_path / "hidden-cache"
    hidden.mkdir()
    run = tmp_path / "run"
    run.mkdir()
    policy = compile_policy(30) if compile_step else SandboxPolicy(mode="bwrap", hide=(str(hidden),))
    r = run_sandboxed("run", ["cat", "/proc/1/cmdline"], run_dir=run, timeout=30, policy=policy,
                      readonly=(hidden,) if compile_step else ())
    args = r.stdout.split("\0")
    assert r.returncode == 0 and args[:2] == ["bwrap", "--args"], args
    assert args[3] == "--" and args[-3:] == ["cat", "/proc/1/cmdline", ""]
    assert not any(str(tmp_path) in a for a in args) and "--ro-bind" not in args, args


def test_within_agrees_with_is_relative_to_on_generated_paths():
    """sandbox._within is Path.is_relative_to without its cost (it runs a few hundred times a
    step): the same answer on random absolute paths, prefixes of one another or not."""
    import random

    from cuset.execute.sandbox import _within

    rng = random.Random(0)
    names = ["a", "ab", "b", "usr", "usr2", "lib", ".", "x y"]
    paths = [Path("/")] + [Path("/" + "/".join(rng.choice(names) for _ in range(rng.randint(1, 4))))
                           for _ in range(300)]
    pairs = [(p, q) for p in paths for q in rng.sample(paths, 20)] + [(p, p) for p in paths] + \
            [(p, p.parent) for p in paths]
    assert all(_within(p, q) == p.is_relative_to(q) for p, q in pairs)
    assert sum(_within(p, q) for p, q in pairs) > len(paths)   # prefixes do occur
