"""Run an untrusted (model-written) program: `run_sandboxed` = `run_step` plus isolation.

What it covers
--------------
- Network: none. A fresh network namespace (only a down loopback), so connect()
  fails with "network unreachable". Filesystem sockets: /run and /var/run are masked
  and (bwrap mode, x86-64/aarch64) a seccomp filter refuses socket(AF_UNIX) anywhere
  (cuset.execute.seccomp); it also refuses new user namespaces, and unprivileged
  bwrap gets --disable-userns.
- Processes: its own session/process group (run_step) AND its own PID namespace:
  when the step ends or times out, every process it started dies with it, even
  ones that called setsid() or double-forked. It cannot see or signal other
  processes: it also runs under a throw-away uid (when the harness runs as root),
  so kill(getppid()) / kill(-1) hit nothing of ours.
- rlimits (`SandboxPolicy`): CPU seconds, largest file written (RLIMIT_FSIZE),
  processes+threads (RLIMIT_NPROC; counted per uid, and each sandbox gets its own
  uid, so a fork bomb stops at the limit without starving other runs), open files,
  and address space (RLIMIT_AS; CPU backend only: CUDA maps huge ranges). No core dumps.
- Environment: rebuilt from scratch (clean_env): PATH, LANG, one BLAS thread,
  HOME/TMPDIR pointing into the run dir, USER/LOGNAME `cuset-sandbox`; no tokens, proxies or CUDA_* unless given.
- Memory of the whole process tree (`program_memory_bytes`): a cgroup with a memory
  and a pids limit (v2, else the v1 controllers; cuset.execute.cgroup); a kill by
  that limit marks the step `limit="memory_limit"`. Without usable cgroups only the
  per-process RLIMIT_AS applies (cgroup.unavailable() says why).
- Filesystem (bwrap mode): the least readable world. The root holds MINIMAL_ROOT (the
  system's programs, libraries and headers), for a run step also RUN_SYSTEM (/sys) and the
  evaluating Python installation (`interpreter_paths`), all read-only, the `readonly`
  paths and the run dir, the only writable place (owned by the sandbox uid); nothing else
  of the host exists (no tasks, generations or results files, checkouts, home, /tmp).
  Paths registered with `protect` or `hide` that lie inside what is visible are masked by
  empty tmpfs. /dev is a minimal devtmpfs (null, zero, urandom, ...) unless `gpu_devices`
  binds the host's /dev for the driver.

Compile steps (`run_compiler`, `compile_policy`) run in the same sandbox with the build
dir as their only writable place, CPU-time, memory (RLIMIT_AS and cgroup), file-size
and process limits; their logs lose whatever the compiler quoted from files outside the
build dir (cuset.execute.compile_log).

Modes: "bwrap" (bubblewrap, the full list above), "unshare" (fallback when bwrap is
missing: util-linux `unshare --net --pid --fork --mount` whose first process builds the
same world from the same options, `world_ops`, and forgets the host's root
(cuset.execute.private_root: a tmpfs root, the same binds and masks, `pivot_root`, the
same seccomp filter), then `setpriv`: network, PID namespace, uid switch, rlimits and
filesystem as above; its probe builds such a world, so a host where it cannot is refused
with the reason), "none" (rlimits and uid switch only; for debugging, never for model
output), and "auto" (bwrap, else unshare, else an error asking to install bubblewrap).

What it does not cover
----------------------
- Reading world-readable files in /usr, /sys and the Python installation: the program can
  read but never change them.
- Kernel exploits, side channels, GPU memory left over by other processes, and
  wall-clock abuse inside the timeout (that is what the timeout is for).
- Disk usage: RLIMIT_FSIZE per file here; the evaluation workspace mounts a
  size-limited tmpfs on each run dir (cuset.execute.disk_quota) where it may mount.
- GPU memory; host memory on the GPU backend only through the cgroup (no RLIMIT_AS
  with CUDA); the GPU driver (host /dev) is reachable by design there.
- Compilers reading world-readable system files (their logs are cleaned, see above).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import json
import logging
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from cuset.errors import CusetError
from cuset.execute.process import Limits, clean_env, run_step
from cuset.execute.result import StepResult

log = logging.getLogger(__name__)
MODES = ("auto", "bwrap", "unshare", "none")
# Throw-away uids for sandboxed programs: far above any real account. Each call
# takes the next one so RLIMIT_NPROC (per uid) is a per-sandbox limit.
UID_BASE = 1_500_000
UID_SPAN = 100_000
_uid_counter = itertools.count()
SANDBOX_USER = "cuset-sandbox"  # the name a sandboxed program sees in $USER and $LOGNAME


class SandboxUnavailable(CusetError, RuntimeError):
    pass


@dataclass(frozen=True)
class SandboxPolicy:
    """Limits and isolation for one untrusted step."""

    mode: str = "auto"
    cpu_seconds: int | None = 120
    file_size_bytes: int | None = 1 << 30
    processes: int | None = 64           # processes + threads of the sandbox uid
    memory_bytes: int | None = None      # RLIMIT_AS; leave None for CUDA programs
    open_files: int | None = 256
    gpu_devices: bool = False            # bind the host /dev (NVIDIA driver nodes)
    hide: tuple[str, ...] = ()           # masked by an empty tmpfs (bwrap mode)
    # Memory of the whole process tree (a cgroup; see cuset.execute.cgroup). None: no
    # such limit; where cgroups are unavailable only RLIMIT_AS (per process) applies.
    program_memory_bytes: int | None = None
    # Without bubblewrap (unshare/none modes) run as a throw-away uid when root. Compile
    # steps turn this off there (they run the trusted compilers as the evaluating user,
    # in unshare mode inside the same minimal root as under bwrap).
    drop_root_without_bwrap: bool = True
    # bwrap mode: instead of the host's whole filesystem read-only, a root holding only
    # MINIMAL_ROOT (the system's programs, libraries and headers) and the `readonly` paths:
    # what compilers need. Compile steps use it (compile_policy); nothing else of the
    # host (other users' files, checkouts, /opt, /srv, /home) exists for them.
    minimal_root: bool = False

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"sandbox mode must be one of {', '.join(MODES)}, got {self.mode!r}")


@functools.lru_cache(maxsize=None)
def _probe(mode: str) -> str | None:
    """None if `mode` works here, else why not."""
    if mode == "bwrap":
        if not shutil.which("bwrap"):
            return "bwrap not found (apt-get install bubblewrap)"
        argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
                "--unshare-net", "--unshare-pid", "--die-with-parent", "true"]
        if os.geteuid() != 0:
            argv.insert(1, "--unshare-user")
    elif mode == "unshare":
        if not shutil.which("unshare"):
            return "unshare (util-linux) not found"
        # the fallback's own world (cuset.execute.private_root) must be buildable here
        with tempfile.TemporaryDirectory(prefix="cuset-probe-") as scratch:
            policy = SandboxPolicy(mode="unshare", minimal_root=True)
            return _probe_run("unshare", _unshare_prefix(world_ops(Path(scratch).resolve(), policy, ())) + ["true"])
    else:
        return None
    return _probe_run(mode, argv)


def _probe_run(mode: str, argv: list[str]) -> str | None:
    for attempt in range(BWRAP_SETUP_ATTEMPTS):
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"{mode} failed to start: {e}"
        # a mount set-up that lost a race with another sandbox's unmount is tried again
        # (see _bwrap_setup_failed): the probe result is cached for the whole process
        if not (mode == "bwrap" and proc.returncode == 1
                and _BWRAP_SETUP_ERROR.match(proc.stderr.decode(errors="replace").lstrip())):
            break
        time.sleep(0.02 * (attempt + 1))
    if proc.returncode != 0:
        return f"{mode} cannot create namespaces here: {proc.stderr.decode(errors='replace').strip()[:200]}"
    if (os.geteuid() == 0 or mode == "unshare") and not shutil.which("setpriv"):
        return "setpriv (util-linux) not found: needed to drop root (or, without root, capabilities)"
    return None


def resolve_mode(mode: str = "auto") -> str:
    """The mode that will actually be used; raises SandboxUnavailable with the reasons."""
    if mode not in MODES:
        raise ValueError(f"sandbox mode must be one of {', '.join(MODES)}, got {mode!r}")
    candidates = ("bwrap", "unshare") if mode == "auto" else (mode,)
    reasons = []
    for m in candidates:
        why = _probe(m)
        if why is None:
            return m
        reasons.append(why)
    raise SandboxUnavailable(
        "no sandbox for untrusted programs: " + "; ".join(reasons)
        + ". Install bubblewrap (`apt-get install bubblewrap`) or util-linux, "
          "or set execution.sandbox.mode=none to run unisolated (never for model output).")


def _next_uid() -> int:
    return UID_BASE + (os.getpid() * 997 + next(_uid_counter)) % UID_SPAN


def _give_to(path: Path, uid: int) -> None:
    """Make the run dir (and what is in it) belong to the sandbox uid."""
    for root, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            os.lchown(os.path.join(root, name), uid, uid)
    os.chown(path, uid, uid)
    os.chmod(path, 0o700)


def _drop_root(uid: int) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs", "--"]


# Shared scratch directories: each is an empty tmpfs in the sandbox (bwrap mode).
SCRATCH_DIRS = (Path("/tmp"), Path("/var/tmp"))
# Where host services keep their Unix sockets (D-Bus, databases, Docker): masked too.
SOCKET_DIRS = (Path("/run"), Path("/var/run"))
# Paths hidden from every sandbox of this process (evaluation workspaces and their
# data caches register here, wherever they live): see `protect`.
_protected: dict[str, None] = {}


def protect(*paths: str | Path) -> None:
    """Hide `paths` from every sandboxed step of this process from now on (the data
    cache with gen.py's references, workspaces): compile and run steps alike."""
    for p in paths:
        _protected[str(Path(p).resolve())] = None


def _home() -> Path | None:
    home = Path(os.path.expanduser("~")).resolve()
    return home if home != Path("/") and home.is_dir() else None


def _closed_ancestors(paths) -> list[Path]:
    """Ancestors of `paths` that others may not traverse (no search bit, e.g. a 0700 /root
    holding the Python installation while HOME points elsewhere): the sandbox uid could
    not reach what lies below, so they are masked like the home dir and the paths bound
    back through traversable parents."""
    closed: list[Path] = []
    for p in paths:
        for parent in Path(p).resolve().parents:
            try:
                if parent != Path("/") and not parent.stat().st_mode & 0o001:
                    closed.append(parent)
            except OSError:
                continue
    return closed


def masked_dirs(policy: "SandboxPolicy", visible: tuple = (), inside: tuple | None = None) -> list[Path]:
    """Every directory replaced by an empty tmpfs, parents before children. `visible`:
    paths bound back into the sandbox (they and the interpreter must stay reachable);
    `inside`: only the masks strictly inside one of these paths (what the root shows), chosen
    before a mask hides its children (a hidden dir below /tmp, itself no mask of a minimal
    root, inside a path bound from there, is masked)."""
    found: dict[Path, None] = {}
    reachable = (sys.prefix, sys.base_prefix, sys.exec_prefix, *visible)
    for p in (*SCRATCH_DIRS, *SOCKET_DIRS, _home(), *_protected, *policy.hide, *_closed_ancestors(reachable)):
        if p is None:
            continue
        path = Path(p).resolve()
        if path.is_dir() and path != Path("/"):
            found[path] = None
    masks: list[Path] = []
    if inside is not None:
        found = {p: None for p in found if any(_within(p, v) and p != v for v in inside)}
    for path in sorted(found, key=lambda q: len(q.parts)):
        if not any(_within(path, m) for m in masks):  # already hidden by an empty parent
            masks.append(path)
    return masks


@functools.lru_cache(maxsize=1)
def _bwrap_has(option: str) -> bool:
    try:
        out = subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option in out.stdout + out.stderr


# The root of a `minimal_root` sandbox: the system's programs, libraries and headers
# (/usr: compilers, binutils, libc and libstdc++ headers, the CUDA toolkit under
# /usr/local), the top-level links or dirs that point into it, and the dynamic
# loader's configuration. Each is bound read-only where the host has it.
MINIMAL_ROOT = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
                "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives")
