"""Convolutions and stencils: halo tiles in shared memory, constant-memory filters, 3-D grids."""

from __future__ import annotations

from cuset.curation.families.base import (
    Check, Family, Tensor, assemble, cfloat, fill, float_tolerance, fmt_num, name_num, one_axis, pick, size_grid,
)

IMAGE_SMALL = size_grid(h=(32, 64, 100, 256), w=(48, 128, 200, 512))
IMAGE_LARGE = size_grid(h=(2048, 4096), w=(2048, 3000))


def _img(name, h, w):
    return Tensor(name, "float32", (h, w), "H * W")


# ---------------------------------------------------------------- conv1d (constant filter, shared halo)

def build_conv1d(variant, size, seed):
    width, mode = variant["width"], variant["mode"]
    n = size["n"]
    left = width - 1 if mode == "causal" else (width - 1) // 2
    x, f, y = Tensor("x", "float32", (n,), "N"), Tensor("filter", "float32", (width,), "WIDTH"), Tensor("y", "float32", (n,), "N")
    kernels = """
        __constant__ float c_filter[WIDTH];

        // Each block stages its inputs plus the halo in shared memory, then every thread
        // reads WIDTH neighbours from there instead of from global memory.
        __global__ void conv1d(const float* __restrict__ x, float* __restrict__ y, int n) {
            extern __shared__ float tile[];
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            int start = blockIdx.x * blockDim.x - LEFT;
            for (int j = threadIdx.x; j < blockDim.x + WIDTH - 1; j += blockDim.x) {
                int src = start + j;
                tile[j] = (src >= 0 && src < n) ? x[src] : 0.0f;
            }
            __syncthreads();
            if (i < n) {
                float acc = 0.0f;
                for (int k = 0; k < WIDTH; ++k) {
                    acc += c_filter[k] * tile[threadIdx.x + k];
                }
                y[i] = acc;
            }
        }
    """
    launch = fill(
        """
        CUDA_CHECK(cudaMemcpyToSymbol(c_filter, h_filter.data(), WIDTH * sizeof(float)));
        const int threads = $BLOCK;
        const int blocks = (N + threads - 1) / threads;
        conv1d<<<blocks, threads, (threads + WIDTH - 1) * sizeof(float)>>>(d_x, d_y, N);
        """,
        BLOCK=pick((128, 256, 512), width, mode, n),
    )
    causal = mode == "causal"
    formula = (f"y[i] = sum_{{k=0}}^{{{width - 1}}} filter[k] * x[i + k - {left}]")
    name = "Convolution_1D" if (width, mode) == (5, "same") else (f"{'Causal_' if causal else ''}Conv1D_Width_{width}")
    return assemble(
        task_name=name,
        detail=(
            f"{'Causal' if causal else 'Same-size'} 1-D convolution (cross-correlation, as in deep-learning "
            f"frameworks) of a float32 signal x of length {n} with a filter of {width} taps: {formula}, where x is "
            "zero outside its bounds. Keep the filter in constant memory and stage each block's inputs plus halo "
            "in dynamically sized shared memory."
        ),
        algorithm=f"{'Causal ' if causal else ''}1-D convolution with a {width}-tap filter and zero padding: {formula}.",
        inputs=(x, f), outputs=(y,), checks=(Check("y", *float_tolerance(width, 0.5)),),
        constants=f"constexpr int N = {n};\nconstexpr int WIDTH = {width};\nconstexpr int LEFT = {left};",
        kernels=kernels, launch=launch,
        gen_body=fill(
            """
            N, WIDTH, LEFT = $N, $WIDTH, $LEFT
            x = rng.uniform(-1.0, 1.0, N).astype(np.float32)
            filter = rng.uniform(-1.0, 1.0, WIDTH).astype(np.float32)
            xp = np.pad(x.astype(np.float64), (LEFT, WIDTH - 1 - LEFT))
            y = sum(float(filter[k]) * xp[k:k + N] for k in range(WIDTH))
            """,
            N=n, WIDTH=width, LEFT=left,
        ),
        seed=seed,
    )


