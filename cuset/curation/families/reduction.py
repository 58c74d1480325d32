"""Reductions and scans: tree reductions in shared memory, warp shuffles, atomics, multi-pass scans."""

from __future__ import annotations

import textwrap

from cuset.curation.families.base import (
    CTYPES, Check, Family, Tensor, assemble, fill, float_tolerance, one_axis, pick, size_grid,
)

SUITE_N = ({"n": 262144}, {"n": 16777216})
SMALL_N = one_axis("n", (1000, 4096, 10000, 30000, 65536, 100000, 131072, 200000, 250000))
LARGE_N = one_axis("n", (1 << 20, 5_000_000, 1 << 23, 1 << 25))
SUITE_MATRIX = ({"rows": 256, "cols": 1024}, {"rows": 8192, "cols": 4096})
SMALL_MATRIX = size_grid(rows=(32, 100, 128, 500), cols=(64, 250, 512, 1000, 2048))
LARGE_MATRIX = size_grid(rows=(4096, 16384), cols=(1024, 8192))


# ---------------------------------------------------------------- block_sum (shared-memory tree + atomicAdd)

# op -> (task name, math, term of v, numpy expression over x64, final CUDA statement or "")
SUM_OPS = {
    "sum": ("Sum_Reduction", "the sum of all elements", "v", "x64.sum()", ""),
    "sum_squares": ("Sum_Of_Squares_Reduction", "the sum of squares of all elements", "v * v", "(x64 * x64).sum()", ""),
    "abs_sum": ("Absolute_Sum_Reduction", "the sum of absolute values (L1 norm)", "fabsf(v)", "np.abs(x64).sum()", ""),
    "mean": ("Mean_Reduction", "the arithmetic mean of all elements", "v", "x64.mean()", ""),
    "l2_norm": ("Vector_L2_Norm", "the Euclidean norm sqrt(sum of squares)", "v * v", "np.sqrt((x64 * x64).sum())", "sqrt"),
}


def build_block_sum(variant, size, seed):
    op, n = variant["op"], size["n"]
    name, math_desc, term, npexpr, final = SUM_OPS[op]
    block = pick((128, 256, 512), name, n)
    x, out = Tensor("x", "float32", (n,), "N"), Tensor("out", "float32", (1,), "1")
    scale = "1.0f / N" if op == "mean" else "1.0f"
    kernels = fill(
        """
        template <int BLOCK>
        __global__ void block_reduce(const float* __restrict__ x, float* __restrict__ out, int n) {
            __shared__ float partial[BLOCK];
            int tid = threadIdx.x;
            float acc = 0.0f;
            for (int i = blockIdx.x * BLOCK + tid; i < n; i += BLOCK * gridDim.x) {
                float v = x[i];
                acc += $TERM;
            }
            partial[tid] = acc;
            __syncthreads();
            // Tree reduction in shared memory: halve the active threads each step.
            for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
                if (tid < stride) {
                    partial[tid] += partial[tid + stride];
                }
                __syncthreads();
            }
            if (tid == 0) {
                atomicAdd(out, partial[0] * ($SCALE));
            }
        }
        """,
        TERM=term, SCALE=scale,
    )
    if final:
        kernels += "\n\n__global__ void finish_sqrt(float* out) {\n    out[0] = sqrtf(out[0]);\n}"
    launch = fill(
        """
        constexpr int BLOCK = $BLOCK;
        int blocks = (N + BLOCK - 1) / BLOCK;
        if (blocks > 256) blocks = 256;
        CUDA_CHECK(cudaMemset(d_out, 0, sizeof(float)));
        block_reduce<BLOCK><<<blocks, BLOCK>>>(d_x, d_out, N);
        """,
        BLOCK=block,
    )
    if final:
        launch += "\nfinish_sqrt<<<1, 1>>>(d_out);"
    atol, rtol = float_tolerance(n, 1.0)
    if op == "mean":
        atol = float(f"{atol / n:.2g}")
    return assemble(
        task_name=name,
        detail=(
            f"Compute {math_desc} of the float32 vector x of length {n} into out[0]. Reduce each block's "
            "partial sums in shared memory and combine the blocks with atomicAdd."
        ),
        algorithm=f"Parallel reduction: out = {math_desc} of a vector.",
        inputs=(x,), outputs=(out,), checks=(Check("out", atol, rtol),),
        constants=f"constexpr int N = {n};", kernels=kernels, launch=launch,
        gen_body=f"N = {n}\nx = rng.uniform(-1.0, 1.0, N).astype(np.float32)\nx64 = x.astype(np.float64)\nout = np.array([{npexpr}])",
        seed=seed, includes=("cmath",),
    )


