"""Element-wise kernels and activations: one thread (or a grid-stride loop) per element."""

from __future__ import annotations

import zlib

from cuset.curation.families.base import (
    CTYPES, Check, Family, Tensor, assemble, cfloat, fill, float_tolerance, fmt_num, name_num,
    one_axis, pick, size_grid,
)

# Sizes shared by the 1-D families here: the suite's small size runs in well under a
# second on the CPU backend; the factory's are different lengths, odd ones included.
SUITE_N = ({"n": 262144}, {"n": 16777216})
SMALL_N = one_axis("n", (1000, 3000, 4096, 10000, 20000, 32768, 50000, 65536, 100000, 131072, 200000, 250000))
LARGE_N = one_axis("n", (1 << 20, 3_000_000, 1 << 22, 10_000_000, 1 << 25))
SMALL_N4 = one_axis("n", (1024, 3000, 4096, 10000, 20000, 32768, 50000, 65536, 100000, 131072, 200000, 250000))


def _launch_1d(kernel_call: str, block: int) -> str:
    return fill(
        """
        const int threads = $BLOCK;
        const int blocks = (N + threads - 1) / threads;
        $CALL
        """,
        BLOCK=block, CALL=kernel_call,
    )


# ---------------------------------------------------------------- vector_binary

# op -> (title, formula, float expr, int expr, numpy expr)
BINARY_OPS = {
    "add": ("Add", "a[i] + b[i]", "a[i] + b[i]", "a[i] + b[i]", "a64 + b"),
    "sub": ("Subtract", "a[i] - b[i]", "a[i] - b[i]", "a[i] - b[i]", "a64 - b"),
    "mul": ("Multiply", "a[i] * b[i]", "a[i] * b[i]", "a[i] * b[i]", "a64 * b"),
    "max": ("Maximum", "max(a[i], b[i])", "fmaxf(a[i], b[i])", "max(a[i], b[i])", "np.maximum(a64, b)"),
    "min": ("Minimum", "min(a[i], b[i])", "fminf(a[i], b[i])", "min(a[i], b[i])", "np.minimum(a64, b)"),
    "absdiff": ("Absolute_Difference", "|a[i] - b[i]|", "fabsf(a[i] - b[i])", "abs(a[i] - b[i])", "np.abs(a64 - b)"),
}


def build_vector_binary(variant, size, seed):
    op, dtype = variant["op"], variant["dtype"]
    title, formula, fexpr, iexpr, npexpr = BINARY_OPS[op]
    n = size["n"]
    is_float = dtype == "float32"
    ctype = CTYPES[dtype]
    a, b, c = (Tensor(name, dtype, (n,), "N") for name in "abc")
    draw = (
        "rng.uniform(-10.0, 10.0, N).astype(np.float32)" if is_float
        else "rng.integers(-1000, 1000, N, dtype=np.int32)"
    )
    kernels = fill(
        """
        __global__ void vector_$OP(const $T* a, const $T* b, $T* c, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) {
                c[i] = $EXPR;
            }
        }
        """,
        OP=op, T=ctype, EXPR=fexpr if is_float else iexpr,
    )
    atol, rtol = float_tolerance() if is_float else (0.0, 0.0)
    return assemble(
        task_name=f"Vector_{title}" + ("" if is_float else "_Int32"),
        detail=(
            f"Compute c[i] = {formula} for every index 0 <= i < {n} of two {dtype} vectors a and b, "
            "using one GPU thread per element."
        ),
        algorithm=f"Element-wise binary operation on two vectors: c[i] = {formula}.",
        inputs=(a, b), outputs=(c,), checks=(Check("c", atol, rtol),),
        constants=f"constexpr int N = {n};",
        kernels=kernels,
        launch=_launch_1d(f"vector_{op}<<<blocks, threads>>>(d_a, d_b, d_c, N);", pick((128, 256, 512), "vb", n, op)),
        gen_body=fill(
            """
            N = $N
            a = $DRAW
            b = $DRAW
            a64 = a.astype(np.float64 if $FLOAT else np.int64)
            c = $NPEXPR
            """,
            N=n, DRAW=draw, FLOAT=is_float, NPEXPR=npexpr,
        ),
        seed=seed,
    )


