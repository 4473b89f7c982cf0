"""The aten handlers of the piecewise activations (leaky_relu, elu, selu, celu, softplus,
hardsigmoid, mish, logsigmoid), maximum/minimum and clamp with tensor bounds, triu/tril and
the transposes `x.T` / `x.mT`.

Each case is captured, checked for the torch ops it maps to, and run with the torch
interpreter against PyTorch in float64. Inputs are scaled so that every piece of each
function is reached (the kinks of hardsigmoid are at +-3, softplus switches to `x` where
`beta * x > threshold`).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from deplodock.frontend.capture import UnsupportedOpError, capture, capture_program, to_numpy
from tests.frontend.capturing import Fn, capture_and_compare


def _randn(*shape: int, scale: float = 1.0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(sum(shape))
    return (torch.randn(*shape, generator=g) * scale).to(dtype)


def _ints(*shape: int) -> torch.Tensor:
    return torch.randint(-6, 7, shape, generator=torch.Generator().manual_seed(len(shape)))


def _torch_ops(ir) -> list[str]:
    return [op.name for op in ir.walk() if op.name.startswith("torch.")]


X = _randn(4, 8, scale=4.0)
BF16 = _randn(4, 8, scale=4.0, dtype=torch.bfloat16)

CASES = {
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), [X], ["torch.leaky_relu"]),
    "leaky_relu_default": (F.leaky_relu, [X], ["torch.leaky_relu"]),
    "elu": (lambda x: F.elu(x, alpha=0.7), [X], ["torch.elu"]),
    "selu": (F.selu, [X], ["torch.elu"]),
    "celu": (lambda x: F.celu(x, alpha=0.5), [X], ["torch.elu"]),
    "softplus": (F.softplus, [_randn(4, 8, scale=12.0)], ["torch.softplus"]),
    "softplus_beta_threshold": (
        lambda x: F.softplus(x, beta=2.0, threshold=3.0),
        [X],
        ["torch.softplus"],
    ),
    "hardsigmoid": (F.hardsigmoid, [X], ["torch.hardsigmoid"]),
    "mish": (F.mish, [X], ["torch.mish"]),
    "logsigmoid": (F.logsigmoid, [_randn(4, 8, scale=10.0)], ["torch.log_sigmoid"]),
    "maximum": (torch.maximum, [_randn(4, 8), _randn(8)], ["torch.maximum"]),
    "minimum_int": (torch.minimum, [_ints(9), _ints(1, 9)], ["torch.minimum"]),
    "clamp_tensor": (
        lambda x, lo, hi: torch.clamp(x, lo, hi),
        [_randn(4, 8), _randn(8) - 0.5, _randn(4, 1) + 0.5],
        ["torch.maximum", "torch.minimum"],
    ),
    "clamp_min_tensor": (
        lambda x, lo: x.clamp_min(lo),
        [_randn(4, 8), _randn(4, 8)],
        ["torch.maximum"],
    ),
    "clamp_max_tensor": (
        lambda x, hi: torch.clamp(x, max=hi),
        [_randn(4, 8), _randn(8)],
        ["torch.minimum"],
    ),
    "clamp_int_tensor_float_bound": (
        lambda i, lo: i.clamp(min=lo),
        [_ints(9), _randn(9)],
        ["torch.cast", "torch.maximum"],
    ),
    "triu": (lambda x: torch.triu(x, 1), [_randn(2, 5, 7)], ["torch.triu"]),
    "triu_default": (torch.triu, [_randn(5, 7)], ["torch.triu"]),
    "tril": (lambda x: x.tril(-2), [_randn(6, 4)], ["torch.tril"]),
    "tril_int": (lambda x: x.tril(), [_ints(4, 4)], ["torch.tril"]),
    "numpy_T": (lambda x: x.T, [_randn(5, 7)], ["torch.permute"]),
    "mT": (lambda x: x.mT, [_randn(2, 5, 7)], ["torch.transpose"]),
    "mH": (lambda x: x.mH, [_randn(5, 7)], ["torch.transpose"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_op_imports_and_matches_pytorch(name, run_torch, rel_err):
    fn, inputs, expected_ops = CASES[name]
    ir = capture_and_compare(fn, inputs, run_torch, rel_err, tolerance=1e-6)
    assert _torch_ops(ir) == expected_ops


BF16_CASES = {
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2),
    "elu": F.elu,
    "selu": F.selu,
    "softplus": lambda x: F.softplus(x, 2.0, 3.0),
    "hardsigmoid": F.hardsigmoid,
    "mish": F.mish,
    "logsigmoid": F.logsigmoid,
    "triu": torch.triu,
}


@pytest.mark.parametrize("name", list(BF16_CASES))
def test_bf16_matches_pytorch_to_bf16_precision(name, run_torch, rel_err):
    """bf16 in, bf16 out: computed in f32 and rounded once (8 bits of mantissa)."""
    capture_and_compare(BF16_CASES[name], [BF16], run_torch, rel_err, tolerance=1e-2)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.maximum(x, -x),
        lambda x: x.clamp(min=x * 0.5),
        lambda x: F.leaky_relu(x),
        F.elu,
        F.softplus,
        F.mish,
        F.logsigmoid,
    ],
)
def test_nan_propagates_like_pytorch(fn, run_torch):
    x = torch.tensor([float("nan"), -2.0, 0.0, 2.0, 30.0, -30.0])
    ir, params = capture_program(Fn(fn), [x])
    (out,) = run_torch(ir, [to_numpy(x), *params])
    np.testing.assert_array_equal(np.isnan(out), torch.isnan(fn(x)).numpy())


def test_selu_and_celu_coefficients_are_aten_s():
    ir = str(capture(Fn(F.selu), (_randn(3),)))
    assert "alpha = 1.6732632423543772" in ir and "scale = 1.0507009873554805" in ir
    ir = str(capture(Fn(lambda x: F.celu(x, 0.25)), (_randn(3),)))
    assert "alpha = 2.500000e-01 : f64" in ir and "input_scale = 4.000000e+00 : f64" in ir


def test_nan_ignoring_fmax_is_still_unsupported():
    """`torch.fmax` ignores NaN (unlike `maximum`): refused in one line, not mis-lowered."""
    with pytest.raises(UnsupportedOpError, match=r"unsupported op aten\.fmax\.default"):
        capture(Fn(torch.fmax), (_randn(3, 5), _randn(5)))