_MINIMAL_ROOT_PATHS = tuple(Path(p) for p in MINIMAL_ROOT)


def _within(path: Path, root: Path) -> bool:
    """`path.is_relative_to(root)` for absolute paths, without its cost: building a sandbox's
    world asks it a few hundred times, once per run step."""
    return path.parts[:len(root.parts)] == root.parts


# What a run step sees besides MINIMAL_ROOT, its run dir and its `readonly` paths: the
# kernel's view of the machine (/sys, read-only: torch's cpuinfo and the GPU driver read
# it) and the evaluating interpreter's installation (`interpreter_paths`). Nothing else of
# the host: no checkout, no generations file, no results being written, no home.
RUN_SYSTEM = ("/sys",)


def interpreter_paths() -> tuple[Path, ...]:
    """The evaluating Python installation as a sandboxed harness or gen.py reaches it: its
    prefixes and the directory of sys.executable, each as named (a venv reached through a
    link) and resolved, where it lies outside MINIMAL_ROOT."""
    found: dict[Path, None] = {}
    for name in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, Path(sys.executable).parent):
        for path in (Path(os.path.abspath(name)), Path(name).resolve()):
            if path != Path("/") and not any(_within(path, r) for r in _MINIMAL_ROOT_PATHS):
                found[path] = None
    return tuple(found)


