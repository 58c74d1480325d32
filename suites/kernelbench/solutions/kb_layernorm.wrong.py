"""kb_layernorm, wrong: wrong normalisation constant: the sum of squares is divided by the block size
(256), not the row length (512), so the variance comes out doubled.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

layernorm_cuda_source = r"""
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

__global__ void layernorm_kernel(const float* x, const float* gamma, const float* beta, float* out,
                                 int cols, float eps) {
    extern __shared__ float sdata[];
    int row = blockIdx.x;
    int tid = threadIdx.x;
    const float* xr = x + (size_t)row * cols;
    float* yr = out + (size_t)row * cols;

    float s = 0.0f;
    for (int j = tid; j < cols; j += blockDim.x) {
        s += xr[j];
    }
    float mean = block_sum(s, sdata) / cols;

    float sq = 0.0f;
    for (int j = tid; j < cols; j += blockDim.x) {
        float d = xr[j] - mean;
        sq += d * d;
    }
    float var = block_sum(sq, sdata) / blockDim.x;
    float rstd = rsqrtf(var + eps);

    for (int j = tid; j < cols; j += blockDim.x) {
        yr[j] = (xr[j] - mean) * rstd * gamma[j] + beta[j];
    }
}

torch::Tensor layernorm_cuda(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, float eps) {
    int cols = x.size(-1);
    int rows = x.numel() / cols;
    auto out = torch::empty_like(x);
    const int threads = 256;
    layernorm_kernel<<<rows, threads, threads * sizeof(float)>>>(x.data_ptr<float>(), gamma.data_ptr<float>(),
                                                                 beta.data_ptr<float>(), out.data_ptr<float>(),
                                                                 cols, eps);
    return out;
}
"""

layernorm_cpp_source = "torch::Tensor layernorm_cuda(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, float eps);"

layernorm_ext = load_inline(
    name="kb_layernorm_wrong",
    cpp_sources=layernorm_cpp_source,
    cuda_sources=layernorm_cuda_source,
    functions=["layernorm_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.ln = nn.LayerNorm(dim)  # holds the same weight, bias and eps as the reference's

    def forward(self, x):
        return layernorm_ext.layernorm_cuda(x.contiguous(), self.ln.weight.contiguous(), self.ln.bias.contiguous(),
                                  self.ln.eps)
