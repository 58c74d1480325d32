"""kb_sum_all, wrong: every block stores its partial sum with a plain write instead of atomicAdd, so
the result is one block's partial sum.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

sum_all_cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void sum_all_kernel(const float* x, float* out, int n) {
    __shared__ float sdata[256];
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + tid;
    sdata[tid] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] += sdata[tid + s];
        }
        __syncthreads();
    }
    if (tid == 0) {
        out[0] = sdata[0];
    }
}

torch::Tensor sum_all_cuda(torch::Tensor x) {
    int n = x.numel();
    auto out = torch::zeros({1}, x.options());
    const int threads = 256;
    const int blocks = (n + threads - 1) / threads;
    sum_all_kernel<<<blocks, threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    return out.squeeze(0);
}
"""

sum_all_cpp_source = "torch::Tensor sum_all_cuda(torch::Tensor x);"

sum_all_ext = load_inline(
    name="kb_sum_all_wrong",
    cpp_sources=sum_all_cpp_source,
    cuda_sources=sum_all_cuda_source,
    functions=["sum_all_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return sum_all_ext.sum_all_cuda(x.contiguous())
