"""Histograms: privatised shared-memory counters, global float atomics, range binning."""

from __future__ import annotations

from cuset.curation.families.base import (
    Check, Family, Tensor, assemble, cfloat, fill, float_tolerance, fmt_num, name_num, one_axis, pick,
)

SUITE_N = ({"n": 1 << 19}, {"n": 1 << 24})
SMALL_N = one_axis("n", (1000, 4096, 10000, 30000, 65536, 100000, 250000, 500000))
LARGE_N = one_axis("n", (1 << 22, 10_000_000, 1 << 25))


# ---------------------------------------------------------------- byte histogram (shared-memory privatisation)

def build_byte_histogram(variant, size, seed):
    bins, n = variant["bins"], size["n"]
    shift = {256: 0, 128: 1, 64: 2, 32: 3, 16: 4, 8: 5}[bins]
    data = Tensor("data", "uint8", (n,), "N")
    hist = Tensor("hist", "uint32", (bins,), "BINS")
    kernels = """
        // Each block counts into its own shared-memory histogram, then merges it into the
        // global one: far fewer contended global atomics than one per element.
        __global__ void histogram_shared(const unsigned char* __restrict__ data, unsigned int* __restrict__ hist, int n) {
            __shared__ unsigned int local[BINS];
            for (int b = threadIdx.x; b < BINS; b += blockDim.x) {
                local[b] = 0;
            }
            __syncthreads();
            for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
                atomicAdd(&local[data[i] >> SHIFT], 1u);
            }
            __syncthreads();
            for (int b = threadIdx.x; b < BINS; b += blockDim.x) {
                if (local[b] != 0) {
                    atomicAdd(&hist[b], local[b]);
                }
            }
        }
    """
    launch = fill(
        """
        const int threads = 256;
        int blocks = (N + threads - 1) / threads;
        if (blocks > $MAXB) blocks = $MAXB;
        CUDA_CHECK(cudaMemset(d_hist, 0, BINS * sizeof(unsigned int)));
        histogram_shared<<<blocks, threads>>>(d_data, d_hist, N);
        """,
        MAXB=pick((64, 120, 240), bins, n),
    )
    name = "Byte_Histogram" if bins == 256 else f"Byte_Histogram_{bins}_Bins"
    rule = "bin = value" if bins == 256 else f"bin = value >> {shift} (value / {256 // bins})"
    return assemble(
        task_name=name,
        detail=(
            f"Histogram of {n} uint8 values into {bins} uint32 counters, {rule}. Give each block a private "
            "histogram in shared memory updated with atomicAdd, then add the block histograms into the global one."
        ),
        algorithm=f"Histogram of byte values into {bins} bins ({rule}).",
        inputs=(data,), outputs=(hist,), checks=(Check("hist"),),
        constants=f"constexpr int N = {n};\nconstexpr int BINS = {bins};\nconstexpr int SHIFT = {shift};",
        kernels=kernels, launch=launch,
        gen_body=(
            f"N, BINS, SHIFT = {n}, {bins}, {shift}\n"
            "data = np.clip(rng.normal(128.0, 45.0, N), 0, 255).astype(np.uint8)\n"
            "hist = np.bincount(data >> SHIFT, minlength=BINS)"
        ),
        seed=seed,
    )


BYTE_HISTOGRAM = Family(
    name="byte_histogram", domain="histogram", build=build_byte_histogram,
    suite_variant={"bins": 256}, suite_sizes=SUITE_N,
    variants=one_axis("bins", (128, 64, 32, 16, 8)),
    small_sizes=SMALL_N, large_sizes=LARGE_N,
)


# ---------------------------------------------------------------- weighted histogram (global float atomics)

