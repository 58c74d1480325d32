import torch
import torch.nn as nn

batch_size = 8
m = 32
k = 48
n = 32


class Model(nn.Module):
    """Batched matrix product: (batch, m, k) @ (batch, k, n)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.bmm(A, B)


def get_inputs():
    A = torch.randn(batch_size, m, k)
    B = torch.randn(batch_size, k, n)
    return [A, B]


def get_init_inputs():
    return []