def _outermost(paths) -> list[Path]:
    """`paths` without those lying inside another one (bound once, with what is below)."""
    unique = sorted(set(paths), key=lambda p: len(p.parts))
    kept: list[Path] = []
    for path in unique:
        if not any(_within(path, k) for k in kept):
            kept.append(path)
    return kept


def _minimal_root_binds(extra: tuple[str, ...] = ()) -> tuple[list[str], list[Path]]:
    """bwrap arguments building the minimal root (and the `extra` system paths), and the
    paths it makes visible."""
    argv: list[str] = []
    visible: list[Path] = []
    made: set[Path] = set()
    for name in (*MINIMAL_ROOT, *extra):
        path = Path(name)
        argv += _new_parents(path, [], made)   # /etc itself 0755 (bwrap would make it 0700)
        if path.is_symlink():   # /bin -> usr/bin on merged-/usr systems: the same link inside
            argv += ["--symlink", os.readlink(path), name]
        elif path.exists():
            argv += ["--ro-bind", name, name]
            visible.append(path)
    return argv, visible


def _new_parents(path: Path, present: list[Path], made: set[Path]) -> list[str]:
    """bwrap arguments creating the parents of `path` that a minimal root lacks, each 0755
    (traversable by the sandbox uid) and empty but for what is bound below it."""
    argv: list[str] = []
    for parent in reversed(path.parents):
        if parent == Path("/") or parent in made or any(_within(parent, p) for p in present):
            continue
        made.add(parent)
        argv += ["--perms", "0755", "--dir", str(parent)]
    return argv