VECTOR_BINARY = Family(
    name="vector_binary", domain="elementwise", build=build_vector_binary,
    suite_variant={"op": "add", "dtype": "float32"},
    suite_sizes=SUITE_N,
    variants=tuple(
        {"op": op, "dtype": dt} for op in BINARY_OPS for dt in ("float32", "int32")
        if (op, dt) != ("add", "float32")
    ),
    small_sizes=SMALL_N, large_sizes=LARGE_N,
)


# ---------------------------------------------------------------- saxpy

def build_saxpy(variant, size, seed):
    alpha, n = variant["alpha"], size["n"]
    x, y, out = Tensor("x", "float32", (n,), "N"), Tensor("y", "float32", (n,), "N"), Tensor("out", "float32", (n,), "N")
    max_blocks = pick((256, 512, 1024), "saxpy", n, alpha)
    kernels = """
        // Grid-stride loop: a fixed-size grid covers any n.
        __global__ void saxpy(int n, float alpha, const float* __restrict__ x,
                              const float* __restrict__ y, float* __restrict__ out) {
            for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
                out[i] = alpha * x[i] + y[i];
            }
        }
    """
    launch = fill(
        """
        const int threads = 256;
        int blocks = (N + threads - 1) / threads;
        if (blocks > $MAXB) blocks = $MAXB;
        saxpy<<<blocks, threads>>>(N, ALPHA, d_x, d_y, d_out);
        """,
        MAXB=max_blocks,
    )
    return assemble(
        task_name="SAXPY" if alpha == 2.0 else f"SAXPY_Alpha_{name_num(alpha)}",
        detail=(
            f"Single-precision A*X plus Y: out[i] = {fmt_num(alpha)} * x[i] + y[i] for {n} elements. "
            "Use a grid-stride loop so a bounded grid covers the whole vector."
        ),
        algorithm=f"SAXPY with scalar alpha = {fmt_num(alpha)}: out = alpha * x + y.",
        inputs=(x, y), outputs=(out,), checks=(Check("out", *float_tolerance()),),
        constants=f"constexpr int N = {n};\nconstexpr float ALPHA = {cfloat(alpha)};",
        kernels=kernels, launch=launch,
        gen_body=fill(
            """
            N = $N
            x = rng.uniform(-1.0, 1.0, N).astype(np.float32)
            y = rng.uniform(-1.0, 1.0, N).astype(np.float32)
            out = $ALPHA * x.astype(np.float64) + y
            """,
            N=n, ALPHA=alpha,
        ),
        seed=seed,
    )


SAXPY = Family(
    name="saxpy", domain="elementwise", build=build_saxpy,
    suite_variant={"alpha": 2.0}, suite_sizes=SUITE_N,
    variants=one_axis("alpha", (0.5, -1.0, 1.5, 3.0, -2.5, 0.25, 4.0, 10.0, -0.75)),
    small_sizes=SMALL_N, large_sizes=LARGE_N,
)


# ---------------------------------------------------------------- relu family

def _relu_kind(variant) -> tuple[str, str, str, str]:
    """(task name, math description, CUDA body returning from v, numpy expression of x64)."""
    kind = variant["kind"]
    if kind == "relu":
        return "ReLU_Activation", "y = max(x, 0)", "return fmaxf(v, 0.0f);", "np.maximum(x64, 0.0)"
    if kind == "leaky":
        s = variant["slope"]
        return (
            f"Leaky_ReLU_Slope_{name_num(s)}", f"y = x if x > 0 else {fmt_num(s)} * x",
            f"return v > 0.0f ? v : {cfloat(s)} * v;", f"np.where(x64 > 0, x64, {s} * x64)",
        )
    if kind == "clip":
        c = variant["cap"]
        return (
            f"Clipped_ReLU_Cap_{name_num(c)}", f"y = min(max(x, 0), {fmt_num(c)})",
            f"return fminf(fmaxf(v, 0.0f), {cfloat(c)});", f"np.clip(x64, 0.0, {c})",
        )
    if kind == "threshold":
        t = variant["threshold"]
        return (
            f"Threshold_ReLU_{name_num(t)}", f"y = x if x > {fmt_num(t)} else 0",
            f"return v > {cfloat(t)} ? v : 0.0f;", f"np.where(x64 > {t}, x64, 0.0)",
        )
    raise ValueError(f"unknown relu kind {kind!r}")


