"""What several frontend tests do: wrap a function as a module, capture it, run the torch
level and compare with PyTorch in float64."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import nn
from xdsl.dialects.builtin import ModuleOp

from deplodock.frontend.capture import capture_program, to_numpy

RunTorch = Callable[[ModuleOp, Sequence[np.ndarray]], list[np.ndarray]]
RelErr = Callable[[np.ndarray, np.ndarray], float]


class Fn(nn.Module):
    """Wraps a function of the inputs as a module (no parameters)."""

    def __init__(self, fn: Callable[..., torch.Tensor]):
        super().__init__()
        self.fn = fn

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        return self.fn(*xs)


def capture_and_compare(
    fn: Callable[..., torch.Tensor],
    inputs: Sequence[torch.Tensor],
    run_torch: RunTorch,
    rel_err: RelErr,
    tolerance: float = 1e-5,
) -> ModuleOp:
    """Captures `fn`, runs the torch level and checks it against PyTorch in float64 (exact
    for integer results); returns the captured module."""
    ir, params = capture_program(Fn(fn), inputs)
    (out,) = run_torch(ir, [to_numpy(x) for x in inputs] + params)
    with torch.no_grad():
        ref = fn(*(x.double() if x.is_floating_point() else x for x in inputs))
    if ref.is_floating_point():
        assert rel_err(out, to_numpy(ref)) <= tolerance
    else:
        assert out.dtype == ref.numpy().dtype
        np.testing.assert_array_equal(out, ref.numpy())
    return ir
