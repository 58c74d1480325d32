"""Image processing: colour conversion, gradients, resampling, rank filters, normalisation."""

from __future__ import annotations

import textwrap

from cuset.curation.families.base import Check, Family, Tensor, assemble, cfloat, fill, fmt_num, pick, size_grid

IMG_SMALL = size_grid(h=(24, 64, 100, 240), w=(32, 80, 160, 320))
IMG_LARGE = size_grid(h=(1080, 2160), w=(1920, 3840))
IMG_SUITE = ({"h": 256, "w": 256}, {"h": 2048, "w": 2048})


def _grid_launch(kernel_call: str, w: str = "W", h: str = "H", bx: int = 16, by: int = 16) -> str:
    return fill(
        """
        dim3 block($BX, $BY);
        dim3 grid(($W + block.x - 1) / block.x, ($H + block.y - 1) / block.y);
        $CALL
        """,
        BX=bx, BY=by, W=w, H=h, CALL=kernel_call,
    )


# ---------------------------------------------------------------- RGB -> grey (integer weights)

GRAY_WEIGHTS = {"bt601": (77, 150, 29), "bt709": (54, 183, 19), "average": (85, 86, 85), "bt2020": (67, 174, 15)}


def build_rgb_to_gray(variant, size, seed):
    wr, wg, wb = GRAY_WEIGHTS[variant["weights"]]
    h, w = size["h"], size["w"]
    rgb = Tensor("rgb", "uint8", (h, w, 3), "H * W * 3")
    gray = Tensor("gray", "uint8", (h, w), "H * W")
    kernels = fill(
        """
        // Fixed-point luma: weights sum to 256, +128 rounds to nearest.
        __global__ void rgb_to_gray(const unsigned char* __restrict__ rgb, unsigned char* __restrict__ gray) {
            int x = blockIdx.x * blockDim.x + threadIdx.x;
            int y = blockIdx.y * blockDim.y + threadIdx.y;
            if (x < W && y < H) {
                int p = (y * W + x) * 3;
                int v = $WR * rgb[p] + $WG * rgb[p + 1] + $WB * rgb[p + 2];
                gray[y * W + x] = (unsigned char)((v + 128) >> 8);
            }
        }
        """,
        WR=wr, WG=wg, WB=wb,
    )
    name = "RGB_To_Grayscale" if variant["weights"] == "bt601" else f"RGB_To_Grayscale_{variant['weights'].upper()}"
    formula = f"gray = ({wr} * R + {wg} * G + {wb} * B + 128) >> 8"
    return assemble(
        task_name=name,
        detail=(
            f"Convert an interleaved {h}x{w} RGB image (uint8, shape ({h}, {w}, 3)) to a {h}x{w} uint8 grey image with "
            f"integer arithmetic: {formula}. Use a 2-D grid with one thread per pixel."
        ),
        algorithm=f"RGB to greyscale conversion with fixed-point weights: {formula}.",
        inputs=(rgb,), outputs=(gray,), checks=(Check("gray"),),
        constants=f"constexpr int H = {h};\nconstexpr int W = {w};", kernels=kernels,
        launch=_grid_launch("rgb_to_gray<<<grid, block>>>(d_rgb, d_gray);", bx=pick((16, 32), wr, h, w), by=8),
        gen_body=(
            f"H, W = {h}, {w}\nrgb = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)\n"
            f"c = rgb.astype(np.int32)\ngray = (({wr} * c[..., 0] + {wg} * c[..., 1] + {wb} * c[..., 2] + 128) >> 8).astype(np.uint8)"
        ),
        seed=seed,
    )


RGB_TO_GRAY = Family(
    name="rgb_to_gray", domain="image", build=build_rgb_to_gray,
    suite_variant={"weights": "bt601"}, suite_sizes=({"h": 512, "w": 512}, {"h": 4320, "w": 7680}),
    variants=tuple({"weights": k} for k in GRAY_WEIGHTS if k != "bt601"),
    small_sizes=IMG_SMALL, large_sizes=IMG_LARGE,
)


# ---------------------------------------------------------------- gradient magnitude (Sobel and friends)

EDGE_OPS = {
    # name -> (title, side weight, centre weight)
    "sobel": ("Sobel", 1, 2),
    "prewitt": ("Prewitt", 1, 1),
    "scharr": ("Scharr", 3, 10),
}


