"""`cuset eval` configuration (YAML + key=value overrides).

`ExecutionConfig` (the `execution:` section) says how and where programs run: backend,
compile judge, workers, executor, timeouts, sandbox. Curation embeds the same section
(`cuset.curation.config.ValidationConfig.execution`), so a reference program is judged
exactly as a generated one: one spelling, one backend construction (`make_backend`),
one batch runner (cuset.evaluate.batch).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from cuset.errors import CusetError
from cuset.config import ConfigError, option
from cuset.evaluate.perf.options import PerfOptions
from cuset.evaluate.options import EvalOptions, Timeouts
from cuset.execute.kernelbench.reference_store import SUBDIR, ReferenceStore
from cuset.execute.sandbox import MODES, SandboxPolicy
from cuset.localpath import MissingPath
COMPAT_TIMEOUT = 60.0  # the official harness: 60 s to compile, 60 s to run
SCRIPT_FILE_BYTES = 8 << 30   # largest file a sandboxed gen.py/compare.py may write


@dataclass
class SandboxConfig:
    mode: str = option("auto", help="bwrap (full isolation), unshare (fallback), none (debug only), auto", choices=MODES)
    processes: int = option(64, help="RLIMIT_NPROC: processes + threads a program may have")
    cpu_seconds: int | None = option(None, help="RLIMIT_CPU per run; default: the run timeout + 5 s")
    cpu_memory_gb: float = option(8.0, help="address-space limit for programs on the CPU backend (GiB)")
    hide: list[str] = option(default_factory=list, help="extra paths masked by an empty tmpfs inside the sandbox")
    program_memory_gb: float | None = option(8.0, help="memory of a program's whole process tree (cgroup where "
                                                       "available, else only the per-process limit); none = no limit")
    run_disk_mb: float | None = option(None, help="disk quota of a run dir beyond its inputs (own tmpfs where it "
                                                  "can be mounted); default: 64 MiB + twice the declared outputs")
    trust_task_scripts: bool = option(False, help="run the tasks file's own gen.py and compare.py outside the "
                                                  "sandbox, as the evaluating user (a warm fork server: faster); "
                                                  "only for tasks files you wrote or have read: a third-party "
                                                  "benchmark's scripts could then read, change or send anything "
                                                  "that user can. Default: each script in the sandbox, seeing its "
                                                  "own dir only")


@dataclass
class ExecutionConfig:
    """How and where programs run (evaluation's and curation's `execution:` section)."""

    backend: str = option("auto", help="gpu (nvcc + a GPU), cpu (CUDA on the CPU), auto (gpu if a driver answers)",
                          choices=("gpu", "cpu", "auto"))
    compile_judge: str = option("auto", help="who decides compilation success: nvcc (the paper's metric; the CPU "
                                             "backend then runs what nvcc accepted), backend (the backend's own "
                                             "compiler: g++ on the CPU backend), auto = nvcc whenever it is installed",
                                choices=("auto", "nvcc", "backend"))
    nvcc_flags: list[str] = option(default_factory=lambda: ["-O2"], help="nvcc flags of the GPU backend (ignored in compat)")
    gpu_device: int = option(0, help="GPU index pinned with CUDA_VISIBLE_DEVICES")
    workers: int = option(0, help="programs evaluated in parallel; 0 = one per core (executor=ray: per node of "
                                  "the embedded cluster; on an existing cluster Ray's resources decide)")
    program_threads: int = option(0, help="cpu backend: OS threads running one program's blocks (more than 1 adds "
                                          "the parallel thread order); 0 = usable cores // workers locally, 1 on Ray "
                                          "(each program then asks Ray for that many cores)")
    backend_options: dict = option(default_factory=dict, help="extra keyword arguments for the backend constructor "
                                                              "(cpu: seed, stack_kb, poison_device_memory, "
                                                              "skip_independent_orders: false runs every thread "
                                                              "order even when the forward run proves every kernel "
                                                              "launch order-independent, ...)")
    executor: str = option("local", help="where programs run: local (threads of this process) or ray (tasks on a "
                                         "Ray cluster; pip install 'cuset[ray]')", choices=("local", "ray"))
    ray_address: str | None = option(None, help="executor=ray: address of an existing cluster (auto = the one "
                                                "`ray start` made on this node); none = start an embedded local "
                                                "cluster for this command and stop it after")
    ray_max_retries: int = option(2, help="executor=ray: retries of a program whose worker process died; after them "
                                          "it is recorded as infra_error (out of the pass@k denominators; curation "
                                          "does not keep the task)")
    timeout_gen: float = option(300.0, help="seconds for gen.py")
    timeout_compile: float = option(120.0, help="seconds per compile (compat: 60)")
    timeout_run: float = option(60.0, help="seconds per program run (compat: 60)")
    timeout_compare: float = option(120.0, help="seconds for compare.py")
    sandbox: SandboxConfig = option(default_factory=SandboxConfig, help="sandbox for untrusted programs")

    def __post_init__(self):
        if self.workers < 0:
            raise ValueError(f"workers must be >= 0 (0 = one per core), got {self.workers}")
        if self.program_threads < 0:
            raise ValueError(f"program_threads must be >= 0 (0 = cores // workers), got {self.program_threads}")
        if "workers" in self.backend_options:
            raise ValueError("backend_options.workers was renamed program_threads (OS threads per program; "
                             "`workers` is the number of programs run at once)")
        if self.ray_max_retries < 0:
            raise ValueError("ray_max_retries must be >= 0")
        if min(self.timeout_gen, self.timeout_compile, self.timeout_run, self.timeout_compare) <= 0:
            raise ValueError("timeouts must be positive")

    @property
    def n_workers(self) -> int:
        return self.workers or os.cpu_count() or 1

    def timeouts(self, compat: bool = False) -> Timeouts:
        if compat:
            return Timeouts(self.timeout_gen, COMPAT_TIMEOUT, COMPAT_TIMEOUT, self.timeout_compare)
        return Timeouts(self.timeout_gen, self.timeout_compile, self.timeout_run, self.timeout_compare)

    def options(self, cases, *, compat: bool = False, hide: tuple[str, ...] = (), **rest) -> EvalOptions:
        """The `EvalOptions` of one program's evaluation: these timeouts and sandbox limits on
        `cases`; `rest` sets the evaluation-only fields (robust, max_data_bytes, ...)."""
        sb = self.sandbox
        policy = SandboxPolicy(mode=sb.mode, cpu_seconds=sb.cpu_seconds, processes=sb.processes,
                               hide=tuple(sb.hide) + tuple(hide))
        memory = int(sb.program_memory_gb * (1 << 30)) if sb.program_memory_gb is not None else None
        disk = int(sb.run_disk_mb * (1 << 20)) if sb.run_disk_mb is not None else None
        return EvalOptions(cases=tuple(cases), timeouts=self.timeouts(compat), compat=compat, sandbox=policy,
                           cpu_memory_bytes=int(sb.cpu_memory_gb * (1 << 30)), program_memory_bytes=memory,
                           run_disk_bytes=disk, **rest)

    def script_sandbox(self) -> SandboxPolicy | None:
        """The sandbox of the tasks file's gen.py and compare.py (None: trusted, unsandboxed):
        the run step's isolation, with the memory and process limits of a program run, RLIMIT_CPU
        from each script's timeout, and no RLIMIT_AS (torch maps more than it uses)."""
        sb = self.sandbox
        if sb.trust_task_scripts:
            return None
        memory = int(sb.program_memory_gb * (1 << 30)) if sb.program_memory_gb is not None else None
        return SandboxPolicy(mode=sb.mode, cpu_seconds=sb.cpu_seconds, file_size_bytes=SCRIPT_FILE_BYTES,
                             processes=sb.processes, hide=tuple(sb.hide), program_memory_bytes=memory)

    def backend_name(self) -> str:
        """gpu or cpu (auto asks the NVIDIA driver)."""
        if self.backend != "auto":
            return self.backend
        from cuset.execute.registry import gpu_available

        return "gpu" if gpu_available() else "cpu"

    def judge_name(self, backend_name: str) -> str:
        """nvcc or backend: who decides compilation success on `backend_name` (gpu: always nvcc)."""
        if backend_name == "gpu":
            return "nvcc"
        if self.compile_judge == "backend":
            return "backend"
        have = shutil.which("nvcc") is not None
        if self.compile_judge == "nvcc" and not have:
            raise MissingPath("execution.compile_judge=nvcc but nvcc is not on PATH: install the CUDA "
                                    "toolkit or set execution.compile_judge=backend")
        return "nvcc" if have else "backend"

    def make_backend(self, compat: bool = False, order_proofs: bool = True):
        """The execution backend, wrapped so nvcc judges compilation when `compile_judge` says so
        (`compat`: the official harness's nvcc, without flags). A GPU backend that finds no
        answering GPU raises `GpuUnavailable` before anything runs. `order_proofs`: the CPU
        backend's default for `skip_independent_orders` (false for model answers, whose
        proofs are not believed: EvalOptions.trusted_programs)."""
        from cuset.execute.registry import get_backend, gpu_available

        name = self.backend_name()
        kwargs = dict(self.backend_options)
        kwargs.setdefault("sandbox_mode", self.sandbox.mode)   # the compile step's sandbox
        flags = [] if compat else list(self.nvcc_flags)  # the harness runs nvcc without flags
        if name == "gpu":
            if not gpu_available():
                raise GpuUnavailable("--backend gpu: no GPU answers here (`nvidia-smi -L` fails or is missing); "
                                     "use --backend cpu to run the programs on the CPU")
            kwargs.setdefault("flags", flags)
            kwargs.setdefault("compat", compat)
            kwargs.setdefault("device", self.gpu_device)
        if name == "cpu":
            from cuset.execute.cpu.backend import usable_cores

            if compat and kwargs.get("poison_device_memory"):
                raise ConfigError(["execution.backend_options.poison_device_memory=true with compat: the official "
                                   "harness runs on GPU memory as the driver hands it out (cleared, or reused after "
                                   "cudaFree); drop one of the two"])
            # Programs run `n_workers` at a time: each run gets its share of the
            # cores for its blocks, so parallel programs do not oversubscribe.
            kwargs["workers"] = self.program_threads or max(1, usable_cores() // self.n_workers)
            kwargs.setdefault("skip_independent_orders", order_proofs)
        backend = get_backend(name, **kwargs)
        if self.judge_name(name) == "nvcc" and name != "gpu":
            from cuset.execute.nvcc_checked import NvccCheckedBackend

            backend = NvccCheckedBackend(backend, nvcc_flags=flags, sandbox_mode=self.sandbox.mode)
        return backend


# EvalConfig keys that moved into its `execution:` section
_MOVED_TO_EXECUTION = ("backend", "compile_judge", "nvcc_flags", "gpu_device", "workers", "backend_options", "executor",
                       "ray_address", "ray_max_retries", "timeout_gen", "timeout_compile", "timeout_run",
                       "timeout_compare", "sandbox")


@dataclass
class EvalConfig:
    # keys of older configs: the loader says where each went (cuset.config)
    RENAMED: ClassVar[dict[str, str]] = {k: f"execution.{k}" for k in _MOVED_TO_EXECUTION}

    execution: ExecutionConfig = option(default_factory=ExecutionConfig,
                                        help="how and where programs run (the same section as curation's "
                                             "validation.execution)")
    compat: bool = option(False, help="official CUDABench definitions: first fenced block, nvcc without flags, "
                                      "60 s compile/run, a compare output without `F` passes")
    allow_missing: bool = option(False, help="score even if the generations cover only some tasks of the tasks file: "
                                             "missing tasks (and missing samples up to k) count as failures")
    extract: str = option("auto", help="code to evaluate: record (the generation's `code`), default or compat "
                                       "(re-extract from `response`); auto = compat in compat mode, else record",
                          choices=("auto", "record", "default", "compat"))
    cases: list[int] = option(default_factory=lambda: [0], help="input cases; gen.py sees CUSET_CASE=<i> (0 = default input)")
    eval_mode: str = option("train", help="KernelBench: run the reference and the candidate as built (train mode, "
                                          "KernelBench's protocol) or both after .eval() (dropout off, batch norm "
                                          "on running statistics), as harnesses that call .eval() do",
                            choices=("train", "eval"))
    robust: bool = option(False, help="robust verification next to the plain verdict: input cases 0..robust_cases-1 "
                                      "(gen.py's constant seeds offset by the case) and every element of every "
                                      "output against the reference; reports show plain and robust Pass@k. Not "
                                      "with compat=true (the official harness has neither)")
    robust_cases: int = option(3, help="robust=true: input cases checked, 0..robust_cases-1 (case 0 = the original data)")
    strict_kernels: bool = option(False, help="fail a KernelBench pass that ran none of its own kernels or that a reward-hack rule flagged")
    kernelbench_build_rounds: int = option(4, help="KernelBench: times one sample's candidate may stop to ask for "
                                                   "load_inline builds its source does not name literally (each "
                                                   "costs a run of the candidate); asking again after that is a "
                                                   "compile_error. Its builds share the compile timeout as one "
                                                   "budget of wall and CPU time")
    trusted_programs: bool = option(False, help="the programs are task references or your own code, never model "
                                                "answers: the CPU backend may skip the random and parallel orders "
                                                "when its runtime proves every kernel launch order-independent (the "
                                                "proof is written from inside the program's process, so a hostile "
                                                "program could forge it; `cuset tasks check` sets it)")
    perf: bool = option(False, help="time every program that passed on the GPU backend (KernelBench: CUDA events, "
                                    "speedup vs eager and torch.compile, fast_p; CUDABench: a run under Nsight "
                                    "Compute, the official roofline score, BU and CE); on the CPU backend the report "
                                    "says 'not measured on the CPU backend'")
    perf_timing: PerfOptions = option(default_factory=PerfOptions, help="perf=true: warm-up, trials, timeouts, ncu")
    max_data_mb: float | None = option(None, help="skip tasks whose declared data exceed this (default: the backend's budget)")
    cache_dir: str = option("", help="compile and data cache root; default $CUSET_CACHE or ~/.cache/cuset")
    compile_cache_gb: float | None = option(20.0, help="size budget of the compile cache: beyond it the entries "
                                                       "used least recently are removed, however recent, except "
                                                       "those a sample in flight is using; none = no budget")
    compile_cache_entry_mb: float | None = option(256.0, help="largest build the compile cache stores (MiB): a "
                                                              "larger one (e.g. a program with a huge initialised "
                                                              "array) is used by the sample that built it and then "
                                                              "removed, never kept; none = no cap")
    reference_cache: bool = option(True, help="KernelBench: keep each reference run's inputs and expected outputs "
                                              "under <cache_dir>/kernelbench-references, keyed by the reference, "
                                              "checks, harness, torch version and device, so another eval, Ray "
                                              "worker or test run on this machine skips the sandboxed reference run; "
                                              "false = once per process, in memory")
    reference_cache_gb: float | None = option(4.0, help="size budget of the reference cache: beyond it the entries "
                                                        "used least recently are removed; none = no budget")
    data_cache: bool = option(True, help="keep gen.py outputs in the cache dir so re-runs skip gen.py")
    python_preload: list[str] | None = option(default_factory=lambda: ["numpy"],
                                              help="modules a warm fork server imports once for gen.py/compare.py "
                                                   "(each script still runs in its own forked process); null = "
                                                   "a fresh interpreter per script")
    workdir: str = option("", help="where to make the temporary workspace; default the system temp dir")
    keep_workdirs: bool = option(False, help="keep run and compare dirs for debugging")
    progress: bool = option(True, help="show a progress bar")

    def __post_init__(self):
        if not self.cases:
            raise ValueError("cases must list at least one input case, e.g. [0]")
        if self.robust and self.compat:
            raise ValueError("robust=true with compat=true: compat reproduces the official harness, which has no "
                             "robust verification; drop one of the two (compat scores are the plain verdict)")
        if self.robust_cases < 1:
            raise ValueError(f"robust_cases must be >= 1 (case 0 is the original data), got {self.robust_cases}")
        for name in ("compile_cache_gb", "compile_cache_entry_mb"):
            if getattr(self, name) is not None and getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive (none = no limit), got {getattr(self, name)}")
        if self.kernelbench_build_rounds < 0:
            raise ValueError(f"kernelbench_build_rounds must be >= 0 (0: only the load_inline calls found in the "
                             f"source are built), got {self.kernelbench_build_rounds}")

    @property
    def extractor(self) -> str:
        if self.extract != "auto":
            return self.extract
        return "compat" if self.compat else "record"

    def timeouts(self) -> Timeouts:
        return self.execution.timeouts(self.compat)

    def options(self, hide: tuple[str, ...] = ()) -> EvalOptions:
        budget = int(self.max_data_mb * 1e6) if self.max_data_mb is not None else None
        return self.execution.options(self.cases, compat=self.compat, hide=hide, max_data_bytes=budget,
                                      robust=self.robust, robust_cases=self.robust_cases,
                                      strict_kernels=self.strict_kernels, eval_mode=self.eval_mode,
                                      reference_store=self.reference_store(),
                                      build_rounds=self.kernelbench_build_rounds,
                                      trusted_programs=self.trusted_programs)

    def reference_store(self) -> ReferenceStore | None:
        """Where KernelBench reference runs are kept on disk (None: reference_cache=false)."""
        if not self.reference_cache:
            return None
        budget = int(self.reference_cache_gb * (1 << 30)) if self.reference_cache_gb else None
        root = str(Path(self.cache_dir).expanduser().resolve() / SUBDIR) if self.cache_dir else None
        return ReferenceStore(root=root, max_bytes=budget)

    def make_backend(self):
        """`execution.make_backend` under this config's compat setting. Model answers
        (`trusted_programs` false) are built without the CPU backend's order proofs, which
        would not be believed (cuset.evaluate.cudabench._orders_to_skip)."""
        return self.execution.make_backend(self.compat, order_proofs=self.trusted_programs)


class GpuUnavailable(CusetError, RuntimeError):
    """--backend gpu on a machine where no GPU answers."""
