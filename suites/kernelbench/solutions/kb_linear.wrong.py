"""kb_linear, wrong: the weight is read untransposed (W[k][j] of an (in, out) layout it does not have)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

linear_cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void linear_kernel(const float* x, const float* w, const float* bias, float* out,
                              int batch, int in_features, int out_features) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < batch * out_features) {
        int b = idx / out_features;
        int j = idx % out_features;
        float acc = bias[j];
        for (int k = 0; k < in_features; ++k) {
            acc += x[b * in_features + k] * w[k * out_features + j];
        }
        out[idx] = acc;
    }
}

torch::Tensor linear_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    int batch = x.size(0);
    int in_features = x.size(1);
    int out_features = weight.size(0);
    auto out = torch::empty({batch, out_features}, x.options());
    const int threads = 256;
    const int blocks = (batch * out_features + threads - 1) / threads;
    linear_kernel<<<blocks, threads>>>(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(),
                                       out.data_ptr<float>(), batch, in_features, out_features);
    return out;
}
"""

linear_cpp_source = "torch::Tensor linear_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

linear_ext = load_inline(
    name="kb_linear_wrong",
    cpp_sources=linear_cpp_source,
    cuda_sources=linear_cuda_source,
    functions=["linear_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        # same parameters, created the same way as the reference's, so a seeded init matches
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return linear_ext.linear_cuda(x.contiguous(), self.linear.weight.contiguous(), self.linear.bias.contiguous())
