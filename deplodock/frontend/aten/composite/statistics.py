"""Reductions and normalizations of the Core ATen opset written with torch reductions: `any`,
`prod`, `var` and `var_mean`, `cumprod`, and the multi-output norms (`native_layer_norm`,
`native_group_norm`, `_native_batch_norm_legit*`), whose extra outputs are the mean and the
reciprocal standard deviation that a backward pass reads.
"""

from __future__ import annotations

import math
from typing import Any

from xdsl.dialects.builtin import TensorType, i64
from xdsl.ir import SSAValue

from deplodock.dialects import torch as T
from deplodock.frontend.aten.composite.common import per_channel, reshaped, tensor_shape
from deplodock.frontend.aten.core import (
    Emitter,
    OutputOf,
    aten,
    handles,
    norm_dim,
    norm_dims,
    rank_of,
)


@handles(aten.any.default, aten.any.dim, aten.any.dims, emits=(T.SumOp, T.NeOp))
def _any(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """Some element is nonzero: the count of nonzero elements is."""
    x = e.boolean(a["input"])
    dims = norm_dims(a.get("dim"), rank_of(x))
    count = e.emit(T.SumOp(e.cast(x, i64), dims, bool(a.get("keepdim", False))))
    return e.binary(T.NeOp, count, 0)


@handles(aten.prod.default, aten.prod.dim_int, emits=T.ProdOp)
def _prod(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.cast(e.tensor(a["input"]), out.element_type)
    dims = norm_dims(a.get("dim"), rank_of(x))
    return e.emit(T.ProdOp(x, dims, bool(a.get("keepdim", False))))


@handles(aten.cumprod.default, emits=T.CumprodOp)
def _cumprod(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.cast(e.tensor(a["input"]), out.element_type)
    return e.emit(T.CumprodOp(x, norm_dim(a["dim"], rank_of(x))))


_STAT_OPS = (T.MeanOp, T.SubOp, T.MulOp, T.SumOp, T.DivOp, T.ReshapeOp)


def moments(
    e: Emitter, x: SSAValue, dims: list[int], correction: float, keep: bool
) -> tuple[SSAValue, SSAValue]:
    """Mean and variance over `dims` (the variance divided by `N - correction`), kept as
    size-1 dims when `keep`."""
    mean = e.emit(T.MeanOp(x, dims, True))
    centered = e.emit(T.SubOp(x, mean))
    total = e.emit(T.SumOp(e.emit(T.MulOp(centered, centered)), dims, keep))
    n = math.prod(tensor_shape(x)[d] for d in dims)
    var = e.binary(T.DivOp, total, float(max(n - correction, 0)))
    if not keep:
        mean = reshaped(e, mean, tensor_shape(total))
    return mean, var


def _correction(a: dict[str, Any]) -> float:
    if "unbiased" in a:
        return 1.0 if a["unbiased"] else 0.0
    return 1.0 if a.get("correction") is None else float(a["correction"])


@handles(aten.var.dim, aten.var.correction, emits=_STAT_OPS)
def _var(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    dims = norm_dims(a.get("dim"), rank_of(x))
    return moments(e, x, dims, _correction(a), bool(a["keepdim"]))[1]


@handles(OutputOf(aten.var_mean.correction, None), emits=_STAT_OPS)
def _var_mean(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    dims = norm_dims(a.get("dim"), rank_of(x))
    mean, var = moments(e, x, dims, _correction(a), bool(a["keepdim"]))
    return var if a["output_index"] == 0 else mean


_NORM_OPS = (*_STAT_OPS, T.AddOp, T.RsqrtOp, T.LayerNormOp, T.ConstantOp)


def _normalized(
    e: Emitter, x: SSAValue, dims: list[int], eps: float, index: int
) -> tuple[SSAValue, SSAValue, SSAValue] | SSAValue:
    """Output `index` of a norm over `dims` without its affine part: 0 the normalized
    `x`, 1 the mean, 2 the reciprocal standard deviation (biased variance), both kept."""
    mean, var = moments(e, x, dims, 0.0, True)
    rstd = e.emit(T.RsqrtOp(e.binary(T.AddOp, var, eps)))
    if index == 1:
        return mean
    if index == 2:
        return rstd
    return e.emit(T.MulOp(e.emit(T.SubOp(x, mean)), rstd))


@handles(OutputOf(aten.native_layer_norm.default, None), emits=_NORM_OPS)
def _native_layer_norm(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """Output 0 is `torch.layer_norm`; 1 and 2 the statistics over the normalized dims."""
    x = e.tensor(a["input"])
    shape = list(a["normalized_shape"])
    if a["output_index"] == 0:
        w, b = (None if a[k] is None else e.tensor(a[k]) for k in ("weight", "bias"))
        return e.emit(T.LayerNormOp(x, w, b, shape, float(a["eps"])))
    dims = list(range(rank_of(x) - len(shape), rank_of(x)))
    return _normalized(e, x, dims, float(a["eps"]), a["output_index"])


def _affine(e: Emitter, y: SSAValue, weight: Any, bias: Any) -> SSAValue:
    rank = rank_of(y)
    if (w := per_channel(e, weight, rank)) is not None:
        y = e.emit(T.MulOp(y, w))
    if (b := per_channel(e, bias, rank)) is not None:
        y = e.emit(T.AddOp(y, b))
    return y


@handles(OutputOf(aten.native_group_norm.default, None), emits=_NORM_OPS)
def _native_group_norm(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`x` viewed as `(N, G, C/G * HxW)`, normalized over its last dim; the statistics are
    `(N, G)`."""
    x = e.tensor(a["input"])
    n, groups = tensor_shape(x)[0], int(a["group"])
    grouped = reshaped(e, x, [n, groups, math.prod(tensor_shape(x)) // (n * groups)])
    index = a["output_index"]
    value = _normalized(e, grouped, [2], float(a["eps"]), index)
    if index:
        return reshaped(e, value, [n, groups])
    return _affine(e, reshaped(e, value, tensor_shape(x)), a["weight"], a["bias"])


@handles(
    OutputOf(aten._native_batch_norm_legit_no_training.default, None),
    OutputOf(aten._native_batch_norm_legit.default, None),
    OutputOf(aten._native_batch_norm_legit.no_stats, None),
    emits=_NORM_OPS,
)
def _batch_norm(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """Per channel (dim 1): with the running statistics given (inference), else with the
    batch's (training, `no_stats`). Outputs 1 and 2 are the batch mean and rstd in
    training, empty in inference, as in PyTorch."""
    x = e.tensor(a["input"])
    index, eps = a["output_index"], float(a["eps"])
    training = a.get("training", False)
    if index and not training:
        return e.emit(T.ConstantOp(0.0, out))
    if training:
        dims = [d for d in range(rank_of(x)) if d != 1]
        value = _normalized(e, x, dims, eps, index)
        if index:
            return reshaped(e, value, out.get_shape())
        return _affine(e, value, a["weight"], a["bias"])
    rank = rank_of(x)
    mean = per_channel(e, a["running_mean"], rank)
    var = per_channel(e, a["running_var"], rank)
    assert mean is not None and var is not None
    rstd = e.emit(T.RsqrtOp(e.binary(T.AddOp, var, eps)))
    return _affine(e, e.emit(T.MulOp(e.emit(T.SubOp(x, mean)), rstd)), a["weight"], a["bias"])
