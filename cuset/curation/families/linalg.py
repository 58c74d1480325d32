"""GEMM and GEMV: shared-memory tiling, warp-per-row dot products, batched 3-D grids."""

from __future__ import annotations

from cuset.curation.families.base import (
    WARP_SUM, Check, Family, Tensor, assemble, cfloat, fill, float_tolerance, fmt_num, name_num, pick, size_grid,
)

GEMM_SMALL = size_grid(m=(32, 64, 100, 200), n=(48, 64, 128, 250), k=(32, 64, 100, 256))
GEMM_LARGE = size_grid(m=(1024, 4096), n=(1024, 4096), k=(1024, 2048))


def _mat(name, rows, cols, rows_c, cols_c):
    return Tensor(name, "float32", (rows, cols), f"{rows_c} * {cols_c}")


# ---------------------------------------------------------------- gemm (shared-memory tiles)

def _gemm_name(layout, alpha, beta):
    if (layout, alpha, beta) == ("nn", 1.0, 0.0):
        return "Matrix_Multiplication"
    name = f"GEMM_{layout.upper()}"
    if alpha != 1.0:
        name += f"_Alpha_{name_num(alpha)}"
    if beta != 0.0:
        name += f"_Beta_{name_num(beta)}"
    return name


def build_gemm(variant, size, seed):
    layout, alpha, beta = variant["layout"], variant["alpha"], variant["beta"]
    m, n, k = size["m"], size["n"], size["k"]
    tile = pick((8, 16, 32), layout, alpha, beta, m, n, k)
    ta, tb = layout[0] == "t", layout[1] == "t"
    a = _mat("A", k, m, "K", "M") if ta else _mat("A", m, k, "M", "K")
    b = _mat("B", n, k, "N", "K") if tb else _mat("B", k, n, "K", "N")
    c = _mat("C", m, n, "M", "N")
    c_in = _mat("C_in", m, n, "M", "N")
    inputs = (a, b, c_in) if beta else (a, b)
    a_load = "A[(size_t)(t + threadIdx.x) * M + row]" if ta else "A[(size_t)row * K + t + threadIdx.x]"
    b_load = "B[(size_t)col * K + t + threadIdx.y]" if tb else "B[(size_t)(t + threadIdx.y) * N + col]"
    store = "ALPHA * acc" + (" + BETA * C_in[(size_t)row * N + col]" if beta else "")
    kernels = fill(
        """
        // C tile = sum over K tiles of (A tile) x (B tile), both staged in shared memory.
        template <int TILE>
        __global__ void gemm_tiled(const float* __restrict__ A, const float* __restrict__ B,$CIN_PARAM
                                   float* __restrict__ C) {
            __shared__ float As[TILE][TILE];
            __shared__ float Bs[TILE][TILE];
            int row = blockIdx.y * TILE + threadIdx.y;
            int col = blockIdx.x * TILE + threadIdx.x;
            float acc = 0.0f;
            for (int t = 0; t < K; t += TILE) {
                As[threadIdx.y][threadIdx.x] = (row < M && t + threadIdx.x < K) ? $A_LOAD : 0.0f;
                Bs[threadIdx.y][threadIdx.x] = (col < N && t + threadIdx.y < K) ? $B_LOAD : 0.0f;
                __syncthreads();
                for (int kk = 0; kk < TILE; ++kk) {
                    acc += As[threadIdx.y][kk] * Bs[kk][threadIdx.x];
                }
                __syncthreads();
            }
            if (row < M && col < N) {
                C[(size_t)row * N + col] = $STORE;
            }
        }
        """,
        CIN_PARAM="\n                           const float* __restrict__ C_in," if beta else "",
        A_LOAD=a_load, B_LOAD=b_load, STORE=store,
    )
    launch = fill(
        """
        constexpr int TILE = $TILE;
        dim3 block(TILE, TILE);
        dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
        gemm_tiled<TILE><<<grid, block>>>($ARGS);
        """,
        TILE=tile, ARGS="d_A, d_B, d_C_in, d_C" if beta else "d_A, d_B, d_C",
    )
    op_a = "A^T" if ta else "A"
    op_b = "B^T" if tb else "B"
    formula = f"C = {fmt_num(alpha)} * {op_a} {op_b}" + (f" + {fmt_num(beta)} * C_in" if beta else "")
    if (alpha, beta) == (1.0, 0.0):
        formula = f"C = {op_a} {op_b}"
    stored = (f"A is stored as a {k}x{m} matrix (so {op_a} is {m}x{k})" if ta else f"A is {m}x{k}") + ", " + (
        f"B is stored as {n}x{k} (so {op_b} is {k}x{n})" if tb else f"B is {k}x{n}")
    npa = "A.T" if ta else "A"
    npb = "B.T" if tb else "B"
    return assemble(
        task_name=_gemm_name(layout, alpha, beta),
        detail=(
            f"Single-precision matrix multiplication {formula} with M = {m}, N = {n}, K = {k}: {stored}, C is {m}x{n}, "
            "all row-major. Tile the computation: each thread block stages square tiles of both operands in shared "
            "memory and each thread accumulates one element of C."
        ),
        algorithm=f"Dense matrix multiplication (GEMM): {formula}.",
        inputs=inputs, outputs=(c,), checks=(Check("C", *float_tolerance(k, max(1.0, abs(alpha)) / 3 + abs(beta))),),
        constants=f"constexpr int M = {m};\nconstexpr int N = {n};\nconstexpr int K = {k};\n"
                  f"constexpr float ALPHA = {cfloat(alpha)};" + (f"\nconstexpr float BETA = {cfloat(beta)};" if beta else ""),
        kernels=kernels, launch=launch,
        gen_body=fill(
            """
            M, N, K = $M, $N, $K
            A = rng.uniform(-1.0, 1.0, $ASHAPE).astype(np.float32)
            B = rng.uniform(-1.0, 1.0, $BSHAPE).astype(np.float32)
            $CIN
            C = $ALPHA * ($NPA.astype(np.float64) @ $NPB.astype(np.float64))$CADD
            """,
            M=m, N=n, K=k, ASHAPE="(K, M)" if ta else "(M, K)", BSHAPE="(N, K)" if tb else "(K, N)",
            CIN="C_in = rng.uniform(-1.0, 1.0, (M, N)).astype(np.float32)" if beta else "",
            ALPHA=alpha, NPA=npa, NPB=npb, CADD=f" + {beta} * C_in" if beta else "",
        ),
        seed=seed,
    )


