"""The family framework: a family turns (variant, size, seed) into a CUDABench task.

A family is a small frozen record: a name, a domain, a pure `build` function, the
one variant and the sizes the bundled suite uses, and the variants and sizes the
task factory may use (never the suite's, so synthesised data cannot leak into the
benchmark). Builders share the helpers below, so every program has the same I/O
contract: raw little-endian `data/<name>.bin` files of the declared dtype.
"""

from __future__ import annotations

import itertools
import json
import math
import textwrap
import zlib
from dataclasses import dataclass
from string import Template
from typing import Callable, Mapping

# The family modules take Check and float_tolerance from here with the other helpers.
from cuset.curation.checker import Check, compare_script, float_tolerance  # noqa: F401
from cuset.tasks.schema import Task, TensorSpec

Params = Mapping[str, object]

# numpy dtype name -> C type used in the reference programs.
CTYPES: dict[str, str] = {
    "float32": "float",
    "int32": "int",
    "uint32": "unsigned int",
    "int64": "long long",
    "uint8": "unsigned char",
}

DOMAINS = (
    "elementwise", "reduction", "normalization", "linear_algebra", "stencil", "pooling",
    "transpose", "histogram", "sorting", "sparse", "graph", "attention", "image", "scientific",
)


@dataclass(frozen=True)
class Tensor:
    """A declared input or output plus the C expression for its element count."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    count: str  # C expression over the program's size constants, e.g. "ROWS * COLS"

    def __post_init__(self):
        if self.dtype not in CTYPES:
            raise ValueError(f"tensor {self.name!r}: dtype {self.dtype!r} is not one of {sorted(CTYPES)}")

    @property
    def ctype(self) -> str:
        return CTYPES[self.dtype]

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def spec(self) -> TensorSpec:
        return TensorSpec(self.name, self.dtype, str(tuple(self.shape)))

    def describe(self) -> str:
        return f"{self.name} ({self.dtype}, shape {tuple(self.shape)})"


@dataclass(frozen=True)
class TaskParts:
    """Everything a builder produces; `make_task` adds id, family and the name-only prompts."""

    task_name: str
    level1: str
    level2: str
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    bench_cu: str
    gen_py: str
    compare_py: str


@dataclass(frozen=True)
class Family:
    """A parametrised task family.

    build(variant, size, seed) -> TaskParts. `suite_variant` with `suite_sizes` (the
    first one small enough for the CPU backend) makes the bundled benchmark; the
    factory draws from `variants` x `small_sizes` (or `large_sizes`), which must not
    contain the suite's variant or sizes.
    """

    name: str
    domain: str
    build: Callable[[Params, Params, int], TaskParts]
    suite_variant: Params
    suite_sizes: tuple[Params, ...]
    variants: tuple[Params, ...]
    small_sizes: tuple[Params, ...]
    large_sizes: tuple[Params, ...] = ()

    def __post_init__(self):
        if self.domain not in DOMAINS:
            raise ValueError(f"family {self.name!r}: unknown domain {self.domain!r}; use one of {DOMAINS}")
        if len(self.suite_sizes) < 2:
            raise ValueError(f"family {self.name!r}: the suite needs at least two sizes")
        keys = {param_key(v) for v in self.variants}
        if param_key(self.suite_variant) in keys:
            raise ValueError(f"family {self.name!r}: the suite variant is also a factory variant")
        if len(keys) != len(self.variants):
            raise ValueError(f"family {self.name!r}: duplicate factory variants")
        suite = {param_key(s) for s in self.suite_sizes}
        for s in (*self.small_sizes, *self.large_sizes):
            if param_key(s) in suite:
                raise ValueError(f"family {self.name!r}: factory size {dict(s)} is a suite size")

    def make(self, variant: Params, size: Params, task_id: int) -> Task:
        seed = task_seed(self.name, variant, size)
        return make_task(self.build(variant, size, seed), task_id, self.name)


def param_key(params: Params) -> str:
    """Canonical text of a parameter point: stable across runs and Python versions."""
    return json.dumps(dict(params), sort_keys=True, separators=(",", ":"))


def task_seed(family: str, variant: Params, size: Params) -> int:
    """Base seed of a task's gen.py: a function of what the task is, nothing else."""
    return zlib.crc32(f"{family}|{param_key(variant)}|{param_key(size)}".encode()) % 1_000_003


