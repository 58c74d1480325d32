"""Scientific kernels: n-body forces, Jacobi relaxation, Black-Scholes pricing, explicit heat diffusion."""

from __future__ import annotations

from cuset.curation.families.base import (
    Check, Family, Tensor, assemble, cfloat, fill, fmt_num, name_num, one_axis, pick, size_grid,
)


# ---------------------------------------------------------------- n-body accelerations (shared-memory tiles)

def build_nbody(variant, size, seed):
    eps2, grav = variant["eps2"], variant["g"]
    n = size["n"]
    bodies = Tensor("bodies", "float32", (n, 4), "N * 4")
    accel = Tensor("accel", "float32", (n, 3), "N * 3")
    block = pick((64, 128, 256), eps2, grav, n)
    kernels = """
        // All-pairs gravity. Each block walks over the bodies in tiles of blockDim.x, staged in
        // shared memory; padding bodies have mass 0 and contribute nothing.
        __global__ void nbody_accel(const float4* __restrict__ bodies, float* __restrict__ accel) {
            extern __shared__ float4 tile[];
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            float4 me = i < N ? bodies[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            float ax = 0.0f, ay = 0.0f, az = 0.0f;
            for (int base = 0; base < N; base += blockDim.x) {
                int j = base + threadIdx.x;
                tile[threadIdx.x] = j < N ? bodies[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                __syncthreads();
                for (int k = 0; k < blockDim.x; ++k) {
                    float4 other = tile[k];
                    float dx = other.x - me.x;
                    float dy = other.y - me.y;
                    float dz = other.z - me.z;
                    float inv = rsqrtf(dx * dx + dy * dy + dz * dz + EPS2);
                    float s = other.w * inv * inv * inv;
                    ax += dx * s;
                    ay += dy * s;
                    az += dz * s;
                }
                __syncthreads();
            }
            if (i < N) {
                accel[3 * i] = G * ax;
                accel[3 * i + 1] = G * ay;
                accel[3 * i + 2] = G * az;
            }
        }
    """
    launch = fill(
        """
        const int threads = $BLOCK;
        const int blocks = (N + threads - 1) / threads;
        nbody_accel<<<blocks, threads, threads * sizeof(float4)>>>(reinterpret_cast<const float4*>(d_bodies), d_accel);
        """,
        BLOCK=block,
    )
    name = "NBody_Acceleration" if (eps2, grav) == (0.01, 1.0) else f"NBody_Softening_{name_num(eps2)}_G_{name_num(grav)}"
    return assemble(
        task_name=name,
        detail=(
            f"Gravitational accelerations of {n} bodies (all pairs). bodies has shape ({n}, 4) holding x, y, z and mass; "
            f"write accel ({n}, 3) with a_i = {fmt_num(grav)} * sum_j m_j * (r_j - r_i) / (|r_j - r_i|^2 + {fmt_num(eps2)})^(3/2) "
            "(the j = i term is zero). Tile the bodies through shared memory, one thread per body."
        ),
        algorithm=f"All-pairs n-body gravitational acceleration with softening {fmt_num(eps2)} and G = {fmt_num(grav)}.",
        inputs=(bodies,), outputs=(accel,),
        checks=(Check("accel", float(f"{2e-5 * n ** 0.5 * grav / eps2 ** 0.5:.2g}"), 1e-3),),
        constants=f"constexpr int N = {n};\nconstexpr float EPS2 = {cfloat(eps2)};\nconstexpr float G = {cfloat(grav)};",
        kernels=kernels, launch=launch,
        gen_body=fill(
            """
            N, EPS2, G = $N, $EPS2, $G
            bodies = np.concatenate([rng.uniform(-1.0, 1.0, (N, 3)), rng.uniform(0.5, 1.5, (N, 1))], axis=1).astype(np.float32)
            b = bodies.astype(np.float64)
            accel = np.zeros((N, 3))
            CHUNK = max(1, 2 ** 21 // N)  # rows per chunk: the pairwise arrays stay around 50 MB
            for start in range(0, N, CHUNK):
                d = b[None, :, :3] - b[start:start + CHUNK, None, :3]
                inv3 = (np.sum(d * d, axis=2) + EPS2) ** -1.5
                accel[start:start + CHUNK] = G * np.einsum("ij,ijk->ik", inv3 * b[None, :, 3], d)
            """,
            N=n, EPS2=eps2, G=grav,
        ),
        seed=seed,
    )