def build_relu(variant, size, seed):
    name, math_desc, body, npexpr = _relu_kind(variant)
    n = size["n"]
    x, y = Tensor("x", "float32", (n,), "N"), Tensor("y", "float32", (n,), "N")
    kernels = fill(
        """
        __device__ __forceinline__ float activate(float v) {
            $BODY
        }

        __global__ void activation_kernel(const float* x, float* y, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) {
                y[i] = activate(x[i]);
            }
        }
        """,
        BODY=body,
    )
    return assemble(
        task_name=name,
        detail=f"Apply the activation {math_desc} to each of the {n} elements of the float32 vector x.",
        algorithm=f"Element-wise activation: {math_desc}.",
        inputs=(x,), outputs=(y,), checks=(Check("y", *float_tolerance()),),
        constants=f"constexpr int N = {n};", kernels=kernels,
        launch=_launch_1d("activation_kernel<<<blocks, threads>>>(d_x, d_y, N);", pick((128, 256, 512, 1024), name, n)),
        gen_body=f"N = {n}\nx = rng.uniform(-8.0, 8.0, N).astype(np.float32)\nx64 = x.astype(np.float64)\ny = {npexpr}",
        seed=seed,
    )


RELU = Family(
    name="relu", domain="elementwise", build=build_relu,
    suite_variant={"kind": "relu"}, suite_sizes=SUITE_N,
    variants=(
        *({"kind": "leaky", "slope": s} for s in (0.01, 0.02, 0.05, 0.1, 0.2, 0.3)),
        *({"kind": "clip", "cap": c} for c in (1.0, 2.0, 3.0, 4.0, 6.0)),
        *({"kind": "threshold", "threshold": t} for t in (0.5, 1.0, -1.0)),
    ),
    small_sizes=SMALL_N, large_sizes=LARGE_N,
)


# ---------------------------------------------------------------- sigmoid family (functor template)

# kind -> (title, math, functor body using v, numpy expression of x64)
SIGMOID_KINDS = {
    "sigmoid": ("Sigmoid_Activation", "y = 1 / (1 + exp(-x))", "return 1.0f / (1.0f + expf(-v));", "1.0 / (1.0 + np.exp(-x64))"),
    "silu": ("SiLU_Activation", "y = x / (1 + exp(-x))", "return v / (1.0f + expf(-v));", "x64 / (1.0 + np.exp(-x64))"),
    "tanh": ("Tanh_Activation", "y = tanh(x)", "return tanhf(v);", "np.tanh(x64)"),
    "hardsigmoid": (
        "HardSigmoid_Activation", "y = min(max(x + 3, 0), 6) / 6",
        "return fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f;", "np.clip(x64 + 3.0, 0.0, 6.0) / 6.0",
    ),
    "hardswish": (
        "HardSwish_Activation", "y = x * min(max(x + 3, 0), 6) / 6",
        "return v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f;", "x64 * np.clip(x64 + 3.0, 0.0, 6.0) / 6.0",
    ),
    "softsign": ("Softsign_Activation", "y = x / (1 + |x|)", "return v / (1.0f + fabsf(v));", "x64 / (1.0 + np.abs(x64))"),
    "logsigmoid": (
        "LogSigmoid_Activation", "y = log(1 / (1 + exp(-x))), computed stably as min(x, 0) - log1p(exp(-|x|))",
        "return fminf(v, 0.0f) - log1pf(expf(-fabsf(v)));", "np.minimum(x64, 0.0) - np.log1p(np.exp(-np.abs(x64)))",
    ),
}


