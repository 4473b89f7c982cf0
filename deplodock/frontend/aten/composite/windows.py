"""Pooling and convolution: sliding windows (`torch.window`), then a reduction (pooling) or
a batched matmul against the weights (convolution; transposed convolution spreads and pads
the input and flips the kernel first). The gradients of avg pooling and convolution (Core
ATen has them) are their adjoints built the same way: a transposed convolution for the
input, the forward windows times the output gradient for the weight.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import TensorType, f32, i64
from xdsl.ir import SSAValue

from deplodock.dialects import torch as T
from deplodock.frontend.aten.composite.common import per_channel, reshaped, tensor_shape
from deplodock.frontend.aten.composite.gathers import flipped, iota
from deplodock.frontend.aten.core import (
    AtenImportError,
    Emitter,
    OutputOf,
    aten,
    elt_of,
    handles,
    rank_of,
)


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


def _window_position(
    e: Emitter, tap: SSAValue, x: SSAValue, w: dict[str, list[int]], outputs: Sequence[int]
) -> SSAValue:
    """The flat spatial index in `x` of each window's tap `tap` (a row-major index into the
    kernel): per dim `o * stride - low + t * dilation`, the dims combined row-major."""
    k, rank = len(outputs), rank_of(tap)
    sizes = tensor_shape(x)[-k:]
    position: SSAValue | None = None
    for d in range(k):
        inner = math.prod(w["kernel"][d + 1 :])
        t = e.binary(T.DivOp, tap, inner) if inner > 1 else tap
        if d:
            t = e.emit(
                T.SubOp(t, e.binary(T.MulOp, e.binary(T.DivOp, t, w["kernel"][d]), w["kernel"][d]))
            )
        start = iota(e, outputs[d], rank - k + d, rank, -w["low"][d], w["stride"][d])
        coordinate = e.emit(T.AddOp(start, e.binary(T.MulOp, t, w["dilation"][d])))
        scaled = None if position is None else e.binary(T.MulOp, position, sizes[d])
        position = coordinate if scaled is None else e.emit(T.AddOp(scaled, coordinate))
    assert position is not None
    return position


def _max_pool_with_indices_handler(k: int) -> Any:
    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        """Output 0 is `max_pool{k}d`; output 1 the flat spatial index (`h * W + w`) of
        each window's maximum in the input: the window's argmax as a tap of the kernel,
        mapped back to the input by `_window_position`."""
        x = e.tensor(a["input"])
        if a["output_index"] == 0:
            return _pool_handler(k, "max")(e, a, out)
        if not T.is_float(elt_of(x)):
            raise AtenImportError("max pooling of an integer tensor is not supported")
        w = _window_args(x, a, k)
        windows = e.emit(T.WindowOp(x, **w, pad_value=-math.inf))
        shape = tensor_shape(windows)
        outputs = shape[rank_of(x) - k : rank_of(x)]
        taps = reshaped(e, windows, [*shape[: rank_of(x)], math.prod(w["kernel"])])
        tap = e.emit(T.ArgmaxOp(taps, rank_of(x)))
        return _window_position(e, tap, x, w, outputs)

    return handler


_MAX_POOL_INDEX_OPS = (T.WindowOp, T.AmaxOp, T.ReshapeOp, T.ArgmaxOp, T.DivOp, T.SubOp, T.MulOp)
_MAX_POOL_INDEX_OPS += (T.AddOp, T.ArangeOp)
for _k, _target in (
    (2, aten.max_pool2d_with_indices.default),
    (3, aten.max_pool3d_with_indices.default),
):
    handles(OutputOf(_target, None), emits=_MAX_POOL_INDEX_OPS)(_max_pool_with_indices_handler(_k))


def _avg_pool_backward_handler(k: int) -> Any:
    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        """The adjoint of `avg_pool{k}d`: each output gradient divided by its window's
        divisor, spread by `stride` (zeros between elements), and every input position
        summing the `kernel` positions of that spread whose windows hold it (a window of
        ones, padded low by `kernel - 1 - padding`; what a `ceil_mode` window sends past
        the padding reaches no input and is sliced off)."""
        g, x = e.tensor(a["grad_output"]), e.tensor(a["input"])
        w = _window_args(x, a, k)
        scaled = _spread(e, e.emit(T.DivOp(g, _pool_divisor(e, x, a, w, k))), w["stride"])
        sizes, rank = tensor_shape(x)[-k:], rank_of(x)
        for i, (n, p) in enumerate(zip(sizes, w["low"], strict=True)):
            if tensor_shape(scaled)[rank - k + i] > n + p:
                scaled = e.emit(T.SliceOp(scaled, rank - k + i, 0, n + p))
        spread = tensor_shape(scaled)[-k:]
        low = [n - 1 - p for n, p in zip(w["kernel"], w["low"], strict=True)]
        high = [n + p - s for n, p, s in zip(sizes, w["low"], spread, strict=True)]
        ones = {"stride": [1] * k, "dilation": [1] * k}
        windows = e.emit(T.WindowOp(scaled, kernel=w["kernel"], low=low, high=high, **ones))
        return e.emit(T.SumOp(windows, list(range(rank, rank + k))))

    return handler


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


_CONV_TRANSPOSE_OPS = (
    *_CONV_OPS,
    T.UnsqueezeOp,
    T.CatOp,
    T.SliceOp,
    T.ArangeOp,
    T.IndexOp,
)


def conv_transpose(
    e: Emitter, x: SSAValue, weight: SSAValue, bias: Any, w: dict[str, list[int]], groups: int
) -> SSAValue:
    """A batched `conv_transpose` (`w`: `stride`, `padding`, `dilation`, `output_padding`)
    as the convolution it is the adjoint of: the input spread by `stride` (zeros between
    elements), padded by `dilation * (kernel - 1) - padding` (plus `output_padding` at the
    end), convolved with stride 1 and the weight flipped in space and with its in / out
    channels swapped per group."""
    k = len(w["stride"])
    in_channels, group_out, *kernel = tensor_shape(weight)
    low = [d * (n - 1) - p for d, n, p in zip(w["dilation"], kernel, w["padding"], strict=True)]
    if min(low) < 0:
        raise AtenImportError("conv_transpose with padding > dilation * (kernel - 1)")
    per_group = [groups, in_channels // groups, group_out, *kernel]
    swapped = e.emit(T.PermuteOp(reshaped(e, weight, per_group), [0, 2, 1, *range(3, 3 + k)]))
    regrouped = reshaped(e, swapped, [groups * group_out, in_channels // groups, *kernel])
    flipped_kernel = flipped(e, regrouped, range(2, 2 + k))
    high = [lo + x for lo, x in zip(low, w["output_padding"], strict=True)]
    window = {"kernel": kernel, "stride": [1] * k, "dilation": w["dilation"]}
    window |= {"low": low, "high": high}
    return _convolve(e, _spread(e, x, w["stride"]), flipped_kernel, bias, window, groups)


def _conv_transpose_handler(k: int) -> Any:
    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        """`conv_transpose{k}d`, batched or not (an unbatched input gets a batch of 1)."""
        x, weight = e.tensor(a["input"]), e.tensor(a["weight"])
        unbatched = rank_of(x) == k + 1
        if unbatched:
            x = reshaped(e, x, [1, *tensor_shape(x)])
        names = ("stride", "padding", "dilation", "output_padding")
        w = {name: _spatial(a[name], k) for name in names}
        y = conv_transpose(e, x, weight, a["bias"], w, int(a["groups"]))
        return reshaped(e, y, out.get_shape()) if unbatched else y

    return handler


_AVG_POOL_BACKWARD_OPS = (T.WindowOp, T.SumOp, T.DivOp, T.ConstantOp, T.SliceOp)
_AVG_POOL_BACKWARD_OPS += (T.UnsqueezeOp, T.CatOp, T.ReshapeOp)  # `_spread`
for _k, _target in ((2, aten.avg_pool2d_backward.default), (3, aten.avg_pool3d_backward.default)):
    handles(_target, emits=_AVG_POOL_BACKWARD_OPS)(_avg_pool_backward_handler(_k))


for _k, _target in (
    (1, aten.conv_transpose1d.default),
    (2, aten.conv_transpose2d.input),
    (3, aten.conv_transpose3d.input),
):
    handles(_target, emits=_CONV_TRANSPOSE_OPS)(_conv_transpose_handler(_k))


@handles(aten.convolution.default, emits=_CONV_TRANSPOSE_OPS)
def _convolution(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """aten's one convolution: `conv{k}d` or, `transposed`, `conv_transpose{k}d`, `k` the
    weight's spatial rank."""
    k = rank_of(e.tensor(a["weight"])) - 2
    make = _conv_transpose_handler if a["transposed"] else _conv_handler
    return make(k)(e, a, out)


