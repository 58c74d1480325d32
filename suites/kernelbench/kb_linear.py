import torch
import torch.nn as nn

batch_size = 16
in_features = 128
out_features = 64


class Model(nn.Module):
    """A fully connected layer: x @ W^T + b."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


def get_inputs():
    x = torch.randn(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features]
