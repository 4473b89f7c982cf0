"""The piecewise activations and maximum/minimum beyond the random-input check of
test_ops_all_levels.py: the inputs reach both sides of each kink, and NaN comes out where
PyTorch puts it at all six levels, the emitted CUDA C (run on the CPU) included."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from deplodock.backend.cpu_runner import run_on_cpu
from deplodock.driver import float64_outputs, max_relative_error
from deplodock.passes.pipelines import STAGES
from tests.e2e.test_ops_all_levels import TOLERANCE, captured, lowered

#: op -> its kinks, in units of the expression's `torch.randn` argument (before the `* 3`
#: or `* 4` of the expression in `OPS`)
KINKS: dict[str, tuple[float, ...]] = {
    "leaky_relu": (0.0,),
    "elu": (0.0,),
    "selu": (0.0,),
    "celu": (0.0,),
    "hardsigmoid": (-3 / 4, 3 / 4),
    "softplus": (1.5 / 4,),  # beta = 2, threshold = 3: beta * x > 3
    "hardtanh": (-1.5 / 2, 0.5 / 2),
}


@pytest.mark.parametrize("name", list(KINKS))
def test_inputs_reach_every_piece(name: str) -> None:
    (x,) = captured(name)[1]
    edges = [-np.inf, *KINKS[name], np.inf]
    for low, high in itertools.pairwise(edges):
        assert np.any((x > low) & (x < high)), f"{name}: no input in ({low}, {high})"


def _with_nans(x: np.ndarray, offset: int) -> np.ndarray:
    """`x` with every 7th element NaN, from `offset` (two operands get different NaNs)."""
    y = np.array(x, copy=True)
    y.reshape(-1)[offset::7] = np.nan
    return y


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("name", ["leaky_relu", "elu", "softplus", "mish", "maximum", "minimum"])
def test_nan_propagates_like_pytorch(name: str, stage: str) -> None:
    program, arguments, _ = captured(name)
    inputs = [_with_nans(x, i * 3) for i, x in enumerate(arguments)]
    (expected,) = (
        t.numpy()
        for t in float64_outputs(program.torch_module, [torch.from_numpy(x) for x in inputs])
    )
    (actual,) = run_on_cpu(lowered(name, stage), inputs)
    nan = np.isnan(expected)
    assert nan.any(), "the reference has no NaN: the check would be vacuous"
    np.testing.assert_array_equal(np.isnan(actual), nan, err_msg=f"{name} at {stage}: NaNs")
    error = max_relative_error(np.where(nan, 0, actual), np.where(nan, 0, expected))
    assert error <= TOLERANCE, f"{name} at {stage}: rel. error {error:.3e} off the NaNs"