BLOCK_SUM = Family(
    name="block_sum", domain="reduction", build=build_block_sum,
    suite_variant={"op": "sum"}, suite_sizes=SUITE_N,
    variants=tuple({"op": op} for op in SUM_OPS if op != "sum"),
    small_sizes=SMALL_N, large_sizes=LARGE_N,
)


# ---------------------------------------------------------------- warp_minmax (shuffles, two passes)

# (op, dtype) -> (title, identity, combine expression of a and b, term of v, numpy expression)
def _minmax(op, dtype):
    is_float = dtype == "float32"
    lowest = {"float32": "-FLT_MAX", "int32": "INT_MIN", "uint32": "0u"}[dtype]
    highest = {"float32": "FLT_MAX", "int32": "INT_MAX", "uint32": "UINT_MAX"}[dtype]
    if op == "max":
        return "Max", lowest, "fmaxf(a, b)" if is_float else "max(a, b)", "v", "x.max()"
    if op == "min":
        return "Min", highest, "fminf(a, b)" if is_float else "min(a, b)", "v", "x.min()"
    if op == "maxabs":
        return "Max_Abs", "0", "fmaxf(a, b)" if is_float else "max(a, b)", "fabsf(v)" if is_float else "abs(v)", "np.abs(x).max()"
    raise ValueError(op)


def build_warp_minmax(variant, size, seed):
    op, dtype, n = variant["op"], variant["dtype"], size["n"]
    title, identity, combine, term, npexpr = _minmax(op, dtype)
    t = CTYPES[dtype]
    x, out = Tensor("x", dtype, (n,), "N"), Tensor("out", dtype, (1,), "1")
    kernels = fill(
        """
        typedef $T value_t;

        __device__ __forceinline__ value_t combine(value_t a, value_t b) {
            return $COMBINE;
        }

        __device__ __forceinline__ value_t warp_reduce(value_t v) {
            for (int offset = 16; offset > 0; offset >>= 1) {
                v = combine(v, __shfl_down_sync(0xffffffff, v, offset));
            }
            return v;
        }

        // Pass 1 writes one partial per block; pass 2 runs the same kernel on the partials.
        __global__ void reduce_pass(const value_t* __restrict__ in, value_t* __restrict__ out, int n) {
            __shared__ value_t warp_vals[32];
            value_t acc = $IDENTITY;
            for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
                value_t v = in[i];
                acc = combine(acc, $TERM);
            }
            acc = warp_reduce(acc);
            int lane = threadIdx.x & 31;
            int warp = threadIdx.x >> 5;
            if (lane == 0) {
                warp_vals[warp] = acc;
            }
            __syncthreads();
            if (warp == 0) {
                acc = lane < (int)(blockDim.x >> 5) ? warp_vals[lane] : $IDENTITY;
                acc = warp_reduce(acc);
                if (lane == 0) {
                    out[blockIdx.x] = acc;
                }
            }
        }
        """,
        T=t, COMBINE=combine, IDENTITY=identity, TERM=term,
    )
    launch = """
        const int threads = 256;
        int blocks = (N + threads - 1) / threads;
        if (blocks > 1024) blocks = 1024;
        value_t* d_partial;
        CUDA_CHECK(cudaMalloc(&d_partial, blocks * sizeof(value_t)));
        reduce_pass<<<blocks, threads>>>(d_x, d_partial, N);
        reduce_pass<<<1, 1024>>>(d_partial, d_out, blocks);
        CUDA_CHECK(cudaFree(d_partial));
    """
    draw = {
        "float32": "rng.standard_normal(N).astype(np.float32) * 10",
        "int32": "rng.integers(-2_000_000, 2_000_000, N, dtype=np.int32)",
        "uint32": "rng.integers(0, 4_000_000_000, N, dtype=np.uint32)",
    }[dtype]
    what = {"max": "maximum", "min": "minimum", "maxabs": "largest absolute value"}[op]
    suffix = {"float32": "", "int32": "_Int32", "uint32": "_UInt32"}[dtype]
    return assemble(
        task_name=f"{title}_Reduction{suffix}",
        detail=(
            f"Find the {what} of the {n} {dtype} values of x and write it to out[0]. Reduce within warps "
            "with __shfl_down_sync, then across warps through shared memory; a second launch reduces the per-block partials."
        ),
        algorithm=f"Parallel reduction computing the {what} of a vector.",
        inputs=(x,), outputs=(out,), checks=(Check("out"),),
        constants=f"constexpr int N = {n};", kernels=kernels, launch=launch,
        gen_body=f"N = {n}\nx = {draw}\nout = np.array([{npexpr}])",
        seed=seed, includes=("cfloat", "climits"),
    )


