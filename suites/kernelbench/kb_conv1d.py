import torch
import torch.nn as nn

batch_size = 8
in_channels = 4
out_channels = 8
kernel_size = 3
length = 128


class Model(nn.Module):
    """1-D convolution (stride 1, no padding, with bias)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    x = torch.randn(batch_size, in_channels, length)
    return [x]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
