"""Softmax and normalisation layers: row-wise reductions followed by an element-wise pass."""

from __future__ import annotations

from cuset.curation.families.base import (
    BLOCK_MAX, BLOCK_SUM, WARP_MAX, WARP_SUM, Check, Family, Tensor, assemble, cfloat, eps_name, fill,
    float_tolerance, fmt_num, name_num, pick, size_grid,
)

SUITE_ROWS = ({"rows": 256, "cols": 1024}, {"rows": 4096, "cols": 4096})
SMALL_ROWS = size_grid(rows=(16, 64, 100, 200, 250), cols=(128, 300, 512, 768, 1000, 2048))
LARGE_ROWS = size_grid(rows=(2048, 8192, 16384), cols=(1024, 2048, 8192))


def _rows_io(rows, cols, out="y"):
    return Tensor("x", "float32", (rows, cols), "ROWS * COLS"), Tensor(out, "float32", (rows, cols), "ROWS * COLS")


def _rows_consts(rows, cols, extra=""):
    return f"constexpr int ROWS = {rows};\nconstexpr int COLS = {cols};" + (f"\n{extra}" if extra else "")


# ---------------------------------------------------------------- softmax (shared-memory tree reductions)

def build_softmax(variant, size, seed):
    kind, temp = variant["kind"], variant["temperature"]
    rows, cols = size["rows"], size["cols"]
    x, y = _rows_io(rows, cols)
    log = kind == "log_softmax"
    block = pick((128, 256), kind, temp, rows, cols)
    write = "row_y[c] = (row_x[c] * INV_T - m) - logf(s);" if log else "row_y[c] = expf(row_x[c] * INV_T - m) / s;"
    kernels = fill(
        """
        template <int BLOCK>
        __device__ float block_reduce(float v, float* red, bool take_max) {
            red[threadIdx.x] = v;
            __syncthreads();
            for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
                if (threadIdx.x < stride) {
                    float other = red[threadIdx.x + stride];
                    red[threadIdx.x] = take_max ? fmaxf(red[threadIdx.x], other) : red[threadIdx.x] + other;
                }
                __syncthreads();
            }
            float result = red[0];
            __syncthreads();  // red is reused by the next reduction
            return result;
        }

        // One block per row: row maximum, then the sum of exp(x - max), then the outputs.
        template <int BLOCK>
        __global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
            __shared__ float red[BLOCK];
            const float* row_x = x + (size_t)blockIdx.x * cols;
            float* row_y = y + (size_t)blockIdx.x * cols;
            float m = -FLT_MAX;
            for (int c = threadIdx.x; c < cols; c += BLOCK) {
                m = fmaxf(m, row_x[c] * INV_T);
            }
            m = block_reduce<BLOCK>(m, red, true);
            float s = 0.0f;
            for (int c = threadIdx.x; c < cols; c += BLOCK) {
                s += expf(row_x[c] * INV_T - m);
            }
            s = block_reduce<BLOCK>(s, red, false);
            for (int c = threadIdx.x; c < cols; c += BLOCK) {
                $WRITE
            }
        }
        """,
        WRITE=write,
    )
    launch = f"softmax_rows<{block}><<<ROWS, {block}>>>(d_x, d_y, COLS);"
    z = "x.astype(np.float64) / T"
    ref = ("z = {z}\nz = z - z.max(axis=1, keepdims=True)\n" +
           ("y = z - np.log(np.exp(z).sum(axis=1, keepdims=True))" if log else "e = np.exp(z)\ny = e / e.sum(axis=1, keepdims=True)")
           ).format(z=z)
    base = "LogSoftmax" if log else "Softmax"
    name = f"{base}_Rows" if temp == 1.0 else f"{base}_Temperature_{name_num(temp)}"
    what = "log-softmax" if log else "softmax"
    formula = ("y[r][c] = z[r][c] - log(sum_k exp(z[r][k]))" if log else "y[r][c] = exp(z[r][c]) / sum_k exp(z[r][k])")
    return assemble(
        task_name=name,
        detail=(
            f"Row-wise {what} of a {rows}x{cols} float32 matrix x with temperature {fmt_num(temp)}: with "
            f"z = x / {fmt_num(temp)}, {formula}. Subtract the row maximum before exponentiating for stability. "
            "Use one thread block per row and shared-memory reductions for the maximum and the sum."
        ),
        algorithm=f"Numerically stable row-wise {what} of a matrix with temperature {fmt_num(temp)}: {formula}, z = x / T.",
        inputs=(x,), outputs=(y,),
        checks=(Check("y", 1e-4, 1e-4) if log else Check("y", 1e-6, 1e-4),),
        constants=_rows_consts(rows, cols, f"constexpr float INV_T = {cfloat(1.0 / temp)};"),
        kernels=kernels, launch=launch,
        gen_body=f"ROWS, COLS = {rows}, {cols}\nT = {temp}\nx = rng.uniform(-3.0, 3.0, (ROWS, COLS)).astype(np.float32)\n{ref}",
        seed=seed, includes=("cfloat", "cmath"),
    )