def _bwrap_root(policy: SandboxPolicy, readonly: tuple[Path, ...], run_dir: Path) -> tuple[list[str], list[Path]]:
    """The root filesystem: MINIMAL_ROOT (and RUN_SYSTEM for a run step) with the readonly
    paths, and the masks that fall inside what is visible."""
    argv, present = _minimal_root_binds(() if policy.minimal_root else RUN_SYSTEM)
    return argv, masked_dirs(policy, (*readonly, run_dir), inside=(*present, *readonly))


def _visible_paths(policy: SandboxPolicy, readonly: tuple[Path, ...]) -> tuple[Path, ...]:
    """What a step sees besides its root and run dir: its `readonly` paths, and for a run
    step the evaluating interpreter (and on the GPU a CUDA toolkit outside /usr, for
    load_inline's nvcc)."""
    if policy.minimal_root:
        return tuple(readonly)
    extra = interpreter_paths()
    if policy.gpu_devices:
        extra += _toolchain_outside_root("nvcc")
    return tuple(_outermost((*readonly, *extra)))


def world_ops(run_dir: Path, policy: SandboxPolicy, readonly: tuple[Path, ...]) -> list[str]:
    """The step's filesystem as bwrap options: the root (MINIMAL_ROOT, for a run step also
    RUN_SYSTEM and the interpreter), /dev, /proc, an empty /tmp, the `readonly` paths, the
    masks inside them and the run dir, the step's cwd. bwrap takes them as they are; the
    unshare fallback builds the same world from them (cuset.execute.private_root)."""
    readonly = _visible_paths(policy, readonly)
    root, masks = _bwrap_root(policy, readonly, run_dir)
    argv = list(root)
    argv += ["--dev-bind", "/dev", "/dev", "--tmpfs", "/dev/shm"] if policy.gpu_devices else ["--dev", "/dev"]
    argv += ["--proc", "/proc"]
    # nothing else of the host: the read-only paths and the run dir on new parents
    present, made = [Path(p) for p in (*MINIMAL_ROOT, *RUN_SYSTEM) if Path(p).exists()], set()
    argv += ["--tmpfs", "/tmp"]
    for path in sorted(readonly, key=lambda p: len(p.parts)):
        argv += _new_parents(path, present, made) + ["--ro-bind", str(path), str(path)]
    for masked in masks:   # a protected path inside what is visible (after the binds: on top of them)
        argv += ["--tmpfs", str(masked)]
    argv += _new_parents(run_dir, present, made)
    return argv + ["--bind", str(run_dir), str(run_dir), "--chdir", str(run_dir)]