CONV1D = Family(
    name="conv1d", domain="stencil", build=build_conv1d,
    suite_variant={"width": 5, "mode": "same"}, suite_sizes=({"n": 262144}, {"n": 16777216}),
    variants=tuple(
        {"width": w, "mode": m} for m in ("same", "causal") for w in (3, 5, 7, 9, 11, 15) if (w, m) != (5, "same")
    ),
    small_sizes=one_axis("n", (1000, 4096, 10000, 65536, 100000, 200000)),
    large_sizes=one_axis("n", (1 << 20, 1 << 23)),
)


# ---------------------------------------------------------------- conv2d single channel (2-D halo tile)

def build_conv2d(variant, size, seed):
    ks, pad = variant["k"], variant["pad"]
    h, w = size["h"], size["w"]
    image, out = _img("image", h, w), _img("out", h, w)
    filt = Tensor("filter", "float32", (ks, ks), "KS * KS")
    load = ("(gy >= 0 && gy < H && gx >= 0 && gx < W) ? image[gy * W + gx] : 0.0f" if pad == "zero"
            else "image[min(max(gy, 0), H - 1) * W + min(max(gx, 0), W - 1)]")
    kernels = fill(
        """
        constexpr int BS = 16;
        constexpr int R = KS / 2;
        constexpr int TW = BS + KS - 1;

        __global__ void conv2d_tiled(const float* __restrict__ image, const float* __restrict__ filter,
                                     float* __restrict__ out) {
            __shared__ float tile[TW][TW];
            __shared__ float f[KS][KS];
            int ox = blockIdx.x * BS;
            int oy = blockIdx.y * BS;
            // Load the block's tile plus an R-pixel halo on every side.
            for (int ty = threadIdx.y; ty < TW; ty += BS) {
                for (int tx = threadIdx.x; tx < TW; tx += BS) {
                    int gy = oy + ty - R;
                    int gx = ox + tx - R;
                    tile[ty][tx] = $LOAD;
                }
            }
            if (threadIdx.y < KS && threadIdx.x < KS) {
                f[threadIdx.y][threadIdx.x] = filter[threadIdx.y * KS + threadIdx.x];
            }
            __syncthreads();
            int y = oy + threadIdx.y;
            int x = ox + threadIdx.x;
            if (y < H && x < W) {
                float acc = 0.0f;
                for (int i = 0; i < KS; ++i) {
                    for (int j = 0; j < KS; ++j) {
                        acc += f[i][j] * tile[threadIdx.y + i][threadIdx.x + j];
                    }
                }
                out[y * W + x] = acc;
            }
        }
        """,
        LOAD=load,
    )
    launch = """
        dim3 block(BS, BS);
        dim3 grid((W + BS - 1) / BS, (H + BS - 1) / BS);
        conv2d_tiled<<<grid, block>>>(d_image, d_filter, d_out);
    """
    pad_text = "zero padding" if pad == "zero" else "replicate padding (out-of-range coordinates clamp to the border)"
    name = "Convolution_2D" if (ks, pad) == (3, "zero") else f"Conv2D_K{ks}" + ("_Replicate_Pad" if pad == "replicate" else "")
    np_pad = "np.pad(image.astype(np.float64), R)" if pad == "zero" else "np.pad(image.astype(np.float64), R, mode='edge')"
    return assemble(
        task_name=name,
        detail=(
            f"2-D convolution (cross-correlation) of a single-channel {h}x{w} float32 image with a {ks}x{ks} float32 "
            f"filter, same output size, {pad_text}: out[y][x] = sum_{{i,j}} filter[i][j] * image[y + i - {ks // 2}][x + j - {ks // 2}]. "
            "Use 16x16 thread blocks that stage their input tile plus halo in shared memory."
        ),
        algorithm=f"Same-size 2-D convolution of an image with a {ks}x{ks} filter, {pad_text}.",
        inputs=(image, filt), outputs=(out,), checks=(Check("out", *float_tolerance(ks * ks, 0.5)),),
        constants=f"constexpr int H = {h};\nconstexpr int W = {w};\nconstexpr int KS = {ks};",
        kernels=kernels, launch=launch,
        gen_body=fill(
            """
            H, W, KS = $H, $W, $KS
            R = KS // 2
            image = rng.uniform(0.0, 1.0, (H, W)).astype(np.float32)
            filter = rng.uniform(-1.0, 1.0, (KS, KS)).astype(np.float32)
            p = $NPPAD
            out = sum(float(filter[i, j]) * p[i:i + H, j:j + W] for i in range(KS) for j in range(KS))
            """,
            H=h, W=w, KS=ks, NPPAD=np_pad,
        ),
        seed=seed,
    )


