"""Sorting: a global bitonic network launched step by step, and per-row sorts in shared memory."""

from __future__ import annotations

from cuset.curation.families.base import CTYPES, Check, Family, Tensor, assemble, fill, one_axis, pick, size_grid

DRAW = {
    "int32": "rng.integers(-(2 ** 31), 2 ** 31 - 1, {shape}, dtype=np.int32)",
    "uint32": "rng.integers(0, 2 ** 32 - 1, {shape}, dtype=np.uint32)",
    "float32": "rng.standard_normal({shape}).astype(np.float32) * 100",
}
SUFFIX = {"int32": "", "uint32": "_UInt32", "float32": "_Float"}


def build_bitonic_sort(variant, size, seed):
    dtype, order = variant["dtype"], variant["order"]
    n = size["n"]
    if n & (n - 1):
        raise ValueError(f"bitonic sort needs a power-of-two length, got {n}")
    t = CTYPES[dtype]
    x, y = Tensor("input", dtype, (n,), "N"), Tensor("sorted", dtype, (n,), "N")
    ascending = order == "asc"
    kernels = fill(
        """
        // One compare-exchange step of the bitonic network: element i pairs with i ^ j, and the
        // direction of each k-sized run alternates so that runs merge into sorted sequences.
        template <typename T>
        __global__ void bitonic_step(T* data, int j, int k) {
            unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
            unsigned int partner = i ^ j;
            if (partner > i) {
                bool up = ((i & k) == 0) == $ASC;
                T a = data[i];
                T b = data[partner];
                if ((a > b) == up) {
                    data[i] = b;
                    data[partner] = a;
                }
            }
        }
        """,
        ASC="true" if ascending else "false",
    )
    launch = fill(
        """
        CUDA_CHECK(cudaMemcpy(d_sorted, d_input, N * sizeof($T), cudaMemcpyDeviceToDevice));
        const int threads = $BLOCK;
        const int blocks = (N + threads - 1) / threads;
        for (int k = 2; k <= N; k <<= 1) {
            for (int j = k >> 1; j > 0; j >>= 1) {
                bitonic_step<$T><<<blocks, threads>>>(d_sorted, j, k);
            }
        }
        """,
        T=t, BLOCK=min(n, pick((256, 512), dtype, order, n)),
    )
    direction = "ascending" if ascending else "descending"
    name = ("Bitonic_Sort" if ascending else "Bitonic_Sort_Descending") + SUFFIX[dtype]
    return assemble(
        task_name=name,
        detail=(
            f"Sort {n} {dtype} values into {direction} order (n is a power of two) with a bitonic sorting network: "
            "for k = 2, 4, ..., n and j = k/2, ..., 1 launch one compare-exchange step in which element i is paired "
            "with i XOR j. Write the sorted array to `sorted`; keep `input` unchanged."
        ),
        algorithm=f"Sort an array of {dtype} values in {direction} order (bitonic sort).",
        inputs=(x,), outputs=(y,), checks=(Check("sorted"),),
        constants=f"constexpr int N = {n};", kernels=kernels, launch=launch,
        gen_body=f"N = {n}\ninput = {DRAW[dtype].format(shape='N')}\nsorted = np.sort(input){'' if ascending else '[::-1]'}",
        seed=seed,
    )


BITONIC_SORT = Family(
    name="bitonic_sort", domain="sorting", build=build_bitonic_sort,
    suite_variant={"dtype": "int32", "order": "asc"}, suite_sizes=({"n": 1 << 16}, {"n": 1 << 24}),
    variants=tuple(
        {"dtype": d, "order": o} for d in ("int32", "uint32", "float32") for o in ("asc", "desc")
        if (d, o) != ("int32", "asc")
    ),
    small_sizes=one_axis("n", tuple(1 << p for p in range(8, 16)) + (1 << 17,)),
    large_sizes=one_axis("n", (1 << 20, 1 << 22, 1 << 23)),
)


def build_sort_rows(variant, size, seed):
    dtype, order = variant["dtype"], variant["order"]
    rows, length = size["rows"], size["length"]
    t = CTYPES[dtype]
    x = Tensor("input", dtype, (rows, length), "ROWS * LEN")
    y = Tensor("output", dtype, (rows, length), "ROWS * LEN")
    ascending = order == "asc"
    kernels = fill(
        """
        // One block per row, one thread per element: the whole bitonic network runs in shared memory.
        template <typename T>
        __global__ void sort_rows(const T* __restrict__ in, T* __restrict__ out) {
            __shared__ T s[LEN];
            int t = threadIdx.x;
            size_t base = (size_t)blockIdx.x * LEN;
            s[t] = in[base + t];
            __syncthreads();
            for (int k = 2; k <= LEN; k <<= 1) {
                for (int j = k >> 1; j > 0; j >>= 1) {
                    int partner = t ^ j;
                    if (partner > t) {
                        bool up = ((t & k) == 0) == $ASC;
                        T a = s[t];
                        T b = s[partner];
                        if ((a > b) == up) {
                            s[t] = b;
                            s[partner] = a;
                        }
                    }
                    __syncthreads();
                }
            }
            out[base + t] = s[t];
        }
        """,
        ASC="true" if ascending else "false",
    )
    launch = f"sort_rows<{t}><<<ROWS, LEN>>>(d_input, d_output);"
    direction = "ascending" if ascending else "descending"
    name = ("Sort_Rows" if ascending else "Sort_Rows_Descending") + SUFFIX[dtype]
    return assemble(
        task_name=name,
        detail=(
            f"Sort each row of a {rows}x{length} {dtype} matrix independently into {direction} order ({length} is a "
            "power of two, at most 1024). Use one thread block per row: load the row into shared memory, run a bitonic "
            "sorting network with __syncthreads between steps, and write the row back."
        ),
        algorithm=f"Sort every row of a matrix independently in {direction} order.",
        inputs=(x,), outputs=(y,), checks=(Check("output"),),
        constants=f"constexpr int ROWS = {rows};\nconstexpr int LEN = {length};", kernels=kernels, launch=launch,
        gen_body=(
            f"ROWS, LEN = {rows}, {length}\ninput = {DRAW[dtype].format(shape='(ROWS, LEN)')}\n"
            f"output = np.sort(input, axis=1){'' if ascending else '[:, ::-1]'}"
        ),
        seed=seed,
    )


SORT_ROWS = Family(
    name="sort_rows", domain="sorting", build=build_sort_rows,
    suite_variant={"dtype": "float32", "order": "asc"},
    suite_sizes=({"rows": 512, "length": 256}, {"rows": 65536, "length": 1024}),
    variants=tuple(
        {"dtype": d, "order": o} for d in ("float32", "int32", "uint32") for o in ("asc", "desc")
        if (d, o) != ("float32", "asc")
    ),
    small_sizes=size_grid(rows=(1, 10, 64, 300), length=(32, 64, 128, 512, 1024)),
    large_sizes=size_grid(rows=(16384, 131072), length=(256, 1024)),
)


FAMILIES = (BITONIC_SORT, SORT_ROWS)