SOFTMAX = Family(
    name="softmax", domain="normalization", build=build_softmax,
    suite_variant={"kind": "softmax", "temperature": 1.0}, suite_sizes=SUITE_ROWS,
    variants=tuple(
        {"kind": k, "temperature": t} for k in ("softmax", "log_softmax") for t in (1.0, 0.5, 2.0, 0.25)
        if (k, t) != ("softmax", 1.0)
    ),
    small_sizes=SMALL_ROWS, large_sizes=LARGE_ROWS,
)


# ---------------------------------------------------------------- layernorm (warp per row, xor shuffles)

def build_layernorm(variant, size, seed):
    eps, affine = variant["eps"], variant["affine"]
    rows, cols = size["rows"], size["cols"]
    x, y = _rows_io(rows, cols)
    gamma, beta = Tensor("gamma", "float32", (cols,), "COLS"), Tensor("beta", "float32", (cols,), "COLS")
    inputs = (x, gamma, beta) if affine else (x,)
    params = ", const float* __restrict__ gamma, const float* __restrict__ beta" if affine else ""
    out_expr = "v * gamma[c] + beta[c]" if affine else "v"
    kernels = fill(
        """
        // Butterfly reduction: after it every lane holds the warp's total.
        __device__ __forceinline__ float warp_allsum(float v) {
            for (int mask = 16; mask > 0; mask >>= 1) {
                v += __shfl_xor_sync(0xffffffff, v, mask);
            }
            return v;
        }

        // One warp per row: mean, then variance around the mean (two passes, stable).
        __global__ void layer_norm(const float* __restrict__ x$PARAMS, float* __restrict__ y, int rows, int cols) {
            int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
            int lane = threadIdx.x & 31;
            if (row >= rows) {
                return;
            }
            const float* xr = x + (size_t)row * cols;
            float* yr = y + (size_t)row * cols;
            float sum = 0.0f;
            for (int c = lane; c < cols; c += 32) {
                sum += xr[c];
            }
            float mean = warp_allsum(sum) / cols;
            float sq = 0.0f;
            for (int c = lane; c < cols; c += 32) {
                float d = xr[c] - mean;
                sq += d * d;
            }
            float rstd = rsqrtf(warp_allsum(sq) / cols + EPS);
            for (int c = lane; c < cols; c += 32) {
                float v = (xr[c] - mean) * rstd;
                yr[c] = $OUT;
            }
        }
        """,
        PARAMS=params, OUT=out_expr,
    )
    args = "d_x, d_gamma, d_beta, d_y" if affine else "d_x, d_y"
    launch = fill(
        """
        const int threads = $BLOCK;  // threads / 32 rows per block
        const int blocks = (ROWS * 32 + threads - 1) / threads;
        layer_norm<<<blocks, threads>>>($ARGS, ROWS, COLS);
        """,
        BLOCK=pick((128, 256), eps, affine, rows, cols), ARGS=args,
    )
    gen_affine = ("gamma = rng.uniform(0.5, 1.5, COLS).astype(np.float32)\n"
                  "beta = rng.uniform(-0.5, 0.5, COLS).astype(np.float32)\n"
                  "y = y * gamma + beta\n") if affine else ""
    name = "Layer_Normalization" if (eps, affine) == (1e-5, True) else (
        f"Layer_Norm_Eps_{eps_name(eps)}" + ("" if affine else "_No_Affine"))
    formula = "y = (x - mean) / sqrt(var + eps)" + (" * gamma + beta" if affine else "")
    return assemble(
        task_name=name,
        detail=(
            f"Layer normalisation over the last dimension of a {rows}x{cols} float32 matrix x with eps = {eps:g}: "
            f"for each row, mean and biased variance over its {cols} values, then {formula}"
            + (" with per-column float32 vectors gamma and beta" if affine else "")
            + ". Use one warp per row with __shfl_xor_sync reductions."
        ),
        algorithm=f"Layer normalisation of each row of a matrix: {formula} (eps = {eps:g}).",
        inputs=inputs, outputs=(y,), checks=(Check("y", 1e-4, 1e-4),),
        constants=_rows_consts(rows, cols, f"constexpr float EPS = {cfloat(eps)};"), kernels=kernels, launch=launch,
        gen_body=(
            f"ROWS, COLS = {rows}, {cols}\nx = (rng.uniform(-2.0, 2.0, (ROWS, COLS)) + 0.5).astype(np.float32)\n"
            "x64 = x.astype(np.float64)\nmean = x64.mean(axis=1, keepdims=True)\n"
            f"var = ((x64 - mean) ** 2).mean(axis=1, keepdims=True)\ny = (x64 - mean) / np.sqrt(var + {eps})\n{gen_affine}"
        ),
        seed=seed,
    )


