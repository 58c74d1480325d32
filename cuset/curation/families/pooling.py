"""Pooling: windowed max/average over 2-D planes and global pooling per channel."""

from __future__ import annotations

from cuset.curation.families.base import (
    WARP_MAX, WARP_SUM, Check, Family, Tensor, assemble, fill, float_tolerance, pick, size_grid,
)

POOL_SMALL = size_grid(c=(1, 3, 8, 16), h=(16, 28, 64, 100), w=(16, 32, 60))
POOL_LARGE = size_grid(c=(32, 256), h=(224, 512), w=(224, 512))
POOL_SUITE = ({"c": 16, "h": 128, "w": 128}, {"c": 64, "h": 512, "w": 512})


def _pool_out(h, w, k, s, pad=0):
    return (h + 2 * pad - k) // s + 1, (w + 2 * pad - k) // s + 1


def build_max_pool(variant, size, seed):
    k, s = variant["k"], variant["stride"]
    c, h, w = size["c"], size["h"], size["w"]
    ho, wo = _pool_out(h, w, k, s)
    x = Tensor("input", "float32", (c, h, w), "C * H * W")
    y = Tensor("output", "float32", (c, ho, wo), "C * HO * WO")
    kernels = """
        // One thread per output pixel; blockIdx.z is the channel.
        __global__ void max_pool2d(const float* __restrict__ input, float* __restrict__ output) {
            int ox = blockIdx.x * blockDim.x + threadIdx.x;
            int oy = blockIdx.y * blockDim.y + threadIdx.y;
            int ch = blockIdx.z;
            if (ox >= WO || oy >= HO) {
                return;
            }
            const float* plane = input + (size_t)ch * H * W;
            float best = -FLT_MAX;
            for (int i = 0; i < KS; ++i) {
                for (int j = 0; j < KS; ++j) {
                    best = fmaxf(best, plane[(oy * STRIDE + i) * W + ox * STRIDE + j]);
                }
            }
            output[((size_t)ch * HO + oy) * WO + ox] = best;
        }
    """
    launch = fill(
        """
        dim3 block(16, $BY);
        dim3 grid((WO + block.x - 1) / block.x, (HO + block.y - 1) / block.y, C);
        max_pool2d<<<grid, block>>>(d_input, d_output);
        """,
        BY=pick((8, 16), k, s, c, h, w),
    )
    name = "Max_Pooling_2D" if (k, s) == (2, 2) else f"Max_Pool2D_K{k}_S{s}"
    return assemble(
        task_name=name,
        detail=(
            f"2-D max pooling of a float32 input of shape ({c}, {h}, {w}) (channels, height, width) with a {k}x{k} "
            f"window and stride {s}, no padding: output has shape ({c}, {ho}, {wo}) and output[c][y][x] is the maximum "
            f"of input[c][y*{s} + i][x*{s} + j] over 0 <= i, j < {k}."
        ),
        algorithm=f"2-D max pooling with a {k}x{k} window and stride {s} over every channel.",
        inputs=(x,), outputs=(y,), checks=(Check("output"),),
        constants=(f"constexpr int C = {c};\nconstexpr int H = {h};\nconstexpr int W = {w};\nconstexpr int KS = {k};\n"
                   f"constexpr int STRIDE = {s};\nconstexpr int HO = {ho};\nconstexpr int WO = {wo};"),
        kernels=kernels, launch=launch,
        gen_body=fill(
            """
            C, H, W, K, S, HO, WO = $C, $H, $W, $K, $S, $HO, $WO
            input = rng.standard_normal((C, H, W)).astype(np.float32)
            output = np.full((C, HO, WO), -np.inf, dtype=np.float32)
            for i in range(K):
                for j in range(K):
                    output = np.maximum(output, input[:, i:i + S * (HO - 1) + 1:S, j:j + S * (WO - 1) + 1:S])
            """,
            C=c, H=h, W=w, K=k, S=s, HO=ho, WO=wo,
        ),
        seed=seed, includes=("cfloat",),
    )