GEMM = Family(
    name="gemm", domain="linear_algebra", build=build_gemm,
    suite_variant={"layout": "nn", "alpha": 1.0, "beta": 0.0},
    suite_sizes=({"m": 256, "n": 256, "k": 256}, {"m": 2048, "n": 2048, "k": 2048}),
    variants=tuple(
        {"layout": lay, "alpha": a, "beta": b}
        for lay in ("nn", "nt", "tn") for a, b in ((1.0, 0.0), (2.0, 0.0), (1.0, 1.0), (0.5, 2.0), (1.5, -1.0))
        if (lay, a, b) != ("nn", 1.0, 0.0)
    ),
    small_sizes=GEMM_SMALL, large_sizes=GEMM_LARGE,
)


# ---------------------------------------------------------------- gemv

def build_gemv(variant, size, seed):
    op = variant["op"]
    m, n = size["m"], size["n"]
    A = _mat("A", m, n, "M", "N")
    if op == "t":
        return _build_gemv_t(A, m, n, seed)
    alpha, beta = variant.get("alpha", 1.0), variant.get("beta", 0.0)
    x = Tensor("x", "float32", (n,), "N")
    y_in = Tensor("y_in", "float32", (m,), "M")
    y = Tensor("y", "float32", (m,), "M")
    store = "ALPHA * acc" + (" + BETA * y_in[row]" if beta else "")
    kernels = WARP_SUM.strip() + "\n\n" + fill(
        """
        // One warp per row: lanes stride across the row, then a shuffle reduction.
        __global__ void gemv_warp(const float* __restrict__ A, const float* __restrict__ x,$YIN
                                  float* __restrict__ y) {
            int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
            int lane = threadIdx.x & 31;
            if (row >= M) {
                return;
            }
            float acc = 0.0f;
            for (int c = lane; c < N; c += 32) {
                acc += A[(size_t)row * N + c] * x[c];
            }
            acc = warp_sum(acc);
            if (lane == 0) {
                y[row] = $STORE;
            }
        }
        """,
        YIN=" const float* __restrict__ y_in," if beta else "", STORE=store,
    )
    launch = fill(
        """
        const int threads = $BLOCK;
        const int blocks = (M * 32 + threads - 1) / threads;
        gemv_warp<<<blocks, threads>>>($ARGS);
        """,
        BLOCK=pick((128, 256), op, alpha, beta, m, n), ARGS="d_A, d_x, d_y_in, d_y" if beta else "d_A, d_x, d_y",
    )
    formula = ("y = A x" if alpha == 1.0 else f"y = {fmt_num(alpha)} * A x") + (f" + {fmt_num(beta)} * y_in" if beta else "")
    name = "Matrix_Vector_Multiplication" if (alpha, beta) == (1.0, 0.0) else (
        f"GEMV_Alpha_{name_num(alpha)}" + (f"_Beta_{name_num(beta)}" if beta else ""))
    return assemble(
        task_name=name,
        detail=(
            f"Matrix-vector product {formula} for a {m}x{n} row-major float32 matrix A and a vector x of length {n}"
            + (f" (y_in has length {m})" if beta else "")
            + ". Assign one warp per row and reduce the partial dot products with __shfl_down_sync."
        ),
        algorithm=f"Dense matrix-vector multiplication (GEMV): {formula}.",
        inputs=(A, x, y_in) if beta else (A, x), outputs=(y,),
        checks=(Check("y", *float_tolerance(n, max(1.0, abs(alpha)) / 3 + abs(beta))),),
        constants=f"constexpr int M = {m};\nconstexpr int N = {n};\nconstexpr float ALPHA = {cfloat(alpha)};"
                  + (f"\nconstexpr float BETA = {cfloat(beta)};" if beta else ""),
        kernels=kernels, launch=launch,
        gen_body=(
            f"M, N = {m}, {n}\nA = rng.uniform(-1.0, 1.0, (M, N)).astype(np.float32)\n"
            "x = rng.uniform(-1.0, 1.0, N).astype(np.float32)\n"
            + ("y_in = rng.uniform(-1.0, 1.0, M).astype(np.float32)\n" if beta else "")
            + f"y = {alpha} * (A.astype(np.float64) @ x.astype(np.float64))" + (f" + {beta} * y_in" if beta else "")
        ),
        seed=seed,
    )