LAYERNORM = Family(
    name="layernorm", domain="normalization", build=build_layernorm,
    suite_variant={"eps": 1e-5, "affine": True}, suite_sizes=SUITE_ROWS,
    variants=tuple({"eps": e, "affine": a} for e in (1e-5, 1e-6, 1e-3) for a in (True, False) if (e, a) != (1e-5, True)),
    small_sizes=SMALL_ROWS, large_sizes=LARGE_ROWS,
)


# ---------------------------------------------------------------- rmsnorm (block per row, warp + shared reduction)

def build_rmsnorm(variant, size, seed):
    eps, weight = variant["eps"], variant["weight"]
    rows, cols = size["rows"], size["cols"]
    x, y = _rows_io(rows, cols)
    w = Tensor("w", "float32", (cols,), "COLS")
    inputs = (x,) if weight == "none" else (x, w)
    scale = {"plain": "w[c]", "offset": "(1.0f + w[c])", "none": "1.0f"}[weight]
    params = "" if weight == "none" else ", const float* __restrict__ w"
    kernels = WARP_SUM.strip() + "\n\n" + BLOCK_SUM.strip() + "\n\n" + fill(
        """
        __global__ void rms_norm(const float* __restrict__ x$PARAMS, float* __restrict__ y, int cols) {
            const float* xr = x + (size_t)blockIdx.x * cols;
            float* yr = y + (size_t)blockIdx.x * cols;
            float sq = 0.0f;
            for (int c = threadIdx.x; c < cols; c += blockDim.x) {
                sq += xr[c] * xr[c];
            }
            float inv_rms = rsqrtf(block_sum(sq) / cols + EPS);
            for (int c = threadIdx.x; c < cols; c += blockDim.x) {
                yr[c] = xr[c] * inv_rms * $SCALE;
            }
        }
        """,
        PARAMS=params, SCALE=scale,
    )
    args = "d_x, d_y" if weight == "none" else "d_x, d_w, d_y"
    launch = f"rms_norm<<<ROWS, {pick((128, 256, 512), eps, weight, rows, cols)}>>>({args}, COLS);"
    formula = {"plain": "y = x / rms(x) * w", "offset": "y = x / rms(x) * (1 + w)", "none": "y = x / rms(x)"}[weight]
    npscale = {"plain": " * w", "offset": " * (1.0 + w)", "none": ""}[weight]
    name = "RMS_Normalization" if (eps, weight) == (1e-6, "plain") else (
        f"RMSNorm_Eps_{eps_name(eps)}" + {"plain": "", "offset": "_Offset_Weight", "none": "_No_Weight"}[weight])
    return assemble(
        task_name=name,
        detail=(
            f"RMS normalisation of each row of a {rows}x{cols} float32 matrix x: rms(x) = sqrt(mean(x^2) + {eps:g}), "
            f"{formula}" + ("" if weight == "none" else f" with a float32 weight vector w of length {cols}")
            + ". One block per row; reduce with warp shuffles and then across warps through shared memory."
        ),
        algorithm=f"RMSNorm of each row of a matrix: {formula}, rms(x) = sqrt(mean(x^2) + eps), eps = {eps:g}.",
        inputs=inputs, outputs=(y,), checks=(Check("y", 1e-4, 1e-4),),
        constants=_rows_consts(rows, cols, f"constexpr float EPS = {cfloat(eps)};"), kernels=kernels, launch=launch,
        gen_body=(
            f"ROWS, COLS = {rows}, {cols}\nx = rng.uniform(-2.0, 2.0, (ROWS, COLS)).astype(np.float32)\n"
            + ("" if weight == "none" else "w = rng.uniform(-1.0, 1.5, COLS).astype(np.float32)\n")
            + f"x64 = x.astype(np.float64)\ny = x64 / np.sqrt((x64 ** 2).mean(axis=1, keepdims=True) + {eps}){npscale}"
        ),
        seed=seed,
    )


