"""kb_softmax_temperature, wrong: multiplies by the temperature instead of dividing by it."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

softmax_temp_cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>

__global__ void softmax_temp_kernel(const float* x, float* out, int rows, int cols, float inv_t) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (warp >= rows) return;  // the whole warp leaves together
    const float* xr = x + (size_t)warp * cols;
    float* yr = out + (size_t)warp * cols;

    float m = -FLT_MAX;
    for (int j = lane; j < cols; j += 32) {
        m = fmaxf(m, xr[j] * inv_t);
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, offset));
    }
    float sum = 0.0f;
    for (int j = lane; j < cols; j += 32) {
        sum += expf(xr[j] * inv_t - m);
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        sum += __shfl_xor_sync(0xffffffff, sum, offset);
    }
    for (int j = lane; j < cols; j += 32) {
        yr[j] = expf(xr[j] * inv_t - m) / sum;
    }
}

torch::Tensor softmax_temp_cuda(torch::Tensor x, float temperature) {
    int rows = x.size(0);
    int cols = x.size(1);
    auto out = torch::empty_like(x);
    const int threads = 128;  // four rows per block, one warp each
    const int blocks = (rows * 32 + threads - 1) / threads;
    float inv_t = temperature;
    softmax_temp_kernel<<<blocks, threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), rows, cols, inv_t);
    return out;
}
"""

softmax_temp_cpp_source = "torch::Tensor softmax_temp_cuda(torch::Tensor x, float temperature);"

softmax_temp_ext = load_inline(
    name="kb_softmax_temperature_wrong",
    cpp_sources=softmax_temp_cpp_source,
    cuda_sources=softmax_temp_cuda_source,
    functions=["softmax_temp_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, temperature: float):
        super().__init__()
        self.temperature = temperature

    def forward(self, x):
        return softmax_temp_ext.softmax_temp_cuda(x.contiguous(), self.temperature)