CONV2D = Family(
    name="conv2d", domain="stencil", build=build_conv2d,
    suite_variant={"k": 3, "pad": "zero"}, suite_sizes=({"h": 512, "w": 512}, {"h": 4096, "w": 4096}),
    variants=tuple({"k": k, "pad": p} for k in (3, 5, 7) for p in ("zero", "replicate") if (k, p) != (3, "zero")),
    small_sizes=IMAGE_SMALL, large_sizes=IMAGE_LARGE,
)


# ---------------------------------------------------------------- conv2d NCHW multi-channel (3-D grid)

def build_conv2d_nchw(variant, size, seed):
    ks, stride, pad = variant["k"], variant["stride"], variant["pad"]
    cin, cout, h, w = size["cin"], size["cout"], size["h"], size["w"]
    ho, wo = (h + 2 * pad - ks) // stride + 1, (w + 2 * pad - ks) // stride + 1
    x = Tensor("input", "float32", (cin, h, w), "CIN * H * W")
    wt = Tensor("weight", "float32", (cout, cin, ks, ks), "COUT * CIN * KS * KS")
    b = Tensor("bias", "float32", (cout,), "COUT")
    y = Tensor("output", "float32", (cout, ho, wo), "COUT * HO * WO")
    kernels = """
        // Direct convolution: blockIdx.z is the output channel, x/y cover the output plane.
        __global__ void conv2d_nchw(const float* __restrict__ input, const float* __restrict__ weight,
                                    const float* __restrict__ bias, float* __restrict__ output) {
            int ox = blockIdx.x * blockDim.x + threadIdx.x;
            int oy = blockIdx.y * blockDim.y + threadIdx.y;
            int oc = blockIdx.z;
            if (ox >= WO || oy >= HO) {
                return;
            }
            float acc = bias[oc];
            for (int ic = 0; ic < CIN; ++ic) {
                for (int ky = 0; ky < KS; ++ky) {
                    int iy = oy * STRIDE - PAD + ky;
                    if (iy < 0 || iy >= H) continue;
                    for (int kx = 0; kx < KS; ++kx) {
                        int ix = ox * STRIDE - PAD + kx;
                        if (ix < 0 || ix >= W) continue;
                        acc += input[(ic * H + iy) * W + ix] * weight[((oc * CIN + ic) * KS + ky) * KS + kx];
                    }
                }
            }
            output[(oc * HO + oy) * WO + ox] = acc;
        }
    """
    launch = """
        dim3 block(16, 16);
        dim3 grid((WO + block.x - 1) / block.x, (HO + block.y - 1) / block.y, COUT);
        conv2d_nchw<<<grid, block>>>(d_input, d_weight, d_bias, d_output);
    """
    name = "Conv2D_Multi_Channel" if (ks, stride, pad) == (3, 1, 1) else f"Conv2D_NCHW_K{ks}_S{stride}_P{pad}"
    return assemble(
        task_name=name,
        detail=(
            f"Multi-channel 2-D convolution (cross-correlation) of an input of shape ({cin}, {h}, {w}) (channels, "
            f"height, width) with weights of shape ({cout}, {cin}, {ks}, {ks}) and a bias per output channel, stride "
            f"{stride}, zero padding {pad}: output has shape ({cout}, {ho}, {wo}) and output[o][y][x] = bias[o] + "
            f"sum over c, i, j of input[c][y*{stride} - {pad} + i][x*{stride} - {pad} + j] * weight[o][c][i][j]. "
            "Use a 3-D grid whose z index is the output channel."
        ),
        algorithm=f"Multi-channel 2-D convolution with a {ks}x{ks} kernel, stride {stride}, zero padding {pad}, and bias.",
        inputs=(x, wt, b), outputs=(y,), checks=(Check("output", *float_tolerance(cin * ks * ks, 0.5)),),
        constants=(f"constexpr int CIN = {cin};\nconstexpr int COUT = {cout};\nconstexpr int H = {h};\nconstexpr int W = {w};\n"
                   f"constexpr int KS = {ks};\nconstexpr int STRIDE = {stride};\nconstexpr int PAD = {pad};\n"
                   f"constexpr int HO = {ho};\nconstexpr int WO = {wo};"),
        kernels=kernels, launch=launch,
        gen_body=fill(
            """
            CIN, COUT, H, W, KS, S, P = $CIN, $COUT, $H, $W, $KS, $S, $P
            HO, WO = $HO, $WO
            input = rng.uniform(-1.0, 1.0, (CIN, H, W)).astype(np.float32)
            weight = rng.uniform(-1.0, 1.0, (COUT, CIN, KS, KS)).astype(np.float32)
            bias = rng.uniform(-1.0, 1.0, COUT).astype(np.float32)
            xp = np.pad(input.astype(np.float64), ((0, 0), (P, P), (P, P)))
            output = np.broadcast_to(bias.astype(np.float64)[:, None, None], (COUT, HO, WO)).copy()
            for i in range(KS):
                for j in range(KS):
                    patch = xp[:, i:i + S * (HO - 1) + 1:S, j:j + S * (WO - 1) + 1:S]
                    output += np.einsum("oc,chw->ohw", weight[:, :, i, j].astype(np.float64), patch)
            """,
            CIN=cin, COUT=cout, H=h, W=w, KS=ks, S=stride, P=pad, HO=ho, WO=wo,
        ),
        seed=seed,
    )