RMSNORM = Family(
    name="rmsnorm", domain="normalization", build=build_rmsnorm,
    suite_variant={"eps": 1e-6, "weight": "plain"}, suite_sizes=SUITE_ROWS,
    variants=tuple(
        {"eps": e, "weight": w} for e in (1e-6, 1e-5, 1e-8) for w in ("plain", "offset", "none")
        if (e, w) != (1e-6, "plain")
    ),
    small_sizes=SMALL_ROWS, large_sizes=LARGE_ROWS,
)


# ---------------------------------------------------------------- batchnorm inference (__constant__ parameters)

def build_batchnorm(variant, size, seed):
    eps, act = variant["eps"], variant["act"]
    n, c, hw = size["n"], size["c"], size["hw"]
    x = Tensor("x", "float32", (n, c, hw), "BATCH * CHANNELS * HW")
    y = Tensor("y", "float32", (n, c, hw), "BATCH * CHANNELS * HW")
    params = tuple(Tensor(p, "float32", (c,), "CHANNELS") for p in ("mean", "var", "gamma", "beta"))
    post = "fmaxf(v, 0.0f)" if act == "relu" else "v"
    kernels = fill(
        """
        // Per-channel scale and shift, folded on the host and read from constant memory.
        __constant__ float c_scale[CHANNELS];
        __constant__ float c_shift[CHANNELS];

        __global__ void batch_norm(const float* __restrict__ x, float* __restrict__ y, int total) {
            for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += blockDim.x * gridDim.x) {
                int ch = (i / HW) % CHANNELS;
                float v = x[i] * c_scale[ch] + c_shift[ch];
                y[i] = $POST;
            }
        }
        """,
        POST=post,
    )
    launch = """
        float h_scale[CHANNELS], h_shift[CHANNELS];
        for (int ch = 0; ch < CHANNELS; ++ch) {
            h_scale[ch] = h_gamma[ch] / sqrtf(h_var[ch] + EPS);
            h_shift[ch] = h_beta[ch] - h_mean[ch] * h_scale[ch];
        }
        CUDA_CHECK(cudaMemcpyToSymbol(c_scale, h_scale, sizeof(h_scale)));
        CUDA_CHECK(cudaMemcpyToSymbol(c_shift, h_shift, sizeof(h_shift)));
        const int total = BATCH * CHANNELS * HW;
        const int threads = 256;
        const int blocks = (total + threads - 1) / threads < 2048 ? (total + threads - 1) / threads : 2048;
        batch_norm<<<blocks, threads>>>(d_x, d_y, total);
    """
    name = ("Batch_Normalization" if act == "none" else "BatchNorm_ReLU") + ("" if eps == 1e-5 else f"_Eps_{eps_name(eps)}")
    formula = "y = gamma[c] * (x - mean[c]) / sqrt(var[c] + eps) + beta[c]" + (", then ReLU" if act == "relu" else "")
    return assemble(
        task_name=name,
        detail=(
            f"Inference-mode batch normalisation of a float32 tensor x of shape ({n}, {c}, {hw}) (batch, channels, "
            f"spatial positions) with per-channel running statistics mean and var and affine parameters gamma and beta "
            f"(each of length {c}), eps = {eps:g}: {formula}. Keep the per-channel factors in constant memory."
        ),
        algorithm=f"Inference batch normalisation over channels: {formula}.",
        inputs=(x, *params), outputs=(y,), checks=(Check("y", 1e-4, 1e-4),),
        constants=f"constexpr int BATCH = {n};\nconstexpr int CHANNELS = {c};\nconstexpr int HW = {hw};\nconstexpr float EPS = {cfloat(eps)};",
        kernels=kernels, launch=launch,
        gen_body=fill(
            """
            N, C, HW = $N, $C, $HW
            x = rng.standard_normal((N, C, HW)).astype(np.float32)
            mean = rng.uniform(-0.5, 0.5, C).astype(np.float32)
            var = rng.uniform(0.5, 2.0, C).astype(np.float32)
            gamma = rng.uniform(0.5, 1.5, C).astype(np.float32)
            beta = rng.uniform(-0.5, 0.5, C).astype(np.float32)
            p = lambda a: a.astype(np.float64)[None, :, None]
            y = p(gamma) * (x - p(mean)) / np.sqrt(p(var) + $EPS) + p(beta)
            $RELU
            """,
            N=n, C=c, HW=hw, EPS=eps, RELU="y = np.maximum(y, 0.0)" if act == "relu" else "",
        ),
        seed=seed, includes=("cmath",),
    )


