import torch
import torch.nn as nn

batch_size = 16
dim1 = 256
dim2 = 32
reduce_dim = 1


class Model(nn.Module):
    """Sums over one dimension, keeping it (size 1) in the output."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    x = torch.randn(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return [reduce_dim]
