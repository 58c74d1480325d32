"""Attention: scaled dot-product attention with masks, rotary embeddings, decode attention with GQA."""

from __future__ import annotations

import math

from cuset.curation.families.base import WARP_SUM, Check, Family, Tensor, assemble, cfloat, fill, size_grid

# Sum or max over the block (blockDim.x a multiple of 32); every thread gets the result.
BLOCK_REDUCE = """
template <bool IS_MAX>
__device__ float block_reduce(float v) {
    __shared__ float partial[32];
    __shared__ float result;
    int lane = threadIdx.x & 31;
    int warp = threadIdx.x >> 5;
    for (int offset = 16; offset > 0; offset >>= 1) {
        float other = __shfl_down_sync(0xffffffff, v, offset);
        v = IS_MAX ? fmaxf(v, other) : v + other;
    }
    if (lane == 0) {
        partial[warp] = v;
    }
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x >> 5) ? partial[lane] : (IS_MAX ? -FLT_MAX : 0.0f);
        for (int offset = 16; offset > 0; offset >>= 1) {
            float other = __shfl_down_sync(0xffffffff, v, offset);
            v = IS_MAX ? fmaxf(v, other) : v + other;
        }
        if (lane == 0) {
            result = v;
        }
    }
    __syncthreads();
    return result;
}
"""


# ---------------------------------------------------------------- scaled dot-product attention

def _mask_text(mask):
    if mask == "none":
        return "no mask", "false", "np.zeros((S, S), dtype=bool)"
    if mask == "causal":
        return "a causal mask (query i sees keys j <= i)", "j > i", "np.triu(np.ones((S, S), dtype=bool), 1)"
    w = int(mask.split(":")[1])
    return (f"a local window (query i sees keys j with |i - j| <= {w})", f"abs(i - j) > {w}",
            f"np.abs(np.arange(S)[:, None] - np.arange(S)[None, :]) > {w}")


def build_sdpa(variant, size, seed):
    mask = variant["mask"]
    h, s, d = size["h"], size["s"], size["d"]
    q, k, v = (Tensor(n, "float32", (h, s, d), "HEADS * S * D") for n in ("Q", "K", "V"))
    o = Tensor("O", "float32", (h, s, d), "HEADS * S * D")
    mask_desc, masked, np_mask = _mask_text(mask)
    kernels = BLOCK_REDUCE.strip() + "\n\n" + fill(
        """
        // One block per (query, head). Scores for all keys live in dynamic shared memory,
        // followed by the query vector.
        __global__ void attention(const float* __restrict__ Q, const float* __restrict__ K,
                                  const float* __restrict__ V, float* __restrict__ O) {
            extern __shared__ float smem[];
            float* scores = smem;
            float* q = smem + S;
            int i = blockIdx.x;
            size_t head = (size_t)blockIdx.y * S * D;
            for (int c = threadIdx.x; c < D; c += blockDim.x) {
                q[c] = Q[head + (size_t)i * D + c];
            }
            __syncthreads();
            float local_max = -FLT_MAX;
            for (int j = threadIdx.x; j < S; j += blockDim.x) {
                float dot = -FLT_MAX;
                if (!($MASKED)) {
                    dot = 0.0f;
                    for (int c = 0; c < D; ++c) {
                        dot += q[c] * K[head + (size_t)j * D + c];
                    }
                    dot *= SCALE;
                }
                scores[j] = dot;
                local_max = fmaxf(local_max, dot);
            }
            float m = block_reduce<true>(local_max);
            float local_sum = 0.0f;
            for (int j = threadIdx.x; j < S; j += blockDim.x) {
                float p = scores[j] == -FLT_MAX ? 0.0f : expf(scores[j] - m);
                scores[j] = p;
                local_sum += p;
            }
            float inv = 1.0f / block_reduce<false>(local_sum);  // synchronises: scores are complete
            for (int c = threadIdx.x; c < D; c += blockDim.x) {
                float acc = 0.0f;
                for (int j = 0; j < S; ++j) {
                    acc += scores[j] * V[head + (size_t)j * D + c];
                }
                O[head + (size_t)i * D + c] = acc * inv;
            }
        }
        """,
        MASKED=masked,
    )
    launch = """
        dim3 grid(S, HEADS);
        const int threads = 128;
        attention<<<grid, threads, (S + D) * sizeof(float)>>>(d_Q, d_K, d_V, d_O);
    """
    name = "Scaled_Dot_Product_Attention" if mask == "none" else (
        "Causal_Attention" if mask == "causal" else f"Local_Window_Attention_{mask.split(':')[1]}")
    return assemble(
        task_name=name,
        detail=(
            f"Scaled dot-product attention for {h} heads with sequence length {s} and head dimension {d}: Q, K, V and O "
            f"have shape ({h}, {s}, {d}); for each head O = softmax(Q K^T / sqrt({d}) + mask) V with {mask_desc} "
            "(masked scores are excluded from the softmax). Use one block per (query, head), keep the row of scores in "
            "dynamically sized shared memory, and reduce the maximum and the sum across the block."
        ),
        algorithm=f"Multi-head scaled dot-product attention O = softmax(Q K^T / sqrt(d)) V with {mask_desc}.",
        inputs=(q, k, v), outputs=(o,), checks=(Check("O", 1e-4, 1e-4),),
        constants=f"constexpr int HEADS = {h};\nconstexpr int S = {s};\nconstexpr int D = {d};\nconstexpr float SCALE = {cfloat(1 / math.sqrt(d))};",
        kernels=kernels, launch=launch,
        gen_body=fill(
            """
            H, S, D = $H, $S, $D
            Q = rng.standard_normal((H, S, D)).astype(np.float32)
            K = rng.standard_normal((H, S, D)).astype(np.float32)
            V = rng.uniform(-1.0, 1.0, (H, S, D)).astype(np.float32)
            mask = $MASK
            O = np.empty((H, S, D))
            for h in range(H):  # one head at a time keeps the S x S scores small
                scores = Q[h].astype(np.float64) @ K[h].astype(np.float64).T / np.sqrt(D)
                scores = np.where(mask, -np.inf, scores)
                p = np.exp(scores - scores.max(axis=1, keepdims=True))
                O[h] = (p / p.sum(axis=1, keepdims=True)) @ V[h].astype(np.float64)
            """,
            H=h, S=s, D=d, MASK=np_mask,
        ),
        seed=seed, includes=("cfloat", "cmath"),
    )