def pick(options: tuple, *key_parts: object):
    """Deterministically pick an implementation detail (block size, ...) from the task's key,
    so programs vary across tasks without adding tasks that differ only in style."""
    return options[zlib.crc32("|".join(map(str, key_parts)).encode()) % len(options)]


def level3(task_name: str) -> str:
    return f"Compute the {task_name} kernel on GPU using CUDA."


def make_task(parts: TaskParts, task_id: int, family: str) -> Task:
    name_only = level3(parts.task_name)
    return Task(
        id=task_id,
        task_name=parts.task_name,
        task_description=name_only,
        inputs=tuple(t.spec() for t in parts.inputs),
        outputs=tuple(t.spec() for t in parts.outputs),
        gpu="unknown",
        bench_cu=parts.bench_cu,
        gen_py=parts.gen_py,
        compare_py=parts.compare_py,
        level1_prompt=parts.level1,
        level2_prompt=parts.level2,
        level3_prompt=name_only,
        family=family,
    )


def fill(template: str, **values: object) -> str:
    """Substitute $NAME placeholders (CUDA code never uses `$`); a missing one raises KeyError."""
    return Template(textwrap.dedent(template).strip("\n")).substitute({k: str(v) for k, v in values.items()})


def cfloat(x: float) -> str:
    """A float literal for CUDA source, e.g. 0.5 -> '0.5f', 1e-05 -> '1e-05f'."""
    text = repr(float(x))
    return text + "f" if ("." in text or "e" in text) else text + ".0f"


def fmt_num(x: float) -> str:
    """A constant as it appears in prompts and task names: 0.05 -> '0.05', 2.0 -> '2'."""
    return f"{x:g}"


def name_num(x: float) -> str:
    """A constant inside a task name (identifier-safe): 0.05 -> '0p05', -1.5 -> 'm1p5'."""
    return fmt_num(x).replace("-", "m").replace(".", "p").replace("+", "")


# ---------------------------------------------------------------- bench.cu

CU_PRELUDE = r"""
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
$INCLUDES
#define CUDA_CHECK(call)                                                      \
    do {                                                                      \
        cudaError_t err_ = (call);                                            \
        if (err_ != cudaSuccess) {                                            \
            fprintf(stderr, "CUDA error %s at %s:%d\n",                       \
                    cudaGetErrorString(err_), __FILE__, __LINE__);            \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

template <typename T>
void read_binary(const char* path, T* data, size_t count) {
    FILE* f = fopen(path, "rb");
    if (!f || fread(data, sizeof(T), count, f) != count) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    fclose(f);
}

template <typename T>
void write_binary(const char* path, const T* data, size_t count) {
    FILE* f = fopen(path, "wb");
    if (!f || fwrite(data, sizeof(T), count, f) != count) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fclose(f);
}
"""


def cuda_program(
    constants: str,
    kernels: str,
    inputs: tuple[Tensor, ...],
    outputs: tuple[Tensor, ...],
    launch: str,
    *,
    includes: tuple[str, ...] = (),
) -> str:
    """A complete program: helpers, size constants, kernels, and a main() that reads the
    inputs, runs `launch` (which may use d_<name> pointers and declare scratch buffers),
    and writes the outputs."""
    inc = "".join(f"#include <{h}>\n" for h in includes)
    prelude = CU_PRELUDE.strip("\n").replace("$INCLUDES\n", inc)
    main = _host_main(inputs, outputs, launch)
    parts = [prelude, textwrap.dedent(constants).strip("\n"), textwrap.dedent(kernels).strip("\n"), main]
    return "\n\n".join(p for p in parts if p) + "\n"