WARP_MINMAX = Family(
    name="warp_minmax", domain="reduction", build=build_warp_minmax,
    suite_variant={"op": "max", "dtype": "float32"}, suite_sizes=SUITE_N,
    variants=tuple(
        {"op": op, "dtype": dt}
        for op in ("max", "min", "maxabs") for dt in ("float32", "int32", "uint32")
        if (op, dt) not in (("max", "float32"), ("maxabs", "uint32"))
    ),
    small_sizes=SMALL_N, large_sizes=LARGE_N,
)


# ---------------------------------------------------------------- dot_product (warp shuffle + one atomic per warp)

DOT_OPS = {
    "dot": ("Dot_Product", "sum_i x[i] * y[i]", "x[i] * y[i]", "(x64 * y).sum()"),
    "sqdist": ("Squared_Euclidean_Distance", "sum_i (x[i] - y[i])^2", "(x[i] - y[i]) * (x[i] - y[i])", "((x64 - y) ** 2).sum()"),
    "l1dist": ("Manhattan_Distance", "sum_i |x[i] - y[i]|", "fabsf(x[i] - y[i])", "np.abs(x64 - y).sum()"),
    "wdot": ("Weighted_Dot_Product", "sum_i w[i] * x[i] * y[i]", "w[i] * x[i] * y[i]", "(w.astype(np.float64) * x64 * y).sum()"),
}


def build_dot(variant, size, seed):
    op, n = variant["op"], size["n"]
    x, y = Tensor("x", "float32", (n,), "N"), Tensor("y", "float32", (n,), "N")
    out = Tensor("out", "float32", (1,), "1")
    if op == "cosine":
        return _build_cosine(n, x, y, out, seed)
    name, math_desc, term, npexpr = DOT_OPS[op]
    weighted = op == "wdot"
    inputs = (x, y, Tensor("w", "float32", (n,), "N")) if weighted else (x, y)
    wparam = ", const float* __restrict__ w" if weighted else ""
    kernels = fill(
        """
        __global__ void dot_kernel(const float* __restrict__ x, const float* __restrict__ y$WPARAM,
                                   float* __restrict__ out, int n) {
            float acc = 0.0f;
            for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
                acc += $TERM;
            }
            // Sum the warp's 32 partials with shuffles, then one atomic per warp.
            for (int offset = 16; offset > 0; offset >>= 1) {
                acc += __shfl_down_sync(0xffffffff, acc, offset);
            }
            if ((threadIdx.x & 31) == 0) {
                atomicAdd(out, acc);
            }
        }
        """,
        WPARAM=wparam, TERM=term,
    )
    args = "d_x, d_y, d_w, d_out" if weighted else "d_x, d_y, d_out"
    launch = fill(
        """
        const int threads = 256;
        int blocks = (N + threads - 1) / threads;
        if (blocks > $MAXB) blocks = $MAXB;
        CUDA_CHECK(cudaMemset(d_out, 0, sizeof(float)));
        dot_kernel<<<blocks, threads>>>($ARGS, N);
        """,
        MAXB=pick((128, 256, 512), name, n), ARGS=args,
    )
    wgen = "w = rng.uniform(0.0, 2.0, N).astype(np.float32)\n" if weighted else ""
    return assemble(
        task_name=name,
        detail=(
            f"Compute out[0] = {math_desc} over two float32 vectors x and y of length {n}"
            + (" with float32 weights w" if weighted else "")
            + ". Accumulate per thread with a grid-stride loop, reduce each warp with __shfl_down_sync and add "
            "each warp's result to out with atomicAdd."
        ),
        algorithm=f"Reduction of two vectors to one number: {math_desc}.",
        inputs=inputs, outputs=(out,), checks=(Check("out", *float_tolerance(n, 1.0)),),
        constants=f"constexpr int N = {n};", kernels=kernels, launch=launch,
        gen_body=(
            f"N = {n}\nx = rng.uniform(-1.0, 1.0, N).astype(np.float32)\n"
            "y = (0.5 * x + rng.uniform(-0.5, 0.5, N)).astype(np.float32)\n"
            f"{wgen}x64 = x.astype(np.float64)\nout = np.array([{npexpr}])"
        ),
        seed=seed,
    )


