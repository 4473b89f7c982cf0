"""argmax / argmin beyond the random-input check of test_ops_all_levels.py: the inputs do
have ties (PyTorch returns the first index), and a NaN wins (PyTorch returns the first
NaN's index) at all six levels, the emitted CUDA C (run on the CPU) included, whose `fmaxf`
would drop the NaN from the max."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from deplodock.backend.cpu_runner import run_on_cpu
from deplodock.driver import float64_outputs
from deplodock.passes.pipelines import STAGES
from tests.e2e.test_ops_all_levels import captured, lowered


def test_rows_have_ties() -> None:
    """In most rows several elements hold the row's extreme value (so the first-index rule matters):
    `clamp(-0.5, 0.5)` of normal values, and the integer parts of `0.7 * x`."""
    (x,) = captured("argmax_ties")[1]
    clamped = x.clip(-0.5, 0.5)
    assert np.all((clamped == clamped.max(1, keepdims=True)).sum(1) > 1)
    (x,) = captured("argmin_int_ties")[1]
    ints = (x * np.float32(0.7)).astype(np.int64)
    assert np.mean((ints == ints.min(1, keepdims=True)).sum(1) > 1) >= 0.5


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("name", ["argmax", "argmin", "argmax_flat"])
def test_the_first_nan_wins_like_pytorch(name: str, stage: str) -> None:
    program, arguments, _ = captured(name)
    x = np.array(arguments[0], copy=True)
    x.reshape(-1)[5::37] = np.nan
    (expected,) = (t.numpy() for t in float64_outputs(program.torch_module, [torch.from_numpy(x)]))
    (actual,) = run_on_cpu(lowered(name, stage), [x])
    np.testing.assert_array_equal(actual, expected, err_msg=f"{name} at {stage}")
