"""Pooling and convolution: sliding windows (`torch.window`), then a reduction (pooling) or
a batched matmul against the weights (convolution; transposed convolution spreads and pads
the input and flips the kernel first).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import TensorType, i64
from xdsl.ir import SSAValue

from deplodock.dialects import torch as T
from deplodock.frontend.aten.composite.common import per_channel, reshaped, tensor_shape
from deplodock.frontend.aten.core import AtenImportError, Emitter, aten, elt_of, handles, rank_of


def _spatial(value: Any, k: int) -> list[int]:
    """A per-dim argument (`3`, `[3]` or `[3, 2]`) as `k` ints."""
    values = [int(value)] if isinstance(value, int) else [int(v) for v in value]
    return values * k if len(values) == 1 else values


def _window_args(x: SSAValue, a: dict[str, Any], k: int) -> dict[str, list[int]]:
    """Kernel, stride (default: the kernel), dilation and padding of a pooling op, with the
    extra high padding that `ceil_mode` needs: one more window where a partial one starts
    inside the input or its low padding (PyTorch's rule)."""
    kernel = _spatial(a["kernel_size"], k)
    stride = _spatial(a["stride"], k) if a["stride"] else kernel
    dilation = _spatial(a.get("dilation", 1), k)
    pad = _spatial(a["padding"], k)
    high = list(pad)
    if a["ceil_mode"]:
        for i, n in enumerate(tensor_shape(x)[-k:]):
            span = dilation[i] * (kernel[i] - 1) + 1
            count = -(-(n + 2 * pad[i] - span) // stride[i]) + 1
            if (count - 1) * stride[i] >= n + pad[i]:
                count -= 1
            high[i] = max(pad[i], (count - 1) * stride[i] + span - n - pad[i])
    return {"kernel": kernel, "stride": stride, "dilation": dilation, "low": pad, "high": high}


def _pool_handler(k: int, kind: str) -> Any:
    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        x = e.tensor(a["input"])
        if rank_of(x) < k + 1:
            raise AtenImportError(f"{k}-d pooling needs a (C, *spatial) or (N, C, *spatial) input")
        w = _window_args(x, a, k)
        window_dims = list(range(rank_of(x), rank_of(x) + k))
        if kind == "max":
            if not T.is_float(elt_of(x)):
                raise AtenImportError("max pooling of an integer tensor is not supported")
            windows = e.emit(T.WindowOp(x, **w, pad_value=-math.inf))
            return e.emit(T.AmaxOp(windows, window_dims))
        total = e.emit(T.SumOp(e.emit(T.WindowOp(x, **w)), window_dims))
        return e.emit(T.DivOp(total, _pool_divisor(e, x, a, w, k)))

    return handler


def _pool_divisor(
    e: Emitter, x: SSAValue, a: dict[str, Any], w: dict[str, list[int]], k: int
) -> SSAValue:
    """What avg pooling divides by: `divisor_override`; the window size when padding counts
    (`count_include_pad`) and no `ceil_mode` window runs past the padding; else the count of
    elements of each window that are in the input (or in its padding, when that counts):
    the windows of a splat of ones that covers just those elements."""
    elt = elt_of(x)
    if a.get("divisor_override"):
        return e.scalar(float(a["divisor_override"]), elt)
    if a["count_include_pad"] and w["high"] == w["low"]:
        return e.scalar(float(math.prod(w["kernel"])), elt)
    sizes = list(tensor_shape(x)[-k:])
    if a["count_include_pad"]:  # the ones cover the padding too; only the overhang is 0
        sizes = [n + 2 * p for n, p in zip(sizes, w["low"], strict=True)]
        w = w | {"low": [0] * k, "high": [h - p for h, p in zip(w["high"], w["low"], strict=True)]}
    ones = e.emit(T.ConstantOp(1.0, TensorType(elt, sizes)))
    return e.emit(T.SumOp(e.emit(T.WindowOp(ones, **w)), list(range(k, 2 * k))))


for _k in (1, 2, 3):
    _max_pool = getattr(aten, f"max_pool{_k}d").default
    _avg_pool = getattr(aten, f"avg_pool{_k}d").default
    handles(_max_pool, emits=(T.WindowOp, T.AmaxOp))(_pool_handler(_k, "max"))
    handles(_avg_pool, emits=(T.WindowOp, T.SumOp, T.DivOp, T.ConstantOp))(_pool_handler(_k, "avg"))


_CONV_OPS = (T.WindowOp, T.ReshapeOp, T.PermuteOp, T.TransposeOp, T.MatmulOp, T.AddOp)


def _convolve(
    e: Emitter, x: SSAValue, weight: SSAValue, bias: Any, w: dict[str, list[int]], groups: int
) -> SSAValue:
    """A batched `(N, C, *S)` convolution as windows and one batched matmul per group:
    windows `(N, G, C/G, *O, *K)` viewed as `(N, G, prod(O), C/G * prod(K))` times the
    weight viewed as `(G, C/G * prod(K), OC/G)` give `(N, G, prod(O), OC/G)`, which is
    permuted back to `(N, OC, *O)`."""
    k = len(w["kernel"])
    n = tensor_shape(x)[0]
    out_channels, group_channels, *kernel = tensor_shape(weight)
    windows = e.emit(T.WindowOp(x, **w))
    outputs = tensor_shape(windows)[2 : 2 + k]
    positions, taps = math.prod(outputs), group_channels * math.prod(kernel)
    grouped = reshaped(e, windows, [n, groups, group_channels, *outputs, *kernel])
    order = [0, 1, *range(3, 3 + k), 2, *range(3 + k, 3 + 2 * k)]
    patches = reshaped(e, e.emit(T.PermuteOp(grouped, order)), [n, groups, positions, taps])
    per_group = reshaped(e, weight, [groups, out_channels // groups, taps])
    product = e.emit(T.MatmulOp(patches, e.emit(T.TransposeOp(per_group, 1, 2))))
    y = reshaped(e, e.emit(T.PermuteOp(product, [0, 1, 3, 2])), [n, out_channels, *outputs])
    if bias is not None:
        y = e.emit(T.AddOp(y, per_channel(e, bias, rank_of(y))))
    return y


def _conv_padding(a: dict[str, Any], kernel: list[int], k: int) -> tuple[list[int], list[int]]:
    """The low and high padding per spatial dim: the ints given, none for 'valid', and for
    'same' `dilation * (kernel - 1)` in all, split with the odd one on the high side as
    PyTorch does (which allows 'same' only with stride 1)."""
    padding = a["padding"]
    if not isinstance(padding, str):
        pad = _spatial(padding, k)
        return pad, pad
    if padding == "valid":
        return [0] * k, [0] * k
    if padding != "same" or any(s != 1 for s in _spatial(a["stride"], k)):
        raise AtenImportError(f"convolution with padding='{padding}' and stride {a['stride']}")
    totals = [d * (n - 1) for d, n in zip(_spatial(a["dilation"], k), kernel, strict=True)]
    return [t // 2 for t in totals], [t - t // 2 for t in totals]


def _conv_handler(k: int) -> Any:
    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        """`conv{k}d`, batched or not (an unbatched input gets a batch of 1), its padding
        ints or 'valid' / 'same' (the `.padding` overload)."""
        x, weight = e.tensor(a["input"]), e.tensor(a["weight"])
        unbatched = rank_of(x) == k + 1
        if unbatched:
            x = reshaped(e, x, [1, *tensor_shape(x)])
        kernel = list(tensor_shape(weight)[2:])
        low, high = _conv_padding(a, kernel, k)
        w = {"kernel": kernel, "stride": _spatial(a["stride"], k)}
        w |= {"dilation": _spatial(a["dilation"], k), "low": low, "high": high}
        y = _convolve(e, x, weight, a["bias"], w, int(a["groups"]))
        return reshaped(e, y, out.get_shape()) if unbatched else y

    return handler


for _k in (1, 2, 3):
    _conv = getattr(aten, f"conv{_k}d")
    handles(_conv.default, _conv.padding, emits=_CONV_OPS)(_conv_handler(_k))


def _spread(e: Emitter, x: SSAValue, stride: list[int]) -> SSAValue:
    """`x` with `stride - 1` zeros between neighbours along each trailing spatial dim: a
    zero block concatenated after every element (`(.., n, 1) ++ (.., n, s - 1)`), the pair
    of dims merged, and the zeros after the last element sliced off."""
    k = len(stride)
    for i, s in enumerate(stride):
        if s == 1:
            continue
        dim = rank_of(x) - k + i
        shape = tensor_shape(x)
        column = e.emit(T.UnsqueezeOp(x, dim + 1))
        zeros_shape = [*shape[: dim + 1], s - 1, *shape[dim + 1 :]]
        zeros = e.emit(T.ConstantOp(0.0, TensorType(elt_of(x), zeros_shape)))
        pairs = e.emit(T.CatOp([column, zeros], dim + 1))
        merged = reshaped(e, pairs, [*shape[:dim], shape[dim] * s, *shape[dim + 1 :]])
        x = e.emit(T.SliceOp(merged, dim, 0, (shape[dim] - 1) * s + 1))
    return x


def _flipped(e: Emitter, x: SSAValue, dims: Sequence[int]) -> SSAValue:
    """`x` reversed along `dims`: each moved to the front, gathered with a descending
    `arange`, and moved back."""
    for dim in dims:
        size = tensor_shape(x)[dim]
        order = [dim, *(d for d in range(rank_of(x)) if d != dim)]
        front = e.emit(T.PermuteOp(x, order)) if dim else x
        backwards = e.emit(T.ArangeOp(size - 1.0, -1.0, TensorType(i64, [size])))
        gathered = e.emit(T.IndexOp(front, [backwards]))
        back = [order.index(d) for d in range(rank_of(x))]
        x = e.emit(T.PermuteOp(gathered, back)) if dim else gathered
    return x


_CONV_TRANSPOSE_OPS = (
    *_CONV_OPS,
    T.UnsqueezeOp,
    T.CatOp,
    T.SliceOp,
    T.ArangeOp,
    T.IndexOp,
)


def _conv_transpose_handler(k: int) -> Any:
    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        """`conv_transpose{k}d` as the convolution it is the adjoint of: the input spread
        by `stride` (zeros between elements), padded by `dilation * (kernel - 1) -
        padding` (plus `output_padding` at the end), convolved with stride 1 and the
        weight flipped in space and with its in / out channels swapped per group."""
        x, weight = e.tensor(a["input"]), e.tensor(a["weight"])
        unbatched = rank_of(x) == k + 1
        if unbatched:
            x = reshaped(e, x, [1, *tensor_shape(x)])
        stride, pad = _spatial(a["stride"], k), _spatial(a["padding"], k)
        dilation, extra = _spatial(a["dilation"], k), _spatial(a["output_padding"], k)
        groups = int(a["groups"])
        in_channels, group_out, *kernel = tensor_shape(weight)
        low = [d * (n - 1) - p for d, n, p in zip(dilation, kernel, pad, strict=True)]
        if min(low) < 0:
            raise AtenImportError("conv_transpose with padding > dilation * (kernel - 1)")
        per_group = [groups, in_channels // groups, group_out, *kernel]
        swapped = e.emit(T.PermuteOp(reshaped(e, weight, per_group), [0, 2, 1, *range(3, 3 + k)]))
        regrouped = reshaped(e, swapped, [groups * group_out, in_channels // groups, *kernel])
        flipped = _flipped(e, regrouped, range(2, 2 + k))
        high = [lo + x for lo, x in zip(low, extra, strict=True)]
        w = {"kernel": kernel, "stride": [1] * k, "dilation": dilation, "low": low, "high": high}
        y = _convolve(e, _spread(e, x, stride), flipped, a["bias"], w, groups)
        return reshaped(e, y, out.get_shape()) if unbatched else y

    return handler


for _k, _target in (
    (1, aten.conv_transpose1d.default),
    (2, aten.conv_transpose2d.input),
    (3, aten.conv_transpose3d.input),
):
    handles(_target, emits=_CONV_TRANSPOSE_OPS)(_conv_transpose_handler(_k))
