"""The aten handlers of amin, the full min/max, argmax/argmin (with a dim, keepdim, and
over the flattened tensor) and `max(x, dim)` / `min(x, dim)` (values and indices), run
with the torch interpreter against PyTorch: values in float64, indices exactly (ties take
the first index, as in PyTorch)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from deplodock.frontend.capture import capture_program, to_numpy
from tests.frontend.capturing import Fn, capture_and_compare


def _randn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape))).to(dtype)


def _ties(*shape: int) -> torch.Tensor:
    """Few distinct values (-1, 0, 1), so most rows hold their extreme value more than once."""
    return torch.randint(-1, 2, shape, generator=torch.Generator().manual_seed(7)).float()


def _torch_ops(ir) -> list[str]:
    return [op.name for op in ir.walk() if op.name.startswith("torch.")]


CASES = {
    "amin": (lambda x: x.amin(dim=(0, 2)), [_randn(3, 4, 5)], ["torch.amin"]),
    "amin_keepdim": (lambda x: torch.amin(x, -1, keepdim=True), [_randn(3, 4)], ["torch.amin"]),
    "min_all": (torch.min, [_randn(3, 4)], ["torch.amin"]),
    "max_all_int": (torch.max, [torch.arange(-6, 6).reshape(3, 4)], ["torch.amax"]),
    "argmax": (lambda x: x.argmax(1), [_randn(3, 7, 2)], ["torch.argmax"]),
    "argmax_keepdim": (lambda x: x.argmax(-1, keepdim=True), [_randn(3, 7)], ["torch.argmax"]),
    "argmin_ties": (lambda x: x.argmin(1), [_ties(6, 9)], ["torch.argmin"]),
    "argmax_ties": (lambda x: x.argmax(0), [_ties(9, 6)], ["torch.argmax"]),
    "argmax_flat": (torch.argmax, [_randn(3, 7)], ["torch.reshape", "torch.argmax"]),
    "argmin_flat_keepdim": (
        lambda x: x.argmin(keepdim=True),
        [_randn(3, 7)],
        ["torch.reshape", "torch.argmin", "torch.reshape"],
    ),
    "argmax_1d": (torch.argmax, [_randn(11)], ["torch.argmax"]),
    "argmax_int": (lambda x: x.argmax(1), [torch.arange(12).reshape(3, 4) % 5], ["torch.argmax"]),
    "max_dim_values": (lambda x: torch.max(x, 1).values, [_randn(3, 7, 2)], ["torch.amax"]),
    "min_dim_indices": (lambda x: x.min(-1, keepdim=True)[1], [_ties(6, 9)], ["torch.argmin"]),
    "argmax_bf16": (lambda x: x.argmax(1), [_randn(4, 9, dtype=torch.bfloat16)], ["torch.argmax"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_op_imports_and_matches_pytorch(name, run_torch, rel_err):
    fn, inputs, expected_ops = CASES[name]
    ir = capture_and_compare(fn, inputs, run_torch, rel_err, tolerance=0.0)
    assert _torch_ops(ir) == expected_ops


def test_max_with_a_dim_gives_values_and_indices(run_torch):
    """`torch.max(x, dim)` is (values, indices): one `amax` and one `argmax`."""
    x = _ties(5, 6)
    ir, params = capture_program(Fn(lambda x: tuple(torch.max(x, 0))), [x])
    assert _torch_ops(ir) == ["torch.amax", "torch.argmax"]
    values, indices = run_torch(ir, [to_numpy(x), *params])
    expected = torch.max(x, 0)
    np.testing.assert_array_equal(values, expected.values.numpy())
    np.testing.assert_array_equal(indices, expected.indices.numpy())


def test_broadcast_tensors_are_expands(run_torch):
    a, b = _randn(3, 1), _randn(4)
    ir, params = capture_program(Fn(lambda a, b: torch.broadcast_tensors(a, b)), [a, b])
    assert _torch_ops(ir) == ["torch.expand", "torch.expand"]
    outs = run_torch(ir, [to_numpy(a), to_numpy(b), *params])
    for out, ref in zip(outs, torch.broadcast_tensors(a, b), strict=True):
        np.testing.assert_array_equal(out, ref.numpy())
