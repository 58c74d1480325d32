"""kb_rmsnorm, correct: one block per row: x * rsqrt(mean(x^2) + eps)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

rmsnorm_cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
// Sum of v over the block, returned to every thread (blockDim.x a power of two, sdata of blockDim.x floats).
__device__ float block_sum(float v, float* sdata) {
    int tid = threadIdx.x;
    sdata[tid] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] += sdata[tid + s];
        }
        __syncthreads();
    }
    float total = sdata[0];
    __syncthreads();  // everyone has read sdata[0] before the next call overwrites it
    return total;
}

__global__ void rmsnorm_kernel(const float* x, float* out, int cols, float eps) {
    extern __shared__ float sdata[];
    int row = blockIdx.x;
    int tid = threadIdx.x;
    const float* xr = x + (size_t)row * cols;
    float* yr = out + (size_t)row * cols;

    float sq = 0.0f;
    for (int j = tid; j < cols; j += blockDim.x) {
        sq += xr[j] * xr[j];
    }
    float inv_rms = rsqrtf(block_sum(sq, sdata) / cols + eps);

    for (int j = tid; j < cols; j += blockDim.x) {
        yr[j] = xr[j] * inv_rms;
    }
}

torch::Tensor rmsnorm_cuda(torch::Tensor x, float eps) {
    int cols = x.size(-1);
    int rows = x.numel() / cols;
    auto out = torch::empty_like(x);
    const int threads = 256;
    rmsnorm_kernel<<<rows, threads, threads * sizeof(float)>>>(x.data_ptr<float>(), out.data_ptr<float>(), cols, eps);
    return out;
}
"""

rmsnorm_cpp_source = "torch::Tensor rmsnorm_cuda(torch::Tensor x, float eps);"

rmsnorm_ext = load_inline(
    name="kb_rmsnorm_correct",
    cpp_sources=rmsnorm_cpp_source,
    cuda_sources=rmsnorm_cuda_source,
    functions=["rmsnorm_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        return rmsnorm_ext.rmsnorm_cuda(x.contiguous(), self.eps)