def build_edges(variant, size, seed):
    op, norm = variant["op"], variant["norm"]
    title, a, b = EDGE_OPS[op]
    h, w = size["h"], size["w"]
    img, mag = Tensor("image", "float32", (h, w), "H * W"), Tensor("magnitude", "float32", (h, w), "H * W")
    combine = "sqrtf(gx * gx + gy * gy)" if norm == "l2" else "fabsf(gx) + fabsf(gy)"
    kernels = fill(
        """
        __device__ __forceinline__ float px(const float* img, int x, int y) {
            return img[y * W + x];
        }

        // Gradient magnitude with the 3x3 kernels [-1 0 1] x [$A $B $A] (x) and their transpose (y).
        // The one-pixel border has no full neighbourhood and is set to 0.
        __global__ void edge_magnitude(const float* __restrict__ image, float* __restrict__ magnitude) {
            int x = blockIdx.x * blockDim.x + threadIdx.x;
            int y = blockIdx.y * blockDim.y + threadIdx.y;
            if (x >= W || y >= H) {
                return;
            }
            if (x == 0 || y == 0 || x == W - 1 || y == H - 1) {
                magnitude[y * W + x] = 0.0f;
                return;
            }
            float gx = $A.0f * (px(image, x + 1, y - 1) - px(image, x - 1, y - 1))
                     + $B.0f * (px(image, x + 1, y) - px(image, x - 1, y))
                     + $A.0f * (px(image, x + 1, y + 1) - px(image, x - 1, y + 1));
            float gy = $A.0f * (px(image, x - 1, y + 1) - px(image, x - 1, y - 1))
                     + $B.0f * (px(image, x, y + 1) - px(image, x, y - 1))
                     + $A.0f * (px(image, x + 1, y + 1) - px(image, x + 1, y - 1));
            magnitude[y * W + x] = $COMBINE;
        }
        """,
        A=a, B=b, COMBINE=combine,
    )
    name = f"{title}_Edge_Detection" + ("" if norm == "l2" else "_L1")
    mag_desc = "sqrt(gx^2 + gy^2)" if norm == "l2" else "|gx| + |gy|"
    npmag = "np.sqrt(gx ** 2 + gy ** 2)" if norm == "l2" else "np.abs(gx) + np.abs(gy)"
    return assemble(
        task_name=name,
        detail=(
            f"{title} edge detection on a {h}x{w} float32 greyscale image: at each interior pixel compute gx with the "
            f"kernel [[-{a}, 0, {a}], [-{b}, 0, {b}], [-{a}, 0, {a}]] and gy with its transpose, and write {mag_desc}; "
            "border pixels get 0."
        ),
        algorithm=f"{title} gradient magnitude ({mag_desc}) of a greyscale image, zero on the border.",
        inputs=(img,), outputs=(mag,), checks=(Check("magnitude", 1e-4, 1e-5),),
        constants=f"constexpr int H = {h};\nconstexpr int W = {w};", kernels=kernels,
        launch=_grid_launch("edge_magnitude<<<grid, block>>>(d_image, d_magnitude);"),
        gen_body=fill(
            """
            H, W, A, B = $H, $W, $A, $B
            image = rng.uniform(0.0, 1.0, (H, W)).astype(np.float32)
            p = image.astype(np.float64)
            c = lambda dy, dx: p[1 + dy:H - 1 + dy, 1 + dx:W - 1 + dx]
            gx = A * (c(-1, 1) - c(-1, -1)) + B * (c(0, 1) - c(0, -1)) + A * (c(1, 1) - c(1, -1))
            gy = A * (c(1, -1) - c(-1, -1)) + B * (c(1, 0) - c(-1, 0)) + A * (c(1, 1) - c(-1, 1))
            magnitude = np.zeros((H, W))
            magnitude[1:-1, 1:-1] = $MAG
            """,
            H=h, W=w, A=a, B=b, MAG=npmag,
        ),
        seed=seed, includes=("cmath",),
    )


EDGES = Family(
    name="edge_detection", domain="image", build=build_edges,
    suite_variant={"op": "sobel", "norm": "l2"}, suite_sizes=IMG_SUITE,
    variants=tuple({"op": o, "norm": n} for o in EDGE_OPS for n in ("l2", "l1") if (o, n) != ("sobel", "l2")),
    small_sizes=IMG_SMALL, large_sizes=IMG_LARGE,
)


# ---------------------------------------------------------------- resize (bilinear / nearest)