def _build_cosine(n, x, y, out, seed):
    kernels = """
        __device__ __forceinline__ float warp_sum(float v) {
            for (int offset = 16; offset > 0; offset >>= 1) {
                v += __shfl_down_sync(0xffffffff, v, offset);
            }
            return v;
        }

        // sums[0] = x.y, sums[1] = x.x, sums[2] = y.y
        __global__ void cosine_partials(const float* __restrict__ x, const float* __restrict__ y,
                                        float* __restrict__ sums, int n) {
            float xy = 0.0f, xx = 0.0f, yy = 0.0f;
            for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
                float a = x[i], b = y[i];
                xy += a * b;
                xx += a * a;
                yy += b * b;
            }
            xy = warp_sum(xy);
            xx = warp_sum(xx);
            yy = warp_sum(yy);
            if ((threadIdx.x & 31) == 0) {
                atomicAdd(&sums[0], xy);
                atomicAdd(&sums[1], xx);
                atomicAdd(&sums[2], yy);
            }
        }

        __global__ void cosine_finish(const float* sums, float* out) {
            out[0] = sums[0] / (sqrtf(sums[1]) * sqrtf(sums[2]));
        }
    """
    launch = """
        const int threads = 256;
        int blocks = (N + threads - 1) / threads;
        if (blocks > 256) blocks = 256;
        float* d_sums;
        CUDA_CHECK(cudaMalloc(&d_sums, 3 * sizeof(float)));
        CUDA_CHECK(cudaMemset(d_sums, 0, 3 * sizeof(float)));
        cosine_partials<<<blocks, threads>>>(d_x, d_y, d_sums, N);
        cosine_finish<<<1, 1>>>(d_sums, d_out);
        CUDA_CHECK(cudaFree(d_sums));
    """
    return assemble(
        task_name="Cosine_Similarity",
        detail=(
            f"Compute out[0] = (x . y) / (||x|| * ||y||) for two float32 vectors of length {n}: accumulate the "
            "three dot products with warp shuffles and atomics, then divide in a one-thread kernel."
        ),
        algorithm="Cosine similarity of two vectors: dot(x, y) / (norm(x) * norm(y)).",
        inputs=(x, y), outputs=(out,), checks=(Check("out", 1e-5, 1e-4),),
        constants=f"constexpr int N = {n};", kernels=kernels, launch=launch,
        gen_body=(
            f"N = {n}\nx = rng.uniform(-1.0, 1.0, N).astype(np.float32)\n"
            "y = (0.5 * x + rng.uniform(-0.5, 0.5, N)).astype(np.float32)\n"
            "x64, y64 = x.astype(np.float64), y.astype(np.float64)\n"
            "out = np.array([(x64 @ y64) / (np.linalg.norm(x64) * np.linalg.norm(y64))])"
        ),
        seed=seed, includes=("cmath",),
    )


DOT_PRODUCT = Family(
    name="dot_product", domain="reduction", build=build_dot,
    suite_variant={"op": "dot"}, suite_sizes=SUITE_N,
    variants=({"op": "sqdist"}, {"op": "l1dist"}, {"op": "wdot"}, {"op": "cosine"}),
    small_sizes=SMALL_N, large_sizes=LARGE_N,
)


# ---------------------------------------------------------------- row_reduce (one block per row, dynamic shared memory)

# op -> (title, math, init, combine(a, b), term of v, final of s, numpy)
ROW_OPS = {
    "sum": ("Row_Sum", "the sum", "0.0f", "a + b", "v", "s", "x64.sum(axis=1)"),
    "mean": ("Row_Mean", "the mean", "0.0f", "a + b", "v", "s / cols", "x64.mean(axis=1)"),
    "max": ("Row_Max", "the maximum", "-FLT_MAX", "fmaxf(a, b)", "v", "s", "x64.max(axis=1)"),
    "min": ("Row_Min", "the minimum", "FLT_MAX", "fminf(a, b)", "v", "s", "x64.min(axis=1)"),
    "l2": ("Row_L2_Norm", "the Euclidean norm", "0.0f", "a + b", "v * v", "sqrtf(s)", "np.sqrt((x64 * x64).sum(axis=1))"),
    "sumsq": ("Row_Sum_Of_Squares", "the sum of squares", "0.0f", "a + b", "v * v", "s", "(x64 * x64).sum(axis=1)"),
    "logsumexp": None,  # handled by _row_logsumexp
}