HOST_HELPERS = CU_PRELUDE.split("$INCLUDES\n", 1)[1].strip("\n")
_HELPER_NAMES = ("CUDA_CHECK", "read_binary", "write_binary")


def kernels_first(program: str) -> str:
    """`program` (from cuda_program) with the host helpers (CUDA_CHECK, read_binary,
    write_binary) moved from after the includes to just before main(): the task-specific
    constants and kernels then start a few lines into the program instead of after ~40
    lines every program shares. The program means the same (only main uses the helpers)."""
    head, sep, rest = program.partition("\n" + HOST_HELPERS + "\n")
    before_main, main_sep, main = rest.partition("\nint main() {")
    if not sep or not main_sep or any(name in before_main for name in _HELPER_NAMES):
        raise ValueError("kernels_first: not a cuda_program() program whose helpers only main() uses")
    return head + "\n\n" + before_main.strip("\n") + "\n\n" + HOST_HELPERS + "\n\nint main() {" + main


def _host_main(inputs: tuple[Tensor, ...], outputs: tuple[Tensor, ...], launch: str) -> str:
    lines = ["int main() {"]
    for t in inputs:
        lines += [
            f"    std::vector<{t.ctype}> h_{t.name}({t.count});",
            f'    read_binary("data/{t.name}.bin", h_{t.name}.data(), h_{t.name}.size());',
        ]
    for t in outputs:
        lines.append(f"    std::vector<{t.ctype}> h_{t.name}({t.count});")
    lines.append("")
    for t in (*inputs, *outputs):
        size = f"h_{t.name}.size() * sizeof({t.ctype})"
        lines += [f"    {t.ctype}* d_{t.name};", f"    CUDA_CHECK(cudaMalloc(&d_{t.name}, {size}));"]
        if t in inputs:
            lines.append(f"    CUDA_CHECK(cudaMemcpy(d_{t.name}, h_{t.name}.data(), {size}, cudaMemcpyHostToDevice));")
    lines.append("")
    lines += ["    " + ln if ln.strip() else "" for ln in textwrap.dedent(launch).strip("\n").splitlines()]
    lines += ["    CUDA_CHECK(cudaGetLastError());", "    CUDA_CHECK(cudaDeviceSynchronize());", ""]
    for t in outputs:
        size = f"h_{t.name}.size() * sizeof({t.ctype})"
        lines += [
            f"    CUDA_CHECK(cudaMemcpy(h_{t.name}.data(), d_{t.name}, {size}, cudaMemcpyDeviceToHost));",
            f'    write_binary("data/{t.name}.bin", h_{t.name}.data(), h_{t.name}.size());',
        ]
    lines += [f"    CUDA_CHECK(cudaFree(d_{t.name}));" for t in (*inputs, *outputs)]
    lines += ["    return 0;", "}"]
    return "\n".join(lines)


# ---------------------------------------------------------------- gen.py

def gen_script(seed: int, body: str, inputs: tuple[Tensor, ...], outputs: tuple[Tensor, ...]) -> str:
    """gen.py: `body` (numpy, using `rng`) must bind one variable per input and per
    output name; inputs go to data/<name>.bin, references to data/<name>_ref.bin."""
    lines = [
        "import os",
        "",
        "import numpy as np",
        "",
        "# CUSET_CASE selects the input case: same shapes, different values.",
        f"SEED = {seed}",
        'CASE = int(os.environ.get("CUSET_CASE", "0"))',
        "rng = np.random.default_rng(SEED + CASE)",
        "",
        "",
        "def save(path, array, dtype, count):",
        "    array = np.ascontiguousarray(array, dtype=dtype).reshape(-1)",
        "    assert array.size == count, f\"{path}: {array.size} elements, expected {count}\"",
        "    array.tofile(path)",
        "",
        "",
        textwrap.dedent(body).strip("\n"),
        "",
        'os.makedirs("data", exist_ok=True)',
    ]
    for t in inputs:
        lines.append(f'save("data/{t.name}.bin", {t.name}, np.{t.dtype}, {t.numel})')
    for t in outputs:
        lines.append(f'save("data/{t.name}_ref.bin", {t.name}, np.{t.dtype}, {t.numel})')
    return "\n".join(lines) + "\n"


