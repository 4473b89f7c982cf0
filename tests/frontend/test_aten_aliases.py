"""Issue 42's user-level programs: the ops a new user reached for and found refused, and the
alias and overload spellings that must land on the lowering of their canonical spelling.

The named ops run through `deplodock.compile` on the CPU against eager PyTorch in float64.
An alias is captured next to its canonical spelling and the two torch-level programs must be
the same text: one lowering, not two that happen to agree.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import deplodock
from deplodock.frontend.capture import capture, to_numpy
from deplodock.numerics import FP32_TOLERANCE, max_relative_error
from tests.frontend.capturing import Fn


def _randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed + sum(shape)))


A, B = _randn(4, 6), _randn(4, 6, seed=1)
IMG, VOL = _randn(2, 3, 7, 9), _randn(1, 2, 5, 6, 7)

NAMED: dict[str, tuple[Callable[..., torch.Tensor], list[torch.Tensor]]] = {
    "logsumexp": (lambda x: torch.logsumexp(x, dim=1), [A]),
    "min_of_two": (lambda x, y: torch.min(x, y), [A, B]),
    "max_of_two": (lambda x, y: torch.max(x, y), [A, B]),
    "multiply": (lambda x, y: torch.multiply(x, y), [A, B]),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (3, 4)), [IMG]),
    "adaptive_avg_pool3d": (lambda x: F.adaptive_avg_pool3d(x, (2, 4, 3)), [VOL]),
    "flip": (lambda x: torch.flip(x, [0, 1]), [A]),
    "narrow": (lambda x: torch.narrow(x, 1, 2, 3), [A]),
    "cumprod": (lambda x: torch.cumprod(x, 1), [A]),
}


@pytest.mark.parametrize("name", list(NAMED))
def test_named_op_compiles_and_matches_eager(name: str) -> None:
    fn, inputs = NAMED[name]
    out = deplodock.compile(Fn(fn), inputs)(*inputs)
    with torch.no_grad():
        ref = fn(*(x.double() for x in inputs))
    assert tuple(out.shape) == tuple(ref.shape)
    assert max_relative_error(to_numpy(out), to_numpy(ref)) <= FP32_TOLERANCE


#: alias -> (the alias, its canonical spelling), both called on `(A, B)`: each pair must
#: capture to the same program.
ALIASES: dict[str, tuple[Callable[..., torch.Tensor], Callable[..., torch.Tensor]]] = {
    "multiply": (torch.multiply, torch.mul),
    "subtract": (torch.subtract, torch.sub),
    "true_divide": (torch.true_divide, torch.div),
    "divide": (torch.divide, torch.div),
    "clip": (lambda x, y: torch.clip(x, -0.5, 0.5) + y, lambda x, y: torch.clamp(x, -0.5, 0.5) + y),
    "absolute": (lambda x, y: torch.absolute(x) + y, lambda x, y: torch.abs(x) + y),
    "greater": (torch.greater, torch.gt),
    "less_equal": (torch.less_equal, torch.le),
    "not_equal": (torch.not_equal, torch.ne),
    "arctan2": (torch.arctan2, torch.atan2),
    "fix": (lambda x, y: torch.fix(x) * y, lambda x, y: torch.trunc(x) * y),
    "negative": (lambda x, y: torch.negative(x) + y, lambda x, y: -x + y),
    "method_mul": (lambda x, y: x.mul(y), lambda x, y: x * y),
    "mul_scalar": (lambda x, y: torch.mul(x, 2.0) + y, lambda x, y: x * 2.0 + y),
    "add_scalar_overload": (
        lambda x, y: torch.ops.aten.add.Scalar(x, 2.0) + y,
        lambda x, y: x + 2.0 + y,
    ),
    "pow_scalar_base": (
        lambda x, y: torch.ops.aten.pow.Scalar(2.0, x) + y,
        lambda x, y: torch.pow(2.0, x) + y,
    ),
    "minimum": (torch.minimum, lambda x, y: torch.min(x, y)),
    "maximum": (torch.maximum, lambda x, y: torch.max(x, y)),
}


def _program(fn: Callable[..., torch.Tensor]) -> str:
    return str(capture(Fn(fn), (A, B)))


@pytest.mark.parametrize("name", list(ALIASES))
def test_alias_lands_on_the_canonical_lowering(name: str) -> None:
    alias, canonical = ALIASES[name]
    assert _program(alias) == _program(canonical)


def test_out_variant_lands_on_the_functional_lowering() -> None:
    """`torch.add(x, y, out=buf)` on a fresh buffer: export makes it the functional op."""

    def with_out(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        buf = torch.empty_like(x)
        torch.add(x, y, out=buf)
        return buf

    assert _program(with_out) == _program(torch.add)
    np.testing.assert_allclose(
        deplodock.compile(Fn(with_out), [A, B])(A, B).numpy(), (A + B).numpy(), rtol=1e-6
    )