def build_weighted_histogram(variant, size, seed):
    bins, n = variant["bins"], size["n"]
    idx = Tensor("idx", "int32", (n,), "N")
    w = Tensor("weights", "float32", (n,), "N")
    hist = Tensor("hist", "float32", (bins,), "BINS")
    kernels = """
        __global__ void weighted_histogram(const int* __restrict__ idx, const float* __restrict__ weights,
                                           float* __restrict__ hist, int n) {
            for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
                atomicAdd(&hist[idx[i]], weights[i]);
            }
        }
    """
    launch = """
        const int threads = 256;
        int blocks = (N + threads - 1) / threads;
        if (blocks > 1024) blocks = 1024;
        CUDA_CHECK(cudaMemset(d_hist, 0, BINS * sizeof(float)));
        weighted_histogram<<<blocks, threads>>>(d_idx, d_weights, d_hist, N);
    """
    name = "Weighted_Histogram" if bins == 256 else f"Weighted_Histogram_{bins}_Bins"
    return assemble(
        task_name=name,
        detail=(
            f"Weighted histogram (scatter-add): for each of {n} elements add weights[i] (float32) to hist[idx[i]], "
            f"where idx is int32 in [0, {bins}); hist has {bins} float32 bins starting at zero. Use atomicAdd on floats."
        ),
        algorithm=f"Weighted histogram / scatter-add: hist[idx[i]] += weights[i] over {bins} bins.",
        inputs=(idx, w), outputs=(hist,), checks=(Check("hist", *float_tolerance(max(1, n // bins), 0.5)),),
        constants=f"constexpr int N = {n};\nconstexpr int BINS = {bins};", kernels=kernels, launch=launch,
        gen_body=(
            f"N, BINS = {n}, {bins}\n"
            "p = rng.uniform(0.2, 1.0, BINS)\n"
            "idx = rng.choice(BINS, size=N, p=p / p.sum()).astype(np.int32)\n"
            "weights = rng.uniform(0.0, 1.0, N).astype(np.float32)\n"
            "hist = np.bincount(idx, weights=weights.astype(np.float64), minlength=BINS)"
        ),
        seed=seed,
    )


WEIGHTED_HISTOGRAM = Family(
    name="weighted_histogram", domain="histogram", build=build_weighted_histogram,
    suite_variant={"bins": 256}, suite_sizes=SUITE_N,
    variants=one_axis("bins", (16, 100, 1000, 4096, 10)),
    small_sizes=SMALL_N, large_sizes=LARGE_N,
)


# ---------------------------------------------------------------- float range histogram

def build_range_histogram(variant, size, seed):
    bins, lo, hi = variant["bins"], variant["lo"], variant["hi"]
    n = size["n"]
    values = Tensor("values", "float32", (n,), "N")
    counts = Tensor("counts", "int32", (bins,), "BINS")
    kernels = """
        // bin = floor((x - LO) * BINS / (HI - LO)); values outside [LO, HI) are not counted.
        __global__ void range_histogram(const float* __restrict__ values, int* __restrict__ counts, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) {
                float x = values[i];
                if (x >= LO && x < HI) {
                    int bin = (int)((x - LO) * SCALE);
                    atomicAdd(&counts[min(bin, BINS - 1)], 1);
                }
            }
        }
    """
    launch = """
        const int threads = 256;
        CUDA_CHECK(cudaMemset(d_counts, 0, BINS * sizeof(int)));
        range_histogram<<<(N + threads - 1) / threads, threads>>>(d_values, d_counts, N);
    """
    name = "Float_Histogram" if (bins, lo, hi) == (100, 0.0, 1.0) else (
        f"Float_Histogram_{bins}_Bins_{name_num(lo)}_To_{name_num(hi)}")
    width = (hi - lo) / bins
    return assemble(
        task_name=name,
        detail=(
            f"Histogram of {n} float32 values over [{fmt_num(lo)}, {fmt_num(hi)}) with {bins} equal-width bins of width "
            f"{width:g}: bin = floor((x - {fmt_num(lo)}) * {bins} / {fmt_num(hi - lo)}); values outside the range are "
            "ignored. Count into int32 counters with atomicAdd."
        ),
        algorithm=f"Histogram of float values into {bins} equal-width bins over [{fmt_num(lo)}, {fmt_num(hi)}), out-of-range values ignored.",
        inputs=(values,), outputs=(counts,), checks=(Check("counts"),),
        constants=(f"constexpr int N = {n};\nconstexpr int BINS = {bins};\nconstexpr float LO = {cfloat(lo)};\n"
                   f"constexpr float HI = {cfloat(hi)};\nconstexpr float SCALE = BINS / (HI - LO);"),
        kernels=kernels, launch=launch,
        gen_body=fill(
            """
            N, BINS, LO, HI = $N, $BINS, $LO, $HI
            WIDTH = (HI - LO) / BINS
            # Values sit well inside their bins (never near an edge), so float rounding cannot move them.
            p = rng.uniform(0.1, 1.0, BINS)
            k = rng.choice(BINS, size=N, p=p / p.sum())
            values = LO + (k + rng.uniform(0.1, 0.9, N)) * WIDTH
            outside = rng.random(N) < 0.1
            values[outside] = np.where(rng.random(outside.sum()) < 0.5, LO - 1.0 - rng.random(outside.sum()), HI + rng.random(outside.sum()))
            values = values.astype(np.float32)
            counts = np.bincount(k[~outside], minlength=BINS)
            """,
            N=n, BINS=bins, LO=lo, HI=hi,
        ),
        seed=seed,
    )


RANGE_HISTOGRAM = Family(
    name="range_histogram", domain="histogram", build=build_range_histogram,
    suite_variant={"bins": 100, "lo": 0.0, "hi": 1.0}, suite_sizes=SUITE_N,
    variants=tuple({"bins": b, "lo": lo, "hi": hi} for b, lo, hi in (
        (64, -1.0, 1.0), (10, 0.0, 100.0), (256, -4.0, 4.0), (50, 10.0, 20.0), (1000, 0.0, 1.0), (20, -5.0, 5.0))),
    small_sizes=SMALL_N, large_sizes=LARGE_N,
)


FAMILIES = (BYTE_HISTOGRAM, WEIGHTED_HISTOGRAM, RANGE_HISTOGRAM)