def build_resize(variant, size, seed):
    mode = variant["mode"]
    h, w, oh, ow = size["h"], size["w"], size["oh"], size["ow"]
    src, dst = Tensor("src", "float32", (h, w), "H * W"), Tensor("dst", "float32", (oh, ow), "OH * OW")
    if mode == "nearest":
        body = """
            int sy = (y * H) / OH;  // integer floor(y * H / OH)
            int sx = (x * W) / OW;
            dst[y * OW + x] = src[sy * W + sx];
        """
        desc = f"nearest neighbour: dst[y][x] = src[floor(y * {h} / {oh})][floor(x * {w} / {ow})] (integer arithmetic)"
        ref = "sy = (np.arange(OH) * H) // OH\nsx = (np.arange(OW) * W) // OW\ndst = src[sy][:, sx]"
        checks = (Check("dst"),)
    else:
        if mode == "bilinear":
            coord = ("float fy = fmaxf((y + 0.5f) * ((float)H / OH) - 0.5f, 0.0f);\n"
                     "float fx = fmaxf((x + 0.5f) * ((float)W / OW) - 0.5f, 0.0f);")
            desc = ("bilinear with half-pixel centres (align_corners = False): source coordinate "
                    f"sy = max((y + 0.5) * {h}/{oh} - 0.5, 0), likewise sx")
            npcoord = "np.maximum((np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5, 0.0)"
        else:
            coord = ("float fy = y * ((float)(H - 1) / (OH - 1));\n"
                     "float fx = x * ((float)(W - 1) / (OW - 1));")
            desc = f"bilinear with align_corners = True: sy = y * ({h} - 1) / ({oh} - 1), likewise sx"
            npcoord = "np.arange(n_out) * ((n_in - 1) / (n_out - 1))"
        body = fill(
            """
            $COORD
            int y0 = (int)fy;
            int x0 = (int)fx;
            int y1 = min(y0 + 1, H - 1);
            int x1 = min(x0 + 1, W - 1);
            float ly = fy - y0;
            float lx = fx - x0;
            float top = (1.0f - lx) * src[y0 * W + x0] + lx * src[y0 * W + x1];
            float bottom = (1.0f - lx) * src[y1 * W + x0] + lx * src[y1 * W + x1];
            dst[y * OW + x] = (1.0f - ly) * top + ly * bottom;
            """,
            COORD=coord,
        )
        desc += "; interpolate between the two nearest rows and columns (index clamped to the last one)"
        ref = fill(
            """
            def axis(n_in, n_out):
                f = $NPCOORD
                i0 = np.floor(f).astype(int)
                return i0, np.minimum(i0 + 1, n_in - 1), f - i0
            y0, y1, ly = axis(H, OH)
            x0, x1, lx = axis(W, OW)
            p = src.astype(np.float64)
            top = (1 - lx) * p[y0][:, x0] + lx * p[y0][:, x1]
            bottom = (1 - lx) * p[y1][:, x0] + lx * p[y1][:, x1]
            dst = (1 - ly)[:, None] * top + ly[:, None] * bottom
            """,
            NPCOORD=npcoord,
        )
        checks = (Check("dst", 1e-4, 1e-4),)
    kernels = fill(
        """
        __global__ void resize(const float* __restrict__ src, float* __restrict__ dst) {
            int x = blockIdx.x * blockDim.x + threadIdx.x;
            int y = blockIdx.y * blockDim.y + threadIdx.y;
            if (x >= OW || y >= OH) {
                return;
            }
        $BODY
        }
        """,
        BODY=_indent(body),
    )
    name = {"bilinear": "Bilinear_Resize", "nearest": "Nearest_Neighbor_Resize", "align": "Bilinear_Resize_Align_Corners"}[mode]
    return assemble(
        task_name=name,
        detail=(
            f"Resize a {h}x{w} float32 image to {oh}x{ow} by {desc}. One thread per output pixel on a 2-D grid."
        ),
        algorithm=f"Image resize by {desc.split(':')[0]}.",
        inputs=(src,), outputs=(dst,), checks=checks,
        constants=f"constexpr int H = {h};\nconstexpr int W = {w};\nconstexpr int OH = {oh};\nconstexpr int OW = {ow};",
        kernels=kernels, launch=_grid_launch("resize<<<grid, block>>>(d_src, d_dst);", w="OW", h="OH"),
        gen_body=(
            f"H, W, OH, OW = {h}, {w}, {oh}, {ow}\n"
            "yy, xx = np.mgrid[0:H, 0:W]\n"
            "# A smooth image: resampling error stays far below the tolerance.\n"
            "phase = rng.uniform(0.0, 6.28, 3)\n"
            "src = (np.sin(yy / 9.0 + phase[0]) * np.cos(xx / 13.0 + phase[1]) + 0.1 * np.sin((xx + yy) / 5.0 + phase[2])).astype(np.float32)\n"
            f"{ref}"
        ),
        seed=seed, includes=("cmath",),
    )


