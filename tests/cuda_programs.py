"""CUDA programs more than one test package uses (tests/ is on sys.path: `from cuda_programs import ...`)."""

# A shared-memory tree reduction: a barrier in a uniform loop, a thread-dependent guard.
REDUCE = """#include <cuda_runtime.h>

__global__ void block_sum(const float* in, float* out, int n) {
    __shared__ float buf[256];
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    buf[t] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) buf[t] += buf[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = buf[0];
}

int main() {
    float *in, *out;
    cudaMalloc(&in, 65536 * sizeof(float));
    cudaMalloc(&out, 256 * sizeof(float));
    dim3 grid(256), block(256);
    block_sum<<<grid, block>>>(in, out, 65536);
    cudaFree(in); cudaFree(out);
    return 0;
}
"""