def _weight_gradient(
    e: Emitter, g: SSAValue, x: SSAValue, w: dict[str, list[int]], groups: int, kernel: list[int]
) -> SSAValue:
    """`dL/dweight` of a batched convolution: per group, the output gradient `(OC/G, N *
    prod(O))` times the input's windows `(N * prod(O), C/G * prod(K))`, the same windows
    the forward convolution multiplies."""
    k = len(kernel)
    n, channels = tensor_shape(x)[:2]
    out_channels = tensor_shape(g)[1]
    windows = e.emit(T.WindowOp(x, **w))  # (N, C, *O, *K)
    outputs = tensor_shape(windows)[2 : 2 + k]
    positions, taps = n * math.prod(outputs), math.prod(kernel)
    grouped = reshaped(e, windows, [n, groups, channels // groups, math.prod(outputs), taps])
    patches = reshaped(
        e,
        e.emit(T.PermuteOp(grouped, [1, 0, 3, 2, 4])),
        [groups, positions, channels // groups * taps],
    )
    per_group = reshaped(e, g, [n, groups, out_channels // groups, math.prod(outputs)])
    rows = reshaped(
        e, e.emit(T.PermuteOp(per_group, [1, 2, 0, 3])), [groups, out_channels // groups, positions]
    )
    product = e.emit(T.MatmulOp(rows, patches))  # (G, OC/G, C/G * prod(K))
    return reshaped(e, product, [out_channels, channels // groups, *kernel])


@handles(
    OutputOf(aten.convolution_backward.default, None),
    emits=(*_CONV_TRANSPOSE_OPS, T.SumOp),
)
def _convolution_backward(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """The gradients of `aten.convolution` (not transposed): output 0 of the input, the
    transposed convolution of the output gradient with `output_padding` making up the
    input size; 1 of the weight (`_weight_gradient`); 2 of the bias, the output gradient
    summed over all but the channels."""
    if a["transposed"]:
        raise AtenImportError("convolution_backward of a transposed convolution")
    g, x, weight = (e.tensor(a[name]) for name in ("grad_output", "input", "weight"))
    kernel = list(tensor_shape(weight)[2:])
    k, groups = len(kernel), int(a["groups"])
    stride, pad = _spatial(a["stride"], k), _spatial(a["padding"], k)
    dilation = _spatial(a["dilation"], k)
    index = a["output_index"]
    if index == 2:
        return e.emit(T.SumOp(g, [0, *range(2, 2 + k)]))
    if index == 1:
        w = {"kernel": kernel, "stride": stride, "dilation": dilation, "low": pad, "high": pad}
        return _weight_gradient(e, g, x, w, groups, kernel)
    spans = [d * (n - 1) + 1 for d, n in zip(dilation, kernel, strict=True)]
    reached = [
        (o - 1) * s - 2 * p + span
        for o, s, p, span in zip(tensor_shape(g)[2:], stride, pad, spans, strict=True)
    ]
    extra = [n - r for n, r in zip(tensor_shape(x)[2:], reached, strict=True)]
    w = {"stride": stride, "padding": pad, "dilation": dilation, "output_padding": extra}
    return conv_transpose(e, g, weight, None, w, groups)


def _averaging(e: Emitter, size: int, count: int) -> SSAValue:
    """The `(count, size)` matrix of adaptive average pooling along one dim: row `i`
    averages the inputs `[floor(i * size / count), ceil((i + 1) * size / count))`."""
    i = reshaped(e, e.emit(T.ArangeOp(0.0, 1.0, TensorType(i64, [count]))), [count, 1])
    j = e.emit(T.ArangeOp(0.0, 1.0, TensorType(i64, [size])))
    start = e.binary(T.DivOp, e.binary(T.MulOp, i, size), count)
    end = e.binary(T.DivOp, e.binary(T.AddOp, e.binary(T.MulOp, i, size), size + count - 1), count)
    inside = e.emit(T.LogicalAndOp(e.emit(T.GeOp(j, start)), e.emit(T.LtOp(j, end))))
    weights = e.cast(inside, f32)
    return e.emit(T.DivOp(weights, e.cast(e.emit(T.SubOp(end, start)), f32)))


def _along_dims(e: Emitter, x: SSAValue, matrices: Sequence[SSAValue | None]) -> SSAValue:
    """`x` with each trailing dim `d` mapped by `matrices[d]` (`(new, old)`; None: kept)."""
    k = len(matrices)
    for i, m in enumerate(matrices):
        if m is None:
            continue
        dim = rank_of(x) - k + i
        last = rank_of(x) - 1
        order = [d for d in range(rank_of(x)) if d != dim] + [dim]
        moved = e.emit(T.PermuteOp(x, order)) if dim != last else x
        product = e.emit(T.MatmulOp(moved, e.emit(T.TransposeOp(e.cast(m, elt_of(x)), 0, 1))))
        x = (
            e.emit(T.PermuteOp(product, [order.index(d) for d in range(rank_of(x))]))
            if dim != last
            else product
        )
    return x


_ADAPTIVE_OPS = (
    *(T.ArangeOp, T.MulOp, T.AddOp, T.DivOp, T.GeOp, T.LtOp, T.LogicalAndOp, T.SubOp),
    *(T.PermuteOp, T.MatmulOp, T.TransposeOp, T.ReshapeOp),
)


@handles(aten._adaptive_avg_pool3d.default, emits=_ADAPTIVE_OPS)
def _adaptive_avg_pool(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """Adaptive average pooling as one averaging matrix per spatial dim (`_averaging`);
    the 1-d and 2-d ones are PyTorch's decompositions (windows where the sizes divide)."""
    x = e.tensor(a["input"])
    sizes = list(a["output_size"])
    k = len(sizes)
    matrices = [_averaging(e, n, m) for n, m in zip(tensor_shape(x)[-k:], sizes, strict=True)]
    return _along_dims(e, x, matrices)


@handles(aten._adaptive_avg_pool2d_backward.default, emits=_ADAPTIVE_OPS)
def _adaptive_avg_pool2d_backward(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """The adjoint of `_adaptive_avg_pool`: the same matrices, transposed."""
    g, x = e.tensor(a["grad_output"]), e.tensor(a["input"])
    pairs = zip(tensor_shape(x)[-2:], tensor_shape(g)[-2:], strict=True)
    matrices = [e.emit(T.TransposeOp(_averaging(e, n, m), 0, 1)) for n, m in pairs]
    return _along_dims(e, g, matrices)
