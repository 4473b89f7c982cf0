"""Small vision models through `deplodock.compile` on the CPU (the kernel-level program,
interpreted), against eager PyTorch in float64: a conv net (two convs, batch norm, ReLU,
max pool, linear) and a ResNet basic block, both in eval() with trained-looking weights
and batch-norm statistics."""

from __future__ import annotations

import copy

import torch
from torch import nn

import deplodock
from deplodock.frontend.expression import randomize_parameters


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 8, 3, stride=2, padding=1),
            nn.ReLU(),
        )
        self.head = nn.Linear(8 * 3 * 3, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


class BasicBlock(nn.Module):
    """ResNet's basic block with a strided 1x1 projection on the shortcut."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


def _rel_err(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return float((actual.double() - expected).abs().max() / expected.abs().max())


def _check(model: nn.Module, x: torch.Tensor) -> None:
    model = randomize_parameters(model, seed=1).eval()
    compiled = deplodock.compile(model, (x,))
    with torch.no_grad():
        expected = copy.deepcopy(model).double()(x.double())  # `compiled` reads `model`
    assert _rel_err(compiled(x), expected) <= 1e-5


def test_conv_net_matches_eager() -> None:
    _check(ConvNet(), torch.randn(2, 3, 12, 12, generator=torch.Generator().manual_seed(0)))


def test_resnet_basic_block_matches_eager() -> None:
    _check(BasicBlock(4, 8, 2), torch.randn(2, 4, 9, 9, generator=torch.Generator().manual_seed(0)))
