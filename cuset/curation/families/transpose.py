"""Transposes and permutations: padded shared-memory tiles, index arithmetic for N-D layouts."""

from __future__ import annotations

from cuset.curation.families.base import CTYPES, Check, Family, Tensor, assemble, fill, pick, size_grid

DRAW = {
    "float32": "rng.standard_normal({shape}).astype(np.float32)",
    "int32": "rng.integers(-1_000_000, 1_000_000, {shape}, dtype=np.int32)",
    "uint8": "rng.integers(0, 256, {shape}, dtype=np.uint8)",
    "int64": "rng.integers(-(2 ** 40), 2 ** 40, {shape}, dtype=np.int64)",
}
SUFFIX = {"float32": "", "int32": "_Int32", "uint8": "_UInt8", "int64": "_Int64"}


def build_transpose(variant, size, seed):
    dtype = variant["dtype"]
    rows, cols = size["rows"], size["cols"]
    t = CTYPES[dtype]
    x = Tensor("input", dtype, (rows, cols), "ROWS * COLS")
    y = Tensor("output", dtype, (cols, rows), "ROWS * COLS")
    rows_per_pass = pick((8, 16), dtype, rows, cols)
    kernels = fill(
        """
        constexpr int TILE = 32;
        constexpr int BLOCK_ROWS = $BR;

        // Read a 32x32 tile with coalesced loads, write it transposed with coalesced stores.
        // The +1 column shifts each row of the tile to another bank: no conflicts on the column read.
        template <typename T>
        __global__ void transpose_tiled(const T* __restrict__ in, T* __restrict__ out, int rows, int cols) {
            __shared__ T tile[TILE][TILE + 1];
            int x = blockIdx.x * TILE + threadIdx.x;
            int y = blockIdx.y * TILE + threadIdx.y;
            for (int j = 0; j < TILE; j += BLOCK_ROWS) {
                if (x < cols && y + j < rows) {
                    tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * cols + x];
                }
            }
            __syncthreads();
            x = blockIdx.y * TILE + threadIdx.x;
            y = blockIdx.x * TILE + threadIdx.y;
            for (int j = 0; j < TILE; j += BLOCK_ROWS) {
                if (x < rows && y + j < cols) {
                    out[(size_t)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
                }
            }
        }
        """,
        BR=rows_per_pass,
    )
    launch = fill(
        """
        dim3 block(TILE, BLOCK_ROWS);
        dim3 grid((COLS + TILE - 1) / TILE, (ROWS + TILE - 1) / TILE);
        transpose_tiled<$T><<<grid, block>>>(d_input, d_output, ROWS, COLS);
        """,
        T=t,
    )
    return assemble(
        task_name="Matrix_Transpose" + SUFFIX[dtype],
        detail=(
            f"Transpose a {rows}x{cols} row-major {dtype} matrix into a {cols}x{rows} one: output[j][i] = input[i][j]. "
            "Stage 32x32 tiles in shared memory (padded by one column against bank conflicts) so that both the loads "
            "and the stores are coalesced."
        ),
        algorithm=f"Matrix transpose of a {dtype} matrix: output[j][i] = input[i][j].",
        inputs=(x,), outputs=(y,), checks=(Check("output"),),
        constants=f"constexpr int ROWS = {rows};\nconstexpr int COLS = {cols};", kernels=kernels, launch=launch,
        gen_body=f"ROWS, COLS = {rows}, {cols}\ninput = {DRAW[dtype].format(shape='(ROWS, COLS)')}\noutput = input.T",
        seed=seed,
    )


TRANSPOSE = Family(
    name="transpose", domain="transpose", build=build_transpose,
    suite_variant={"dtype": "float32"}, suite_sizes=({"rows": 512, "cols": 512}, {"rows": 8192, "cols": 8192}),
    variants=({"dtype": "int32"}, {"dtype": "uint8"}, {"dtype": "int64"}),
    small_sizes=size_grid(rows=(32, 100, 256, 400, 500), cols=(64, 128, 300, 500, 640)),
    large_sizes=size_grid(rows=(4096, 16384), cols=(4096, 12288)),
)