def build_row_reduce(variant, size, seed):
    op, rows, cols = variant["op"], size["rows"], size["cols"]
    if op == "logsumexp":
        title, math_desc = "Row_LogSumExp", "log(sum(exp(x)))"
        init, combine, term, final = "-FLT_MAX", "fmaxf(a, b)", "v", "s"
        npexpr = "np.log(np.exp(x64 - x64.max(axis=1, keepdims=True)).sum(axis=1)) + x64.max(axis=1)"
    else:
        title, math_desc, init, combine, term, final, npexpr = ROW_OPS[op]
    x = Tensor("x", "float32", (rows, cols), "ROWS * COLS")
    out = Tensor("out", "float32", (rows,), "ROWS")
    block = pick((128, 256), title, rows, cols)
    reduce_fn = fill(
        """
        __device__ __forceinline__ float combine(float a, float b) {
            return $COMBINE;
        }

        // Block-wide reduction over the dynamically sized shared buffer (one float per thread).
        __device__ float block_reduce(float acc, float* sdata) {
            sdata[threadIdx.x] = acc;
            __syncthreads();
            for (int s = blockDim.x / 2; s > 0; s >>= 1) {
                if (threadIdx.x < s) {
                    sdata[threadIdx.x] = combine(sdata[threadIdx.x], sdata[threadIdx.x + s]);
                }
                __syncthreads();
            }
            float result = sdata[0];
            __syncthreads();
            return result;
        }
        """,
        COMBINE=combine,
    )
    if op == "logsumexp":
        body = """
            float m = -FLT_MAX;
            for (int c = threadIdx.x; c < cols; c += blockDim.x) {
                m = fmaxf(m, row[c]);
            }
            m = block_reduce(m, sdata);
            float acc = 0.0f;
            for (int c = threadIdx.x; c < cols; c += blockDim.x) {
                acc += expf(row[c] - m);
            }
            sdata[threadIdx.x] = acc;
            __syncthreads();
            for (int s = blockDim.x / 2; s > 0; s >>= 1) {
                if (threadIdx.x < s) {
                    sdata[threadIdx.x] += sdata[threadIdx.x + s];
                }
                __syncthreads();
            }
            if (threadIdx.x == 0) {
                out[blockIdx.x] = m + logf(sdata[0]);
            }
        """
    else:
        body = fill(
            """
            float acc = $INIT;
            for (int c = threadIdx.x; c < cols; c += blockDim.x) {
                float v = row[c];
                acc = combine(acc, $TERM);
            }
            float s = block_reduce(acc, sdata);
            if (threadIdx.x == 0) {
                out[blockIdx.x] = $FINAL;
            }
            """,
            INIT=init, TERM=term, FINAL=final,
        )
    kernels = reduce_fn + "\n\n" + fill(
        """
        __global__ void row_reduce(const float* __restrict__ x, float* __restrict__ out, int cols) {
            extern __shared__ float sdata[];
            const float* row = x + (size_t)blockIdx.x * cols;
        $BODY
        }
        """,
        BODY=textwrap.indent(textwrap.dedent(body).strip("\n"), "    "),
    )
    launch = fill(
        """
        const int threads = $BLOCK;
        row_reduce<<<ROWS, threads, threads * sizeof(float)>>>(d_x, d_out, COLS);
        """,
        BLOCK=block,
    )
    if op in ("max", "min"):
        checks = (Check("out"),)
    elif op == "mean":
        checks = (Check("out", *float_tolerance(cols, 1.0 / cols)),)
    else:
        checks = (Check("out", *float_tolerance(cols, 1.0)),)
    return assemble(
        task_name=title,
        detail=(
            f"For each of the {rows} rows of a {rows}x{cols} float32 matrix x, compute {math_desc} of the row "
            f"into out[row]. Use one thread block per row and a shared-memory tree reduction whose buffer size is "
            "given at launch (dynamic shared memory)."
        ),
        algorithm=f"Row-wise reduction of a matrix: out[r] = {math_desc} of row r.",
        inputs=(x,), outputs=(out,), checks=checks,
        constants=f"constexpr int ROWS = {rows};\nconstexpr int COLS = {cols};", kernels=kernels, launch=launch,
        gen_body=(
            f"ROWS, COLS = {rows}, {cols}\nx = rng.uniform(-2.0, 2.0, (ROWS, COLS)).astype(np.float32)\n"
            f"x64 = x.astype(np.float64)\nout = {npexpr}"
        ),
        seed=seed, includes=("cfloat", "cmath"),
    )


