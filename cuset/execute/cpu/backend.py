"""The `cpu` execution backend: CUDA programs compiled with g++ against the
cuset CPU runtime and run as ordinary processes.

compile(): rewrite the source (launches, shared memory, checked volatile
pointers), refuse features the CPU cannot run (status `unsupported`), then
g++ with the prebuilt runtime. invocation(): the executable plus the thread
order (`forward`, `random:<seed>`, or `parallel:<seed>` with blocks on
`workers` OS threads) in the environment. classify_failure():
the runtime's own reports (deadlocks, launch errors, warp-synchronous code,
unsupported features at run time).
"""

from __future__ import annotations

import dataclasses
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from cuset.config import ConfigError
from cuset.execute.interface import CompileOutcome, Invocation
from cuset.execute.cpu.diagnostics import classify_run, order_proof_result, summarize_compile_errors
from cuset.execute.cpu import block_loop, code_hash, order_proof, rewrite_worker
from cuset.execute.cpu.toolchain import INCLUDE_DIR, Toolchain, ToolchainError
from cuset.execute.result import Status, StepResult
from cuset.execute.sandbox import COMPILE_MEMORY_BYTES, compile_policy, run_compiler



def default_max_data_bytes() -> int:
    """A quarter of physical memory: a task's inputs and outputs live on the
    host and again in device memory, next to other runs in parallel."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4
    except (ValueError, OSError, AttributeError):  # no sysconf names on this platform
        return 256 << 20


DEFAULT_MAX_DATA_BYTES = default_max_data_bytes()
SOURCE_NAME = "kernel.cu"
REWRITTEN_NAME = "cuset_kernel.cpp"
EXECUTABLE_NAME = "kernel"
ASAN_EXIT_CODE = 93
DIAG_FD_ENV = "CUSET_CPU_DIAG_FD"        # runtime/src/diag.cpp


@dataclass(frozen=True)
class CpuBackendOptions:
    seed: int = 1                        # seed of the random thread order
    max_data_bytes: int | None = DEFAULT_MAX_DATA_BYTES
    cxx: str = "g++"
    cache_dir: Path | None = None        # where the prebuilt runtime lives
    asan: bool = False                   # AddressSanitizer build (out-of-bounds accesses)
    check_host_access: bool = True       # host code touching device memory faults (forward order)
    stack_kb: int = 256                  # stack per CUDA thread
    race_check: bool = False             # instrument programs: report data races between threads
    sandbox_mode: str = "auto"           # sandbox of the compile step (see cuset.execute.sandbox)
    compile_memory_bytes: int = COMPILE_MEMORY_BYTES  # g++ and its children together
    workers: int = 1                     # OS threads running blocks concurrently (parallel order)
    poison_device_memory: bool = False   # new cudaMalloc blocks hold NaN / INT_MAX words instead of GPU-like contents
    block_loops: bool = True             # kernels that need no fiber run as loops over a block's threads (block_loop.py)
    skip_independent_orders: bool = True  # skip the other orders when the forward run proves every launch order-independent


class CpuBackend:
    """Runs CUDA programs on the CPU. See the module docstring."""

    name = "cpu"

    def __init__(self, seed: int = 1, max_data_bytes: int | None = DEFAULT_MAX_DATA_BYTES, cxx: str = "g++",
                 cache_dir: str | Path | None = None, asan: bool = False, check_host_access: bool = True,
                 stack_kb: int = 256, race_check: bool = False, sandbox_mode: str = "auto",
                 compile_memory_bytes: int = COMPILE_MEMORY_BYTES, workers: int | None = None,
                 poison_device_memory: bool = False, block_loops: bool = True,
                 skip_independent_orders: bool = True):
        if stack_kb < 16:
            raise ConfigError([f"stack_kb={stack_kb}: a CUDA thread needs at least 16 KiB of stack"], "the CPU backend's options")
        workers = default_workers() if workers is None else workers
        if not isinstance(workers, int) or workers < 1:
            raise ConfigError([f"workers={workers!r}: the number of OS threads running blocks must be an integer >= 1"],
                              "the CPU backend's options")
        if workers > 1 and (asan or race_check):
            workers = 1  # the sanitizer builds run blocks on one OS thread (runtime: per-process bookkeeping)
        self.options = CpuBackendOptions(seed, max_data_bytes, cxx, Path(cache_dir) if cache_dir else None, asan,
                                         check_host_access, stack_kb, race_check, sandbox_mode,
                                         compile_memory_bytes, workers, bool(poison_device_memory),
                                         bool(block_loops), bool(skip_independent_orders))
        self.toolchain = Toolchain(cxx=cxx, asan=asan, race_check=race_check, cache_dir=self.options.cache_dir)
        # forward and random run blocks one at a time (reproducible); parallel
        # runs them concurrently, so races between blocks change the outputs.
        self.run_orders: tuple[str, ...] = ("forward", f"random:{seed}") + (
            (f"parallel:{seed}",) if workers > 1 else ())
        self.max_data_bytes = max_data_bytes

    def fingerprint(self) -> str:
        """The compile cache's key beside the source: the toolchain's, and a hash of every
        file that decides what a program compiles into (code_hash.compile_hash: the
        rewriter, planners, runtime...), so no edit can serve a binary older code built.
        Instrumented and plain builds differ: the option is part of the key."""
        proofs = "-p" if self.options.skip_independent_orders else ""
        return f"cpu-{self.toolchain.fingerprint()}-c{code_hash.compile_hash()}{proofs}"

    # ------------------------------------------------------------ compile
    def compile(self, source: str, workdir: Path, timeout: float) -> CompileOutcome:
        workdir = Path(workdir).resolve()  # the compiler runs with cwd=workdir
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / SOURCE_NAME).write_text(source)
        try:   # in a worker under the compile timeout: pathological sources make the rewriter slow
            [(rewritten, unsupported)] = rewrite_worker.analyse(
                [source], timeout, block_loops=True, order_proofs=self.options.skip_independent_orders)
        except (rewrite_worker.RewriteTimeout, rewrite_worker.RewriteFailed) as e:
            step = StepResult("compile", None, 0.0, isinstance(e, rewrite_worker.RewriteTimeout), "", str(e))
            return CompileOutcome(False, None, step, Status.COMPILE_ERROR, str(e))
        if unsupported:
            detail = "uses " + "; ".join(u.describe() for u in unsupported)
            step = StepResult("compile", None, 0.0, False, "", detail)
            return CompileOutcome(False, None, step, Status.UNSUPPORTED, detail)
        try:
            runtime = self.toolchain.ensure_runtime()
        except ToolchainError as e:
            step = StepResult("compile", None, 0.0, False, "", str(e))
            return CompileOutcome(False, None, step, Status.COMPILE_ERROR, f"CPU toolchain unavailable: {e}")
        exe = workdir / EXECUTABLE_NAME
        step = self._build(runtime, rewritten.source, workdir, exe, timeout)
        if rewritten.fallback_source and step.returncode != 0 and not step.timed_out and not step.limit:
            # A block-loop variant g++ refuses (it should not happen): build without them,
            # so the program's own errors, or none, decide.
            step = self._build(runtime, rewritten.fallback_source, workdir, exe, timeout)
            paths = ("cuset-cpu: kernel paths: all fibers, no order proofs (the block-loop variants or the "
                     "order proofs' checked pointers did not compile)")
        else:
            paths = block_loop.summary(list(rewritten.kernel_plans)) if self.options.block_loops else ""
            proofs = order_proof.summary(list(rewritten.proof_plans))
            paths = "\n".join(line for line in (paths, proofs) if line)
        if paths:  # the run record keeps the compile step: which path each kernel takes
            step = dataclasses.replace(step, stdout=(step.stdout + "\n" + paths).lstrip("\n"))
        if step.timed_out:
            return CompileOutcome(False, None, step, Status.COMPILE_ERROR, f"g++ timed out after {timeout:.0f} s")
        if step.limit == "memory_limit" or step.returncode in (-9, -24, -25):
            policy = compile_policy(timeout, self.options.sandbox_mode, self.options.compile_memory_bytes)
            why = {"memory_limit": f"more than {policy.memory_bytes >> 20} MiB of memory", -9: "killed",
                   -24: f"more than {policy.cpu_seconds} s of CPU time",
                   -25: f"a file larger than {policy.file_size_bytes >> 20} MiB"}
            return CompileOutcome(False, None, step, Status.COMPILE_ERROR,
                                  f"the compiler exceeded its limits: {why[step.limit or step.returncode]}")
        if step.returncode != 0 or not exe.is_file():
            errors = summarize_compile_errors(step.stderr, SOURCE_NAME)
            if rewritten.dropped_includes:  # something of the library is used in a way we did not recognise
                return CompileOutcome(False, None, step, Status.UNSUPPORTED,
                                      f"includes {', '.join(rewritten.dropped_includes)}, not provided on the CPU, "
                                      f"and does not build without it: {errors}")
            return CompileOutcome(False, None, step, Status.COMPILE_ERROR, errors)
        return CompileOutcome(True, exe, step)

    def _build(self, runtime: Path, source: str, workdir: Path, exe: Path, timeout: float) -> StepResult:
        # `#line` keeps diagnostics on the user's file and line numbers.
        (workdir / REWRITTEN_NAME).write_text(f'#line 1 "{SOURCE_NAME}"\n' + source)
        step = None
        # The source is untrusted: g++ (and as, ld) run in the compile sandbox, seeing
        # the prebuilt runtime read-only and nothing of the data caches.
        policy = compile_policy(timeout, self.options.sandbox_mode, self.options.compile_memory_bytes)
        for argv in self.toolchain.compile_commands(runtime, workdir / REWRITTEN_NAME, exe):
            step = _merge(step, run_compiler(argv, build_dir=workdir, timeout=timeout, policy=policy,
                                             readonly=(runtime, INCLUDE_DIR)))
            if step.returncode != 0 or step.timed_out:
                break
        return step

    # ------------------------------------------------------------ run
    def invocation(self, executable: Path, order: str) -> Invocation:
        if order not in self.run_orders and not (order == "forward" or order.startswith(("random:", "parallel:"))):
            raise ConfigError([f"unknown thread order {order!r}: use one of {self.run_orders}"], "the CPU backend's options")
        env = {"CUSET_CPU_ORDER": order, "CUSET_CPU_STACK_KB": str(self.options.stack_kb),
               "CUSET_CPU_WORKERS": str(self.options.workers)}
        # The access check costs an mprotect per launch and copy: one order is enough.
        if self.options.check_host_access and order == "forward":
            env["CUSET_CPU_CHECK_HOST_ACCESS"] = "1"
        if self.options.poison_device_memory:
            env["CUSET_CPU_POISON_DEVICE"] = "1"
        if not self.options.block_loops:  # the same executable, every kernel on the fiber path
            env["CUSET_CPU_BLOCK_LOOP"] = "0"
        secret = ""
        if self.options.skip_independent_orders and order == "forward" and len(self.run_orders) > 1:
            secret = secrets.token_hex(16)  # fresh per run: see order_proof_result
            env.update(CUSET_CPU_ORDER_PROOF="1", CUSET_CPU_PROOF_TOKEN=secret)
        if self.options.asan:
            env["ASAN_OPTIONS"] = f"detect_leaks=0:abort_on_error=0:exitcode={ASAN_EXIT_CODE}"
        return Invocation(argv=[str(executable)], env=env, diagnostics_env=DIAG_FD_ENV, secret=secret)

    def orders_to_skip(self, step: StepResult, invocation: Invocation) -> tuple[tuple[str, ...], str]:
        """After a successful run of the first order: the remaining orders that cannot give
        other outputs, and why ((), "" unless the runtime proved every kernel launch of the
        run order-independent on its diagnostics channel, with this run's secret)."""
        if not invocation.secret or step.returncode != 0 or step.timed_out:
            return (), ""
        why = order_proof_result(step.diagnostics, invocation.secret)
        return (tuple(self.run_orders[1:]), why) if why else ((), "")

    def wrong_output_note(self) -> str:
        """Appended to a `wrong` verdict: under poisoned device memory, the probable cause."""
        if not self.options.poison_device_memory:
            return ""
        return ("device memory was poisoned (poison_device_memory: new cudaMalloc blocks hold NaN / INT_MAX "
                "words): the program probably reads global memory it never wrote")

    def classify_failure(self, step: StepResult) -> tuple[Status, str] | None:
        if self.options.asan and not step.timed_out and "ERROR: AddressSanitizer" in (step.stderr or ""):
            return Status.RUNTIME_ERROR, _asan_summary(step.stderr)
        return classify_run(step)


def usable_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def default_workers() -> int:
    """`CUSET_CPU_WORKERS`, else the cores this process may use."""
    env = os.environ.get("CUSET_CPU_WORKERS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise ConfigError([f"CUSET_CPU_WORKERS={env!r}: expected an integer >= 1"], "the environment")
        return int(env)
    return usable_cores()


def _merge(first: StepResult | None, second: StepResult) -> StepResult:
    """One compile step from a compile and a link."""
    if first is None:
        return second
    return StepResult("compile", second.returncode, first.seconds + second.seconds, second.timed_out,
                      first.stdout + second.stdout, first.stderr + second.stderr, second.limit)


def _asan_summary(stderr: str) -> str:
    """`AddressSanitizer: heap-buffer-overflow on address ...` plus the first
    frame in the user's program."""
    lines = stderr.splitlines()
    head = next((ln.split("ERROR: ", 1)[1].strip() for ln in lines if "ERROR: AddressSanitizer" in ln),
                "AddressSanitizer reported an error")
    head = re.sub(r" at pc 0x[0-9a-f]+ bp 0x[0-9a-f]+ sp 0x[0-9a-f]+", "", head)
    where = next((ln.strip() for ln in lines if f"{SOURCE_NAME}:" in ln and ln.strip().startswith("#")), "")
    if where:
        head += f" at {where.rsplit(' ', 1)[-1]}"
    position = next((ln.split("stopped the program ", 1)[1] for ln in lines
                     if ln.startswith("CUSET-CPU: note: AddressSanitizer stopped the program ")), "")
    return f"{head} {position}".strip()
