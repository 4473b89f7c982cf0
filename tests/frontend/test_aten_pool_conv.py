"""Pooling and convolution (`deplodock/frontend/aten/composite/windows.py`): `torch.window` plus a
reduction (max / avg pooling) or a batched matmul per group (convolution), captured and run
with the torch interpreter against PyTorch in float64. Sizes are odd and strides do not
divide them; padding (ints, 'valid', and 'same' with even kernels, its odd extra on the high
side), dilation, `ceil_mode`, `count_include_pad`, groups (depthwise included), transposed
convolutions (output_padding), unbatched inputs and the gradients of avg pooling and
convolution are covered."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from deplodock.frontend.capture import UnsupportedOpError, capture
from tests.frontend.capturing import Fn, capture_and_compare

#: one stream for the whole module, so that two inputs of one shape differ
_G = torch.Generator().manual_seed(0)


def _randn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=_G).to(dtype)


X = _randn(2, 3, 9, 8)
_avg_pool2d_backward = torch.ops.aten.avg_pool2d_backward

POOLS = {
    "max_pool2d": (lambda x: F.max_pool2d(x, 3, 2, 1), [X]),
    "max_pool2d_ceil": (lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), [X]),
    "max_pool2d_dilated": (
        lambda x: F.max_pool2d(x, (2, 3), (1, 2), (1, 0), dilation=(2, 1)),
        [X],
    ),
    "max_pool2d_unbatched": (lambda x: F.max_pool2d(x, 2), [X[0]]),
    "max_pool1d": (lambda x: F.max_pool1d(x, 3, 2, 1, ceil_mode=True), [_randn(2, 3, 10)]),
    "max_pool3d": (lambda x: F.max_pool3d(x, 2, padding=1), [_randn(1, 2, 5, 4, 3)]),
    "max_pool2d_indices": (lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True)[1], [X]),
    "max_pool2d_indices_ceil_dilated": (
        lambda x: F.max_pool2d(x, (2, 3), (2, 1), (1, 0), (2, 1), True, True)[1],
        [X],
    ),
    "max_pool2d_indices_unbatched": (lambda x: F.max_pool2d(x, 2, return_indices=True)[1], [X[0]]),
    "max_pool3d_indices": (
        lambda x: F.max_pool3d(x, 2, padding=1, return_indices=True)[1],
        [_randn(1, 2, 5, 4, 3)],
    ),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 3, 2, 1), [X]),
    "avg_pool2d_exclude_pad": (
        lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
        [X],
    ),
    "avg_pool2d_ceil": (lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), [X]),
    "avg_pool2d_ceil_exclude_pad": (
        lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
        [X],
    ),
    "avg_pool2d_divisor": (lambda x: F.avg_pool2d(x, 2, divisor_override=3), [X]),
    "avg_pool1d": (lambda x: F.avg_pool1d(x, 4, 3, 2, ceil_mode=True), [_randn(3, 11)]),
    "avg_pool3d": (lambda x: F.avg_pool3d(x, 2, 1, 1), [_randn(1, 2, 4, 3, 5)]),
    # the adjoints: `aten.avg_pool{2,3}d_backward` (Core ATen) of the output gradient
    "avg_pool2d_backward": (
        lambda g, x: _avg_pool2d_backward(g, x, [3, 3], [2, 2], [1, 1], False, True, None),
        [_randn(2, 3, 5, 4), X],
    ),
    "avg_pool2d_backward_ceil_exclude_pad": (
        lambda g, x: _avg_pool2d_backward(g, x, [3, 2], [2, 3], [1, 1], True, False, None),
        [_randn(2, 3, 5, 3), X],
    ),
    "avg_pool2d_backward_divisor_unbatched": (
        lambda g, x: _avg_pool2d_backward(g, x, [2, 2], [], [0, 0], False, True, 3),
        [_randn(3, 4, 4), X[0]],
    ),
    "avg_pool3d_backward": (
        lambda g, x: torch.ops.aten.avg_pool3d_backward(
            g, x, [2, 2, 2], [1, 2, 1], [1, 0, 1], True, False, None
        ),
        [_randn(1, 2, 5, 2, 6), _randn(1, 2, 4, 3, 5)],
    ),
}


def _conv_backward(output: int):
    """Output `output` (input, weight, bias gradient) of `aten.convolution_backward` of a
    grouped, strided, dilated convolution whose strides leave input rows unread."""

    def fn(g: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        grads = torch.ops.aten.convolution_backward(
            g, x, w, [6], [2, 3], [1, 0], [1, 2], False, [0, 0], 2, [True, True, True]
        )
        return grads[output]

    return fn, [_randn(2, 6, 5, 2), _randn(2, 4, 9, 8), _randn(6, 2, 3, 2)]


CONVS = {
    **{f"convolution_backward_{i}": _conv_backward(i) for i in range(3)},
    "conv2d": (
        lambda x, w, b: F.conv2d(x, w, b, padding=1),
        [X, _randn(4, 3, 3, 3), _randn(4)],
    ),
    "conv2d_stride_dilation": (
        lambda x, w: F.conv2d(x, w, stride=2, padding=(2, 1), dilation=(1, 2)),
        [X, _randn(5, 3, 3, 2)],
    ),
    "conv2d_groups": (
        lambda x, w: F.conv2d(x, w, groups=3),
        [_randn(2, 6, 7, 5), _randn(9, 2, 3, 3)],
    ),
    "conv2d_depthwise": (
        lambda x, w: F.conv2d(x, w, groups=6, padding=1, stride=2),
        [_randn(2, 6, 7, 5), _randn(6, 1, 3, 3)],
    ),
    "conv1d": (
        lambda x, w: F.conv1d(x, w, stride=2, padding=1),
        [_randn(2, 3, 11), _randn(4, 3, 3)],
    ),
    "conv1d_unbatched": (F.conv1d, [_randn(3, 11), _randn(4, 3, 3)]),
    "conv3d": (
        lambda x, w, b: F.conv3d(x, w, b, padding=1),
        [_randn(1, 2, 4, 5, 3), _randn(3, 2, 3, 3, 3), _randn(3)],
    ),
    "conv2d_same_even_kernel": (  # 3 in all: 1 low, 2 high
        lambda x, w, b: F.conv2d(x, w, b, padding="same"),
        [X, _randn(4, 3, 4, 4), _randn(4)],
    ),
    "conv2d_same_dilation": (  # 4 and 9 in all: (2, 4) low, (2, 5) high
        lambda x, w: F.conv2d(x, w, padding="same", dilation=(2, 3)),
        [X, _randn(5, 3, 3, 4)],
    ),
    "conv1d_same_groups_unbatched": (
        lambda x, w: F.conv1d(x, w, padding="same", groups=2),
        [_randn(4, 11), _randn(6, 2, 2)],
    ),
    "conv3d_same": (
        lambda x, w: F.conv3d(x, w, padding="same"),
        [_randn(1, 2, 4, 5, 3), _randn(3, 2, 2, 3, 4)],
    ),
    "conv2d_valid": (
        lambda x, w: F.conv2d(x, w, stride=2, padding="valid"),
        [X, _randn(4, 3, 3, 2)],
    ),
    "conv1d_valid": (
        lambda x, w, b: F.conv1d(x, w, b, padding="valid", dilation=2),
        [_randn(2, 3, 11), _randn(4, 3, 3), _randn(4)],
    ),
    "conv_transpose2d": (
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
        [_randn(2, 4, 5, 6), _randn(4, 3, 3, 3), _randn(3)],
    ),
    "conv_transpose2d_plain": (F.conv_transpose2d, [_randn(2, 4, 5, 6), _randn(4, 3, 3, 2)]),
    "conv_transpose2d_dilation_groups": (
        lambda x, w: F.conv_transpose2d(
            x, w, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2
        ),
        [_randn(2, 4, 5, 6), _randn(4, 3, 3, 3)],
    ),
    "conv_transpose1d": (
        lambda x, w: F.conv_transpose1d(x, w, stride=3, padding=2, output_padding=2),
        [_randn(2, 4, 7), _randn(4, 5, 4)],
    ),
    "conv_transpose1d_unbatched": (
        lambda x, w: F.conv_transpose1d(x, w, stride=2),
        [_randn(4, 7), _randn(4, 5, 3)],
    ),
    "conv_transpose3d": (
        lambda x, w: F.conv_transpose3d(x, w, stride=2, padding=1),
        [_randn(1, 2, 3, 4, 3), _randn(2, 3, 3, 3, 3)],
    ),
}


@pytest.mark.parametrize("name", list(POOLS) + list(CONVS))
def test_op_imports_and_matches_pytorch(name, run_torch, rel_err):
    fn, inputs = {**POOLS, **CONVS}[name]
    capture_and_compare(fn, inputs, run_torch, rel_err, tolerance=1e-5)


def test_max_pool_propagates_nan(run_torch):
    x = X.clone()
    x[0, 0, 4, 4] = float("nan")
    ir = capture(Fn(lambda x: F.max_pool2d(x, 3, 2)), (x,))
    (out,) = run_torch(ir, [x.numpy()])
    assert (torch.from_numpy(out).isnan() == F.max_pool2d(x, 3, 2).isnan()).all()


def test_bf16_conv_and_pool(run_torch, rel_err):
    x, w = _randn(2, 3, 7, 6, dtype=torch.bfloat16), _randn(4, 3, 3, 3, dtype=torch.bfloat16)
    capture_and_compare(lambda x, w: F.conv2d(x, w, padding=1), [x, w], run_torch, rel_err, 2e-2)
    capture_and_compare(lambda x: F.avg_pool2d(x, 2), [x], run_torch, rel_err, 2e-2)


def test_transposed_padding_beyond_the_kernel_is_refused_in_one_line():
    with pytest.raises(UnsupportedOpError, match="padding > dilation") as info:
        capture(Fn(lambda x, w: F.conv_transpose2d(x, w, padding=3)), (X, _randn(3, 2, 3, 3)))
    assert "\n" not in str(info.value)