SDPA = Family(
    name="sdpa", domain="attention", build=build_sdpa,
    suite_variant={"mask": "none"},
    suite_sizes=({"h": 4, "s": 256, "d": 64}, {"h": 32, "s": 2048, "d": 128}),
    variants=({"mask": "causal"}, {"mask": "window:16"}, {"mask": "window:64"}),
    small_sizes=size_grid(h=(1, 2, 4), s=(32, 64, 128, 200), d=(16, 32, 64)),
    large_sizes=size_grid(h=(16, 32), s=(1024, 4096), d=(64, 128)),
)


# ---------------------------------------------------------------- rotary position embedding

def build_rope(variant, size, seed):
    base, style = variant["base"], variant["style"]
    s, h, d = size["s"], size["h"], size["d"]
    x = Tensor("x", "float32", (s, h, d), "S * HEADS * D")
    y = Tensor("y", "float32", (s, h, d), "S * HEADS * D")
    pair = ("int a = 2 * i, b = 2 * i + 1;" if style == "interleaved" else "int a = i, b = i + D / 2;")
    kernels = fill(
        """
        // Frequencies are computed once on the host (in double) and read from constant memory.
        __constant__ float c_inv_freq[D / 2];

        // One thread per rotated pair (position, head, i).
        __global__ void rope(const float* __restrict__ x, float* __restrict__ y) {
            int idx = blockIdx.x * blockDim.x + threadIdx.x;
            if (idx >= S * HEADS * (D / 2)) {
                return;
            }
            int i = idx % (D / 2);
            int row = idx / (D / 2);  // = pos * HEADS + head
            int pos = row / HEADS;
            float angle = (float)pos * c_inv_freq[i];
            float c = cosf(angle);
            float s = sinf(angle);
            $PAIR
            const float* xr = x + (size_t)row * D;
            float x0 = xr[a];
            float x1 = xr[b];
            y[(size_t)row * D + a] = x0 * c - x1 * s;
            y[(size_t)row * D + b] = x0 * s + x1 * c;
        }
        """,
        PAIR=pair,
    )
    launch = """
        float h_inv_freq[D / 2];
        for (int i = 0; i < D / 2; ++i) {
            h_inv_freq[i] = (float)pow(BASE, -2.0 * i / D);
        }
        CUDA_CHECK(cudaMemcpyToSymbol(c_inv_freq, h_inv_freq, sizeof(h_inv_freq)));
        const int total = S * HEADS * (D / 2);
        const int threads = 256;
        rope<<<(total + threads - 1) / threads, threads>>>(d_x, d_y);
    """
    pairing = ("dimensions (2i, 2i+1)" if style == "interleaved" else f"dimensions (i, i + {d // 2}) (rotate-half layout)")
    name = ("Rotary_Position_Embedding" if (base, style) == (10000.0, "interleaved") else
            f"RoPE_{'Interleaved' if style == 'interleaved' else 'Half'}_Base_{int(base)}")
    return assemble(
        task_name=name,
        detail=(
            f"Apply rotary position embeddings to x of shape ({s}, {h}, {d}) (position, head, dim). For position p and "
            f"i < {d // 2}, let theta = p * inv_freq[i] with inv_freq[i] = {int(base)}^(-2i/{d}) (computed in double on "
            f"the host, rounded to float), and rotate the pair of {pairing}: y_a = x_a cos(theta) - x_b sin(theta), "
            "y_b = x_a sin(theta) + x_b cos(theta). Compute theta in float32 as (float)p * inv_freq[i]."
        ),
        algorithm=f"Rotary position embedding (base {int(base)}) over {pairing} of each head vector.",
        inputs=(x,), outputs=(y,), checks=(Check("y", 1e-4, 1e-4),),
        constants=f"constexpr int S = {s};\nconstexpr int HEADS = {h};\nconstexpr int D = {d};\nconstexpr double BASE = {float(base)!r};",
        kernels=kernels, launch=launch,
        gen_body=fill(
            """
            S, H, D, BASE = $S, $H, $D, $BASE
            x = rng.standard_normal((S, H, D)).astype(np.float32)
            inv_freq = (BASE ** (-2.0 * np.arange(D // 2) / D)).astype(np.float32)
            angle = (np.arange(S, dtype=np.float32)[:, None] * inv_freq[None, :]).astype(np.float64)
            c, s = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
            $SPLIT
            y = np.empty((S, H, D))
            y[..., ia] = xa * c - xb * s
            y[..., ib] = xa * s + xb * c
            """,
            S=s, H=h, D=d, BASE=float(base),
            SPLIT=("ia, ib = np.arange(0, D, 2), np.arange(1, D, 2)" if style == "interleaved"
                   else "ia, ib = np.arange(D // 2), np.arange(D // 2, D)")
            + "\nxa, xb = x[..., ia].astype(np.float64), x[..., ib].astype(np.float64)",
        ),
        seed=seed, includes=("cmath",),
    )