NBODY = Family(
    name="nbody", domain="scientific", build=build_nbody,
    suite_variant={"eps2": 0.01, "g": 1.0}, suite_sizes=({"n": 2048}, {"n": 16384}),
    variants=tuple(
        {"eps2": e, "g": g} for e in (0.01, 0.001, 0.1, 1.0) for g in (1.0, 0.5) if (e, g) != (0.01, 1.0)
    ),
    small_sizes=one_axis("n", (64, 100, 256, 500, 1000, 1500, 3000)),
    large_sizes=one_axis("n", (8192, 32768)),
)


# ---------------------------------------------------------------- Jacobi relaxation (ping-pong launches)

def build_jacobi(variant, size, seed):
    iters, omega = variant["iters"], variant["omega"]
    h, w = size["h"], size["w"]
    u0 = Tensor("u0", "float32", (h, w), "H * W")
    f = Tensor("f", "float32", (h, w), "H * W")
    u = Tensor("u", "float32", (h, w), "H * W")
    kernels = """
        // One weighted Jacobi sweep for -laplace(u) = f on a unit grid; boundary values stay fixed.
        __global__ void jacobi_step(const float* __restrict__ u, const float* __restrict__ f, float* __restrict__ u_next) {
            int x = blockIdx.x * blockDim.x + threadIdx.x;
            int y = blockIdx.y * blockDim.y + threadIdx.y;
            if (x >= W || y >= H) {
                return;
            }
            int idx = y * W + x;
            if (x == 0 || y == 0 || x == W - 1 || y == H - 1) {
                u_next[idx] = u[idx];
                return;
            }
            float jacobi = 0.25f * (u[idx - 1] + u[idx + 1] + u[idx - W] + u[idx + W] + f[idx]);
            u_next[idx] = (1.0f - OMEGA) * u[idx] + OMEGA * jacobi;
        }
    """
    launch = """
        CUDA_CHECK(cudaMemcpy(d_u, d_u0, H * W * sizeof(float), cudaMemcpyDeviceToDevice));
        float* d_tmp;
        CUDA_CHECK(cudaMalloc(&d_tmp, H * W * sizeof(float)));
        dim3 block(32, 8);
        dim3 grid((W + block.x - 1) / block.x, (H + block.y - 1) / block.y);
        float* cur = d_u;
        float* next = d_tmp;
        for (int it = 0; it < ITERS; ++it) {
            jacobi_step<<<grid, block>>>(cur, d_f, next);
            float* t = cur;
            cur = next;
            next = t;
        }
        if (cur != d_u) {
            CUDA_CHECK(cudaMemcpy(d_u, cur, H * W * sizeof(float), cudaMemcpyDeviceToDevice));
        }
        CUDA_CHECK(cudaFree(d_tmp));
    """
    name = "Jacobi_2D" if (iters, omega) == (10, 1.0) else f"Jacobi_2D_Iters_{iters}_Omega_{name_num(round(omega, 3))}"
    return assemble(
        task_name=name,
        detail=(
            f"Run {iters} weighted Jacobi iterations (omega = {omega:.4g}) for the Poisson problem -laplace(u) = f on a "
            f"{h}x{w} grid with unit spacing, starting from u0: at interior points u'[y][x] = (1 - omega) * u[y][x] + "
            "omega * (u[y][x-1] + u[y][x+1] + u[y-1][x] + u[y+1][x] + f[y][x]) / 4; boundary points keep their values. "
            "Alternate between two buffers, one kernel launch per iteration, and write the final u."
        ),
        algorithm=f"{iters} weighted Jacobi iterations (omega = {omega:.4g}) for a 2-D Poisson problem with fixed boundary.",
        inputs=(u0, f), outputs=(u,), checks=(Check("u", 2e-5, 1e-5),),
        constants=f"constexpr int H = {h};\nconstexpr int W = {w};\nconstexpr int ITERS = {iters};\nconstexpr float OMEGA = {cfloat(omega)};",
        kernels=kernels, launch=launch,
        gen_body=fill(
            """
            H, W, ITERS, OMEGA = $H, $W, $ITERS, $OMEGA
            u0 = rng.uniform(-1.0, 1.0, (H, W)).astype(np.float32)
            f = rng.uniform(-0.1, 0.1, (H, W)).astype(np.float32)
            u = u0.astype(np.float64)
            f64 = f.astype(np.float64)
            for _ in range(ITERS):
                nxt = u.copy()
                nxt[1:-1, 1:-1] = (1 - OMEGA) * u[1:-1, 1:-1] + OMEGA * 0.25 * (
                    u[1:-1, :-2] + u[1:-1, 2:] + u[:-2, 1:-1] + u[2:, 1:-1] + f64[1:-1, 1:-1])
                u = nxt
            """,
            H=h, W=w, ITERS=iters, OMEGA=omega,
        ),
        seed=seed,
    )