def _indent(body: str) -> str:
    return textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")


RESIZE = Family(
    name="resize", domain="image", build=build_resize,
    suite_variant={"mode": "bilinear"},
    suite_sizes=({"h": 256, "w": 256, "oh": 512, "ow": 384}, {"h": 2048, "w": 2048, "oh": 4096, "ow": 3072}),
    variants=({"mode": "nearest"}, {"mode": "align"}),
    small_sizes=(*size_grid(h=(32, 100), w=(48, 160), oh=(64, 75), ow=(96, 120)),
                 *size_grid(h=(240,), w=(320,), oh=(120, 480), ow=(160, 640))),
    large_sizes=size_grid(h=(1080,), w=(1920,), oh=(2160, 720), ow=(3840, 1280)),
)


# ---------------------------------------------------------------- rank filters (median, erosion, dilation)

def build_rank_filter(variant, size, seed):
    op, k = variant["op"], variant["k"]
    h, w = size["h"], size["w"]
    img, out = Tensor("image", "uint8", (h, w), "H * W"), Tensor("filtered", "uint8", (h, w), "H * W")
    r = k // 2
    pick_value = {"median": "window[KS * KS / 2]", "min": "window[0]", "max": "window[KS * KS - 1]"}[op]
    if op == "median":
        gather = """
            // Insertion sort of the window, then the middle element.
            for (int i = 1; i < KS * KS; ++i) {
                unsigned char v = window[i];
                int j = i - 1;
                while (j >= 0 && window[j] > v) {
                    window[j + 1] = window[j];
                    --j;
                }
                window[j + 1] = v;
            }
        """
    else:
        pick_value = "best"
        gather = fill(
            """
            unsigned char best = window[0];
            for (int i = 1; i < KS * KS; ++i) {
                best = window[i] $CMP best ? window[i] : best;
            }
            """,
            CMP="<" if op == "min" else ">",
        )
    kernels = fill(
        """
        // Window of KSxKS pixels with replicated borders (coordinates clamp to the image).
        __global__ void rank_filter(const unsigned char* __restrict__ image, unsigned char* __restrict__ filtered) {
            int x = blockIdx.x * blockDim.x + threadIdx.x;
            int y = blockIdx.y * blockDim.y + threadIdx.y;
            if (x >= W || y >= H) {
                return;
            }
            unsigned char window[KS * KS];
            int n = 0;
            for (int dy = -R; dy <= R; ++dy) {
                for (int dx = -R; dx <= R; ++dx) {
                    int yy = min(max(y + dy, 0), H - 1);
                    int xx = min(max(x + dx, 0), W - 1);
                    window[n++] = image[yy * W + xx];
                }
            }
        $GATHER
            filtered[y * W + x] = $PICK;
        }
        """,
        GATHER=_indent(gather), PICK=pick_value,
    )
    title = {"median": "Median_Filter", "min": "Erosion_Min_Filter", "max": "Dilation_Max_Filter"}[op]
    name = f"{title}_{k}x{k}"
    what = {"median": "median", "min": "minimum (grey-scale erosion)", "max": "maximum (grey-scale dilation)"}[op]
    npop = {"median": "np.median(win, axis=(2, 3))", "min": "win.min(axis=(2, 3))", "max": "win.max(axis=(2, 3))"}[op]
    return assemble(
        task_name=name,
        detail=(
            f"Apply a {k}x{k} {what} filter to a {h}x{w} uint8 image: each output pixel is the {what.split(' ')[0]} of the "
            f"{k * k} pixels around it, with coordinates outside the image clamped to the nearest border pixel."
        ),
        algorithm=f"{k}x{k} {what} filter of a greyscale image with replicated borders.",
        inputs=(img,), outputs=(out,), checks=(Check("filtered"),),
        constants=f"constexpr int H = {h};\nconstexpr int W = {w};\nconstexpr int KS = {k};\nconstexpr int R = {r};",
        kernels=kernels, launch=_grid_launch("rank_filter<<<grid, block>>>(d_image, d_filtered);"),
        gen_body=(
            f"H, W, R = {h}, {w}, {r}\n"
            "image = rng.integers(0, 256, (H, W), dtype=np.uint8)\n"
            "padded = np.pad(image, R, mode='edge')\n"
            "win = np.lib.stride_tricks.sliding_window_view(padded, (2 * R + 1, 2 * R + 1))\n"
            f"filtered = {npop}.astype(np.uint8)"
        ),
        seed=seed,
    )


