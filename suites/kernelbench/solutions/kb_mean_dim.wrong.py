"""kb_mean_dim, wrong: wrong normalisation constant: the row sum is divided by the block size, not the
row length.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

row_mean_cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void row_mean_kernel(const float* x, float* out, int cols) {
    extern __shared__ float sdata[];
    int row = blockIdx.x;
    int tid = threadIdx.x;
    const float* xr = x + (size_t)row * cols;
    float s = 0.0f;
    for (int j = tid; j < cols; j += blockDim.x) {
        s += xr[j];
    }
    sdata[tid] = s;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (tid < stride) {
            sdata[tid] += sdata[tid + stride];
        }
        __syncthreads();
    }
    if (tid == 0) {
        out[row] = sdata[0] / (float)blockDim.x;
    }
}

torch::Tensor row_mean_cuda(torch::Tensor x) {
    int rows = x.size(0);
    int cols = x.size(1);
    auto out = torch::empty({rows}, x.options());
    const int threads = 256;
    row_mean_kernel<<<rows, threads, threads * sizeof(float)>>>(x.data_ptr<float>(), out.data_ptr<float>(), cols);
    return out;
}
"""

row_mean_cpp_source = "torch::Tensor row_mean_cuda(torch::Tensor x);"

row_mean_ext = load_inline(
    name="kb_mean_dim_wrong",
    cpp_sources=row_mean_cpp_source,
    cuda_sources=row_mean_cuda_source,
    functions=["row_mean_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return row_mean_ext.row_mean_cuda(x.contiguous())