def _bwrap_prefix(run_dir: Path, policy: SandboxPolicy, readonly: tuple[Path, ...],
                  seccomp_fd: int | None = None) -> list[str]:
    argv = ["bwrap", *world_ops(run_dir, policy, readonly)]
    argv += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", "sandbox",
             "--die-with-parent", "--new-session"]
    if os.geteuid() != 0:
        argv.append("--unshare-user")
        if _bwrap_has("--disable-userns"):
            argv.append("--disable-userns")
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    return argv + ["--"]


def run_sandboxed(
    name: str,
    argv: list[str],
    *,
    run_dir: str | Path,
    timeout: float,
    policy: SandboxPolicy = SandboxPolicy(),
    env: dict[str, str] | None = None,
    readonly: tuple[str | Path, ...] = (),
    pass_fds: tuple[int, ...] = (),
) -> StepResult:
    """Run `argv` with cwd `run_dir` inside the sandbox; the only writable place is `run_dir`.

    Relative argv[0] is resolved against run_dir. `readonly` paths (files or
    dirs, e.g. the compiled executable) stay visible even under hidden paths.
    """
    run_dir = Path(run_dir).resolve()
    mode = resolve_mode(policy.mode)
    is_root = os.geteuid() == 0
    uid = _next_uid() if is_root and (mode == "bwrap" or policy.drop_root_without_bwrap) else None
    if uid is not None:
        _give_to(run_dir, uid)
    # USER/LOGNAME: the throw-away uid has no passwd entry, and getpass.getuser() (torch.compile's
    # cache directory, among others) reads these before it asks getpwuid, which would raise
    full_env = clean_env({"HOME": str(run_dir), "TMPDIR": str(run_dir), "USER": SANDBOX_USER, "LOGNAME": SANDBOX_USER,
                          **(env or {})})
    launch = _Launch(name, tuple(argv), run_dir, timeout, full_env, tuple(readonly), tuple(pass_fds))
    for attempt in range(BWRAP_SETUP_ATTEMPTS):
        step = _run_sandboxed_once(launch, policy, mode, uid)
        if mode != "bwrap" or not _bwrap_setup_failed(step):
            break
        # bwrap died before starting the program: the host's mount table changed under
        # its set-up (see _bwrap_setup_failed). Nothing ran; start it again.
        log.debug("sandbox: bwrap set-up failed (%s), attempt %d", step.stderr.strip()[:200], attempt + 1)
        time.sleep(0.02 * (attempt + 1))
    return _signal_from_wrapper(step) if mode in ("bwrap", "unshare") else step


BWRAP_SETUP_ATTEMPTS = 5
WRAPPER_PROCESSES = 4
_BWRAP_SETUP_ERROR = re.compile(r"bwrap: (Can't|Failed to|Unable to) [^\n]*mount")


