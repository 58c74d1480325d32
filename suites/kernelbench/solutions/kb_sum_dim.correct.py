"""kb_sum_dim, correct: one thread per output sums the reduced dimension of an (outer, reduce, inner)
view.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

sum_dim_cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void sum_dim_kernel(const float* x, float* out, int outer, int reduce, int inner) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < outer * inner) {
        int o = idx / inner;
        int i = idx % inner;
        float acc = 0.0f;
        for (int k = 0; k < reduce; ++k) {
            acc += x[(o * reduce + k) * inner + i];
        }
        out[idx] = acc;
    }
}

torch::Tensor sum_dim_cuda(torch::Tensor x, int dim) {
    int outer = 1, inner = 1;
    for (int d = 0; d < dim; ++d) outer *= x.size(d);
    for (int d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
    int reduce = x.size(dim);
    auto sizes = x.sizes().vec();
    sizes[dim] = 1;
    auto out = torch::empty(sizes, x.options());
    const int threads = 256;
    const int blocks = (outer * inner + threads - 1) / threads;
    sum_dim_kernel<<<blocks, threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), outer, reduce, inner);
    return out;
}
"""

sum_dim_cpp_source = "torch::Tensor sum_dim_cuda(torch::Tensor x, int dim);"

sum_dim_ext = load_inline(
    name="kb_sum_dim_correct",
    cpp_sources=sum_dim_cpp_source,
    cuda_sources=sum_dim_cuda_source,
    functions=["sum_dim_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return sum_dim_ext.sum_dim_cuda(x.contiguous(), self.dim % x.dim())