ROPE = Family(
    name="rope", domain="attention", build=build_rope,
    suite_variant={"base": 10000.0, "style": "interleaved"},
    suite_sizes=({"s": 512, "h": 8, "d": 64}, {"s": 8192, "h": 32, "d": 128}),
    variants=tuple(
        {"base": b, "style": st} for b in (10000.0, 500000.0, 1000.0) for st in ("interleaved", "half")
        if (b, st) != (10000.0, "interleaved")
    ),
    small_sizes=size_grid(s=(16, 64, 128, 256, 500), h=(1, 4, 8), d=(32, 64, 128)),
    large_sizes=size_grid(s=(4096, 16384), h=(16, 32), d=(64, 128)),
)


# ---------------------------------------------------------------- decode attention with grouped KV heads

def build_decode_attention(variant, size, seed):
    group = variant["group"]
    hkv, length, d = size["hkv"], size["length"], size["d"]
    if length * 4 > 48 * 1024:
        raise ValueError(f"decode attention keeps {length} scores in shared memory: more than the 48 KB a launch may ask for")
    hq = hkv * group
    q = Tensor("q", "float32", (hq, d), "HQ * D")
    kc = Tensor("k_cache", "float32", (hkv, length, d), "HKV * L * D")
    vc = Tensor("v_cache", "float32", (hkv, length, d), "HKV * L * D")
    out = Tensor("out", "float32", (hq, d), "HQ * D")
    kernels = WARP_SUM.strip() + "\n\n" + BLOCK_REDUCE.strip() + "\n\n" + """
        // One block per query head. Warps take keys in turn; the lanes of a warp split the head
        // dimension and combine their partial dot products with shuffles.
        __global__ void decode_attention(const float* __restrict__ q, const float* __restrict__ k_cache,
                                         const float* __restrict__ v_cache, float* __restrict__ out) {
            extern __shared__ float scores[];
            int head = blockIdx.x;
            int kv = head / GROUP;  // query heads of one group share a KV head
            const float* qh = q + (size_t)head * D;
            const float* kh = k_cache + (size_t)kv * L * D;
            const float* vh = v_cache + (size_t)kv * L * D;
            int lane = threadIdx.x & 31;
            int warp = threadIdx.x >> 5;
            int warps = blockDim.x >> 5;
            for (int j = warp; j < L; j += warps) {
                float part = 0.0f;
                for (int c = lane; c < D; c += 32) {
                    part += qh[c] * kh[(size_t)j * D + c];
                }
                part = warp_sum(part);
                if (lane == 0) {
                    scores[j] = part * SCALE;
                }
            }
            __syncthreads();
            float local_max = -FLT_MAX;
            for (int j = threadIdx.x; j < L; j += blockDim.x) {
                local_max = fmaxf(local_max, scores[j]);
            }
            float m = block_reduce<true>(local_max);
            float local_sum = 0.0f;
            for (int j = threadIdx.x; j < L; j += blockDim.x) {
                scores[j] = expf(scores[j] - m);
                local_sum += scores[j];
            }
            float inv = 1.0f / block_reduce<false>(local_sum);
            for (int c = threadIdx.x; c < D; c += blockDim.x) {
                float acc = 0.0f;
                for (int j = 0; j < L; ++j) {
                    acc += scores[j] * vh[(size_t)j * D + c];
                }
                out[(size_t)head * D + c] = acc * inv;
            }
        }
    """
    launch = "decode_attention<<<HQ, 128, L * sizeof(float)>>>(d_q, d_k_cache, d_v_cache, d_out);"
    name = "Decode_Attention" if group == 1 else f"Decode_Attention_GQA_Group_{group}"
    return assemble(
        task_name=name,
        detail=(
            f"Single-token decode attention against a KV cache: q has shape ({hq}, {d}) ({hq} query heads), k_cache and "
            f"v_cache have shape ({hkv}, {length}, {d}); query head h uses KV head h / {group}"
            + (" (grouped-query attention)" if group > 1 else "")
            + f". out[h] = softmax(k_cache[kv] q[h] / sqrt({d})) v_cache[kv], shape ({hq}, {d}). Use one block per query "
            "head; warps compute the dot products with shuffle reductions and the scores stay in shared memory."
        ),
        algorithm="Decode-step attention of one query per head over a KV cache"
                  + (f", grouped-query with {group} query heads per KV head." if group > 1 else "."),
        inputs=(q, kc, vc), outputs=(out,), checks=(Check("out", 1e-4, 1e-4),),
        constants=(f"constexpr int HQ = {hq};\nconstexpr int HKV = {hkv};\nconstexpr int GROUP = {group};\n"
                   f"constexpr int L = {length};\nconstexpr int D = {d};\nconstexpr float SCALE = {cfloat(1 / math.sqrt(d))};"),
        kernels=kernels, launch=launch,
        gen_body=fill(
            """
            HQ, HKV, G, L, D = $HQ, $HKV, $G, $L, $D
            q = rng.standard_normal((HQ, D)).astype(np.float32)
            k_cache = rng.standard_normal((HKV, L, D)).astype(np.float32)
            v_cache = rng.uniform(-1.0, 1.0, (HKV, L, D)).astype(np.float32)
            kv = np.arange(HQ) // G
            scores = np.einsum("hd,hld->hl", q.astype(np.float64), k_cache[kv].astype(np.float64)) / np.sqrt(D)
            p = np.exp(scores - scores.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            out = np.einsum("hl,hld->hd", p, v_cache[kv].astype(np.float64))
            """,
            HQ=hq, HKV=hkv, G=group, L=length, D=d,
        ),
        seed=seed, includes=("cfloat", "cmath"),
    )


DECODE_ATTENTION = Family(
    name="decode_attention", domain="attention", build=build_decode_attention,
    suite_variant={"group": 1},
    suite_sizes=({"hkv": 8, "length": 1024, "d": 64}, {"hkv": 32, "length": 8192, "d": 128}),
    variants=({"group": 2}, {"group": 4}, {"group": 8}),
    small_sizes=size_grid(hkv=(1, 2, 4), length=(64, 200, 512, 1000), d=(32, 64, 128)),
    large_sizes=size_grid(hkv=(8, 16), length=(4096, 12288), d=(128,)),
)


FAMILIES = (SDPA, ROPE, DECODE_ATTENTION)