def _sigmoid_kind(variant):
    if variant["kind"] == "swish":
        beta = variant["beta"]
        return (
            f"Swish_Beta_{name_num(beta)}", f"y = x / (1 + exp(-{fmt_num(beta)} * x))",
            f"return v / (1.0f + expf(-{cfloat(beta)} * v));", f"x64 / (1.0 + np.exp(-{beta} * x64))",
        )
    return SIGMOID_KINDS[variant["kind"]]


def build_sigmoid(variant, size, seed):
    name, math_desc, body, npexpr = _sigmoid_kind(variant)
    n = size["n"]
    x, y = Tensor("x", "float32", (n,), "N"), Tensor("y", "float32", (n,), "N")
    kernels = fill(
        """
        struct Activation {
            __device__ float operator()(float v) const {
                $BODY
            }
        };

        // One kernel for any unary functor; the grid-stride loop lets the grid stay small.
        template <typename Op>
        __global__ void map_kernel(const float* __restrict__ x, float* __restrict__ y, int n, Op op) {
            for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
                y[i] = op(x[i]);
            }
        }
        """,
        BODY=body,
    )
    launch = fill(
        """
        const int threads = 256;
        const int blocks = (N + threads - 1) / threads < $MAXB ? (N + threads - 1) / threads : $MAXB;
        map_kernel<<<blocks, threads>>>(d_x, d_y, N, Activation());
        """,
        MAXB=pick((120, 480, 1024), name, n),
    )
    return assemble(
        task_name=name,
        detail=f"Apply the activation {math_desc} element-wise to the {n} values of the float32 vector x.",
        algorithm=f"Element-wise activation: {math_desc}.",
        inputs=(x,), outputs=(y,), checks=(Check("y", *float_tolerance(transcendental=True)),),
        constants=f"constexpr int N = {n};", kernels=kernels, launch=launch,
        gen_body=f"N = {n}\nx = rng.uniform(-6.0, 6.0, N).astype(np.float32)\nx64 = x.astype(np.float64)\ny = {npexpr}",
        seed=seed, includes=("cmath",),
    )


SIGMOID = Family(
    name="sigmoid", domain="elementwise", build=build_sigmoid,
    suite_variant={"kind": "sigmoid"}, suite_sizes=SUITE_N,
    variants=(
        *({"kind": k} for k in SIGMOID_KINDS if k != "sigmoid"),
        *({"kind": "swish", "beta": b} for b in (0.5, 1.5, 2.0, 3.0)),
    ),
    small_sizes=SMALL_N, large_sizes=LARGE_N,
)


# ---------------------------------------------------------------- smooth activations (float4)