def _build_gemv_t(A, m, n, seed):
    x = Tensor("x", "float32", (m,), "M")
    y = Tensor("y", "float32", (n,), "N")
    kernels = """
        // y = A^T x: thread j walks down column j, so a warp reads consecutive addresses of each row.
        __global__ void gemv_transposed(const float* __restrict__ A, const float* __restrict__ x, float* __restrict__ y) {
            int col = blockIdx.x * blockDim.x + threadIdx.x;
            if (col < N) {
                float acc = 0.0f;
                for (int r = 0; r < M; ++r) {
                    acc += A[(size_t)r * N + col] * x[r];
                }
                y[col] = acc;
            }
        }
    """
    launch = "const int threads = 128;\ngemv_transposed<<<(N + threads - 1) / threads, threads>>>(d_A, d_x, d_y);"
    return assemble(
        task_name="GEMV_Transposed",
        detail=(
            f"Transposed matrix-vector product y = A^T x for a {m}x{n} row-major float32 matrix A and x of length {m}; "
            f"y has length {n}. Give each thread one column so the loads of a warp are coalesced."
        ),
        algorithm="Transposed matrix-vector multiplication: y = A^T x.",
        inputs=(A, x), outputs=(y,), checks=(Check("y", *float_tolerance(m, 1 / 3)),),
        constants=f"constexpr int M = {m};\nconstexpr int N = {n};", kernels=kernels, launch=launch,
        gen_body=(
            f"M, N = {m}, {n}\nA = rng.uniform(-1.0, 1.0, (M, N)).astype(np.float32)\n"
            "x = rng.uniform(-1.0, 1.0, M).astype(np.float32)\ny = A.astype(np.float64).T @ x.astype(np.float64)"
        ),
        seed=seed,
    )


GEMV = Family(
    name="gemv", domain="linear_algebra", build=build_gemv,
    suite_variant={"op": "n"}, suite_sizes=({"m": 1024, "n": 1024}, {"m": 8192, "n": 8192}),
    variants=(
        {"op": "t"},
        *({"op": "axpby", "alpha": a, "beta": b} for a, b in ((2.0, 0.0), (1.0, 1.0), (0.5, -1.0), (1.5, 0.5))),
    ),
    small_sizes=size_grid(m=(64, 100, 256, 500, 1000), n=(64, 128, 300, 700, 1000)),
    large_sizes=size_grid(m=(4096, 16384), n=(4096, 16384)),
)


