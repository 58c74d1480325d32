"""kb_conv1d, correct: direct convolution, one thread per output element (cross-correlation, as
PyTorch).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

conv1d_cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void conv1d_kernel(const float* x, const float* w, const float* bias, float* out,
                              int batch, int in_ch, int out_ch, int length, int ksize, int out_len) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < batch * out_ch * out_len) {
        int ol = idx % out_len;
        int oc = (idx / out_len) % out_ch;
        int b = idx / (out_len * out_ch);
        float acc = bias[oc];
        for (int ic = 0; ic < in_ch; ++ic) {
            for (int k = 0; k < ksize; ++k) {
                acc += x[(b * in_ch + ic) * length + ol + k] * w[(oc * in_ch + ic) * ksize + k];
            }
        }
        out[idx] = acc;
    }
}

torch::Tensor conv1d_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    int batch = x.size(0);
    int in_ch = x.size(1);
    int length = x.size(2);
    int out_ch = weight.size(0);
    int ksize = weight.size(2);
    int out_len = length - ksize + 1;
    auto out = torch::empty({batch, out_ch, out_len}, x.options());
    int total = batch * out_ch * out_len;
    const int threads = 256;
    const int blocks = (total + threads - 1) / threads;
    conv1d_kernel<<<blocks, threads>>>(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(),
                                       out.data_ptr<float>(), batch, in_ch, out_ch, length, ksize, out_len);
    return out;
}
"""

conv1d_cpp_source = "torch::Tensor conv1d_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

conv1d_ext = load_inline(
    name="kb_conv1d_correct",
    cpp_sources=conv1d_cpp_source,
    cuda_sources=conv1d_cuda_source,
    functions=["conv1d_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        # same parameters, created the same way as the reference's, so a seeded init matches
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        return conv1d_ext.conv1d_cuda(x.contiguous(), self.conv.weight.contiguous(), self.conv.bias.contiguous())