def _smooth_kind(variant):
    """(name, math, CUDA body over v, numpy expression over x64, needs scipy)."""
    kind = variant["kind"]
    if kind == "gelu_tanh":
        return (
            "GELU_Activation", "y = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))",
            "return 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));",
            "0.5 * x64 * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x64 + 0.044715 * x64 ** 3)))", False,
        )
    if kind == "gelu_erf":
        return (
            "GELU_Erf_Activation", "y = 0.5 * x * (1 + erf(x / sqrt(2)))",
            "return 0.5f * v * (1.0f + erff(v * 0.70710678f));",
            "0.5 * x64 * (1.0 + special.erf(x64 / np.sqrt(2.0)))", True,
        )
    if kind == "mish":
        return (
            "Mish_Activation", "y = x * tanh(softplus(x)) with softplus(x) = log(1 + exp(x))",
            "float sp = v > 20.0f ? v : log1pf(expf(v));\n    return v * tanhf(sp);",
            "x64 * np.tanh(np.where(x64 > 20.0, x64, np.log1p(np.exp(np.minimum(x64, 20.0)))))", False,
        )
    if kind == "softplus":
        b = variant["beta"]
        return (
            f"Softplus_Beta_{name_num(b)}",
            f"y = log(1 + exp({fmt_num(b)} * x)) / {fmt_num(b)}, and y = x where {fmt_num(b)} * x > 20",
            f"float bv = {cfloat(b)} * v;\n    return bv > 20.0f ? v : log1pf(expf(bv)) / {cfloat(b)};",
            f"np.where({b} * x64 > 20.0, x64, np.log1p(np.exp(np.minimum({b} * x64, 20.0))) / {b})", False,
        )
    if kind == "elu":
        a = variant["alpha"]
        return (
            f"ELU_Alpha_{name_num(a)}", f"y = x if x > 0 else {fmt_num(a)} * (exp(x) - 1)",
            f"return v > 0.0f ? v : {cfloat(a)} * expm1f(v);",
            f"np.where(x64 > 0, x64, {a} * np.expm1(np.minimum(x64, 0.0)))", False,
        )
    if kind == "selu":
        return (
            "SELU_Activation", "y = 1.0507009873554805 * (x if x > 0 else 1.6732632423543772 * (exp(x) - 1))",
            "return 1.0507009873554805f * (v > 0.0f ? v : 1.6732632423543772f * expm1f(v));",
            "1.0507009873554805 * np.where(x64 > 0, x64, 1.6732632423543772 * np.expm1(np.minimum(x64, 0.0)))", False,
        )
    if kind == "celu":
        a = variant["alpha"]
        return (
            f"CELU_Alpha_{name_num(a)}", f"y = max(0, x) + min(0, {fmt_num(a)} * (exp(x / {fmt_num(a)}) - 1))",
            f"return fmaxf(v, 0.0f) + fminf(0.0f, {cfloat(a)} * expm1f(v / {cfloat(a)}));",
            f"np.maximum(x64, 0.0) + np.minimum(0.0, {a} * np.expm1(np.minimum(x64, 0.0) / {a}))", False,
        )
    raise ValueError(f"unknown activation kind {kind!r}")


def build_smooth_activation(variant, size, seed):
    name, math_desc, body, npexpr, scipy = _smooth_kind(variant)
    n = size["n"]
    if n % 4:
        raise ValueError(f"{name}: the float4 kernel needs a length divisible by 4, got {n}")
    x, y = Tensor("x", "float32", (n,), "N"), Tensor("y", "float32", (n,), "N")
    kernels = fill(
        """
        __device__ __forceinline__ float activate(float v) {
            $BODY
        }

        // Each thread handles four consecutive values through one 16-byte load and store.
        __global__ void activation_vec4(const float4* __restrict__ x, float4* __restrict__ y, int n4) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n4) {
                float4 v = x[i];
                v.x = activate(v.x);
                v.y = activate(v.y);
                v.z = activate(v.z);
                v.w = activate(v.w);
                y[i] = v;
            }
        }
        """,
        BODY=body,
    )
    launch = fill(
        """
        const int n4 = N / 4;
        const int threads = $BLOCK;
        const int blocks = (n4 + threads - 1) / threads;
        activation_vec4<<<blocks, threads>>>(reinterpret_cast<const float4*>(d_x),
                                             reinterpret_cast<float4*>(d_y), n4);
        """,
        BLOCK=pick((128, 256), name, n),
    )
    head = "from scipy import special\n" if scipy else ""
    return assemble(
        task_name=name,
        detail=(
            f"Apply the activation {math_desc} element-wise to the {n} values of the float32 vector x "
            f"({n} is a multiple of 4, so the data can be processed as float4)."
        ),
        algorithm=f"Element-wise activation: {math_desc}.",
        inputs=(x,), outputs=(y,), checks=(Check("y", *float_tolerance(transcendental=True)),),
        constants=f"constexpr int N = {n};", kernels=kernels, launch=launch,
        gen_body=f"{head}N = {n}\nx = rng.uniform(-5.0, 5.0, N).astype(np.float32)\nx64 = x.astype(np.float64)\ny = {npexpr}",
        seed=seed, includes=("cmath",),
    )


SMOOTH_ACTIVATION = Family(
    name="smooth_activation", domain="elementwise", build=build_smooth_activation,
    suite_variant={"kind": "gelu_tanh"}, suite_sizes=SUITE_N,
    variants=(
        {"kind": "gelu_erf"}, {"kind": "mish"}, {"kind": "selu"},
        *({"kind": "softplus", "beta": b} for b in (1.0, 2.0, 0.5)),
        *({"kind": "elu", "alpha": a} for a in (0.5, 1.0, 2.0)),
        *({"kind": "celu", "alpha": a} for a in (0.5, 2.0)),
    ),
    small_sizes=SMALL_N4, large_sizes=LARGE_N,
)