# ---------------------------------------------------------------- batched matmul (3-D grid)

def build_batched_matmul(variant, size, seed):
    layout, scale = variant["layout"], variant["scale"]
    bsz, m, n, k = size["b"], size["m"], size["n"], size["k"]
    tb = layout == "nt"
    a = Tensor("A", "float32", (bsz, m, k), "BATCH * M * K")
    b = Tensor("B", "float32", (bsz, n, k) if tb else (bsz, k, n), "BATCH * K * N")
    c = Tensor("C", "float32", (bsz, m, n), "BATCH * M * N")
    b_elem = "Bb[(size_t)col * K + kk]" if tb else "Bb[(size_t)kk * N + col]"
    kernels = fill(
        """
        // blockIdx.z selects the matrix pair; each thread computes one element of its C.
        __global__ void batched_matmul(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
            int batch = blockIdx.z;
            int row = blockIdx.y * blockDim.y + threadIdx.y;
            int col = blockIdx.x * blockDim.x + threadIdx.x;
            if (row < M && col < N) {
                const float* Ab = A + (size_t)batch * M * K;
                const float* Bb = B + (size_t)batch * K * N;
                float acc = 0.0f;
                for (int kk = 0; kk < K; ++kk) {
                    acc += Ab[(size_t)row * K + kk] * $BELEM;
                }
                C[(size_t)batch * M * N + (size_t)row * N + col] = SCALE * acc;
            }
        }
        """,
        BELEM=b_elem,
    )
    bx, by = pick(((16, 16), (32, 8)), layout, scale, bsz, m, n, k)
    launch = fill(
        """
        dim3 block($BX, $BY);
        dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y, BATCH);
        batched_matmul<<<grid, block>>>(d_A, d_B, d_C);
        """,
        BX=bx, BY=by,
    )
    name = "Batched_Matrix_Multiplication" if (layout, scale) == ("nn", 1.0) else (
        f"Batched_Matmul_{layout.upper()}" + ("" if scale == 1.0 else f"_Scale_{name_num(scale)}"))
    op_b = "B[b]^T" if tb else "B[b]"
    formula = f"C[b] = " + ("" if scale == 1.0 else f"{fmt_num(scale)} * ") + f"A[b] {op_b}"
    return assemble(
        task_name=name,
        detail=(
            f"Batched matrix multiplication over {bsz} independent problems: {formula} for b = 0..{bsz - 1}, "
            f"with A of shape ({bsz}, {m}, {k}) and B of shape {b.shape} (row-major); C has shape ({bsz}, {m}, {n}). "
            "Use a 3-D grid whose z dimension is the batch index."
        ),
        algorithm=f"Batched matrix multiplication: {formula} for every batch index b.",
        inputs=(a, b), outputs=(c,), checks=(Check("C", *float_tolerance(k, max(scale, 1.0) / 3)),),
        constants=f"constexpr int BATCH = {bsz};\nconstexpr int M = {m};\nconstexpr int N = {n};\nconstexpr int K = {k};\n"
                  f"constexpr float SCALE = {cfloat(scale)};",
        kernels=kernels, launch=launch,
        gen_body=(
            f"BATCH, M, N, K = {bsz}, {m}, {n}, {k}\nA = rng.uniform(-1.0, 1.0, (BATCH, M, K)).astype(np.float32)\n"
            f"B = rng.uniform(-1.0, 1.0, {'(BATCH, N, K)' if tb else '(BATCH, K, N)'}).astype(np.float32)\n"
            f"B64 = B.astype(np.float64){'.transpose(0, 2, 1)' if tb else ''}\nC = {scale} * (A.astype(np.float64) @ B64)"
        ),
        seed=seed,
    )


BATCHED_MATMUL = Family(
    name="batched_matmul", domain="linear_algebra", build=build_batched_matmul,
    suite_variant={"layout": "nn", "scale": 1.0},
    suite_sizes=({"b": 8, "m": 64, "n": 64, "k": 64}, {"b": 64, "m": 512, "n": 512, "k": 256}),
    variants=tuple({"layout": lay, "scale": s} for lay in ("nn", "nt") for s in (1.0, 0.125, 0.5) if (lay, s) != ("nn", 1.0)),
    small_sizes=size_grid(b=(2, 4, 16), m=(16, 32, 50), n=(32, 64), k=(16, 48, 64)),
    large_sizes=size_grid(b=(32, 128), m=(256, 512), n=(256,), k=(64, 512)),
)