CONV2D_NCHW = Family(
    name="conv2d_nchw", domain="stencil", build=build_conv2d_nchw,
    suite_variant={"k": 3, "stride": 1, "pad": 1},
    suite_sizes=({"cin": 8, "cout": 16, "h": 64, "w": 64}, {"cin": 64, "cout": 128, "h": 128, "w": 128}),
    variants=tuple(
        {"k": k, "stride": s, "pad": p} for k, s, p in ((3, 2, 1), (1, 1, 0), (5, 1, 2), (3, 1, 0), (5, 2, 2), (7, 2, 3))
    ),
    small_sizes=size_grid(cin=(1, 3, 4), cout=(4, 8), h=(16, 28, 32), w=(16, 32, 40)),
    large_sizes=size_grid(cin=(32, 64), cout=(64,), h=(112, 224), w=(112, 224)),
)


# ---------------------------------------------------------------- depthwise conv2d

def build_depthwise(variant, size, seed):
    ks, stride = variant["k"], variant["stride"]
    c, h, w = size["c"], size["h"], size["w"]
    pad = ks // 2
    ho, wo = (h + 2 * pad - ks) // stride + 1, (w + 2 * pad - ks) // stride + 1
    x = Tensor("input", "float32", (c, h, w), "C * H * W")
    f = Tensor("filter", "float32", (c, ks, ks), "C * KS * KS")
    y = Tensor("output", "float32", (c, ho, wo), "C * HO * WO")
    kernels = """
        // Each channel is convolved with its own KSxKS filter; one thread per output pixel.
        __global__ void depthwise_conv2d(const float* __restrict__ input, const float* __restrict__ filter,
                                         float* __restrict__ output) {
            int ox = blockIdx.x * blockDim.x + threadIdx.x;
            int oy = blockIdx.y * blockDim.y + threadIdx.y;
            int ch = blockIdx.z;
            if (ox < WO && oy < HO) {
                const float* in_c = input + (size_t)ch * H * W;
                const float* f_c = filter + ch * KS * KS;
                float acc = 0.0f;
                for (int i = 0; i < KS; ++i) {
                    for (int j = 0; j < KS; ++j) {
                        int iy = oy * STRIDE - PAD + i;
                        int ix = ox * STRIDE - PAD + j;
                        if (iy >= 0 && iy < H && ix >= 0 && ix < W) {
                            acc += in_c[iy * W + ix] * f_c[i * KS + j];
                        }
                    }
                }
                output[((size_t)ch * HO + oy) * WO + ox] = acc;
            }
        }
    """
    launch = fill(
        """
        dim3 block($BX, $BY);
        dim3 grid((WO + block.x - 1) / block.x, (HO + block.y - 1) / block.y, C);
        depthwise_conv2d<<<grid, block>>>(d_input, d_filter, d_output);
        """,
        BX=32, BY=pick((4, 8), ks, stride, c, h, w),
    )
    name = "Depthwise_Conv2D" if (ks, stride) == (3, 1) else f"Depthwise_Conv2D_K{ks}_S{stride}"
    return assemble(
        task_name=name,
        detail=(
            f"Depthwise 2-D convolution of an input of shape ({c}, {h}, {w}) with one {ks}x{ks} filter per channel "
            f"(filter shape ({c}, {ks}, {ks})), stride {stride}, zero padding {pad}; output shape ({c}, {ho}, {wo}): "
            f"output[c][y][x] = sum_{{i,j}} input[c][y*{stride} - {pad} + i][x*{stride} - {pad} + j] * filter[c][i][j]."
        ),
        algorithm=f"Depthwise (per-channel) 2-D convolution with {ks}x{ks} filters, stride {stride}, zero padding {pad}.",
        inputs=(x, f), outputs=(y,), checks=(Check("output", *float_tolerance(ks * ks, 0.5)),),
        constants=(f"constexpr int C = {c};\nconstexpr int H = {h};\nconstexpr int W = {w};\nconstexpr int KS = {ks};\n"
                   f"constexpr int STRIDE = {stride};\nconstexpr int PAD = {pad};\nconstexpr int HO = {ho};\nconstexpr int WO = {wo};"),
        kernels=kernels, launch=launch,
        gen_body=fill(
            """
            C, H, W, KS, S, P, HO, WO = $C, $H, $W, $KS, $S, $P, $HO, $WO
            input = rng.uniform(-1.0, 1.0, (C, H, W)).astype(np.float32)
            filter = rng.uniform(-1.0, 1.0, (C, KS, KS)).astype(np.float32)
            xp = np.pad(input.astype(np.float64), ((0, 0), (P, P), (P, P)))
            output = np.zeros((C, HO, WO))
            for i in range(KS):
                for j in range(KS):
                    patch = xp[:, i:i + S * (HO - 1) + 1:S, j:j + S * (WO - 1) + 1:S]
                    output += filter[:, i, j].astype(np.float64)[:, None, None] * patch
            """,
            C=c, H=h, W=w, KS=ks, S=stride, P=pad, HO=ho, WO=wo,
        ),
        seed=seed,
    )