# ---------------------------------------------------------------- polynomial (__constant__)

SUITE_COEFFS = (0.5, -1.25, 0.75, 2.0)


def poly_coefficients(degree: int, set_id: int) -> tuple[float, ...]:
    """Coefficients c_0..c_degree of a factory polynomial: fixed, two decimals, c_degree != 0."""
    if set_id == 0 and degree == 3:
        return SUITE_COEFFS
    out = []
    for k in range(degree + 1):
        h = zlib.crc32(f"poly-{degree}-{set_id}-{k}".encode())
        c = ((h % 401) - 200) / 100.0
        out.append(c if (c != 0.0 or k < degree) else 1.0)
    return tuple(out)


def build_polynomial(variant, size, seed):
    degree, set_id, n = variant["degree"], variant["set"], size["n"]
    coeffs = poly_coefficients(degree, set_id)
    x, y = Tensor("x", "float32", (n,), "N"), Tensor("y", "float32", (n,), "N")
    terms = " + ".join(f"{fmt_num(c)}*x^{k}" if k else fmt_num(c) for k, c in enumerate(coeffs))
    init = ", ".join(cfloat(c) for c in coeffs)
    kernels = """
        // Coefficients live in constant memory: every thread reads the same address at once.
        __constant__ float c_coeffs[DEGREE + 1];

        __global__ void polynomial_kernel(const float* x, float* y, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) {
                float v = x[i];
                float acc = c_coeffs[DEGREE];
                for (int k = DEGREE - 1; k >= 0; --k) {
                    acc = acc * v + c_coeffs[k];  // Horner's rule
                }
                y[i] = acc;
            }
        }
    """
    launch = fill(
        """
        const float h_coeffs[DEGREE + 1] = {$INIT};
        CUDA_CHECK(cudaMemcpyToSymbol(c_coeffs, h_coeffs, sizeof(h_coeffs)));
        """,
        INIT=init,
    ) + "\n" + _launch_1d("polynomial_kernel<<<blocks, threads>>>(d_x, d_y, N);", 256)
    scale = sum(abs(c) * 1.5 ** k for k, c in enumerate(coeffs))
    name = "Polynomial_Evaluation" if (degree, set_id) == (3, 0) else f"Polynomial_Degree{degree}_Set{set_id}"
    return assemble(
        task_name=name,
        detail=(
            f"Evaluate the degree-{degree} polynomial p(x) = {terms} at each of the {n} float32 values of x "
            "(Horner's rule; keep the coefficients in constant memory)."
        ),
        algorithm=f"Evaluate the polynomial p(x) = {terms} element-wise.",
        inputs=(x,), outputs=(y,), checks=(Check("y", float(f"{1e-5 * scale:.2g}"), 1e-5),),
        constants=f"constexpr int N = {n};\nconstexpr int DEGREE = {degree};", kernels=kernels, launch=launch,
        gen_body=fill(
            """
            N = $N
            x = rng.uniform(-1.5, 1.5, N).astype(np.float32)
            coeffs = np.array([$COEFFS], dtype=np.float32).astype(np.float64)
            y = np.zeros(N)
            for c in coeffs[::-1]:
                y = y * x + c
            """,
            N=n, COEFFS=", ".join(repr(c) for c in coeffs),
        ),
        seed=seed,
    )


POLYNOMIAL = Family(
    name="polynomial", domain="elementwise", build=build_polynomial,
    suite_variant={"degree": 3, "set": 0}, suite_sizes=SUITE_N,
    variants=tuple({"degree": d, "set": s} for d in range(2, 9) for s in range(3) if (d, s) != (3, 0)),
    small_sizes=SMALL_N, large_sizes=LARGE_N,
)


# ---------------------------------------------------------------- scale + bias + activation (2-D)