def io_sentence(inputs: tuple[Tensor, ...], outputs: tuple[Tensor, ...]) -> str:
    ins = "; ".join(t.describe() for t in inputs)
    outs = "; ".join(t.describe() for t in outputs)
    return f"Inputs: {ins}. Outputs: {outs}."


def assemble(
    *,
    task_name: str,
    detail: str,
    algorithm: str,
    inputs: tuple[Tensor, ...],
    outputs: tuple[Tensor, ...],
    checks: tuple[Check, ...],
    constants: str,
    kernels: str,
    launch: str,
    gen_body: str,
    seed: int,
    includes: tuple[str, ...] = (),
) -> TaskParts:
    """The common tail of every builder: prompts, program, gen.py and compare.py."""
    level1 = (
        f"Task: {task_name}. {detail.strip()} {io_sentence(inputs, outputs)} "
        "Every tensor is stored row-major as a raw little-endian binary file data/<name>.bin."
    )
    return TaskParts(
        task_name=task_name,
        level1=level1,
        level2=algorithm.strip(),
        inputs=inputs,
        outputs=outputs,
        bench_cu=cuda_program(constants, kernels, inputs, outputs, launch, includes=includes),
        gen_py=gen_script(seed, gen_body, inputs, outputs),
        compare_py=compare_script(outputs, checks),
    )


def size_grid(**axes: tuple[int, ...]) -> tuple[dict, ...]:
    """Every combination of the given size axes, e.g. size_grid(rows=(8, 16), cols=(32,))."""
    names = list(axes)
    return tuple(dict(zip(names, combo)) for combo in itertools.product(*(axes[n] for n in names)))


def one_axis(name: str, values: tuple) -> tuple[dict, ...]:
    return tuple({name: v} for v in values)


# ---------------------------------------------------------------- shared device helpers

WARP_SUM = """
__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_down_sync(0xffffffff, v, offset);
    }
    return v;
}
"""

WARP_MAX = """
__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        v = fmaxf(v, __shfl_down_sync(0xffffffff, v, offset));
    }
    return v;
}
"""

# Needs WARP_SUM. blockDim.x must be a multiple of 32; every thread gets the total.
BLOCK_SUM = """
__device__ float block_sum(float v) {
    __shared__ float warp_totals[32];
    __shared__ float total;
    int lane = threadIdx.x & 31;
    int warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) {
        warp_totals[warp] = v;
    }
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x >> 5) ? warp_totals[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) {
            total = v;
        }
    }
    __syncthreads();
    return total;
}
"""

# Needs WARP_MAX. Same contract as BLOCK_SUM.
BLOCK_MAX = """
__device__ float block_max(float v) {
    __shared__ float warp_best[32];
    __shared__ float best;
    int lane = threadIdx.x & 31;
    int warp = threadIdx.x >> 5;
    v = warp_max(v);
    if (lane == 0) {
        warp_best[warp] = v;
    }
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x >> 5) ? warp_best[lane] : -FLT_MAX;
        v = warp_max(v);
        if (lane == 0) {
            best = v;
        }
    }
    __syncthreads();
    return best;
}
"""


def eps_name(eps: float) -> str:
    """1e-05 -> '1e5', 0.001 -> '1e3': epsilons inside task names."""
    mant, exp = f"{eps:.0e}".split("e")
    return f"{mant}e{int(exp) * -1}" if eps < 1 else fmt_num(eps)
