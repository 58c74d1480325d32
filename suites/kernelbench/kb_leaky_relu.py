import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
dim = 1024
negative_slope = 0.2


class Model(nn.Module):
    """Applies LeakyReLU with a fixed negative slope elementwise."""

    def __init__(self, negative_slope: float):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, negative_slope=self.negative_slope)


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return [negative_slope]
