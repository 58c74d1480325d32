"""kb_matvec, wrong: A indexed as if column-major (A[k * M + row])."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

matvec_cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void matvec_kernel(const float* A, const float* x, float* y, int M, int K) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) {
            acc += A[k * M + row] * x[k];
        }
        y[row] = acc;
    }
}

torch::Tensor matvec_cuda(torch::Tensor A, torch::Tensor x) {
    int M = A.size(0);
    int K = A.size(1);
    auto y = torch::empty({M, 1}, A.options());
    const int threads = 256;
    const int blocks = (M + threads - 1) / threads;
    matvec_kernel<<<blocks, threads>>>(A.data_ptr<float>(), x.data_ptr<float>(), y.data_ptr<float>(), M, K);
    return y;
}
"""

matvec_cpp_source = "torch::Tensor matvec_cuda(torch::Tensor A, torch::Tensor x);"

matvec_ext = load_inline(
    name="kb_matvec_wrong",
    cpp_sources=matvec_cpp_source,
    cuda_sources=matvec_cuda_source,
    functions=["matvec_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return matvec_ext.matvec_cuda(A.contiguous(), B.contiguous())
