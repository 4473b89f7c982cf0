"""deplodock's own decompositions (`aten/decompositions.py`, `OWN_DECOMPOSITIONS`): ops
that PyTorch decomposes only into prims or not at all, checked through `deplodock.compile`
on the CPU against eager float64, indices exactly."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import deplodock


class _Fn(nn.Module):
    def __init__(self, fn: Callable[..., object]):
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> object:
        return self.fn(x)


def _check(fn: Callable[..., object], x: torch.Tensor) -> None:
    outputs = deplodock.compile(_Fn(fn), (x,))(x)
    expected = fn(x.double())
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for out, ref in zip(outputs, expected, strict=True):
        assert out.shape == ref.shape
        if ref.is_floating_point():
            assert float((out.double() - ref).abs().max() / ref.abs().max()) <= 1e-6
        else:
            assert torch.equal(out, ref)


def _x(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize(("dim", "size", "step"), [(2, 3, 1), (-1, 2, 3)])
def test_tensor_unfold_slides_windows(dim: int, size: int, step: int) -> None:
    _check(lambda x: x.unfold(dim, size, step) * 2, _x(2, 3, 7, 8))


@pytest.mark.parametrize("size", [(4, 3), (2, 2)])  # uneven (overlapping) and even windows
def test_adaptive_max_pool2d_values_and_indices(size: tuple[int, int]) -> None:
    _check(lambda x: F.adaptive_max_pool2d(x, size, return_indices=True), _x(2, 3, 6, 7))


def test_adaptive_max_pool1d() -> None:
    _check(lambda x: F.adaptive_max_pool1d(x, 4), _x(2, 3, 10))