# ---------------------------------------------------------------- outer product / rank-1 update

def build_outer(variant, size, seed):
    alpha, update = variant["alpha"], variant["update"]
    m, n = size["m"], size["n"]
    x, y = Tensor("x", "float32", (m,), "M"), Tensor("y", "float32", (n,), "N")
    A = _mat("A", m, n, "M", "N")
    out = _mat("out", m, n, "M", "N")
    expr = "ALPHA * x[row] * y[col]" + (" + A[(size_t)row * N + col]" if update else "")
    kernels = fill(
        """
        __global__ void outer_product(const float* __restrict__ x, const float* __restrict__ y,$APARAM
                                      float* __restrict__ out) {
            int col = blockIdx.x * blockDim.x + threadIdx.x;
            int row = blockIdx.y * blockDim.y + threadIdx.y;
            if (row < M && col < N) {
                out[(size_t)row * N + col] = $EXPR;
            }
        }
        """,
        APARAM=" const float* __restrict__ A," if update else "", EXPR=expr,
    )
    launch = fill(
        """
        dim3 block(32, $BY);
        dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
        outer_product<<<grid, block>>>($ARGS);
        """,
        BY=pick((4, 8, 16), alpha, update, m, n), ARGS="d_x, d_y, d_A, d_out" if update else "d_x, d_y, d_out",
    )
    coef = "" if alpha == 1.0 else f"{fmt_num(alpha)} * "
    formula = f"out[i][j] = {coef}x[i] * y[j]" + (" + A[i][j]" if update else "")
    name = ("Rank1_Update" if update else "Outer_Product") + ("" if alpha == 1.0 else f"_Alpha_{name_num(alpha)}")
    return assemble(
        task_name=name,
        detail=(
            f"{'Rank-1 update' if update else 'Outer product'} of float32 vectors x (length {m}) and y (length {n})"
            + (f" added to a {m}x{n} matrix A" if update else "") + f": {formula}, out is {m}x{n} row-major. "
            "Use a 2-D grid with one thread per output element."
        ),
        algorithm=f"{'Rank-1 matrix update' if update else 'Outer product of two vectors'}: {formula}.",
        inputs=(x, y, A) if update else (x, y), outputs=(out,), checks=(Check("out", *float_tolerance()),),
        constants=f"constexpr int M = {m};\nconstexpr int N = {n};\nconstexpr float ALPHA = {cfloat(alpha)};",
        kernels=kernels, launch=launch,
        gen_body=(
            f"M, N = {m}, {n}\nx = rng.uniform(-2.0, 2.0, M).astype(np.float32)\ny = rng.uniform(-2.0, 2.0, N).astype(np.float32)\n"
            + ("A = rng.uniform(-1.0, 1.0, (M, N)).astype(np.float32)\n" if update else "")
            + f"out = {alpha} * np.outer(x.astype(np.float64), y.astype(np.float64))" + (" + A" if update else "")
        ),
        seed=seed,
    )


OUTER_PRODUCT = Family(
    name="outer_product", domain="linear_algebra", build=build_outer,
    suite_variant={"alpha": 1.0, "update": False}, suite_sizes=({"m": 512, "n": 512}, {"m": 8192, "n": 8192}),
    variants=tuple(
        {"alpha": a, "update": u} for u in (False, True) for a in (1.0, 0.5, 2.0, -1.0) if (a, u) != (1.0, False)
    ),
    small_sizes=size_grid(m=(32, 100, 256, 600), n=(64, 128, 300, 1000)),
    large_sizes=size_grid(m=(4096, 16384), n=(4096, 8192)),
)


# ---------------------------------------------------------------- linear layer + activation (tiled, W^T)

LINEAR_ACTS = {
    "relu": ("ReLU", "max(v, 0)", "fmaxf(v, 0.0f)", "np.maximum(v, 0.0)", False),
    "none": ("Layer", "v (no activation)", "v", "v", False),
    "gelu": ("GELU", "0.5 * v * (1 + tanh(0.7978845608 * (v + 0.044715 * v^3)))",
             "0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)))",
             "0.5 * v * (1.0 + np.tanh(0.7978845608 * (v + 0.044715 * v ** 3)))", True),
    "sigmoid": ("Sigmoid", "1 / (1 + exp(-v))", "1.0f / (1.0f + expf(-v))", "1.0 / (1.0 + np.exp(-v))", True),
    "tanh": ("Tanh", "tanh(v)", "tanhf(v)", "np.tanh(v)", True),
    "silu": ("SiLU", "v / (1 + exp(-v))", "v / (1.0f + expf(-v))", "v / (1.0 + np.exp(-v))", True),
}


