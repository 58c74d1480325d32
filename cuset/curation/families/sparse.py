"""Sparse matrices: CSR SpMV (thread or warp per row, transposed scatter), ELLPACK, CSR x dense."""

from __future__ import annotations

from cuset.curation.families.base import (
    WARP_SUM, Check, Family, Tensor, assemble, cfloat, fill, float_tolerance, fmt_num, name_num, pick, size_grid,
)

# gen.py lines building a random CSR matrix with exactly NNZ entries (rows sorted, columns random).
CSR_GEN = """
row_ids = np.sort(rng.integers(0, ROWS, NNZ))
row_ptr = np.concatenate([[0], np.cumsum(np.bincount(row_ids, minlength=ROWS))]).astype(np.int32)
col_idx = rng.integers(0, COLS, NNZ).astype(np.int32)
values = rng.uniform(-1.0, 1.0, NNZ).astype(np.float32)
"""

SPMV_SMALL = size_grid(rows=(100, 1000, 5000, 20000), cols=(100, 1000, 5000, 20000), per_row=(4, 16, 32))
SPMV_LARGE = size_grid(rows=(1 << 20,), cols=(1 << 20, 1 << 18), per_row=(8, 32))


def _csr_tensors(rows, nnz):
    return (
        Tensor("row_ptr", "int32", (rows + 1,), "ROWS + 1"),
        Tensor("col_idx", "int32", (nnz,), "NNZ"),
        Tensor("values", "float32", (nnz,), "NNZ"),
    )


def _csr_consts(rows, cols, nnz):
    return f"constexpr int ROWS = {rows};\nconstexpr int COLS = {cols};\nconstexpr int NNZ = {nnz};"