DEPTHWISE = Family(
    name="depthwise_conv2d", domain="stencil", build=build_depthwise,
    suite_variant={"k": 3, "stride": 1}, suite_sizes=({"c": 32, "h": 64, "w": 64}, {"c": 256, "h": 112, "w": 112}),
    variants=({"k": 5, "stride": 1}, {"k": 3, "stride": 2}, {"k": 7, "stride": 1}, {"k": 5, "stride": 2}),
    small_sizes=size_grid(c=(3, 8, 16, 64), h=(14, 28, 56), w=(14, 28, 56)),
    large_sizes=size_grid(c=(128, 512), h=(56, 224), w=(56, 224)),
)


# ---------------------------------------------------------------- 2-D stencils (shared tile, copied border)

STENCILS_2D = {
    # kind -> (name, description, CUDA expression over s (tile) at (ty, tx), numpy expression over p (padded))
    "laplace5": (
        "Laplacian_5_Point", "out = in[y-1][x] + in[y+1][x] + in[y][x-1] + in[y][x+1] - 4 * in[y][x]",
        "s[ty - 1][tx] + s[ty + 1][tx] + s[ty][tx - 1] + s[ty][tx + 1] - 4.0f * s[ty][tx]",
        "p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4.0 * p[1:-1, 1:-1]",
    ),
    "laplace9": (
        "Laplacian_9_Point", "out = (sum of the 8 neighbours) - 8 * in[y][x]",
        "s[ty - 1][tx - 1] + s[ty - 1][tx] + s[ty - 1][tx + 1] + s[ty][tx - 1] + s[ty][tx + 1] + "
        "s[ty + 1][tx - 1] + s[ty + 1][tx] + s[ty + 1][tx + 1] - 8.0f * s[ty][tx]",
        "sum(p[1 + dy:p.shape[0] - 1 + dy, 1 + dx:p.shape[1] - 1 + dx] for dy in (-1, 0, 1) for dx in (-1, 0, 1)) - 9.0 * p[1:-1, 1:-1]",
    ),
    "cross_avg": (
        "Cross_Average_Stencil", "out = (in[y][x] + in[y-1][x] + in[y+1][x] + in[y][x-1] + in[y][x+1]) / 5",
        "(s[ty][tx] + s[ty - 1][tx] + s[ty + 1][tx] + s[ty][tx - 1] + s[ty][tx + 1]) * 0.2f",
        "(p[1:-1, 1:-1] + p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:]) * np.float32(0.2)",
    ),
    "box_avg": (
        "Box_Average_3x3_Stencil", "out = mean of the 3x3 neighbourhood of (y, x)",
        "(s[ty - 1][tx - 1] + s[ty - 1][tx] + s[ty - 1][tx + 1] + s[ty][tx - 1] + s[ty][tx] + s[ty][tx + 1] + "
        "s[ty + 1][tx - 1] + s[ty + 1][tx] + s[ty + 1][tx + 1]) * (1.0f / 9.0f)",
        "sum(p[1 + dy:p.shape[0] - 1 + dy, 1 + dx:p.shape[1] - 1 + dx] for dy in (-1, 0, 1) for dx in (-1, 0, 1)) * np.float32(1.0 / 9.0)",
    ),
}