ROW_REDUCE = Family(
    name="row_reduce", domain="reduction", build=build_row_reduce,
    suite_variant={"op": "sum"}, suite_sizes=SUITE_MATRIX,
    variants=tuple({"op": op} for op in ROW_OPS if op != "sum"),
    small_sizes=SMALL_MATRIX, large_sizes=LARGE_MATRIX,
)


# ---------------------------------------------------------------- column_reduce (thread per column, coalesced)

COL_OPS = {
    # op -> (title, math, init, step of acc and v, final, numpy)
    "sum": ("Column_Sum", "the sum", "0", "acc + v", "acc", "x.astype(np.float64 if FLOAT else np.int64).sum(axis=0)"),
    "mean": ("Column_Mean", "the mean", "0", "acc + v", "acc / rows", "x.astype(np.float64).mean(axis=0)"),
    "max": ("Column_Max", "the maximum", "x[c]", "max(acc, v)", "acc", "x.max(axis=0)"),
    "min": ("Column_Min", "the minimum", "x[c]", "min(acc, v)", "acc", "x.min(axis=0)"),
}


def build_column_reduce(variant, size, seed):
    op, dtype, rows, cols = variant["op"], variant["dtype"], size["rows"], size["cols"]
    title, math_desc, init, step, final, npexpr = COL_OPS[op]
    t = CTYPES[dtype]
    is_float = dtype == "float32"
    if is_float:
        step = step.replace("max(", "fmaxf(").replace("min(", "fminf(")
    x = Tensor("x", dtype, (rows, cols), "ROWS * COLS")
    out = Tensor("out", dtype, (cols,), "COLS")
    kernels = fill(
        """
        // Thread c walks down column c; at each row the warp reads consecutive addresses.
        __global__ void column_reduce(const $T* __restrict__ x, $T* __restrict__ out, int rows, int cols) {
            int c = blockIdx.x * blockDim.x + threadIdx.x;
            if (c < cols) {
                $T acc = $INIT;
                for (int r = 0; r < rows; ++r) {
                    $T v = x[(size_t)r * cols + c];
                    acc = $STEP;
                }
                out[c] = $FINAL;
            }
        }
        """,
        T=t, INIT=init, STEP=step, FINAL=final if not (is_float and op == "mean") else "acc / (float)rows",
    )
    launch = _launch_cols(pick((64, 128, 256), title, dtype, rows, cols))
    if is_float:
        checks = (Check("out") if op in ("max", "min")
                  else Check("out", *float_tolerance(rows, 1.0 / rows if op == "mean" else 1.0)),)
        draw = "rng.uniform(-1.0, 1.0, (ROWS, COLS)).astype(np.float32)"
    else:
        checks = (Check("out"),)
        draw = "rng.integers(-1000, 1000, (ROWS, COLS), dtype=np.int32)"
    return assemble(
        task_name=title + ("" if is_float else "_Int32"),
        detail=(
            f"For each of the {cols} columns of a {rows}x{cols} {dtype} matrix x (row-major), compute {math_desc} "
            "of the column into out[col]. Give each thread one column so that a warp's loads are coalesced."
        ),
        algorithm=f"Column-wise reduction of a matrix: out[c] = {math_desc} of column c.",
        inputs=(x,), outputs=(out,), checks=checks,
        constants=f"constexpr int ROWS = {rows};\nconstexpr int COLS = {cols};", kernels=kernels, launch=launch,
        gen_body=f"FLOAT = {is_float}\nROWS, COLS = {rows}, {cols}\nx = {draw}\nout = {npexpr}",
        seed=seed,
    )


def _launch_cols(block: int) -> str:
    return fill(
        """
        const int threads = $BLOCK;
        const int blocks = (COLS + threads - 1) / threads;
        column_reduce<<<blocks, threads>>>(d_x, d_out, ROWS, COLS);
        """,
        BLOCK=block,
    )


COLUMN_REDUCE = Family(
    name="column_reduce", domain="reduction", build=build_column_reduce,
    suite_variant={"op": "sum", "dtype": "float32"},
    suite_sizes=({"rows": 1024, "cols": 256}, {"rows": 4096, "cols": 8192}),
    variants=tuple(
        {"op": op, "dtype": dt} for op in COL_OPS for dt in ("float32", "int32")
        if (op, dt) not in (("sum", "float32"), ("mean", "int32"))
    ),
    small_sizes=size_grid(rows=(64, 100, 500, 1000), cols=(32, 100, 256, 700, 1000)),
    large_sizes=size_grid(rows=(2048, 16384), cols=(2048, 8192)),
)