def _bwrap_setup_failed(step: StepResult) -> bool:
    """bwrap reports a failed set-up as one "bwrap: ..." line and exit status 1 before the
    program starts. The mount ones are transient: bwrap binds / recursively and then
    remounts every mount it listed, which fails when another process unmounts one in
    between (bubblewrap issue #650). A program printing the same line is merely run again."""
    return (step.returncode == 1 and not step.timed_out and not step.stdout
            and _BWRAP_SETUP_ERROR.match(step.stderr.lstrip()) is not None
            and step.stderr.strip().count("\n") == 0)


@dataclass(frozen=True)
class _Launch:
    """One program to run sandboxed (run_sandboxed's arguments, its environment made whole)."""

    name: str
    argv: tuple[str, ...]
    run_dir: Path
    timeout: float
    env: dict[str, str]
    readonly: tuple[str | Path, ...]
    pass_fds: tuple[int, ...]


def _run_sandboxed_once(launch: _Launch, policy: SandboxPolicy, mode: str, uid: int | None) -> StepResult:
    """One attempt at `launch` in sandbox `mode`, as `uid` (None: this process's own)."""
    run_dir, readonly = launch.run_dir, launch.readonly
    is_root = os.geteuid() == 0
    with contextlib.ExitStack() as stack:
        fds = launch.pass_fds
        prefix: list[str] = []
        if mode == "bwrap":
            seccomp_fd = _seccomp_fd(stack, allow_unix_sockets=policy.gpu_devices)
            fds += (seccomp_fd,) if seccomp_fd is not None else ()
            prefix = _bwrap_prefix(run_dir, policy, tuple(Path(p).resolve() for p in readonly), seccomp_fd)
        elif mode == "unshare":
            seccomp_fd = _seccomp_fd(stack, allow_unix_sockets=policy.gpu_devices)
            fds += (seccomp_fd,) if seccomp_fd is not None else ()
            ops = world_ops(run_dir, policy, tuple(Path(p).resolve() for p in readonly))
            prefix = _unshare_prefix(ops + (["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []))
        if uid is not None:
            prefix += _drop_root(uid)
        elif mode == "unshare" and not is_root:
            prefix += _DROP_CAPABILITIES   # the mapped root must not undo the world's mounts
        if mode == "unshare":
            # The first process of a PID namespace ignores signals it has no handler
            # for (SIGXFSZ, SIGXCPU, kill from inside): keep the program off PID 1.
            prefix += ["/bin/sh", "-c", '"$@"; exit $?', "sandbox-init"]
        limits = Limits(
            cpu_seconds=policy.cpu_seconds, address_space_bytes=policy.memory_bytes,
            file_size_bytes=policy.file_size_bytes, processes=_process_limit(policy.processes, uid),
            open_files=policy.open_files,
        )
        group = None
        if policy.program_memory_bytes is not None or policy.processes is not None:
            from cuset.execute.cgroup import ProgramCgroup

            # The group also holds what the program leaves behind: closing it kills and
            # waits for every process of the run, whatever sessions or namespaces they
            # made (bwrap's namespace is drained by _SandboxInit as well). The wrappers
            # (bwrap, unshare, sh) are members too: a few pids more than the program's.
            pids = None if policy.processes is None else policy.processes + WRAPPER_PROCESSES
            group = ProgramCgroup.create(policy.program_memory_bytes, pids)
            if group is not None:
                stack.callback(group.close)
            elif policy.program_memory_bytes is not None:
                from cuset.execute.cgroup import unavailable

                warn_once(f"no per-program memory limit ({unavailable()}): only RLIMIT_AS per process applies")
        command = prefix + list(launch.argv)
        init = None
        if mode == "bwrap":
            init = stack.enter_context(_SandboxInit())
            command.insert(command.index("--"), "--info-fd")
            command.insert(command.index("--"), str(init.write_fd))
            command, args_fd = _args_from_fd(stack, command)
            fds += (args_fd, init.write_fd)
        step = run_step(launch.name, command, cwd=run_dir, timeout=launch.timeout, env=launch.env,
                        limits=limits, pass_fds=fds,
                        join=group.procs_files if group is not None else ())
        if init is not None:
            init.wait_until_gone()
        if group is not None and group.oom_kills() > 0:
            step = dataclasses.replace(step, limit="memory_limit")
    return step


def _unshare_prefix(ops: list[str]) -> list[str]:
    """The unshare fallback: new network, PID and mount namespaces (a user namespace too when
    not root), whose first process builds the world `ops` describe and forgets the host's
    root (cuset.execute.private_root) before the step's command runs."""
    from cuset.execute import private_root

    prefix = ["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        prefix.insert(1, "--map-root-user")
    return prefix + ["--", sys.executable, "-I", "-S", private_root.__file__, os.readlink("/proc/self/ns/mnt"),
                     json.dumps(ops), "--"]


# Without root the program runs as the mapped root of its user namespace: with no
# capabilities left (none kept across exec), it cannot remount or unmount what hides the host.
_DROP_CAPABILITIES = ["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


class _SandboxInit:
    """The sandbox's first process, as bwrap names it on `--info-fd` ({"child-pid": N}).

    run_step returns when the outer bwrap has exited and its process group is killed;
    the programs inside the PID namespace die when its first process does (bwrap's
    --die-with-parent), which the kernel finishes asynchronously, up to about a second
    later under load. Until then a killed fork bomb still holds its processes (and the
    CPU). The kernel kills and reaps every member of a namespace before its first
    process turns zombie, so waiting for that process means nothing of the run is left."""

    WAIT_SECONDS = 10.0

    def __enter__(self) -> "_SandboxInit":
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        return self

    def __exit__(self, *exc) -> None:
        for fd in (self.read_fd, self.write_fd):
            if fd is not None:
                os.close(fd)
        self.read_fd = self.write_fd = None

    def _child_pid(self) -> int | None:
        os.close(self.write_fd)     # bwrap holds its own copy; ours would keep the pipe open
        self.write_fd = None
        try:
            info = os.read(self.read_fd, 4096)
        except BlockingIOError:     # bwrap died before it started anything
            return None
        try:
            pid = json.loads(info.decode("utf-8", "replace").split("}", 1)[0] + "}").get("child-pid")
        except (ValueError, AttributeError):
            return None
        return pid if isinstance(pid, int) and pid > 1 else None

    def wait_until_gone(self) -> None:
        pid = self._child_pid()
        if pid is None:
            return
        own_namespace = os.readlink("/proc/self/ns/pid")
        deadline = time.monotonic() + self.WAIT_SECONDS
        while time.monotonic() < deadline:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                namespace = os.readlink(f"/proc/{pid}/ns/pid")
            except (OSError, IndexError):
                return              # reaped
            # a zombie has finished its namespace; a pid in our own namespace is a new
            # process that reused the number
            if state in ("Z", "X") or namespace == own_namespace:
                return
            time.sleep(0.01)
        warn_once(f"sandbox: the namespace of process {pid} outlived its run by {self.WAIT_SECONDS:.0f} s")


def _args_from_fd(stack: contextlib.ExitStack, command: list[str]) -> tuple[list[str], int]:
    """`bwrap --args FD`: bwrap's options read from an anonymous file, so the sandbox's PID 1
    (bwrap) shows `bwrap --args N -- <the program's command>` in /proc/1/cmdline, not the
    host paths it binds and masks (caches, workspaces, the home dir). The command itself stays
    on the command line (bwrap takes it from there only)."""
    end = command.index("--")
    fh = stack.enter_context(tempfile.TemporaryFile())
    fh.write(b"".join(os.fsencode(a) + b"\0" for a in command[1:end]))
    fh.flush()
    fh.seek(0)
    return [command[0], "--args", str(fh.fileno()), *command[end:]], fh.fileno()


@functools.lru_cache(maxsize=None)
def warn_once(message: str) -> None:
    """A limit asked for but not available here: said once per process, on the log."""
    log.warning("sandbox: %s", message)


def _seccomp_fd(stack: contextlib.ExitStack, allow_unix_sockets: bool = False) -> int | None:
    """An fd holding the compiled seccomp filter for bwrap (None where none exists
    for this machine); closed when `stack` closes. GPU sandboxes allow AF_UNIX sockets:
    the CUDA driver needs one (cuset.execute.seccomp)."""
    from cuset.execute import seccomp

    prog = seccomp.program(allow_unix_sockets=allow_unix_sockets)
    if prog is None:
        warn_once(f"no seccomp filter for {platform.machine()}: AF_UNIX sockets outside the masked dirs "
                  "and nested user namespaces stay possible")
        return None
    fh = stack.enter_context(tempfile.TemporaryFile())
    fh.write(prog)
    fh.flush()
    fh.seek(0)
    return fh.fileno()


def _signal_from_wrapper(step: StepResult) -> StepResult:
    """bwrap (and our shell init in unshare mode) report a child killed by signal N as 128+N; give it back the
    negative code run_step uses for signals, so SIGXCPU/SIGXFSZ/SIGSEGV read the same
    in every mode. (A program calling exit(128+N) itself is misread; none has reason to.)"""
    rc = step.returncode
    if rc is not None and 128 < rc < 128 + 65:
        return dataclasses.replace(step, returncode=128 - rc)
    return step


def _process_limit(limit: int | None, uid: int | None) -> int | None:
    """RLIMIT_NPROC counts every process of the real uid. With our own uid that is
    the sandbox alone; without root, add what the user already runs."""
    if limit is None or uid is not None:
        return limit
    me = os.getuid()
    count = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.stat(f"/proc/{pid}").st_uid == me:
                    count += len(os.listdir(f"/proc/{pid}/task"))
            except OSError:
                pass
    return count + limit


# Limits of a compile step. The compilers are trusted, their input is not:
# `#include "/dev/zero"` or `.incbin` of a huge file must stop at these.
COMPILE_MEMORY_BYTES = 4 << 30        # g++/cc1plus/as together (cgroup) and each (RLIMIT_AS)
NVCC_MEMORY_BYTES = 16 << 30          # nvcc reserves more address space (cicc, ptxas)
COMPILE_FILE_BYTES = 512 << 20        # largest object or executable


def compile_policy(timeout: float, mode: str = "auto", memory_bytes: int = COMPILE_MEMORY_BYTES) -> SandboxPolicy:
    """The sandbox of a compile step: the run step's isolation (read-only root, only
    the build dir writable, home, temp dirs, sockets and every protected path hidden,
    no network) with CPU-time, memory, file-size and process limits."""
    return SandboxPolicy(mode=mode, cpu_seconds=int(timeout) + 5, file_size_bytes=COMPILE_FILE_BYTES,
                         processes=64, memory_bytes=memory_bytes, open_files=1024,
                         program_memory_bytes=memory_bytes, drop_root_without_bwrap=False, minimal_root=True)


def _toolchain_outside_root(compiler: str) -> tuple[Path, ...]:
    """The installation of a compiler living outside MINIMAL_ROOT (a conda or module g++ or
    nvcc): the prefix above its bin/ dir, bound read-only into a minimal root."""
    found = shutil.which(compiler, path=clean_env().get("PATH")) if os.sep not in compiler else compiler
    if not found:
        return ()
    prefixes = []
    for path in {Path(found).absolute(), Path(found).resolve()}:
        if not any(_within(path, r) for r in _MINIMAL_ROOT_PATHS):
            prefixes.append(path.parent.parent if path.parent.name == "bin" else path.parent)
    return tuple(dict.fromkeys(prefixes))


def run_compiler(argv: list[str], *, build_dir: Path, timeout: float, policy: SandboxPolicy,
                 readonly: tuple[Path, ...] = ()) -> StepResult:
    """One compiler command over untrusted source inside the compile sandbox;
    `readonly` (prebuilt headers, runtime library) stays visible even under masked dirs.
    Its log is cleaned of text quoted from files outside the build dir."""
    from cuset.execute.compile_log import clean_compile_log

    readonly = (*readonly, *_toolchain_outside_root(argv[0])) if policy.minimal_root else readonly
    step = run_sandboxed("compile", argv, run_dir=build_dir, timeout=timeout, policy=policy, readonly=readonly)
    return dataclasses.replace(step, stdout=clean_compile_log(step.stdout, build_dir, readonly),
                               stderr=clean_compile_log(step.stderr, build_dir, readonly))