def build_stencil_2d(variant, size, seed):
    kind = variant["kind"]
    name, desc, cexpr, npexpr = STENCILS_2D[kind]
    h, w = size["h"], size["w"]
    grid_in, grid_out = _img("grid", h, w), _img("out", h, w)
    bs = pick((16, 32), kind, h, w)
    kernels = fill(
        """
        constexpr int BS = $BS;

        // Interior points get the stencil; the outermost ring of the grid is copied unchanged.
        __global__ void stencil_2d(const float* __restrict__ in, float* __restrict__ out) {
            __shared__ float s[BS + 2][BS + 2];
            int x = blockIdx.x * BS + threadIdx.x;
            int y = blockIdx.y * BS + threadIdx.y;
            int tx = threadIdx.x + 1;
            int ty = threadIdx.y + 1;
            // Stage the tile and a one-point halo (corners included).
            for (int dy = threadIdx.y; dy < BS + 2; dy += BS) {
                for (int dx = threadIdx.x; dx < BS + 2; dx += BS) {
                    int gy = blockIdx.y * BS + dy - 1;
                    int gx = blockIdx.x * BS + dx - 1;
                    s[dy][dx] = (gy >= 0 && gy < H && gx >= 0 && gx < W) ? in[gy * W + gx] : 0.0f;
                }
            }
            __syncthreads();
            if (x < W && y < H) {
                bool border = x == 0 || y == 0 || x == W - 1 || y == H - 1;
                out[y * W + x] = border ? s[ty][tx] : $EXPR;
            }
        }
        """,
        BS=bs, EXPR=cexpr,
    )
    launch = """
        dim3 block(BS, BS);
        dim3 grid((W + BS - 1) / BS, (H + BS - 1) / BS);
        stencil_2d<<<grid, block>>>(d_grid, d_out);
    """
    return assemble(
        task_name=name,
        detail=(
            f"Apply a 2-D stencil to a {h}x{w} float32 grid: for interior points {desc}; points on the outer border "
            "are copied unchanged. Stage each 2-D block's tile with a one-point halo in shared memory."
        ),
        algorithm=f"2-D stencil on a grid: {desc} at interior points, border copied.",
        inputs=(grid_in,), outputs=(grid_out,), checks=(Check("out", 1e-5, 1e-5),),
        constants=f"constexpr int H = {h};\nconstexpr int W = {w};", kernels=kernels, launch=launch,
        gen_body=(
            f"H, W = {h}, {w}\ngrid = rng.uniform(-1.0, 1.0, (H, W)).astype(np.float32)\n"
            f"p = grid.astype(np.float64)\nout = p.copy()\nout[1:-1, 1:-1] = {npexpr}"
        ),
        seed=seed,
    )


STENCIL_2D = Family(
    name="stencil_2d", domain="stencil", build=build_stencil_2d,
    suite_variant={"kind": "laplace5"}, suite_sizes=({"h": 512, "w": 512}, {"h": 4096, "w": 4096}),
    variants=({"kind": "laplace9"}, {"kind": "cross_avg"}, {"kind": "box_avg"}),
    small_sizes=IMAGE_SMALL, large_sizes=IMAGE_LARGE,
)


# ---------------------------------------------------------------- 3-D 7-point stencil (2.5-D: threads march in z)