JACOBI = Family(
    name="jacobi2d", domain="scientific", build=build_jacobi,
    suite_variant={"iters": 10, "omega": 1.0}, suite_sizes=({"h": 256, "w": 256}, {"h": 4096, "w": 4096}),
    variants=tuple(
        {"iters": it, "omega": om} for it in (1, 5, 10, 20, 50) for om in (1.0, 0.8, 0.6667) if (it, om) != (10, 1.0)
    ),
    small_sizes=size_grid(h=(16, 32, 64, 128), w=(16, 48, 100, 200)),
    large_sizes=size_grid(h=(2048, 8192), w=(2048, 8192)),
)


# ---------------------------------------------------------------- Black-Scholes

def build_black_scholes(variant, size, seed):
    rate, vol = variant["r"], variant["sigma"]
    n = size["n"]
    s, k, t = (Tensor(nm, "float32", (n,), "N") for nm in ("price", "strike", "years"))
    call, put = Tensor("call", "float32", (n,), "N"), Tensor("put", "float32", (n,), "N")
    kernels = """
        // Cumulative normal distribution, polynomial approximation (Abramowitz & Stegun 26.2.17).
        __device__ __forceinline__ float cnd(float d) {
            const float A1 = 0.31938153f, A2 = -0.356563782f, A3 = 1.781477937f, A4 = -1.821255978f, A5 = 1.330274429f;
            const float RSQRT2PI = 0.39894228040143267794f;
            float k = 1.0f / (1.0f + 0.2316419f * fabsf(d));
            float c = RSQRT2PI * expf(-0.5f * d * d) * (k * (A1 + k * (A2 + k * (A3 + k * (A4 + k * A5)))));
            return d > 0.0f ? 1.0f - c : c;
        }

        __global__ void black_scholes(const float* __restrict__ price, const float* __restrict__ strike,
                                      const float* __restrict__ years, float* __restrict__ call,
                                      float* __restrict__ put, int n) {
            for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
                float S = price[i], X = strike[i], T = years[i];
                float sqrt_t = sqrtf(T);
                float d1 = (logf(S / X) + (RATE + 0.5f * VOL * VOL) * T) / (VOL * sqrt_t);
                float d2 = d1 - VOL * sqrt_t;
                float discount = expf(-RATE * T);
                float c1 = cnd(d1), c2 = cnd(d2);
                call[i] = S * c1 - X * discount * c2;
                put[i] = X * discount * (1.0f - c2) - S * (1.0f - c1);
            }
        }
    """
    launch = """
        const int threads = 128;
        int blocks = (N + threads - 1) / threads;
        if (blocks > 480) blocks = 480;
        black_scholes<<<blocks, threads>>>(d_price, d_strike, d_years, d_call, d_put, N);
    """
    name = "Black_Scholes" if (rate, vol) == (0.02, 0.3) else f"Black_Scholes_R_{name_num(rate)}_Vol_{name_num(vol)}"
    return assemble(
        task_name=name,
        detail=(
            f"Price {n} European options with the Black-Scholes formula (riskless rate {fmt_num(rate)}, volatility "
            f"{fmt_num(vol)}): inputs price S, strike X and time to expiry T in years (float32 each). With "
            "d1 = (ln(S/X) + (r + v^2/2) T) / (v sqrt(T)) and d2 = d1 - v sqrt(T): call = S N(d1) - X e^(-rT) N(d2), "
            "put = X e^(-rT) (1 - N(d2)) - S (1 - N(d1)), where N is the standard normal CDF approximated by "
            "Abramowitz & Stegun 26.2.17 (k = 1/(1 + 0.2316419|d|), 1 - phi(d) k (0.31938153 + k (-0.356563782 + "
            "k (1.781477937 + k (-1.821255978 + 1.330274429 k)))) for d > 0, mirrored for d <= 0)."
        ),
        algorithm=f"Black-Scholes call and put prices for a batch of options (r = {fmt_num(rate)}, volatility {fmt_num(vol)}).",
        inputs=(s, k, t), outputs=(call, put), checks=(Check("call", 2e-3, 1e-4), Check("put", 2e-3, 1e-4)),
        constants=f"constexpr int N = {n};\nconstexpr float RATE = {cfloat(rate)};\nconstexpr float VOL = {cfloat(vol)};",
        kernels=kernels, launch=launch,
        gen_body=fill(
            """
            N, R, V = $N, $R, $V
            price = rng.uniform(5.0, 30.0, N).astype(np.float32)
            strike = rng.uniform(1.0, 100.0, N).astype(np.float32)
            years = rng.uniform(0.25, 10.0, N).astype(np.float32)


            def cnd(d):
                k = 1.0 / (1.0 + 0.2316419 * np.abs(d))
                poly = k * (0.31938153 + k * (-0.356563782 + k * (1.781477937 + k * (-1.821255978 + k * 1.330274429))))
                c = np.exp(-0.5 * d * d) / np.sqrt(2 * np.pi) * poly
                return np.where(d > 0, 1.0 - c, c)


            S, X, T = (a.astype(np.float64) for a in (price, strike, years))
            d1 = (np.log(S / X) + (R + 0.5 * V * V) * T) / (V * np.sqrt(T))
            d2 = d1 - V * np.sqrt(T)
            disc = np.exp(-R * T)
            call = S * cnd(d1) - X * disc * cnd(d2)
            put = X * disc * (1.0 - cnd(d2)) - S * (1.0 - cnd(d1))
            """,
            N=n, R=rate, V=vol,
        ),
        seed=seed, includes=("cmath",),
    )