RANK_FILTER = Family(
    name="rank_filter", domain="image", build=build_rank_filter,
    suite_variant={"op": "median", "k": 3}, suite_sizes=IMG_SUITE,
    variants=tuple({"op": o, "k": k} for o in ("median", "min", "max") for k in (3, 5) if (o, k) != ("median", 3)),
    small_sizes=IMG_SMALL, large_sizes=IMG_LARGE,
)


# ---------------------------------------------------------------- uint8 HWC -> normalised float CHW

NORMS = {
    "imagenet": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    "clip": ((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)),
    "half": ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
    "unit": ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0)),
}


def build_normalize_image(variant, size, seed):
    mean, std = NORMS[variant["norm"]]
    h, w = size["h"], size["w"]
    img = Tensor("image", "uint8", (h, w, 3), "H * W * 3")
    out = Tensor("tensor", "float32", (3, h, w), "3 * H * W")
    kernels = """
        __constant__ float c_mean[3];
        __constant__ float c_inv_std[3];

        // HWC bytes in, CHW floats out: (v / 255 - mean[c]) / std[c].
        __global__ void normalize_image(const unsigned char* __restrict__ image, float* __restrict__ tensor) {
            int x = blockIdx.x * blockDim.x + threadIdx.x;
            int y = blockIdx.y * blockDim.y + threadIdx.y;
            if (x < W && y < H) {
                for (int c = 0; c < 3; ++c) {
                    float v = image[(y * W + x) * 3 + c] / 255.0f;
                    tensor[(c * H + y) * W + x] = (v - c_mean[c]) * c_inv_std[c];
                }
            }
        }
    """
    launch = fill(
        """
        const float h_mean[3] = {$M};
        const float h_inv_std[3] = {$S};
        CUDA_CHECK(cudaMemcpyToSymbol(c_mean, h_mean, sizeof(h_mean)));
        CUDA_CHECK(cudaMemcpyToSymbol(c_inv_std, h_inv_std, sizeof(h_inv_std)));
        """,
        M=", ".join(cfloat(m) for m in mean), S=", ".join(f"1.0f / {cfloat(s)}" for s in std),
    ) + "\n" + _grid_launch("normalize_image<<<grid, block>>>(d_image, d_tensor);", bx=32, by=8)
    name = "Image_Normalization" if variant["norm"] == "imagenet" else f"Image_Normalization_{variant['norm'].upper()}"
    return assemble(
        task_name=name,
        detail=(
            f"Convert a {h}x{w} interleaved RGB image (uint8, shape ({h}, {w}, 3)) to a normalised float32 tensor of shape "
            f"(3, {h}, {w}) (channel-first): tensor[c][y][x] = (image[y][x][c] / 255 - mean[c]) / std[c] with "
            f"mean = ({', '.join(fmt_num(m) for m in mean)}) and std = ({', '.join(fmt_num(s) for s in std)}). Keep mean "
            "and 1/std in constant memory."
        ),
        algorithm="Image to tensor: scale bytes to [0, 1], normalise each channel with mean/std, and reorder HWC to CHW.",
        inputs=(img,), outputs=(out,), checks=(Check("tensor", 1e-5, 1e-5),),
        constants=f"constexpr int H = {h};\nconstexpr int W = {w};", kernels=kernels, launch=launch,
        gen_body=(
            f"H, W = {h}, {w}\nimage = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)\n"
            f"mean = np.array({list(mean)})\nstd = np.array({list(std)})\n"
            "tensor = ((image / 255.0 - mean) / std).transpose(2, 0, 1)"
        ),
        seed=seed,
    )


NORMALIZE_IMAGE = Family(
    name="normalize_image", domain="image", build=build_normalize_image,
    suite_variant={"norm": "imagenet"}, suite_sizes=({"h": 224, "w": 224}, {"h": 2048, "w": 2048}),
    variants=tuple({"norm": k} for k in NORMS if k != "imagenet"),
    small_sizes=IMG_SMALL, large_sizes=IMG_LARGE,
)


FAMILIES = (RGB_TO_GRAY, EDGES, RESIZE, RANK_FILTER, NORMALIZE_IMAGE)