def build_spmv_csr(variant, size, seed):
    op = variant["op"]
    rows, cols, per_row = size["rows"], size["cols"], size["per_row"]
    nnz = rows * per_row
    row_ptr, col_idx, values = _csr_tensors(rows, nnz)
    transpose = op == "transpose"
    x = Tensor("x", "float32", (rows if transpose else cols,), "ROWS" if transpose else "COLS")
    y = Tensor("y", "float32", (cols if transpose else rows,), "COLS" if transpose else "ROWS")
    y_in = Tensor("y_in", "float32", (rows,), "ROWS")
    alpha, beta = variant.get("alpha", 1.0), variant.get("beta", 0.0)
    inputs = (row_ptr, col_idx, values, x) + ((y_in,) if op == "axpby" else ())
    params = "const int* __restrict__ row_ptr, const int* __restrict__ col_idx, const float* __restrict__ values,\n" \
             "                          const float* __restrict__ x"
    if op == "warp":
        kernels = WARP_SUM.strip() + "\n\n" + fill(
            """
            // One warp per row: lanes stride over the row's nonzeros, then a shuffle reduction.
            __global__ void spmv_csr_warp($PARAMS, float* __restrict__ y) {
                int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
                int lane = threadIdx.x & 31;
                if (row >= ROWS) {
                    return;
                }
                float acc = 0.0f;
                for (int k = row_ptr[row] + lane; k < row_ptr[row + 1]; k += 32) {
                    acc += values[k] * x[col_idx[k]];
                }
                acc = warp_sum(acc);
                if (lane == 0) {
                    y[row] = acc;
                }
            }
            """,
            PARAMS=params,
        )
        launch = "const int threads = 256;\nspmv_csr_warp<<<(ROWS * 32 + threads - 1) / threads, threads>>>(d_row_ptr, d_col_idx, d_values, d_x, d_y);"
    elif transpose:
        kernels = fill(
            """
            // y = A^T x: row r scatters values[k] * x[r] into y[col_idx[k]]; rows collide, hence atomics.
            __global__ void spmv_csr_transposed($PARAMS, float* __restrict__ y) {
                int row = blockIdx.x * blockDim.x + threadIdx.x;
                if (row < ROWS) {
                    float xr = x[row];
                    for (int k = row_ptr[row]; k < row_ptr[row + 1]; ++k) {
                        atomicAdd(&y[col_idx[k]], values[k] * xr);
                    }
                }
            }
            """,
            PARAMS=params,
        )
        launch = ("CUDA_CHECK(cudaMemset(d_y, 0, COLS * sizeof(float)));\nconst int threads = 256;\n"
                  "spmv_csr_transposed<<<(ROWS + threads - 1) / threads, threads>>>(d_row_ptr, d_col_idx, d_values, d_x, d_y);")
    else:
        store = "acc" if op == "plain" else f"ALPHA * acc + BETA * y_in[row]"
        kernels = fill(
            """
            // Scalar CSR kernel: one thread per row.
            __global__ void spmv_csr($PARAMS,$YIN float* __restrict__ y) {
                int row = blockIdx.x * blockDim.x + threadIdx.x;
                if (row < ROWS) {
                    float acc = 0.0f;
                    for (int k = row_ptr[row]; k < row_ptr[row + 1]; ++k) {
                        acc += values[k] * x[col_idx[k]];
                    }
                    y[row] = $STORE;
                }
            }
            """,
            PARAMS=params, YIN=" const float* __restrict__ y_in," if op == "axpby" else "", STORE=store,
        )
        args = "d_row_ptr, d_col_idx, d_values, d_x" + (", d_y_in" if op == "axpby" else "") + ", d_y"
        launch = fill("const int threads = $B;\nspmv_csr<<<(ROWS + threads - 1) / threads, threads>>>($ARGS);",
                      B=pick((128, 256), op, rows, cols, per_row), ARGS=args)
    names = {"plain": "SpMV_CSR", "warp": "SpMV_CSR_Warp_Per_Row", "transpose": "SpMV_CSR_Transposed"}
    name = names.get(op) or f"SpMV_CSR_Alpha_{name_num(alpha)}_Beta_{name_num(beta)}"
    formula = {"plain": "y = A x", "warp": "y = A x", "transpose": "y = A^T x"}.get(
        op, f"y = {fmt_num(alpha)} * A x + {fmt_num(beta)} * y_in")
    how = {"plain": "Use one thread per row.", "warp": "Use one warp per row and reduce with __shfl_down_sync.",
           "transpose": "Let each row scatter its products into y with atomicAdd (y starts at zero).",
           "axpby": "Use one thread per row."}[op]
    ref = {"plain": "y = np.bincount(row_ids, weights=prod, minlength=ROWS)",
           "warp": "y = np.bincount(row_ids, weights=prod, minlength=ROWS)",
           "transpose": "y = np.bincount(col_idx, weights=values.astype(np.float64) * x[row_ids], minlength=COLS)",
           "axpby": f"y = {alpha} * np.bincount(row_ids, weights=prod, minlength=ROWS) + {beta} * y_in"}[op]
    xlen = "ROWS" if transpose else "COLS"
    return assemble(
        task_name=name,
        detail=(
            f"Sparse matrix-vector product {formula} for a {rows}x{cols} float32 matrix A in CSR format with {nnz} "
            f"nonzeros: row_ptr ({rows + 1} int32 offsets), col_idx and values ({nnz} entries each, column indices may "
            f"repeat within a row and then add up). {how}"
        ),
        algorithm=f"Sparse matrix-vector multiplication with a CSR matrix: {formula}.",
        inputs=inputs, outputs=(y,), checks=(Check("y", *float_tolerance(3 * per_row, 0.5)),),
        constants=_csr_consts(rows, cols, nnz) + (f"\nconstexpr float ALPHA = {cfloat(alpha)};\nconstexpr float BETA = {cfloat(beta)};" if op == "axpby" else ""),
        kernels=kernels, launch=launch,
        gen_body=(
            f"ROWS, COLS, NNZ = {rows}, {cols}, {nnz}\n{CSR_GEN.strip()}\n"
            f"x = rng.uniform(-1.0, 1.0, {xlen}).astype(np.float32)\n"
            + ("y_in = rng.uniform(-1.0, 1.0, ROWS).astype(np.float32)\n" if op == "axpby" else "")
            + ("" if transpose else "prod = values.astype(np.float64) * x[col_idx]\n") + ref
        ),
        seed=seed,
    )


SPMV_CSR = Family(
    name="spmv_csr", domain="sparse", build=build_spmv_csr,
    suite_variant={"op": "plain"},
    suite_sizes=({"rows": 16384, "cols": 16384, "per_row": 16}, {"rows": 1 << 20, "cols": 1 << 20, "per_row": 16}),
    variants=(
        {"op": "warp"}, {"op": "transpose"},
        *({"op": "axpby", "alpha": a, "beta": b} for a, b in ((2.0, 0.0), (1.0, 1.0), (0.5, -1.0))),
    ),
    small_sizes=SPMV_SMALL, large_sizes=SPMV_LARGE,
)


# ---------------------------------------------------------------- ELLPACK