BLACK_SCHOLES = Family(
    name="black_scholes", domain="scientific", build=build_black_scholes,
    suite_variant={"r": 0.02, "sigma": 0.3}, suite_sizes=({"n": 262144}, {"n": 1 << 24}),
    variants=tuple(
        {"r": r, "sigma": v} for r in (0.02, 0.05, 0.01) for v in (0.3, 0.2, 0.5, 0.1) if (r, v) != (0.02, 0.3)
    ),
    small_sizes=one_axis("n", (1000, 4096, 10000, 50000, 100000, 200000)),
    large_sizes=one_axis("n", (1 << 22, 10_000_000)),
)


# ---------------------------------------------------------------- explicit heat equation in 1-D (shared halo)

def build_heat(variant, size, seed):
    r, steps = variant["r"], variant["steps"]
    n = size["n"]
    u0, u = Tensor("u0", "float32", (n,), "N"), Tensor("u", "float32", (n,), "N")
    kernels = """
        // One explicit (FTCS) step: each block stages its points plus one halo point per side.
        __global__ void heat_step(const float* __restrict__ u, float* __restrict__ u_next) {
            extern __shared__ float s[];
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            int t = threadIdx.x + 1;
            if (i < N) {
                s[t] = u[i];
            }
            if (threadIdx.x == 0 && i > 0) {
                s[0] = u[i - 1];
            }
            if (threadIdx.x == blockDim.x - 1 && i + 1 < N) {
                s[t + 1] = u[i + 1];
            }
            __syncthreads();
            if (i < N) {
                if (i == 0 || i == N - 1) {
                    u_next[i] = s[t];  // fixed boundary values
                } else {
                    u_next[i] = s[t] + R * (s[t - 1] - 2.0f * s[t] + s[t + 1]);
                }
            }
        }
    """
    launch = fill(
        """
        CUDA_CHECK(cudaMemcpy(d_u, d_u0, N * sizeof(float), cudaMemcpyDeviceToDevice));
        float* d_tmp;
        CUDA_CHECK(cudaMalloc(&d_tmp, N * sizeof(float)));
        const int threads = $BLOCK;
        const int blocks = (N + threads - 1) / threads;
        float* cur = d_u;
        float* next = d_tmp;
        for (int step = 0; step < STEPS; ++step) {
            heat_step<<<blocks, threads, (threads + 2) * sizeof(float)>>>(cur, next);
            float* t = cur;
            cur = next;
            next = t;
        }
        if (cur != d_u) {
            CUDA_CHECK(cudaMemcpy(d_u, cur, N * sizeof(float), cudaMemcpyDeviceToDevice));
        }
        CUDA_CHECK(cudaFree(d_tmp));
        """,
        BLOCK=pick((128, 256), r, steps, n),
    )
    name = "Heat_Equation_1D" if (r, steps) == (0.25, 100) else f"Heat_1D_R_{name_num(r)}_Steps_{steps}"
    return assemble(
        task_name=name,
        detail=(
            f"Integrate the 1-D heat equation with {steps} explicit FTCS steps on {n} points with diffusion number "
            f"r = {fmt_num(r)}: u'[i] = u[i] + r (u[i-1] - 2 u[i] + u[i+1]) for 0 < i < {n - 1}, while u[0] and "
            f"u[{n - 1}] stay fixed. Start from u0, one kernel launch per step (ping-pong buffers, halo in shared memory)."
        ),
        algorithm=f"Explicit finite-difference heat diffusion in 1-D: {steps} steps with r = {fmt_num(r)}, fixed ends.",
        inputs=(u0,), outputs=(u,), checks=(Check("u", 2e-5, 1e-5),),
        constants=f"constexpr int N = {n};\nconstexpr int STEPS = {steps};\nconstexpr float R = {cfloat(r)};",
        kernels=kernels, launch=launch,
        gen_body=fill(
            """
            N, STEPS, R = $N, $STEPS, $R
            u0 = rng.uniform(-1.0, 1.0, N).astype(np.float32)
            u = u0.astype(np.float64)
            for _ in range(STEPS):
                nxt = u.copy()
                nxt[1:-1] = u[1:-1] + R * (u[:-2] - 2.0 * u[1:-1] + u[2:])
                u = nxt
            """,
            N=n, STEPS=steps, R=r,
        ),
        seed=seed,
    )


HEAT_1D = Family(
    name="heat_1d", domain="scientific", build=build_heat,
    suite_variant={"r": 0.25, "steps": 100}, suite_sizes=({"n": 16384}, {"n": 1 << 22}),
    variants=tuple(
        {"r": r, "steps": st} for r in (0.25, 0.1, 0.4, 0.5) for st in (10, 50, 100, 200) if (r, st) != (0.25, 100)
    ),
    small_sizes=one_axis("n", (100, 1000, 4096, 10000, 20000, 30000)),
    large_sizes=one_axis("n", (1 << 20, 1 << 23)),
)


FAMILIES = (NBODY, JACOBI, BLACK_SCHOLES, HEAT_1D)
