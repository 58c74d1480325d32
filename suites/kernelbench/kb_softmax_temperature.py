import torch
import torch.nn as nn

batch_size = 8
dim = 512
temperature = 2.0


class Model(nn.Module):
    """Softmax of x / temperature over the last dimension."""

    def __init__(self, temperature: float):
        super().__init__()
        self.temperature = temperature

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x / self.temperature, dim=-1)


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return [temperature]