BATCHNORM = Family(
    name="batchnorm", domain="normalization", build=build_batchnorm,
    suite_variant={"eps": 1e-5, "act": "none"},
    suite_sizes=({"n": 8, "c": 32, "hw": 1024}, {"n": 32, "c": 64, "hw": 4096}),
    variants=tuple({"eps": e, "act": a} for e in (1e-5, 1e-3, 1e-4) for a in ("none", "relu") if (e, a) != (1e-5, "none")),
    small_sizes=size_grid(n=(1, 4, 8), c=(3, 16, 64), hw=(49, 196, 1024)),
    large_sizes=size_grid(n=(32, 64), c=(64, 128), hw=(3136,)),
)


# ---------------------------------------------------------------- p-norm row normalisation (block per row)

def build_row_normalize(variant, size, seed):
    p = variant["p"]
    rows, cols = size["rows"], size["cols"]
    x, y = _rows_io(rows, cols)
    helpers = (WARP_MAX.strip() + "\n\n" + BLOCK_MAX.strip()) if p == "inf" else (WARP_SUM.strip() + "\n\n" + BLOCK_SUM.strip())
    term, reduce_call, norm = {
        "2": ("v * v", "block_sum(acc)", "sqrtf(total)"),
        "1": ("fabsf(v)", "block_sum(acc)", "total"),
        "inf": ("fabsf(v)", "block_max(acc)", "total"),
    }[p]
    combine = "acc = fmaxf(acc, {t});" if p == "inf" else "acc += {t};"
    kernels = helpers + "\n\n" + fill(
        """
        __global__ void normalize_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
            const float* xr = x + (size_t)blockIdx.x * cols;
            float* yr = y + (size_t)blockIdx.x * cols;
            float acc = 0.0f;
            for (int c = threadIdx.x; c < cols; c += blockDim.x) {
                float v = xr[c];
                $COMBINE
            }
            float total = $REDUCE;
            float inv = 1.0f / fmaxf($NORM, 1e-12f);
            for (int c = threadIdx.x; c < cols; c += blockDim.x) {
                yr[c] = xr[c] * inv;
            }
        }
        """,
        COMBINE=combine.format(t=term), REDUCE=reduce_call, NORM=norm,
    )
    launch = f"normalize_rows<<<ROWS, {pick((128, 256), p, rows, cols)}>>>(d_x, d_y, COLS);"
    title = {"2": "L2", "1": "L1", "inf": "Max"}[p]
    npnorm = {"2": "np.sqrt((x64 ** 2).sum(axis=1, keepdims=True))", "1": "np.abs(x64).sum(axis=1, keepdims=True)",
              "inf": "np.abs(x64).max(axis=1, keepdims=True)"}[p]
    desc = {"2": "Euclidean (L2) norm", "1": "L1 norm (sum of absolute values)", "inf": "maximum absolute value"}[p]
    return assemble(
        task_name=f"{title}_Normalize_Rows",
        detail=(
            f"Divide each row of a {rows}x{cols} float32 matrix x by its {desc}, clamped below at 1e-12: "
            "y[r][c] = x[r][c] / max(norm(row r), 1e-12). One block per row; reduce with warp shuffles and shared memory."
        ),
        algorithm=f"Normalise each row of a matrix by its {desc}.",
        inputs=(x,), outputs=(y,), checks=(Check("y", 1e-5, 1e-4),),
        constants=_rows_consts(rows, cols), kernels=kernels, launch=launch,
        gen_body=(
            f"ROWS, COLS = {rows}, {cols}\nx = rng.uniform(-2.0, 2.0, (ROWS, COLS)).astype(np.float32)\n"
            f"x64 = x.astype(np.float64)\ny = x64 / np.maximum({npnorm}, 1e-12)"
        ),
        seed=seed, includes=("cfloat", "cmath"),
    )


ROW_NORMALIZE = Family(
    name="row_normalize", domain="normalization", build=build_row_normalize,
    suite_variant={"p": "2"}, suite_sizes=SUITE_ROWS,
    variants=({"p": "1"}, {"p": "inf"}),
    small_sizes=SMALL_ROWS, large_sizes=LARGE_ROWS,
)


FAMILIES = (SOFTMAX, LAYERNORM, RMSNORM, BATCHNORM, ROW_NORMALIZE)