def build_spmv_ell(variant, size, seed):
    op = variant["op"]
    rows, cols, width = size["rows"], size["cols"], size["width"]
    col_idx = Tensor("col_idx", "int32", (width, rows), "WIDTH * ROWS")
    values = Tensor("values", "float32", (width, rows), "WIDTH * ROWS")
    x = Tensor("x", "float32", (cols,), "COLS")
    bias = Tensor("bias", "float32", (rows,), "ROWS")
    y = Tensor("y", "float32", (rows,), "ROWS")
    alpha = variant.get("alpha", 1.0)
    store = {"plain": "acc", "bias": "acc + bias[row]", "relu": "fmaxf(acc, 0.0f)", "scale": "ALPHA * acc"}[op]
    kernels = fill(
        """
        // ELLPACK stores slot k of every row contiguously (column-major), so consecutive threads
        // (rows) read consecutive addresses. Padding slots have col_idx = -1.
        __global__ void spmv_ell(const int* __restrict__ col_idx, const float* __restrict__ values,
                                 const float* __restrict__ x,$BIAS float* __restrict__ y) {
            int row = blockIdx.x * blockDim.x + threadIdx.x;
            if (row < ROWS) {
                float acc = 0.0f;
                for (int k = 0; k < WIDTH; ++k) {
                    int c = col_idx[k * ROWS + row];
                    if (c >= 0) {
                        acc += values[k * ROWS + row] * x[c];
                    }
                }
                y[row] = $STORE;
            }
        }
        """,
        BIAS=" const float* __restrict__ bias," if op == "bias" else "", STORE=store,
    )
    args = "d_col_idx, d_values, d_x" + (", d_bias" if op == "bias" else "") + ", d_y"
    launch = f"const int threads = 256;\nspmv_ell<<<(ROWS + threads - 1) / threads, threads>>>({args});"
    formula = {"plain": "y = A x", "bias": "y = A x + bias", "relu": "y = max(A x, 0)",
               "scale": f"y = {fmt_num(alpha)} * A x"}[op]
    name = {"plain": "SpMV_ELL", "bias": "SpMV_ELL_Bias", "relu": "SpMV_ELL_ReLU",
            "scale": f"SpMV_ELL_Alpha_{name_num(alpha)}"}[op]
    post = {"plain": "y = acc", "bias": "y = acc + bias", "relu": "y = np.maximum(acc, 0.0)", "scale": f"y = {alpha} * acc"}[op]
    return assemble(
        task_name=name,
        detail=(
            f"Sparse matrix-vector product {formula} for a {rows}x{cols} float32 matrix in ELLPACK format with "
            f"{width} slots per row, stored column-major: entry k of row r is at index k * {rows} + r of col_idx "
            "(int32) and values (float32); unused slots have col_idx = -1 and must be skipped. One thread per row."
        ),
        algorithm=f"Sparse matrix-vector multiplication with an ELLPACK matrix: {formula}.",
        inputs=(col_idx, values, x) + ((bias,) if op == "bias" else ()), outputs=(y,),
        checks=(Check("y", *float_tolerance(width, 0.5 * max(1.0, abs(alpha)))),),
        constants=f"constexpr int ROWS = {rows};\nconstexpr int COLS = {cols};\nconstexpr int WIDTH = {width};"
                  + (f"\nconstexpr float ALPHA = {cfloat(alpha)};" if op == "scale" else ""),
        kernels=kernels, launch=launch,
        gen_body=fill(
            """
            ROWS, COLS, WIDTH = $ROWS, $COLS, $WIDTH
            used = rng.integers(0, WIDTH + 1, ROWS)
            slot_used = np.arange(WIDTH)[:, None] < used[None, :]
            col_idx = np.where(slot_used, rng.integers(0, COLS, (WIDTH, ROWS)), -1).astype(np.int32)
            values = np.where(slot_used, rng.uniform(-1.0, 1.0, (WIDTH, ROWS)), 0.0).astype(np.float32)
            x = rng.uniform(-1.0, 1.0, COLS).astype(np.float32)
            bias = rng.uniform(-1.0, 1.0, ROWS).astype(np.float32)
            acc = np.where(slot_used, values.astype(np.float64) * x[np.maximum(col_idx, 0)], 0.0).sum(axis=0)
            $POST
            """,
            ROWS=rows, COLS=cols, WIDTH=width, POST=post,
        ),
        seed=seed,
    )


SPMV_ELL = Family(
    name="spmv_ell", domain="sparse", build=build_spmv_ell,
    suite_variant={"op": "plain"},
    suite_sizes=({"rows": 16384, "cols": 16384, "width": 32}, {"rows": 1 << 20, "cols": 1 << 20, "width": 32}),
    variants=({"op": "bias"}, {"op": "relu"}, {"op": "scale", "alpha": 0.5}, {"op": "scale", "alpha": 2.0}),
    small_sizes=size_grid(rows=(100, 1000, 5000, 20000), cols=(100, 1000, 20000), width=(4, 8, 24)),
    large_sizes=size_grid(rows=(1 << 19, 1 << 21), cols=(1 << 20,), width=(16, 64)),
)


