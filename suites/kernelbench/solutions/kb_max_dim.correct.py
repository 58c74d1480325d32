"""kb_max_dim, correct: one block per row, strided partial maxima, shared-memory tree reduction."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

row_max_cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>

__global__ void row_max_kernel(const float* x, float* out, int cols) {
    extern __shared__ float sdata[];
    int row = blockIdx.x;
    int tid = threadIdx.x;
    const float* xr = x + (size_t)row * cols;
    float m = -FLT_MAX;
    for (int j = tid; j < cols; j += blockDim.x) {
        m = fmaxf(m, xr[j]);
    }
    sdata[tid] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] = fmaxf(sdata[tid], sdata[tid + s]);
        }
        __syncthreads();
    }
    if (tid == 0) {
        out[row] = sdata[0];
    }
}

torch::Tensor row_max_cuda(torch::Tensor x) {
    int rows = x.size(0);
    int cols = x.size(1);
    auto out = torch::empty({rows}, x.options());
    const int threads = 256;
    row_max_kernel<<<rows, threads, threads * sizeof(float)>>>(x.data_ptr<float>(), out.data_ptr<float>(), cols);
    return out;
}
"""

row_max_cpp_source = "torch::Tensor row_max_cuda(torch::Tensor x);"

row_max_ext = load_inline(
    name="kb_max_dim_correct",
    cpp_sources=row_max_cpp_source,
    cuda_sources=row_max_cuda_source,
    functions=["row_max_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return row_max_ext.row_max_cuda(x.contiguous())