# ---------------------------------------------------------------- prefix_scan (block scan + recursive block offsets)

def build_prefix_scan(variant, size, seed):
    kind, dtype, n = variant["kind"], variant["dtype"], size["n"]
    t = CTYPES[dtype]
    x, y = Tensor("x", dtype, (n,), "N"), Tensor("y", dtype, (n,), "N")
    block = pick((256, 512, 1024), kind, dtype, n)
    exclusive = kind == "exclusive"
    kernels = """
        // Kogge-Stone scan of one block in shared memory. Reading `shift` elements back turns the
        // inclusive scan into an exclusive one. The block total goes to block_sums.
        template <typename T>
        __global__ void block_scan(const T* __restrict__ in, T* __restrict__ out, T* __restrict__ block_sums,
                                   int n, int shift) {
            extern __shared__ unsigned char smem_raw[];
            T* s = reinterpret_cast<T*>(smem_raw);
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            int src = i - shift;
            s[threadIdx.x] = (i < n && src >= 0) ? in[src] : T(0);
            __syncthreads();
            for (int offset = 1; offset < blockDim.x; offset <<= 1) {
                T add = threadIdx.x >= offset ? s[threadIdx.x - offset] : T(0);
                __syncthreads();
                s[threadIdx.x] += add;
                __syncthreads();
            }
            if (i < n) {
                out[i] = s[threadIdx.x];
            }
            if (threadIdx.x == blockDim.x - 1) {
                block_sums[blockIdx.x] = s[threadIdx.x];
            }
        }

        template <typename T>
        __global__ void add_block_offsets(T* __restrict__ out, const T* __restrict__ scanned_sums, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (blockIdx.x > 0 && i < n) {
                out[i] += scanned_sums[blockIdx.x - 1];
            }
        }

        // Scan each block, scan the block totals recursively, then add each block's offset.
        template <typename T>
        void scan(const T* d_in, T* d_out, int n, int shift, int threads) {
            int blocks = (n + threads - 1) / threads;
            T* d_sums;
            CUDA_CHECK(cudaMalloc(&d_sums, blocks * sizeof(T)));
            block_scan<T><<<blocks, threads, threads * sizeof(T)>>>(d_in, d_out, d_sums, n, shift);
            if (blocks > 1) {
                T* d_scanned;
                CUDA_CHECK(cudaMalloc(&d_scanned, blocks * sizeof(T)));
                scan<T>(d_sums, d_scanned, blocks, 0, threads);
                add_block_offsets<T><<<blocks, threads>>>(d_out, d_scanned, n);
                CUDA_CHECK(cudaFree(d_scanned));
            }
            CUDA_CHECK(cudaFree(d_sums));
        }
    """
    launch = f"scan<{t}>(d_x, d_y, N, {1 if exclusive else 0}, {block});"
    draw, np_acc, checks = {
        "int32": ("rng.integers(-100, 100, N, dtype=np.int32)", "np.int64", (Check("y"),)),
        "uint32": ("rng.integers(0, 200, N, dtype=np.uint32)", "np.uint64", (Check("y"),)),
        "float32": ("rng.uniform(-1.0, 1.0, N).astype(np.float32)", "np.float64", (Check("y", *float_tolerance(n, 1.0)),)),
    }[dtype]
    ref = "np.cumsum(x, dtype=ACC)"
    if exclusive:
        ref = f"np.concatenate([np.zeros(1, dtype=ACC), {ref}[:-1]])"
    what = "y[i] = x[0] + ... + x[i-1] (y[0] = 0)" if exclusive else "y[i] = x[0] + ... + x[i]"
    suffix = {"int32": "", "uint32": "_UInt32", "float32": "_Float"}[dtype]
    return assemble(
        task_name=f"{kind.capitalize()}_Prefix_Sum{suffix}",
        detail=(
            f"Compute the {kind} prefix sum of the {n} {dtype} values of x: {what}. Scan each block in "
            "shared memory, scan the per-block totals, then add each block's offset."
        ),
        algorithm=f"{kind.capitalize()} parallel prefix sum (scan) of a vector: {what}.",
        inputs=(x,), outputs=(y,), checks=checks,
        constants=f"constexpr int N = {n};", kernels=kernels, launch=launch,
        gen_body=f"N = {n}\nACC = {np_acc}\nx = {draw}\ny = {ref}",
        seed=seed,
    )


