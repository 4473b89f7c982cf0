"""erf, clamp and hardswish beyond the random-input check of test_ops_all_levels.py.

That check compares every level with PyTorch on one random input per op; here we make sure
the inputs reach every piece of the piecewise ops (both clamp bounds, hardswish's three
pieces), and that NaN comes out where PyTorch puts it at all six levels, the emitted CUDA C
(run on the CPU) included: `clamp(NaN) = NaN`, as in PyTorch, even though C's `fmaxf`
would drop it.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from deplodock.backend.cpu_runner import run_on_cpu
from deplodock.driver import float64_outputs, max_relative_error
from deplodock.passes.pipelines import STAGES
from tests.e2e.test_ops_all_levels import TOLERANCE, captured, lowered

NEW_OPS = ("erf", "clamp", "clamp_min", "clamp_max", "relu6", "hardswish")


def _reference(name: str) -> np.ndarray:
    (expected,) = captured(name)[2]
    return np.asarray(expected)


@pytest.mark.parametrize(
    ("name", "low", "high"),
    [("clamp", -0.5, 0.5), ("clamp_min", -0.25, None), ("clamp_max", None, 0.75)],
)
def test_clamp_inputs_reach_each_bound_and_the_middle(name: str, low, high) -> None:
    y = _reference(name)
    inside = np.ones(y.shape, dtype=bool)
    for bound in (low, high):
        if bound is not None:
            assert np.any(y == bound), f"{name}: no input was clamped to {bound}"
            inside &= y != bound
    assert np.any(inside), f"{name}: every input was clamped"


def test_hardswish_inputs_reach_its_three_pieces() -> None:
    """Read off the output: 0 only for x <= -3 (or x = 0), negative only on the parabola
    (-3 < x < 0), >= 3 only for x >= 3 (the parabola stays below 3)."""
    y = _reference("hardswish")
    assert np.any(y == 0), "no input <= -3"
    assert np.any(y < 0), "no input on the parabola (-3, 0)"
    assert np.any(y >= 3), "no input >= 3"


def _with_nans(x: np.ndarray) -> np.ndarray:
    """`x` with every 7th element NaN (rows and columns both get some)."""
    y = np.array(x, copy=True)
    y.reshape(-1)[::7] = np.nan
    return y


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("name", NEW_OPS)
def test_nan_propagates_like_pytorch(name: str, stage: str) -> None:
    program, arguments, _ = captured(name)
    (x,) = arguments
    inputs = [_with_nans(x)]
    (expected,) = (
        t.numpy() for t in float64_outputs(program.torch_module, [torch.from_numpy(inputs[0])])
    )
    (actual,) = run_on_cpu(lowered(name, stage), inputs)
    nan = np.isnan(expected)
    assert nan.any(), "the reference has no NaN: the check would be vacuous"
    np.testing.assert_array_equal(np.isnan(actual), nan, err_msg=f"{name} at {stage}: NaNs")
    error = max_relative_error(np.where(nan, 0, actual), np.where(nan, 0, expected))
    assert error <= TOLERANCE, f"{name} at {stage}: rel. error {error:.3e} off the NaNs"