# ---------------------------------------------------------------- CSR x dense (SpMM)

def build_spmm(variant, size, seed):
    op = variant["op"]
    rows, cols, per_row, feats = size["rows"], size["cols"], size["per_row"], size["feats"]
    nnz = rows * per_row
    row_ptr, col_idx, values = _csr_tensors(rows, nnz)
    B = Tensor("B", "float32", (cols, feats), "COLS * F")
    C = Tensor("C", "float32", (rows, feats), "ROWS * F")
    store = {"plain": "acc", "relu": "fmaxf(acc, 0.0f)", "half": "0.5f * acc"}[op]
    kernels = fill(
        """
        // C = A B with A sparse (CSR) and B dense: threadIdx.x runs along the feature dimension,
        // so a warp reads contiguous pieces of B's rows. Rows go on grid.x (grid.y stops at 65535).
        __global__ void spmm_csr(const int* __restrict__ row_ptr, const int* __restrict__ col_idx,
                                 const float* __restrict__ values, const float* __restrict__ B, float* __restrict__ C) {
            int f = blockIdx.y * blockDim.x + threadIdx.x;
            int row = blockIdx.x * blockDim.y + threadIdx.y;
            if (row < ROWS && f < F) {
                float acc = 0.0f;
                for (int k = row_ptr[row]; k < row_ptr[row + 1]; ++k) {
                    acc += values[k] * B[(size_t)col_idx[k] * F + f];
                }
                C[(size_t)row * F + f] = $STORE;
            }
        }
        """,
        STORE=store,
    )
    launch = """
        dim3 block(32, 8);
        dim3 grid((ROWS + block.y - 1) / block.y, (F + block.x - 1) / block.x);
        spmm_csr<<<grid, block>>>(d_row_ptr, d_col_idx, d_values, d_B, d_C);
    """
    formula = {"plain": "C = A B", "relu": "C = max(A B, 0)", "half": "C = 0.5 * A B"}[op]
    name = {"plain": "SpMM_CSR", "relu": "SpMM_CSR_ReLU", "half": "SpMM_CSR_Half_Scale"}[op]
    post = {"plain": "C = acc", "relu": "C = np.maximum(acc, 0.0)", "half": "C = 0.5 * acc"}[op]
    return assemble(
        task_name=name,
        detail=(
            f"Sparse-dense matrix product {formula} where A is {rows}x{cols} in CSR format ({nnz} nonzeros: row_ptr, "
            f"col_idx, values) and B is a dense {cols}x{feats} row-major float32 matrix; C is {rows}x{feats}. Use a 2-D "
            "grid over (rows of A, feature columns) with threadIdx.x along the features."
        ),
        algorithm=f"Sparse (CSR) times dense matrix multiplication: {formula}.",
        inputs=(row_ptr, col_idx, values, B), outputs=(C,), checks=(Check("C", *float_tolerance(3 * per_row, 0.5)),),
        constants=_csr_consts(rows, cols, nnz) + f"\nconstexpr int F = {feats};", kernels=kernels, launch=launch,
        gen_body=(
            f"ROWS, COLS, NNZ, F = {rows}, {cols}, {nnz}, {feats}\n{CSR_GEN.strip()}\n"
            "B = rng.uniform(-1.0, 1.0, (COLS, F)).astype(np.float32)\n"
            "from scipy.sparse import csr_matrix\n\n"
            "A = csr_matrix((values.astype(np.float64), col_idx, row_ptr), shape=(ROWS, COLS))\n"
            "acc = A @ B.astype(np.float64)  # duplicate column indices add up, as in the kernel\n"
            f"{post}"
        ),
        seed=seed,
    )


SPMM = Family(
    name="spmm_csr", domain="sparse", build=build_spmm,
    suite_variant={"op": "plain"},
    suite_sizes=({"rows": 4096, "cols": 4096, "per_row": 8, "feats": 64}, {"rows": 1 << 18, "cols": 1 << 18, "per_row": 16, "feats": 128}),
    variants=({"op": "relu"}, {"op": "half"}),
    small_sizes=size_grid(rows=(100, 500, 2000), cols=(100, 1000, 3000), per_row=(4, 16), feats=(16, 32, 100)),
    large_sizes=size_grid(rows=(1 << 17,), cols=(1 << 17, 1 << 19), per_row=(8, 32), feats=(64, 256)),
)


FAMILIES = (SPMV_CSR, SPMV_ELL, SPMM)