# ---------------------------------------------------------------- permute_3d (gather by index arithmetic)

def build_permute(variant, size, seed):
    perm, dtype = tuple(variant["perm"]), variant["dtype"]
    d = (size["d0"], size["d1"], size["d2"])
    t = CTYPES[dtype]
    out_shape = tuple(d[p] for p in perm)
    x = Tensor("input", dtype, d, "D0 * D1 * D2")
    y = Tensor("output", dtype, out_shape, "D0 * D1 * D2")
    # Output index (o0, o1, o2) holds input index i with i[perm[k]] = o[k].
    src = {perm[0]: "o0", perm[1]: "o1", perm[2]: "o2"}
    kernels = fill(
        """
        // One thread per output element: decompose its linear index in the output shape, then
        // gather from the matching input position.
        __global__ void permute_3d(const $T* __restrict__ in, $T* __restrict__ out) {
            int idx = blockIdx.x * blockDim.x + threadIdx.x;
            if (idx >= D0 * D1 * D2) {
                return;
            }
            int o2 = idx % O2;
            int o1 = (idx / O2) % O1;
            int o0 = idx / (O1 * O2);
            int i0 = $I0, i1 = $I1, i2 = $I2;
            out[idx] = in[(i0 * D1 + i1) * D2 + i2];
        }
        """,
        T=t, I0=src[0], I1=src[1], I2=src[2],
    )
    launch = fill(
        """
        const int total = D0 * D1 * D2;
        const int threads = $BLOCK;
        permute_3d<<<(total + threads - 1) / threads, threads>>>(d_input, d_output);
        """,
        BLOCK=pick((128, 256, 512), perm, dtype, d),
    )
    ptxt = "".join(map(str, perm))
    name = ("Batched_Transpose" if perm == (0, 2, 1) else f"Permute_3D_{ptxt}") + SUFFIX[dtype]
    return assemble(
        task_name=name,
        detail=(
            f"Permute the axes of a row-major {dtype} tensor of shape {d} with permutation ({', '.join(map(str, perm))}) "
            f"(as numpy.transpose): the output has shape {out_shape} and output[o0][o1][o2] = input[i0][i1][i2] where "
            f"i{perm[0]} = o0, i{perm[1]} = o1, i{perm[2]} = o2."
        ),
        algorithm=f"Axis permutation ({', '.join(map(str, perm))}) of a 3-D tensor.",
        inputs=(x,), outputs=(y,), checks=(Check("output"),),
        constants=(f"constexpr int D0 = {d[0]};\nconstexpr int D1 = {d[1]};\nconstexpr int D2 = {d[2]};\n"
                   f"constexpr int O1 = {out_shape[1]};\nconstexpr int O2 = {out_shape[2]};"),
        kernels=kernels, launch=launch,
        gen_body=f"input = {DRAW[dtype].format(shape=repr(d))}\noutput = np.transpose(input, {perm!r})",
        seed=seed,
    )


PERMUTE_3D = Family(
    name="permute_3d", domain="transpose", build=build_permute,
    suite_variant={"perm": [0, 2, 1], "dtype": "float32"},
    suite_sizes=({"d0": 16, "d1": 128, "d2": 256}, {"d0": 64, "d1": 1024, "d2": 1024}),
    variants=tuple(
        {"perm": list(p), "dtype": dt} for p in ((0, 2, 1), (1, 0, 2), (2, 1, 0), (1, 2, 0), (2, 0, 1))
        for dt in ("float32", "int32") if (p, dt) != ((0, 2, 1), "float32")
    ),
    small_sizes=size_grid(d0=(2, 8, 24), d1=(16, 50, 128), d2=(32, 64, 100)),
    large_sizes=size_grid(d0=(32, 128), d1=(512,), d2=(512, 1024)),
)


FAMILIES = (TRANSPOSE, PERMUTE_3D)
