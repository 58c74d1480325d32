"""kb_conv2d, wrong: the padding offset is forgotten in the input index (ih = oh + kh), shifting the
window by pad pixels.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

conv2d_cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void conv2d_kernel(const float* x, const float* w, const float* bias, float* out,
                              int batch, int in_ch, int out_ch, int height, int width,
                              int ksize, int pad, int out_h, int out_w) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < batch * out_ch * out_h * out_w) {
        int ow = idx % out_w;
        int oh = (idx / out_w) % out_h;
        int oc = (idx / (out_w * out_h)) % out_ch;
        int b = idx / (out_w * out_h * out_ch);
        float acc = bias[oc];
        for (int ic = 0; ic < in_ch; ++ic) {
            for (int kh = 0; kh < ksize; ++kh) {
                for (int kw = 0; kw < ksize; ++kw) {
                    int ih = oh + kh;
                    int iw = ow + kw;
                    if (ih >= 0 && ih < height && iw >= 0 && iw < width) {
                        acc += x[((b * in_ch + ic) * height + ih) * width + iw] *
                               w[((oc * in_ch + ic) * ksize + kh) * ksize + kw];
                    }
                }
            }
        }
        out[idx] = acc;
    }
}

torch::Tensor conv2d_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, int pad) {
    int batch = x.size(0);
    int in_ch = x.size(1);
    int height = x.size(2);
    int width = x.size(3);
    int out_ch = weight.size(0);
    int ksize = weight.size(2);
    int out_h = height + 2 * pad - ksize + 1;
    int out_w = width + 2 * pad - ksize + 1;
    auto out = torch::empty({batch, out_ch, out_h, out_w}, x.options());
    int total = batch * out_ch * out_h * out_w;
    const int threads = 256;
    const int blocks = (total + threads - 1) / threads;
    conv2d_kernel<<<blocks, threads>>>(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(),
                                       out.data_ptr<float>(), batch, in_ch, out_ch, height, width,
                                       ksize, pad, out_h, out_w);
    return out;
}
"""

conv2d_cpp_source = "torch::Tensor conv2d_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, int pad);"

conv2d_ext = load_inline(
    name="kb_conv2d_wrong",
    cpp_sources=conv2d_cpp_source,
    cuda_sources=conv2d_cuda_source,
    functions=["conv2d_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        # same parameters, created the same way as the reference's, so a seeded init matches
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x):
        return conv2d_ext.conv2d_cuda(x.contiguous(), self.conv.weight.contiguous(), self.conv.bias.contiguous(),
                                      self.conv.padding[0])
