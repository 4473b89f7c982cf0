"""Fusion where whole nets need it (issue 38): a padded convolution with its batch norm and
activation is one kernel, and a norm's statistics are one kernel, not one per reduction.

Each case is compiled for the CPU (the kernel level), its launches are counted in the
lowered program, and its result is checked against the module in float64, on random
weights and batch-norm statistics, so a fusion that drops a term fails here too.
"""

from __future__ import annotations

import copy
import re

import pytest
import torch
from torch import nn

import deplodock
from deplodock.frontend.expression import randomize_parameters
from tests.nets.zoo import relative_error


def _launches(module: nn.Module, x: torch.Tensor) -> list[str]:
    """The kernels the compiled program launches, in order, after checking its result."""
    model = randomize_parameters(module, seed=3).eval()
    compiled = deplodock.compile(model, (x,))
    actual = compiled(x)
    with torch.no_grad():
        expected = copy.deepcopy(model).double()(x.double())
    assert relative_error(actual, expected) <= 1e-5
    return re.findall(r"kernel\.launch @(\w+)", compiled.ir)


def _x(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("padding", [0, 1, 2])
def test_conv_bn_relu_is_one_kernel(padding: int) -> None:
    """The padding fuses into the convolution's loads (no padded copy), and the batch norm
    and the ReLU into its epilogue."""
    net = nn.Sequential(nn.Conv2d(4, 8, 3, padding=padding), nn.BatchNorm2d(8), nn.ReLU(True))
    assert len(_launches(net, _x(2, 4, 9, 9))) == 1


def test_max_pool_padding_fuses() -> None:
    """A pool's -inf padding is a pad like a convolution's: one kernel."""
    assert len(_launches(nn.MaxPool2d(3, 2, padding=1), _x(2, 3, 9, 9))) == 1


def test_group_norm_statistics_are_one_kernel() -> None:
    """Mean, its correction and variance of each group: one statistics kernel, then the
    normalisation (whose loops run over channels, four per group here)."""
    launches = _launches(nn.GroupNorm(2, 8), _x(2, 8, 4, 4))
    assert len(launches) == 2, launches


def test_layer_norm_is_one_kernel() -> None:
    """A row fits a block: statistics and normalisation are one kernel."""
    assert len(_launches(nn.LayerNorm(32), _x(4, 6, 32))) == 1