def build_linear(variant, size, seed):
    act = variant["act"]
    title, math_desc, cexpr, npexpr, transcendental = LINEAR_ACTS[act]
    m, n, k = size["m"], size["n"], size["k"]
    X, W = _mat("X", m, k, "M", "K"), _mat("W", n, k, "N", "K")
    b = Tensor("b", "float32", (n,), "N")
    Y = _mat("Y", m, n, "M", "N")
    kernels = fill(
        """
        constexpr int TILE = 16;

        // Y = act(X W^T + b). W is stored (N, K), so its tile is read along K like X's.
        __global__ void linear_act(const float* __restrict__ X, const float* __restrict__ W,
                                   const float* __restrict__ b, float* __restrict__ Y) {
            __shared__ float Xs[TILE][TILE];
            __shared__ float Ws[TILE][TILE + 1];  // +1 avoids bank conflicts on the transposed read
            int row = blockIdx.y * TILE + threadIdx.y;
            int col = blockIdx.x * TILE + threadIdx.x;
            int w_row = blockIdx.x * TILE + threadIdx.y;
            float acc = 0.0f;
            for (int t = 0; t < K; t += TILE) {
                Xs[threadIdx.y][threadIdx.x] = (row < M && t + threadIdx.x < K) ? X[(size_t)row * K + t + threadIdx.x] : 0.0f;
                Ws[threadIdx.y][threadIdx.x] = (w_row < N && t + threadIdx.x < K) ? W[(size_t)w_row * K + t + threadIdx.x] : 0.0f;
                __syncthreads();
                for (int kk = 0; kk < TILE; ++kk) {
                    acc += Xs[threadIdx.y][kk] * Ws[threadIdx.x][kk];
                }
                __syncthreads();
            }
            if (row < M && col < N) {
                float v = acc + b[col];
                Y[(size_t)row * N + col] = $ACT;
            }
        }
        """,
        ACT=cexpr,
    )
    launch = """
        dim3 block(TILE, TILE);
        dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
        linear_act<<<grid, block>>>(d_X, d_W, d_b, d_Y);
    """
    atol, rtol = float_tolerance(k, 1 / 3)
    if transcendental:
        atol, rtol = max(atol, 1e-4), max(rtol, 1e-4)
    return assemble(
        task_name=f"Linear_{title}",
        detail=(
            f"A fully connected layer Y = act(X W^T + b) with X of shape ({m}, {k}), weights W of shape ({n}, {k}) "
            f"(out_features x in_features, as in PyTorch), bias b of length {n}, and act(v) = {math_desc}; Y is "
            f"({m}, {n}). Use 16x16 shared-memory tiles of X and W and fuse the bias and activation into the store."
        ),
        algorithm=f"Linear layer followed by an activation: Y = act(X W^T + b), act(v) = {math_desc}.",
        inputs=(X, W, b), outputs=(Y,), checks=(Check("Y", atol, rtol),),
        constants=f"constexpr int M = {m};\nconstexpr int N = {n};\nconstexpr int K = {k};",
        kernels=kernels, launch=launch,
        gen_body=(
            f"M, N, K = {m}, {n}, {k}\nX = rng.uniform(-1.0, 1.0, (M, K)).astype(np.float32)\n"
            "W = (rng.uniform(-1.0, 1.0, (N, K)) / np.sqrt(K)).astype(np.float32)\n"
            "b = rng.uniform(-0.5, 0.5, N).astype(np.float32)\n"
            f"v = X.astype(np.float64) @ W.astype(np.float64).T + b\nY = {npexpr}"
        ),
        seed=seed, includes=("cmath",),
    )


LINEAR = Family(
    name="linear_act", domain="linear_algebra", build=build_linear,
    suite_variant={"act": "relu"}, suite_sizes=({"m": 128, "n": 256, "k": 512}, {"m": 2048, "n": 4096, "k": 2048}),
    variants=tuple({"act": a} for a in LINEAR_ACTS if a != "relu"),
    small_sizes=GEMM_SMALL, large_sizes=GEMM_LARGE,
)


FAMILIES = (GEMM, GEMV, BATCHED_MATMUL, OUTER_PRODUCT, LINEAR)
