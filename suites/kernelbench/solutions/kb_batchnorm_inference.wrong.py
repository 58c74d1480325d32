"""kb_batchnorm_inference, wrong: divides by var + eps instead of its square root."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

batchnorm_cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void batchnorm_kernel(const float* x, const float* mean, const float* var, const float* gamma,
                                 const float* beta, float* out, int total, int channels, int spatial, float eps) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < total) {
        int c = (idx / spatial) % channels;
        out[idx] = (x[idx] - mean[c]) / (var[c] + eps) * gamma[c] + beta[c];
    }
}

torch::Tensor batchnorm_cuda(torch::Tensor x, torch::Tensor mean, torch::Tensor var, torch::Tensor gamma,
                             torch::Tensor beta, float eps) {
    int total = x.numel();
    int channels = x.size(1);
    int spatial = x.size(2) * x.size(3);
    auto out = torch::empty_like(x);
    const int threads = 256;
    const int blocks = (total + threads - 1) / threads;
    batchnorm_kernel<<<blocks, threads>>>(x.data_ptr<float>(), mean.data_ptr<float>(), var.data_ptr<float>(),
                                          gamma.data_ptr<float>(), beta.data_ptr<float>(), out.data_ptr<float>(),
                                          total, channels, spatial, eps);
    return out;
}
"""

batchnorm_cpp_source = "torch::Tensor batchnorm_cuda(torch::Tensor x, torch::Tensor mean, torch::Tensor var, torch::Tensor gamma, torch::Tensor beta, float eps);"

batchnorm_ext = load_inline(
    name="kb_batchnorm_inference_wrong",
    cpp_sources=batchnorm_cpp_source,
    cuda_sources=batchnorm_cuda_source,
    functions=["batchnorm_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        # the reference's fixed statistics and affine parameters
        self.register_buffer("running_mean", torch.linspace(-1.0, 1.0, num_features))
        self.register_buffer("running_var", torch.linspace(0.5, 2.0, num_features))
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, num_features))
        self.bias = nn.Parameter(torch.linspace(-0.5, 0.5, num_features))

    def forward(self, x):
        return batchnorm_ext.batchnorm_cuda(x.contiguous(), self.running_mean, self.running_var,
                                  self.weight.contiguous(), self.bias.contiguous(), 1e-5)