PREFIX_SCAN = Family(
    name="prefix_scan", domain="reduction", build=build_prefix_scan,
    suite_variant={"kind": "inclusive", "dtype": "int32"}, suite_sizes=SUITE_N,
    variants=tuple(
        {"kind": k, "dtype": d} for k in ("inclusive", "exclusive") for d in ("int32", "uint32", "float32")
        if (k, d) != ("inclusive", "int32")
    ),
    small_sizes=SMALL_N, large_sizes=LARGE_N,
)


# ---------------------------------------------------------------- argmax_rows (warp per row, (value, index) shuffles)

def build_argmax(variant, size, seed):
    op, dtype, rows, cols = variant["op"], variant["dtype"], size["rows"], size["cols"]
    t = CTYPES[dtype]
    better = ">" if op == "argmax" else "<"
    start = {("argmax", "float32"): "-FLT_MAX", ("argmin", "float32"): "FLT_MAX",
             ("argmax", "int32"): "INT_MIN", ("argmin", "int32"): "INT_MAX"}[(op, dtype)]
    x = Tensor("x", dtype, (rows, cols), "ROWS * COLS")
    idx = Tensor("idx", "int32", (rows,), "ROWS")
    kernels = fill(
        """
        // One warp per row. Ties go to the lowest column, like numpy.
        __global__ void row_$OP(const $T* __restrict__ x, int* __restrict__ idx, int rows, int cols) {
            int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
            int lane = threadIdx.x & 31;
            if (warp >= rows) {
                return;  // the whole warp leaves together
            }
            const $T* row = x + (size_t)warp * cols;
            $T best = $START;
            int best_idx = INT_MAX;
            for (int c = lane; c < cols; c += 32) {
                $T v = row[c];
                if (v $BETTER best || best_idx == INT_MAX) {
                    best = v;
                    best_idx = c;
                }
            }
            for (int offset = 16; offset > 0; offset >>= 1) {
                $T other = __shfl_down_sync(0xffffffff, best, offset);
                int other_idx = __shfl_down_sync(0xffffffff, best_idx, offset);
                if (other_idx != INT_MAX && (best_idx == INT_MAX || other $BETTER best ||
                                             (other == best && other_idx < best_idx))) {
                    best = other;
                    best_idx = other_idx;
                }
            }
            if (lane == 0) {
                idx[warp] = best_idx;
            }
        }
        """,
        OP=op, T=t, START=start, BETTER=better,
    )
    launch = fill(
        """
        const int threads = 256;  // 8 warps, 8 rows per block
        const int blocks = (ROWS * 32 + threads - 1) / threads;
        row_$OP<<<blocks, threads>>>(d_x, d_idx, ROWS, COLS);
        """,
        OP=op,
    )
    draw = ("rng.standard_normal((ROWS, COLS)).astype(np.float32)" if dtype == "float32"
            else "rng.integers(-50, 50, (ROWS, COLS), dtype=np.int32)")
    what = "largest" if op == "argmax" else "smallest"
    return assemble(
        task_name=f"Row_{op.capitalize()}" + ("" if dtype == "float32" else "_Int32"),
        detail=(
            f"For each row of a {rows}x{cols} {dtype} matrix x, write the column index of the {what} value to "
            "idx[row] (the lowest such index on ties). Use one warp per row and combine (value, index) pairs "
            "with __shfl_down_sync."
        ),
        algorithm=f"Row-wise {op} of a matrix: idx[r] = index of the {what} element of row r (first on ties).",
        inputs=(x,), outputs=(idx,), checks=(Check("idx"),),
        constants=f"constexpr int ROWS = {rows};\nconstexpr int COLS = {cols};", kernels=kernels, launch=launch,
        gen_body=f"ROWS, COLS = {rows}, {cols}\nx = {draw}\nidx = np.{op}(x, axis=1).astype(np.int32)",
        seed=seed, includes=("cfloat", "climits"),
    )


ARGMAX_ROWS = Family(
    name="argmax_rows", domain="reduction", build=build_argmax,
    suite_variant={"op": "argmax", "dtype": "float32"}, suite_sizes=SUITE_MATRIX,
    variants=({"op": "argmin", "dtype": "float32"}, {"op": "argmax", "dtype": "int32"}, {"op": "argmin", "dtype": "int32"}),
    small_sizes=SMALL_MATRIX, large_sizes=LARGE_MATRIX,
)


FAMILIES = (BLOCK_SUM, WARP_MINMAX, DOT_PRODUCT, ROW_REDUCE, COLUMN_REDUCE, PREFIX_SCAN, ARGMAX_ROWS)