MAX_POOL = Family(
    name="max_pool2d", domain="pooling", build=build_max_pool,
    suite_variant={"k": 2, "stride": 2}, suite_sizes=POOL_SUITE,
    variants=tuple({"k": k, "stride": s} for k, s in ((3, 2), (3, 1), (2, 1), (4, 4), (3, 3), (5, 2))),
    small_sizes=POOL_SMALL, large_sizes=POOL_LARGE,
)


def build_avg_pool(variant, size, seed):
    k, s, pad = variant["k"], variant["stride"], variant["pad"]
    c, h, w = size["c"], size["h"], size["w"]
    ho, wo = _pool_out(h, w, k, s, pad)
    x = Tensor("input", "float32", (c, h, w), "C * H * W")
    y = Tensor("output", "float32", (c, ho, wo), "C * HO * WO")
    kernels = """
        // Padding counts as zeros and the divisor is always KS * KS (count_include_pad).
        __global__ void avg_pool2d(const float* __restrict__ input, float* __restrict__ output) {
            int ox = blockIdx.x * blockDim.x + threadIdx.x;
            int oy = blockIdx.y * blockDim.y + threadIdx.y;
            int ch = blockIdx.z;
            if (ox < WO && oy < HO) {
                const float* plane = input + (size_t)ch * H * W;
                float sum = 0.0f;
                for (int i = 0; i < KS; ++i) {
                    int iy = oy * STRIDE - PAD + i;
                    for (int j = 0; j < KS; ++j) {
                        int ix = ox * STRIDE - PAD + j;
                        if (iy >= 0 && iy < H && ix >= 0 && ix < W) {
                            sum += plane[iy * W + ix];
                        }
                    }
                }
                output[((size_t)ch * HO + oy) * WO + ox] = sum / (KS * KS);
            }
        }
    """
    launch = """
        dim3 block(16, 16);
        dim3 grid((WO + block.x - 1) / block.x, (HO + block.y - 1) / block.y, C);
        avg_pool2d<<<grid, block>>>(d_input, d_output);
    """
    name = "Average_Pooling_2D" if (k, s, pad) == (2, 2, 0) else f"Avg_Pool2D_K{k}_S{s}_P{pad}"
    return assemble(
        task_name=name,
        detail=(
            f"2-D average pooling of a float32 input of shape ({c}, {h}, {w}) with a {k}x{k} window, stride {s} and zero "
            f"padding {pad}; the divisor is always {k * k} (padded zeros count). Output shape ({c}, {ho}, {wo})."
        ),
        algorithm=f"2-D average pooling with a {k}x{k} window, stride {s}, zero padding {pad} (padding included in the average).",
        inputs=(x,), outputs=(y,), checks=(Check("output", *float_tolerance()),),
        constants=(f"constexpr int C = {c};\nconstexpr int H = {h};\nconstexpr int W = {w};\nconstexpr int KS = {k};\n"
                   f"constexpr int STRIDE = {s};\nconstexpr int PAD = {pad};\nconstexpr int HO = {ho};\nconstexpr int WO = {wo};"),
        kernels=kernels, launch=launch,
        gen_body=fill(
            """
            C, H, W, K, S, P, HO, WO = $C, $H, $W, $K, $S, $P, $HO, $WO
            input = rng.standard_normal((C, H, W)).astype(np.float32)
            xp = np.pad(input.astype(np.float64), ((0, 0), (P, P), (P, P)))
            output = np.zeros((C, HO, WO))
            for i in range(K):
                for j in range(K):
                    output += xp[:, i:i + S * (HO - 1) + 1:S, j:j + S * (WO - 1) + 1:S]
            output /= K * K
            """,
            C=c, H=h, W=w, K=k, S=s, P=pad, HO=ho, WO=wo,
        ),
        seed=seed,
    )


AVG_POOL = Family(
    name="avg_pool2d", domain="pooling", build=build_avg_pool,
    suite_variant={"k": 2, "stride": 2, "pad": 0}, suite_sizes=POOL_SUITE,
    variants=tuple({"k": k, "stride": s, "pad": p} for k, s, p in ((3, 2, 1), (3, 1, 1), (2, 1, 0), (4, 4, 0), (3, 3, 0), (5, 1, 2))),
    small_sizes=POOL_SMALL, large_sizes=POOL_LARGE,
)


# ---------------------------------------------------------------- global pooling (warp per channel)