BIAS_ACTS = {
    "identity": ("Identity", "a(v) = v", "return v;", "v"),
    "relu": ("ReLU", "a(v) = max(v, 0)", "return fmaxf(v, 0.0f);", "np.maximum(v, 0.0)"),
    "sigmoid": ("Sigmoid", "a(v) = 1 / (1 + exp(-v))", "return 1.0f / (1.0f + expf(-v));", "1.0 / (1.0 + np.exp(-v))"),
    "tanh": ("Tanh", "a(v) = tanh(v)", "return tanhf(v);", "np.tanh(v)"),
    "silu": ("SiLU", "a(v) = v / (1 + exp(-v))", "return v / (1.0f + expf(-v));", "v / (1.0 + np.exp(-v))"),
    "leaky": ("LeakyReLU", "a(v) = v if v > 0 else 0.1 * v", "return v > 0.0f ? v : 0.1f * v;", "np.where(v > 0, v, 0.1 * v)"),
    "gelu": (
        "GELU", "a(v) = 0.5 * v * (1 + tanh(0.7978845608 * (v + 0.044715 * v^3)))",
        "return 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));",
        "0.5 * v * (1.0 + np.tanh(0.7978845608 * (v + 0.044715 * v ** 3)))",
    ),
}


def build_bias_act(variant, size, seed):
    act, scale = variant["act"], variant["scale"]
    rows, cols = size["rows"], size["cols"]
    title, math_desc, body, npexpr = BIAS_ACTS[act]
    x = Tensor("x", "float32", (rows, cols), "ROWS * COLS")
    bias = Tensor("bias", "float32", (cols,), "COLS")
    y = Tensor("y", "float32", (rows, cols), "ROWS * COLS")
    bx, by = pick(((16, 16), (32, 8), (32, 4)), act, scale, rows, cols)
    kernels = fill(
        """
        __device__ __forceinline__ float act(float v) {
            $BODY
        }

        __global__ void scale_bias_act(const float* x, const float* bias, float* y, int rows, int cols) {
            int col = blockIdx.x * blockDim.x + threadIdx.x;
            int row = blockIdx.y * blockDim.y + threadIdx.y;
            if (row < rows && col < cols) {
                int idx = row * cols + col;
                y[idx] = act(x[idx] * SCALE + bias[col]);
            }
        }
        """,
        BODY=body,
    )
    launch = fill(
        """
        dim3 block($BX, $BY);
        dim3 grid((COLS + block.x - 1) / block.x, (ROWS + block.y - 1) / block.y);
        scale_bias_act<<<grid, block>>>(d_x, d_bias, d_y, ROWS, COLS);
        """,
        BX=bx, BY=by,
    )
    name = f"Bias_{title}" if scale == 1.0 else f"Scale_{name_num(scale)}_Bias_{title}"
    return assemble(
        task_name=name,
        detail=(
            f"For a {rows}x{cols} float32 matrix x and a bias vector of length {cols}, compute "
            f"y[r][c] = a(x[r][c] * {fmt_num(scale)} + bias[c]) where {math_desc}. Use a 2-D grid of 2-D blocks."
        ),
        algorithm=f"Fused scale, per-column bias and activation over a matrix: y = a(x * {fmt_num(scale)} + bias), {math_desc}.",
        inputs=(x, bias), outputs=(y,),
        checks=(Check("y", *float_tolerance(transcendental=act not in ("identity", "relu", "leaky"))),),
        constants=f"constexpr int ROWS = {rows};\nconstexpr int COLS = {cols};\nconstexpr float SCALE = {cfloat(scale)};",
        kernels=kernels, launch=launch,
        gen_body=fill(
            """
            ROWS, COLS = $ROWS, $COLS
            x = rng.uniform(-3.0, 3.0, (ROWS, COLS)).astype(np.float32)
            bias = rng.uniform(-1.0, 1.0, COLS).astype(np.float32)
            v = x.astype(np.float64) * $SCALE + bias
            y = $NPEXPR
            """,
            ROWS=rows, COLS=cols, SCALE=scale, NPEXPR=npexpr,
        ),
        seed=seed, includes=("cmath",),
    )