def build_stencil_3d(variant, size, seed):
    c0, c1 = variant["c0"], variant["c1"]
    d, h, w = size["d"], size["h"], size["w"]
    vol_in = Tensor("volume", "float32", (d, h, w), "D * H * W")
    vol_out = Tensor("out", "float32", (d, h, w), "D * H * W")
    kernels = """
        // A 2-D grid covers (x, y); each thread marches through z, so every block stays small.
        __global__ void stencil_3d(const float* __restrict__ in, float* __restrict__ out) {
            int x = blockIdx.x * blockDim.x + threadIdx.x;
            int y = blockIdx.y * blockDim.y + threadIdx.y;
            if (x >= W || y >= H) {
                return;
            }
            const int plane = H * W;
            for (int z = 0; z < D; ++z) {
                int idx = z * plane + y * W + x;
                bool border = x == 0 || y == 0 || z == 0 || x == W - 1 || y == H - 1 || z == D - 1;
                if (border) {
                    out[idx] = in[idx];
                } else {
                    float neighbours = in[idx - 1] + in[idx + 1] + in[idx - W] + in[idx + W] + in[idx - plane] + in[idx + plane];
                    out[idx] = C0 * in[idx] + C1 * neighbours;
                }
            }
        }
    """
    launch = fill(
        """
        dim3 block(32, $BY);
        dim3 grid((W + block.x - 1) / block.x, (H + block.y - 1) / block.y);
        stencil_3d<<<grid, block>>>(d_volume, d_out);
        """,
        BY=pick((4, 8), c0, c1, d, h, w),
    )
    name = "Stencil_3D_7_Point" if (c0, c1) == (-6.0, 1.0) else f"Stencil_3D_7pt_C0_{name_num(c0)}_C1_{name_num(c1)}"
    formula = f"out = {fmt_num(c0)} * center + {fmt_num(c1)} * (sum of the 6 face neighbours)"
    return assemble(
        task_name=name,
        detail=(
            f"7-point stencil on a float32 volume of shape ({d}, {h}, {w}) (z, y, x; x fastest): at interior points "
            f"{formula}; points on the boundary faces are copied unchanged. Launch a 2-D grid over (x, y) and let each "
            "thread loop over z."
        ),
        algorithm=f"3-D 7-point stencil: {formula} at interior points, boundary copied.",
        inputs=(vol_in,), outputs=(vol_out,), checks=(Check("out", 1e-5, 1e-5),),
        constants=(f"constexpr int D = {d};\nconstexpr int H = {h};\nconstexpr int W = {w};\n"
                   f"constexpr float C0 = {cfloat(c0)};\nconstexpr float C1 = {cfloat(c1)};"),
        kernels=kernels, launch=launch,
        gen_body=fill(
            """
            D, H, W = $D, $H, $W
            volume = rng.uniform(-1.0, 1.0, (D, H, W)).astype(np.float32)
            v = volume.astype(np.float64)
            out = v.copy()
            nb = v[:-2, 1:-1, 1:-1] + v[2:, 1:-1, 1:-1] + v[1:-1, :-2, 1:-1] + v[1:-1, 2:, 1:-1] + v[1:-1, 1:-1, :-2] + v[1:-1, 1:-1, 2:]
            out[1:-1, 1:-1, 1:-1] = $C0 * v[1:-1, 1:-1, 1:-1] + $C1 * nb
            """,
            D=d, H=h, W=w, C0=c0, C1=c1,
        ),
        seed=seed,
    )


STENCIL_3D = Family(
    name="stencil_3d", domain="stencil", build=build_stencil_3d,
    suite_variant={"c0": -6.0, "c1": 1.0}, suite_sizes=({"d": 64, "h": 64, "w": 64}, {"d": 256, "h": 256, "w": 256}),
    variants=tuple({"c0": a, "c1": b} for a, b in ((0.4, 0.1), (0.5, 0.0833), (1.0, -0.1), (-3.0, 0.5), (0.25, 0.125))),
    small_sizes=size_grid(d=(8, 16, 32), h=(16, 32, 48), w=(16, 32, 64)),
    large_sizes=size_grid(d=(128, 512), h=(128, 512), w=(128, 512)),
)


FAMILIES = (CONV1D, CONV2D, CONV2D_NCHW, DEPTHWISE, STENCIL_2D, STENCIL_3D)
