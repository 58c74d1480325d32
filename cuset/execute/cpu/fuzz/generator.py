"""Random CUDA kernels and host programs for the CPU backend's differential fuzzer.

Each kernel is drawn from its own seed (`kernel_seed(seed, index)`), so a kernel is the
same whatever batch it is generated in. A kernel is either *strict* (generated under
rules that make it race-free: writes only to a thread's own elements, shared memory
read at other threads' elements only after a barrier that follows its writes, one
commutative atomic per kernel, no aliasing launch) or *loose* (the same statements
with those rules off: neighbours' elements, missing barriers, in-place and offset
launches, atomics' return values, aliases that overlap). Whether a kernel really races
is for the reference run to say (the fibers under every order), never for the
generator: the rules only keep the proportion of race-free kernels high.

What every kernel keeps, strict or loose, so that it is valid CUDA with one defined
behaviour per thread order: indices masked into the buffers (padded for the offset
launches and the pointer arithmetic), `__syncthreads` only where every live thread
reaches it (the top level of the body, or of a block-uniform loop), full-mask warp
operations only where the whole warp arrives (no thread-dependent return before them,
blocks of whole warps), partial masks naming exactly the lanes that execute them.

Values are `unsigned` (wrap-around is defined, no FMA contraction): the fast paths
must give the fibers' bytes, not values an ulp apart.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

FULL_MASK = "0xffffffffu"
PAD = 64            # elements past each buffer's end: offset launches (d + 1) and aliases (p + k) stay inside
N_BUFFERS = 4       # a, b (written), c (read-only), acc (atomics)

# Every feature the generator can put in a kernel (the record counts kernels per feature).
FEATURES = (
    "barrier", "barrier_loop", "missing_barrier", "static_shared", "extern_shared", "extern_shared_multi",
    "shared_alias", "global_alias", "pointer_arith", "inplace_same", "inplace_offset", "inplace_readonly",
    "restrict", "ldg", "ldcs", "ldca", "ldlu", "ldcv", "store_intrinsic", "atomic", "atomic_return",
    "atomic_shared", "shuffle", "vote", "syncwarp", "partial_mask", "warp_uniform_if", "early_return",
    "warp_uniform_return", "block_stride_loop", "grid_stride_loop", "uniform_loop", "divergent_branch",
    "multi_launch", "partial_warp_block", "helper_call", "strict", "loose",
)


@dataclass(frozen=True)
class Stmt:
    """One statement of a kernel body: a simple line (`body is None`), or a block
    `head { body }` with an optional `else { orelse }`. The minimiser drops them."""

    head: str
    body: tuple["Stmt", ...] | None = None
    orelse: tuple["Stmt", ...] | None = None
    features: frozenset[str] = frozenset()

    def lines(self, indent: str = "    ") -> list[str]:
        if self.body is None:
            return [indent + self.head]
        out = [f"{indent}{self.head} {{"]
        for s in self.body:
            out += s.lines(indent + "    ")
        if self.orelse is not None:
            out.append(f"{indent}}} else {{")
            for s in self.orelse:
                out += s.lines(indent + "    ")
        out.append(indent + "}")
        return out

    def all_features(self) -> frozenset[str]:
        found = set(self.features)
        for s in (self.body or ()) + (self.orelse or ()):
            found |= s.all_features()
        return frozenset(found)

    def size(self) -> int:
        return 1 + sum(s.size() for s in (self.body or ()) + (self.orelse or ()))


@dataclass(frozen=True)
class Launch:
    grid: int
    block: int
    shared_bytes: int          # dynamic shared memory of the launch
    args: tuple[str, ...]      # host expressions for a, b, c, acc (over d[0..3])
    launches: int              # the kernel is launched this many times in a row


@dataclass(frozen=True)
class Kernel:
    name: str
    seed: str
    strict: bool
    params: str
    body: tuple[Stmt, ...]
    launch: Launch
    length: int                # elements per buffer (a power of two; PAD more are allocated)
    launch_features: frozenset[str] = frozenset()
    helpers: str = ""          # __device__ functions the body calls (defined before the kernel)

    def source(self) -> str:
        lines = [f"// fuzz kernel {self.name}: seed {self.seed!r}, {'strict' if self.strict else 'loose'}",
                 *([self.helpers] if self.helpers else []),
                 f"__global__ void {self.name}({self.params}) {{"]
        for s in self.body:
            lines += s.lines()
        lines.append("}")
        return "\n".join(lines)

    @property
    def features(self) -> frozenset[str]:
        found = set(self.launch_features) | {"strict" if self.strict else "loose"}
        for s in self.body:
            found |= s.all_features()
        return frozenset(found)

    def with_body(self, body: tuple[Stmt, ...]) -> "Kernel":
        return dataclasses.replace(self, body=body)


@dataclass(frozen=True)
class Program:
    kernels: tuple[Kernel, ...]

    def source(self) -> str:
        return program_source(self.kernels)


def kernel_seed(seed: int, index: int) -> str:
    return f"cuset-cpu-fuzz:{seed}:{index}"


def generate_program(seed: int, first: int, count: int) -> Program:
    """Kernels `first` .. `first + count - 1` of the run with this seed, as one program."""
    return Program(tuple(generate_kernel(kernel_seed(seed, i), f"k{i}") for i in range(first, first + count)))


def generate_kernel(seed: str, name: str) -> Kernel:
    return _KernelGen(random.Random(seed), seed, name).kernel()


# ------------------------------------------------------------------------ host program
def program_source(kernels: tuple[Kernel, ...]) -> str:
    """A host program running each kernel on its own buffers and writing them to
    `out_<name>.bin`; with arguments, only the kernels named."""
    parts = ["#include <cstdio>", "#include <cstdlib>", "#include <cstring>", "#include <cuda_runtime.h>", "",
             "static void check(const char* what) {",
             "    cudaError_t e = cudaGetLastError();",
             "    if (e == cudaSuccess) e = cudaDeviceSynchronize();",
             "    if (e != cudaSuccess) { fprintf(stderr, \"%s: %s\\n\", what, cudaGetErrorString(e)); exit(3); }",
             "}", "",
             "static bool wanted(int argc, char** argv, const char* name) {",
             "    if (argc < 2) return true;",
             "    for (int i = 1; i < argc; ++i) if (strcmp(argv[i], name) == 0) return true;",
             "    return false;",
             "}", ""]
    for k in kernels:
        parts += [k.source(), "", _host_runner(k), ""]
    parts += ["int main(int argc, char** argv) {"]
    parts += [f"    if (wanted(argc, argv, \"{k.name}\")) run_{k.name}();" for k in kernels]
    parts += ["    return 0;", "}", ""]
    return "\n".join(parts)


def _host_runner(k: Kernel) -> str:
    n = k.length + PAD
    la = k.launch
    launch = f"    {k.name}<<<{la.grid}, {la.block}, {la.shared_bytes}>>>({', '.join(la.args)}, {k.length});"
    return "\n".join([
        f"static void run_{k.name}() {{",
        f"    const int N = {n};",
        "    unsigned* h = (unsigned*)malloc(N * sizeof(unsigned));",
        f"    unsigned* d[{N_BUFFERS}];",
        f"    for (int b = 0; b < {N_BUFFERS}; ++b) {{",
        "        for (int i = 0; i < N; ++i) h[i] = (unsigned)i * 2654435761u ^ (unsigned)(b * 40503 + 17);",
        "        cudaMalloc(&d[b], N * sizeof(unsigned));",
        "        cudaMemcpy(d[b], h, N * sizeof(unsigned), cudaMemcpyHostToDevice);",
        "    }",
        *([launch, f"    check(\"{k.name}\");"] * la.launches),
        f"    FILE* f = fopen(\"out_{k.name}.bin\", \"wb\");",
        f"    for (int b = 0; b < {N_BUFFERS}; ++b) {{",
        "        cudaMemcpy(h, d[b], N * sizeof(unsigned), cudaMemcpyDeviceToHost);",
        "        fwrite(h, sizeof(unsigned), N, f);",
        "        cudaFree(d[b]);",
        "    }",
        "    fclose(f);",
        "    free(h);",
        "}",
    ])


# ------------------------------------------------------------------------ kernels
@dataclass
class _Storage:
    """A shared-memory storage (one `__shared__` array, or all the `extern __shared__`
    arrays together) and what the strict rules know of it."""

    names: list[str]                    # the arrays and local pointers into it
    offsets: dict[str, int]             # name -> the element it points at
    size: int                           # elements the threads use (2 * block); declared larger
    initialised: bool = False           # every element written by every thread before the last barrier
    written: bool = False               # written in this stretch (own elements)
    read_any: bool = False              # read at other threads' elements in this stretch
    full_write_pending: bool = False    # written in full in this stretch (initialised at the next barrier)


@dataclass
class _State:
    warp_ok: bool = True                # full-mask warp operations allowed (no thread-dependent exit yet)
    in_branch: bool = False
    loop_var: str | None = None          # a block-uniform loop's variable in scope
    returned: bool = False               # an early return was generated (strict: shared memory stays as it is)


class _KernelGen:
    def __init__(self, rng: random.Random, seed: str, name: str):
        self.rng, self.seed, self.name = rng, seed, name
        r = rng
        self.strict = r.random() < 0.5
        self.block = r.choice([32, 64, 64, 128, 96] + ([48, 40] if r.random() < 0.15 else []))
        self.whole_warps = self.block % 32 == 0
        self.grid = r.choice([1, 2, 3, 4])
        self.length = 1 << max(6, (self.grid * self.block * 2 - 1).bit_length())
        self.mask = self.length - 1
        # A third of the kernels are element-wise (no shared memory, barrier, warp operation or
        # atomic): the block loops' and the order proof's kernels.
        self.elementwise = r.random() < 0.35
        self.use_shared = not self.elementwise and r.random() < 0.65
        self.use_barriers = not self.elementwise and (self.use_shared and r.random() < 0.85 or r.random() < 0.1)
        self.use_warp = not self.elementwise and self.whole_warps and r.random() < 0.35
        self.use_atomics = not self.elementwise and r.random() < 0.3
        # most loads of a kernel in one style, as programs are written
        self.load_style = r.choice(["sub", "ldg", "ldg_addr", "ldcs", "ldca", "ldlu", "ldcv"])
        self.atomic_op = r.choice(["atomicAdd", "atomicOr", "atomicXor", "atomicMax", "atomicMin", "atomicAnd"])
        self.values = ["v0", "v1"]
        self.storages: list[_Storage] = []
        self.st = _State()
        self.counter = 0
        self.binding = (r.choice(["distinct", "distinct", "same"]) if self.strict else
                        r.choice(["distinct", "same", "offset", "readonly", "readonly_offset"]))
        # __restrict__ on parameters bound to one buffer: a broken promise only loose kernels make
        self.restrict = r.random() < 0.25 and (self.binding == "distinct" or not self.strict)
        self.launches = r.choice([1, 1, 1, 2])

    # ---------------------------------------------------------------- helpers
    def pick(self, *options):
        return self.rng.choice(options)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"

    def const(self) -> str:
        return f"{self.rng.choice([1, 3, 5, 7, 11, 31, 97, 1021, 40503])}u"

    # ---------------------------------------------------------------- values
    def value(self, depth: int = 0) -> tuple[str, set[str]]:
        """An unsigned expression and the features it uses (loads included)."""
        roll = self.rng.random()
        if depth >= 2 or roll < 0.3:
            leaf = self.pick(*self.values, *self.values, "tid", "gid", "lane", self.const(),
                             *([self.st.loop_var] if self.st.loop_var else []))
            return leaf, set()
        if roll < 0.6:
            return self.load_any()
        x, fx = self.value(depth + 1)
        y, fy = self.value(depth + 1)
        op = self.pick("({x} * 3u + {y})", "({x} ^ ({y} >> 1))", "({x} + {y})", "min({x}, {y})", "({x} - {y})")
        return op.format(x=x, y=y), fx | fy

    def load_any(self) -> tuple[str, set[str]]:
        """A load from global memory (c at any element; a or b at the thread's own in strict
        kernels) or from shared memory, where the rules allow it."""
        options = ["c", "c", "own"]
        if self.storages:
            options += ["shared", "shared"]
        what = self.pick(*options)
        if what == "shared":
            got = self.shared_read()
            if got is not None:
                return got
            what = "c"
        if what == "c" or not self.strict:
            buf = self.pick("c", "c", "a", "b") if not self.strict else "c"
            return self.global_load(buf, self.global_index(own=False))
        return self.global_load(self.pick("a", "b"), "gid")

    def global_index(self, own: bool, var: str = "gid") -> str:
        if own:
            return var
        m = self.mask
        return self.pick(var, f"(({var} + {self.pick(1, 2, 31, 32, 33)}u) & {m}u)", f"({var} ^ 1u)",
                         f"({m}u - {var})", "tid", "blockIdx.x", "0u", f"({self.pick(*self.values)} & {m}u)",
                         *([f"(({var} + {self.st.loop_var}) & {m}u)"] if self.st.loop_var else []))

    def global_load(self, buf: str, index: str) -> tuple[str, set[str]]:
        forms = ("sub", "ldg", "ldg_addr", "ldcs", "ldca", "ldlu", "ldcv")
        form = self.load_style if self.chance(0.8) else self.pick(*forms)
        if form == "sub":
            return f"{buf}[{index}]", set()
        fn = "__ldg" if form.startswith("ldg") else f"__{form}"
        feature = "ldg" if form.startswith("ldg") else form
        return (f"{fn}(&{buf}[{index}])" if form == "ldg_addr" else f"{fn}({buf} + {index})"), {feature}

    # ---------------------------------------------------------------- shared memory
    def declare_shared(self) -> list[Stmt]:
        out = []
        size = 2 * self.block
        if self.chance(0.6):
            out.append(Stmt(f"__shared__ unsigned s0[{size + 8}];", features=frozenset({"static_shared"})))
            self.storages.append(_Storage(["s0"], {"s0": 0}, size))
        if not self.storages or self.chance(0.5):
            names = ["e0"] if self.chance(0.5) else ["e0", "e1"]
            feats = {"extern_shared"} | ({"extern_shared_multi"} if len(names) > 1 else set())
            for n in names:
                out.append(Stmt(f"extern __shared__ unsigned {n}[];", features=frozenset(feats)))
            self.storages.append(_Storage(names, {n: 0 for n in names}, size))
        if self.chance(0.4):  # a local pointer into a storage: `unsigned* p = s0 + k`
            st = self.pick(*self.storages)
            base = st.names[0]
            off = self.pick(1, self.block) if not self.strict else self.block
            alias = self.fresh("sp")
            out.append(Stmt(f"unsigned* {alias} = {base} + {off};",
                            features=frozenset({"shared_alias", "pointer_arith"})))
            st.names.append(alias)
            st.offsets[alias] = off
        return out

    def shared_bytes(self) -> int:
        return 4 * (2 * self.block + 8) if any(n.startswith("e") for s in self.storages for n in s.names) else 0

    def shared_write_index(self, st: _Storage, name: str) -> str | None:
        """An index of `name` at which the thread writes: in strict kernels one of its own
        elements (tid and tid + block, through an alias at offset k the index minus k;
        None when the alias reaches neither), in loose ones anything in bounds."""
        if not self.strict:
            return self.shared_any_index(st, name)
        off = st.offsets[name]
        own = [("tid" if e == off else f"(tid + {e - off}u)") for e in (0, self.block) if e >= off]
        return self.pick(*own) if own else None

    def shared_any_index(self, st: _Storage, name: str) -> str:
        b, off = self.block, st.offsets[name]
        limit = st.size - off          # elements of the used range reachable from `name`
        return self.pick("tid", f"((tid + {self.pick(1, 3, 32, 33)}u) % {limit}u)", f"({b - 1}u - tid % {b}u)",
                         f"((tid ^ 1u) % {limit}u)", "0u", f"({self.pick(*self.values)} % {limit}u)")

    def shared_read(self) -> tuple[str, set[str]] | None:
        st = self.pick(*self.storages)
        name = self.pick(*st.names)
        if self.strict:
            if not st.initialised:
                return None
            if st.written:   # only the thread's own elements in a stretch that writes them
                idx = self.shared_write_index(st, name)
                if idx is None:
                    return None
            else:
                st.read_any = True
                idx = self.shared_any_index(st, name)
        else:
            idx = self.shared_any_index(st, name)
        return f"{name}[{idx}]", set()

    def shared_write(self) -> Stmt | None:
        st = self.pick(*self.storages)
        name = self.pick(*st.names)
        if self.strict and st.read_any:
            return None   # others read this storage in this stretch: no write before a barrier
        idx = self.shared_write_index(st, name)
        if idx is None:
            return None
        val, feats = self.value()
        if self.strict:
            if st.read_any:   # the value read this storage at other threads' elements: no write before a barrier
                return Stmt(f"{self.values[0]} ^= {val};", features=frozenset(feats))
            st.written = True
        elif self.chance(0.15):
            return Stmt(f"atomicAdd(&{name}[{idx}], {val});", features=frozenset(feats | {"atomic", "atomic_shared"}))
        return Stmt(f"{name}[{idx}] = {val};", features=frozenset(feats))

    def shared_fill(self) -> Stmt:
        """Every element of a storage written by a block-stride loop (the region lanes' shape)."""
        st = self.pick(*self.storages)
        name = st.names[0]
        if not self.strict and self.chance(0.5) and len(st.names) > 1:
            # s[c] = s[c] + nxt[c], nxt = s + k: a neighbour's element through an alias
            other = st.names[-1]
            bound = st.size - st.offsets[other]
            c = self.fresh("c")
            return Stmt(f"for (unsigned {c} = threadIdx.x; {c} < {bound}u; {c} += blockDim.x)",
                        (Stmt(f"{name}[{c}] = {name}[{c}] + {other}[{c}];"),),
                        features=frozenset({"block_stride_loop"}))
        c = self.fresh("c")
        val, feats = self.global_load("c", f"((blockIdx.x * {st.size}u + {c}) & {self.mask}u)")
        if self.strict:
            if st.read_any:   # others read it in this stretch: the fill waits for a barrier
                return self.assign_value()
            st.written = True
            if not self.st.in_branch and not self.st.returned:
                st.full_write_pending = True
        return Stmt(f"for (unsigned {c} = threadIdx.x; {c} < {st.size}u; {c} += blockDim.x)",
                    (Stmt(f"{name}[{c}] = {val} + {c};", features=frozenset(feats)),),
                    features=frozenset({"block_stride_loop"}))

    # ---------------------------------------------------------------- statements
    def global_write(self) -> Stmt:
        buf = self.pick("a", "b")
        idx = self.global_index(own=self.strict)
        val, feats = self.value()
        form = self.pick("=", "=", "+=", "^=", "stcs", "stwt", "stcg", "stwb")
        if form.startswith("st"):
            return Stmt(f"__{form}({buf} + {idx}, {val});", features=frozenset(feats | {"store_intrinsic"}))
        return Stmt(f"{buf}[{idx}] {form} {val};", features=frozenset(feats))

    def global_alias(self) -> list[Stmt]:
        """A local pointer computed from a parameter, then used as the parameter would be."""
        alias = self.fresh("p")
        if self.strict:
            stmts = [Stmt(f"unsigned* {alias} = a + blockIdx.x * blockDim.x;",
                          features=frozenset({"global_alias", "pointer_arith"}))]
            val, feats = self.value()
            stmts.append(Stmt(f"{alias}[tid] = {val};", features=frozenset(feats)))
            return stmts
        base = self.pick("a", "b")
        off = self.pick(1, 2, 32)
        stmts = [Stmt(f"unsigned* {alias} = {base} + {off};", features=frozenset({"global_alias", "pointer_arith"}))]
        val, feats = self.value()
        stmts.append(Stmt(f"{alias}[{self.global_index(own=False)}] = {val};", features=frozenset(feats)))
        if self.chance(0.5):
            v = self.pick(*self.values)
            stmts.append(Stmt(f"{v} += {alias}[{self.global_index(own=False)}];"))
        return stmts

    def assign_value(self) -> Stmt:
        v = self.pick(*self.values)
        val, feats = self.value()
        return Stmt(f"{v} = {val};" if self.chance(0.5) else f"{v} ^= {val};", features=frozenset(feats))

    def atomic(self) -> Stmt:
        val, feats = self.value(1)
        idx = self.global_index(own=False)
        if self.strict:
            return Stmt(f"{self.atomic_op}(&acc[{idx}], {val});", features=frozenset(feats | {"atomic"}))
        op = self.pick("atomicAdd", "atomicMax", "atomicExch", "atomicOr", self.atomic_op)
        target = self.pick("acc", "acc", "a")
        if self.chance(0.5):
            v = self.pick(*self.values)
            return Stmt(f"{v} += {op}(&{target}[{idx}], {val});",
                        features=frozenset(feats | {"atomic", "atomic_return"}))
        return Stmt(f"{op}(&{target}[{idx}], {val});", features=frozenset(feats | {"atomic"}))

    def warp_op(self) -> list[Stmt]:
        v = self.pick(*self.values)
        kind = self.pick("shfl", "shfl", "vote", "vote", "syncwarp", "partial", "reduce", "uniform_if")
        if self.warp_helper and self.chance(0.3):   # a helper with shuffles (inline_calls.py)
            return [Stmt(f"{v} = {self.name}_warp_sum({v});", features=frozenset({"shuffle", "helper_call"}))]
        if kind == "shfl":
            return [Stmt(self.shuffle(v, FULL_MASK, 32), features=frozenset({"shuffle"}))]
        if kind == "vote":
            w = self.pick(*self.values)
            form = self.pick(f"{v} += __popc(__ballot_sync({FULL_MASK}, ({w} & 1u) != 0u));",
                             f"{v} ^= __ballot_sync({FULL_MASK}, {w} > {self.const()});",
                             f"{v} += __any_sync({FULL_MASK}, ({w} & 7u) == 0u);",
                             f"{v} += __all_sync({FULL_MASK}, {w} != 0u);")
            return [Stmt(form, features=frozenset({"vote"}))]
        if kind == "syncwarp":
            return [Stmt("__syncwarp();", features=frozenset({"syncwarp"}))]
        if kind == "partial":   # exactly the lanes inside the `if` named by the mask
            lanes, mask = self.pick((16, "0x0000ffffu"), (8, "0x000000ffu"))
            inner = self.shuffle(v, mask, lanes)
            body = [Stmt(inner, features=frozenset({"shuffle"}))]
            if self.chance(0.3):
                body.append(Stmt(f"__syncwarp({mask});", features=frozenset({"syncwarp"})))
            return [Stmt(f"if (lane < {lanes}u)", tuple(body), features=frozenset({"partial_mask"}))]
        if kind == "reduce":
            o = self.fresh("o")
            return [Stmt(f"for (int {o} = 16; {o} > 0; {o} >>= 1)",
                         (Stmt(f"{v} += __shfl_down_sync({FULL_MASK}, {v}, {o});"),),
                         features=frozenset({"shuffle", "uniform_loop"}))]
        cond = self.pick("(tid >> 5) == 0u", "(tid >> 5) == 1u", "blockIdx.x == 0u")
        return [Stmt(f"if ({cond})", (Stmt(self.shuffle(v, FULL_MASK, 32), features=frozenset({"shuffle"})),),
                     features=frozenset({"warp_uniform_if"}))]

    def shuffle(self, v: str, mask: str, lanes: int) -> str:
        kind = self.pick("xor", "down", "up", "idx")
        if kind == "xor":
            m = self.pick(*[x for x in (1, 2, 4, 8, 16) if x < lanes])
            return f"{v} = __shfl_xor_sync({mask}, {v}, {m});"
        if kind == "down":
            return f"{v} += __shfl_down_sync({mask}, {v}, {self.pick(1, 2, 4)});"
        if kind == "up":
            return f"{v} ^= __shfl_up_sync({mask}, {v}, {self.pick(1, 3)});"
        src = self.pick("0", "lane ^ 1u", f"{self.pick(*self.values)} % {lanes}u") if lanes == 32 else "lane ^ 1u"
        width = f", {self.pick(8, 16)}" if lanes == 32 and self.chance(0.3) else ""
        return f"{self.pick(*self.values)} = __shfl_sync({mask}, {v}, {src}{width});"

    def early_return(self) -> Stmt | None:
        if self.strict and any(not (s.initialised or s.full_write_pending) for s in self.storages):
            return None  # a thread leaving before writing its shared elements leaves them unwritten
        uniform = self.whole_warps and self.chance(0.5)
        if uniform:
            cond = self.pick("(tid >> 5) == 1u", "blockIdx.x == 1u", f"(tid >> 5) == {self.block // 32 - 1}u")
            feats = {"early_return", "warp_uniform_return"}
        else:
            cond = self.pick(f"gid >= {self.rng.randint(1, self.grid * self.block)}u", "tid == 5u", "(tid % 7u) == 3u")
            feats = {"early_return"}
            self.st.warp_ok = False
        self.st.returned = True
        return Stmt(f"if ({cond}) return;", features=frozenset(feats))

    def branch(self) -> Stmt:
        cond = self.pick("(tid % 3u) == 0u", "(v0 & 1u) != 0u", f"gid < {self.rng.randint(1, self.grid * self.block)}u",
                         "lane < 16u")
        was = self.st.in_branch
        self.st.in_branch = True
        then = tuple(self.simple_stmts(self.rng.randint(1, 2)))
        orelse = tuple(self.simple_stmts(self.rng.randint(1, 2))) if self.chance(0.6) else None
        self.st.in_branch = was
        return Stmt(f"if ({cond})", then, orelse, features=frozenset({"divergent_branch"}))

    def simple_stmts(self, n: int) -> list[Stmt]:
        """Statements with no barrier or warp operation (divergent branches hold these)."""
        out = []
        for _ in range(n):
            roll = self.rng.random()
            if roll < 0.3:
                out.append(self.assign_value())
            elif roll < 0.55:
                out.append(self.global_write())
            elif roll < 0.8 and self.storages:
                w = self.shared_write()
                out.append(w if w is not None else self.assign_value())
            elif self.use_atomics:
                out.append(self.atomic())
            else:
                out.append(self.assign_value())
        return out

    def stretch(self, n: int, allow_loops: bool = True) -> list[Stmt]:
        """The statements between two barriers."""
        out: list[Stmt] = []
        for _ in range(n):
            if self.use_warp and self.st.warp_ok and self.chance(0.3):
                out += self.warp_op()
                continue
            roll = self.rng.random()
            if roll < 0.45:
                out += self.simple_stmts(1)
            elif roll < 0.55:
                out.append(self.branch())
            elif roll < 0.65 and self.storages:
                out.append(self.shared_fill())
            elif roll < 0.75 and self.use_warp and self.st.warp_ok:
                out += self.warp_op()
            elif roll < 0.8 and (not self.elementwise or self.chance(0.25)):
                out += self.global_alias()
            elif roll < 0.87 and allow_loops and not self.st.loop_var:
                out.append(self.uniform_loop())
            elif roll < 0.92 and allow_loops and not self.st.loop_var:
                out.append(self.grid_stride_loop())
            elif roll < 0.97 and not self.st.in_branch and not self.st.loop_var:
                r = self.early_return()
                if r is not None:
                    out.append(r)
            else:
                out.append(self.assign_value())
        return out

    def uniform_loop(self) -> Stmt:
        r = self.fresh("r")
        trips = self.pick(3, 8, 40, 70)
        self.st.loop_var = r
        body = [self.assign_value()]
        if self.chance(0.5):
            idx = self.global_index(own=self.strict)
            v = self.pick(*self.values)
            body.append(Stmt(f"a[{idx}] += {v} + {r};"))
        self.st.loop_var = None
        return Stmt(f"for (unsigned {r} = 0; {r} < {trips}u; ++{r})", tuple(body), features=frozenset({"uniform_loop"}))

    def grid_stride_loop(self) -> Stmt:
        i = self.fresh("i")
        self.st.loop_var = i
        val, feats = self.global_load("c", self.global_index(own=False, var=i))
        buf = self.pick("a", "b")
        own = self.global_index(own=self.strict, var=i)
        v = self.pick(*self.values)
        body = (Stmt(f"{buf}[{own}] = {val} ^ {v};", features=frozenset(feats)),)
        self.st.loop_var = None
        return Stmt(f"for (unsigned {i} = gid; {i} < n; {i} += blockDim.x * gridDim.x)", body,
                    features=frozenset({"grid_stride_loop"}))

    def barrier(self) -> Stmt:
        for s in self.storages:
            if s.full_write_pending:
                s.initialised = True
            s.written = s.read_any = s.full_write_pending = False
        return Stmt("__syncthreads();", features=frozenset({"barrier"}))

    def barrier_loop(self) -> Stmt:
        """A block-uniform loop with barriers in its body (a tile loop): fill, barrier, use, barrier."""
        t = self.fresh("t")
        self.st.loop_var = t
        body: list[Stmt] = []
        if self.storages:
            st = self.pick(*self.storages)
            c = self.fresh("c")
            val, feats = self.global_load("c", f"(({t} * {st.size}u + blockIdx.x + {c}) & {self.mask}u)")
            if self.strict:
                st.written = True
            body.append(Stmt(f"for (unsigned {c} = threadIdx.x; {c} < {st.size}u; {c} += blockDim.x)",
                             (Stmt(f"{st.names[0]}[{c}] = {val};", features=frozenset(feats)),),
                             features=frozenset({"block_stride_loop"})))
            if self.strict:
                st.full_write_pending = True
        body += self.stretch(self.rng.randint(0, 1), allow_loops=False)
        body.append(self.barrier())
        body += self.stretch(self.rng.randint(1, 2), allow_loops=False)
        if not self.strict and self.chance(0.5):
            body.append(Stmt("// second barrier left out", features=frozenset({"missing_barrier"})))
        else:
            body.append(self.barrier())
        self.st.loop_var = None
        return Stmt(f"for (unsigned {t} = 0; {t} < {self.pick(2, 3)}u; ++{t})", tuple(body),
                    features=frozenset({"barrier_loop"}))

    # ---------------------------------------------------------------- the kernel
    def kernel(self) -> Kernel:
        r = self.rng
        body: list[Stmt] = [Stmt("unsigned tid = threadIdx.x;"),
                            Stmt("unsigned gid = blockIdx.x * blockDim.x + threadIdx.x;"),
                            Stmt("unsigned lane = tid & 31u;"),
                            Stmt("unsigned v0 = gid * 2654435761u;"),
                            Stmt(f"unsigned v1 = tid + {self.const()};")]
        if self.use_shared:
            body += self.declare_shared()
        self.warp_helper = self.use_warp and self.chance(0.35)
        self.sync_helper = self.use_barriers and bool(self.storages) and self.chance(0.35)
        if self.strict and self.storages:   # strict kernels fill their shared memory first
            for st in self.storages:
                c = self.fresh("c")
                body.append(Stmt(f"for (unsigned {c} = threadIdx.x; {c} < {st.size}u; {c} += blockDim.x)",
                                 (Stmt(f"{st.names[0]}[{c}] = {c} * 3u + blockIdx.x;"),),
                                 features=frozenset({"block_stride_loop"})))
                st.written = st.full_write_pending = True
        stretches = r.randint(2, 4) if self.use_barriers else 1
        for k in range(stretches):
            body += self.stretch(r.randint(1, 3))
            if k + 1 < stretches:
                if not self.strict and self.chance(0.2):
                    body.append(Stmt("// barrier left out", features=frozenset({"missing_barrier"})))
                elif self.sync_helper and self.chance(0.5) and not (self.strict and self.storages[0].read_any):
                    body.append(self.fill_and_sync())
                else:
                    body.append(self.barrier())
                if self.chance(0.25):
                    body.append(self.barrier_loop())
        final = self.pick("a", "b")
        body.append(Stmt(f"{final}[{self.global_index(own=self.strict)}] = v0 ^ (v1 << 1);"))
        return Kernel(self.name, self.seed, self.strict, self.params(), tuple(body), self.launch(), self.length,
                      self.launch_features(), self.helpers())

    def helpers(self) -> str:
        out = []
        if self.warp_helper:
            out.append(f"__device__ unsigned {self.name}_warp_sum(unsigned v) {{\n"
                       f"    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync({FULL_MASK}, v, o);\n"
                       "    return v;\n}")
        if self.sync_helper:
            size = self.storages[0].size
            out.append(f"__device__ void {self.name}_fill(unsigned* s, const unsigned* src, unsigned k) {{\n"
                       f"    for (unsigned j = threadIdx.x; j < {size}u; j += blockDim.x) "
                       f"s[j] = src[(k + j) & {self.mask}u];\n"
                       "    __syncthreads();\n}")
        return "\n".join(out)

    def fill_and_sync(self) -> Stmt:
        """A helper filling the first storage and meeting at a barrier, called where a barrier stands."""
        st = self.storages[0]
        src = "c" if self.strict else self.pick("c", "a")
        if self.strict:
            st.written = True
            st.full_write_pending = st.full_write_pending or not self.st.returned
        self.barrier()
        return Stmt(f"{self.name}_fill({st.names[0]}, {src}, blockIdx.x * 7u);",
                    features=frozenset({"helper_call", "barrier", "block_stride_loop"}))

    def params(self) -> str:
        q = " __restrict__" if self.restrict else ""
        return f"unsigned*{q} a, unsigned*{q} b, const unsigned*{q} c, unsigned* acc, unsigned n"

    def launch(self) -> Launch:
        args = {"distinct": ("d[0]", "d[1]", "d[2]", "d[3]"),
                "same": ("d[0]", "d[0]", "d[2]", "d[3]"),
                "offset": ("d[0]", "d[0] + 1", "d[2]", "d[3]"),
                "readonly": ("d[0]", "d[1]", "d[0]", "d[3]"),
                "readonly_offset": ("d[0]", "d[1]", "d[0] + 1", "d[3]")}[self.binding]
        return Launch(self.grid, self.block, self.shared_bytes(), args, self.launches)

    def launch_features(self) -> frozenset[str]:
        f = {"same": {"inplace_same"}, "offset": {"inplace_offset"}, "readonly": {"inplace_readonly"},
             "readonly_offset": {"inplace_readonly", "inplace_offset"}}.get(self.binding, set())
        f |= {"restrict"} if self.restrict else set()
        f |= {"multi_launch"} if self.launches > 1 else set()
        f |= set() if self.whole_warps else {"partial_warp_block"}
        return frozenset(f)