BIAS_ACT = Family(
    name="bias_act", domain="elementwise", build=build_bias_act,
    suite_variant={"act": "relu", "scale": 1.0},
    suite_sizes=({"rows": 512, "cols": 512}, {"rows": 4096, "cols": 4096}),
    variants=tuple(
        {"act": a, "scale": s} for a in BIAS_ACTS for s in (1.0, 0.5, 2.0) if (a, s) != ("relu", 1.0)
    ),
    small_sizes=size_grid(rows=(64, 100, 256, 300), cols=(128, 200, 384, 768)),
    large_sizes=size_grid(rows=(2048, 8192), cols=(1024, 2048, 3072)),
)


# ---------------------------------------------------------------- where / masked fill

def build_where(variant, size, seed):
    n = size["n"]
    mode = variant["mode"]
    mask = Tensor("mask", "uint8", (n,), "N")
    if mode == "select":
        dtype = variant["dtype"]
        ctype = CTYPES[dtype]
        a, b, out = Tensor("a", dtype, (n,), "N"), Tensor("b", dtype, (n,), "N"), Tensor("out", dtype, (n,), "N")
        inputs = (mask, a, b)
        name = "Where_Select" + ("" if dtype == "float32" else "_Int32")
        math_desc = "out[i] = a[i] if mask[i] != 0 else b[i]"
        signature, expr, call = f"const {ctype}* a, const {ctype}* b", "mask[i] ? a[i] : b[i]", "d_mask, d_a, d_b, d_out"
        draw = ("rng.standard_normal(N).astype(np.float32)" if dtype == "float32"
                else "rng.integers(-50000, 50000, N, dtype=np.int32)")
        gen = f"a = {draw}\nb = {draw}\nout = np.where(mask != 0, a, b)"
    else:
        value = variant["value"]
        ctype, dtype = "float", "float32"
        x, out = Tensor("x", "float32", (n,), "N"), Tensor("out", "float32", (n,), "N")
        inputs = (mask, x)
        name = f"Masked_Fill_{name_num(value)}"
        math_desc = f"out[i] = {fmt_num(value)} if mask[i] != 0 else x[i]"
        signature, expr, call = "const float* x", f"mask[i] ? {cfloat(value)} : x[i]", "d_mask, d_x, d_out"
        gen = f"x = rng.standard_normal(N).astype(np.float32)\nout = np.where(mask != 0, np.float32({value}), x)"
    kernels = fill(
        """
        __global__ void where_kernel(const unsigned char* mask, $SIG, $T* out, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) {
                out[i] = $EXPR;
            }
        }
        """,
        SIG=signature, T=ctype, EXPR=expr,
    )
    return assemble(
        task_name=name,
        detail=f"With a uint8 mask of {n} bytes (0 or 1), compute {math_desc} for every 0 <= i < {n}; the values are {dtype}.",
        algorithm=f"Element-wise selection driven by a byte mask: {math_desc}.",
        inputs=inputs, outputs=(out,), checks=(Check("out"),),
        constants=f"constexpr int N = {n};", kernels=kernels,
        launch=_launch_1d(f"where_kernel<<<blocks, threads>>>({call}, N);", 256),
        gen_body=f"N = {n}\nmask = (rng.random(N) < 0.5).astype(np.uint8)\n{gen}",
        seed=seed,
    )


WHERE = Family(
    name="where", domain="elementwise", build=build_where,
    suite_variant={"mode": "select", "dtype": "float32"}, suite_sizes=SUITE_N,
    variants=(
        {"mode": "select", "dtype": "int32"},
        *({"mode": "fill", "value": v} for v in (0.0, -1.0, 1.0, 100.0, -10000.0, 0.5)),
    ),
    small_sizes=SMALL_N, large_sizes=LARGE_N,
)


FAMILIES = (VECTOR_BINARY, SAXPY, RELU, SIGMOID, SMOOTH_ACTIVATION, POLYNOMIAL, BIAS_ACT, WHERE)