GLOBAL_OPS = {
    "avg": ("Global_Average_Pooling", "the mean", "acc += v;", "warp_sum(acc)", "total / HW", "x64.mean(axis=2)"),
    "max": ("Global_Max_Pooling", "the maximum", "acc = fmaxf(acc, v);", "warp_max(acc)", "total", "x64.max(axis=2)"),
    "rms": ("Global_RMS_Pooling", "the root mean square", "acc += v * v;", "warp_sum(acc)", "sqrtf(total / HW)",
            "np.sqrt((x64 ** 2).mean(axis=2))"),
    "gem": ("Global_GeM_Pooling", "the generalised mean with p = 3, (mean of x^3)^(1/3) (inputs are positive)",
            "acc += v * v * v;", "warp_sum(acc)", "cbrtf(total / HW)", "np.cbrt((x64 ** 3).mean(axis=2))"),
}


def build_global_pool(variant, size, seed):
    op = variant["op"]
    name, what, step, reduce_call, final, npexpr = GLOBAL_OPS[op]
    n, c, hw = size["n"], size["c"], size["hw"]
    x = Tensor("input", "float32", (n, c, hw), "BATCH * C * HW")
    y = Tensor("output", "float32", (n, c), "BATCH * C")
    helper = WARP_MAX if op == "max" else WARP_SUM
    init = "-FLT_MAX" if op == "max" else "0.0f"
    kernels = helper.strip() + "\n\n" + fill(
        """
        // One warp per (image, channel) plane: spatial maps are small, so a block per plane would idle.
        __global__ void global_pool(const float* __restrict__ input, float* __restrict__ output, int planes) {
            int plane = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
            int lane = threadIdx.x & 31;
            if (plane >= planes) {
                return;
            }
            const float* p = input + (size_t)plane * HW;
            float acc = $INIT;
            for (int i = lane; i < HW; i += 32) {
                float v = p[i];
                $STEP
            }
            float total = $REDUCE;
            if (lane == 0) {
                output[plane] = $FINAL;
            }
        }
        """,
        INIT=init, STEP=step, REDUCE=reduce_call, FINAL=final,
    )
    launch = """
        const int planes = BATCH * C;
        const int threads = 256;
        global_pool<<<(planes * 32 + threads - 1) / threads, threads>>>(d_input, d_output, planes);
    """
    draw = "rng.uniform(0.1, 2.0, (N, C, HW))" if op == "gem" else "rng.standard_normal((N, C, HW))"
    return assemble(
        task_name=name,
        detail=(
            f"Global pooling of a float32 tensor of shape ({n}, {c}, {hw}) (batch, channels, flattened spatial "
            f"positions): output[n][c] = {what} of the {hw} values of plane (n, c). Use one warp per plane and "
            "reduce with warp shuffles."
        ),
        algorithm=f"Global pooling over the spatial positions of each (batch, channel) plane: {what}.",
        inputs=(x,), outputs=(y,),
        checks=(Check("output") if op == "max" else Check("output", *float_tolerance(hw, 1.0 / hw ** 0.5)),),
        constants=f"constexpr int BATCH = {n};\nconstexpr int C = {c};\nconstexpr int HW = {hw};",
        kernels=kernels, launch=launch,
        gen_body=f"N, C, HW = {n}, {c}, {hw}\ninput = {draw}.astype(np.float32)\nx64 = input.astype(np.float64)\noutput = {npexpr}",
        seed=seed, includes=("cfloat", "cmath"),
    )


GLOBAL_POOL = Family(
    name="global_pool", domain="pooling", build=build_global_pool,
    suite_variant={"op": "avg"}, suite_sizes=({"n": 8, "c": 256, "hw": 196}, {"n": 128, "c": 2048, "hw": 196}),
    variants=({"op": "max"}, {"op": "rms"}, {"op": "gem"}),
    small_sizes=size_grid(n=(1, 2, 4, 6), c=(16, 64, 256), hw=(49, 64, 196, 256)),
    large_sizes=size_grid(n=(64, 256), c=(512, 2048), hw=(49, 196)),
)


FAMILIES = (MAX_POOL, AVG_POOL, GLOBAL_POOL)
