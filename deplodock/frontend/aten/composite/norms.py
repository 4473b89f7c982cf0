"""The norm family: batch, instance and group norm (per-channel parameters reshaped to
`(C, 1, ..., 1)` so they broadcast against `(N, C, *spatial)`), the vector and matrix norms
of `torch.linalg` that need no singular values, and what is measured with them (pairwise
distance, cosine similarity).
"""

from __future__ import annotations

import math
from typing import Any

from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue

from deplodock.dialects import torch as T
from deplodock.frontend.aten.composite.common import per_channel, reshaped, tensor_shape
from deplodock.frontend.aten.core import (
    AtenImportError,
    Emitter,
    aten,
    elt_of,
    handles,
    norm_dim,
    norm_dims,
    rank_of,
)


def _affine(e: Emitter, y: SSAValue, weight: Any, bias: Any) -> SSAValue:
    """`y * weight + bias` per channel, for whichever of the two is given."""
    rank = rank_of(y)
    if (w := per_channel(e, weight, rank)) is not None:
        y = e.emit(T.MulOp(y, e.cast(w, elt_of(y))))
    if (b := per_channel(e, bias, rank)) is not None:
        y = e.emit(T.AddOp(y, e.cast(b, elt_of(y))))
    return y


def _standardize(e: Emitter, x: SSAValue, dims: list[int], eps: float) -> SSAValue:
    """`(x - mean) * rsqrt(var + eps)` over `dims` with the biased variance of the centred
    values (the two-pass form, accurate in f32), as the norms compute in training."""
    centred = e.emit(T.SubOp(x, e.emit(T.MeanOp(x, dims, keepdim=True))))
    var = e.emit(T.MeanOp(e.emit(T.MulOp(centred, centred)), dims, keepdim=True))
    return e.emit(T.MulOp(centred, e.emit(T.RsqrtOp(e.binary(T.AddOp, var, eps)))))


def _with_running_stats(e: Emitter, x: SSAValue, a: dict[str, Any]) -> SSAValue:
    """`(x - running_mean) * rsqrt(running_var + eps)`, the statistics per channel (the
    rsqrt is taken on the `(C, 1, ...)` vector, not per element)."""
    rank, elt = rank_of(x), elt_of(x)
    mean = e.cast(per_channel(e, a["running_mean"], rank), elt)  # type: ignore[arg-type]
    var = e.cast(per_channel(e, a["running_var"], rank), elt)  # type: ignore[arg-type]
    scale = e.emit(T.RsqrtOp(e.binary(T.AddOp, var, float(a["eps"]))))
    return e.emit(T.MulOp(e.emit(T.SubOp(x, mean)), scale))


_NORM_OPS = (T.MeanOp, T.SubOp, T.MulOp, T.AddOp, T.RsqrtOp, T.ReshapeOp)


@handles(aten.batch_norm.default, emits=_NORM_OPS)
def _batch_norm(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """Inference form (`training=False`): the running statistics. In training form (or
    without running statistics) the batch's, over every dim but the channels (dim 1); the
    running statistics are not updated (an exported module in eval() never does)."""
    x = e.tensor(a["input"])
    if rank_of(x) < 2:
        raise AtenImportError("batch_norm needs an (N, C, ...) input")
    if a["training"] or a["running_mean"] is None or a["running_var"] is None:
        y = _standardize(e, x, [0, *range(2, rank_of(x))], float(a["eps"]))
    else:
        y = _with_running_stats(e, x, a)
    return _affine(e, y, a["weight"], a["bias"])


@handles(aten.instance_norm.default, emits=(*_NORM_OPS, T.LayerNormOp))
def _instance_norm(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """Each (sample, channel) normalized over its spatial dims: a layer norm over the
    trailing dims, then the per-channel affine (`use_input_stats=False` is batch norm's
    inference form)."""
    x = e.tensor(a["input"])
    if rank_of(x) < 3:
        raise AtenImportError("instance_norm needs an (N, C, *spatial) input")
    if a["use_input_stats"]:
        y = e.emit(T.LayerNormOp(x, None, None, tensor_shape(x)[2:], float(a["eps"])))
    else:
        y = _with_running_stats(e, x, a)
    return _affine(e, y, a["weight"], a["bias"])


@handles(aten.group_norm.default, emits=(*_NORM_OPS, T.LayerNormOp))
def _group_norm(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`(N, C, *S)` viewed as `(N, G, C/G * prod(S))`, a layer norm over the last dim, the
    view undone, then the per-channel affine."""
    x = e.tensor(a["input"])
    shape, groups = tensor_shape(x), int(a["num_groups"])
    if len(shape) < 2 or shape[1] % groups:
        raise AtenImportError(f"group_norm: {groups} groups do not divide the channels")
    grouped = [shape[0], groups, math.prod(shape[1:]) // groups]
    y = e.emit(T.LayerNormOp(reshaped(e, x, grouped), None, None, grouped[2:], float(a["eps"])))
    return _affine(e, reshaped(e, y, shape), a["weight"], a["bias"])


VECTOR_NORM_OPS = (
    T.MulOp,
    T.SumOp,
    T.SqrtOp,
    T.AbsOp,
    T.AmaxOp,
    T.AminOp,
    T.PowOp,
    T.NeOp,
)


@handles(aten.linalg_vector_norm.default, emits=VECTOR_NORM_OPS)
def _vector_norm(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.cast(e.tensor(a["input"]), out.element_type)
    return norm_of(e, x, float(a["ord"]), norm_dims(a["dim"], rank_of(x)), bool(a["keepdim"]))


def norm_of(e: Emitter, x: SSAValue, order: float, dims: list[int], keep: bool) -> SSAValue:
    """`(sum |x|^ord)^(1/ord)` over `dims`: ord 2 (and Frobenius) is `sqrt(sum(x * x))`,
    1 `sum |x|`, +-inf `max` / `min |x|`, 0 the count of nonzeros."""
    if order == 2:
        return e.emit(T.SqrtOp(e.emit(T.SumOp(e.emit(T.MulOp(x, x)), dims, keep))))
    if order == 0:
        nonzero = e.cast(e.binary(T.NeOp, x, 0.0), elt_of(x))
        return e.emit(T.SumOp(nonzero, dims, keep))
    size = e.emit(T.AbsOp(x))
    if math.isinf(order):
        extreme = T.AmaxOp if order > 0 else T.AminOp
        return e.emit(extreme(size, dims, keep))
    if order == 1:
        return e.emit(T.SumOp(size, dims, keep))
    total = e.emit(T.SumOp(e.emit(T.PowOp(size, order)), dims, keep))
    return e.emit(T.PowOp(total, 1.0 / order))


def _matrix_norm(
    e: Emitter, x: SSAValue, order: float | str, dims: list[int], keep: bool, out: TensorType
) -> SSAValue:
    """The matrix norms that need no singular values, over the two `dims` (rows, columns):
    'fro' is the 2-norm of the entries; ord +-1 the max / min over columns of the column
    sums of |x|, +-inf the same over rows (PyTorch's rule). 2, -2 and 'nuc' need an SVD."""
    if order == "fro":
        return norm_of(e, x, 2.0, sorted(dims), keep)
    if not isinstance(order, float) or abs(order) not in (1.0, math.inf):
        raise AtenImportError(f"matrix norm ord={order!r} needs singular values (unsupported)")
    rows, cols = dims
    summed, across = (rows, cols) if abs(order) == 1 else (cols, rows)
    sums = e.emit(T.SumOp(e.emit(T.AbsOp(x)), [summed], True))
    extreme = e.emit((T.AmaxOp if order > 0 else T.AminOp)(sums, [across], True))
    return reshaped(e, extreme, out.get_shape())


def _two_dims(dim: Any, rank: int) -> list[int] | None:
    """`dim` of a matrix norm as two non-negative dims, or None when it names one dim."""
    if dim is None:
        return [rank - 2, rank - 1] if rank == 2 else None
    dims = [dim] if isinstance(dim, int) else list(dim)
    return [norm_dim(d, rank) for d in dims] if len(dims) == 2 else None


@handles(
    aten.linalg_norm.default,
    aten.linalg_norm.ord_str,
    aten.linalg_matrix_norm.default,
    aten.linalg_matrix_norm.str_ord,
    emits=(*VECTOR_NORM_OPS, T.ReshapeOp),
)
def _linalg_norm(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`torch.linalg.norm` and `matrix_norm`: without `ord`, the 2-norm of all entries (or
    along `dim`); with `ord`, a matrix norm when two dims are named (or the input is 2-D and
    none are), else a vector norm along the one dim (or of a 1-D input)."""
    x = e.cast(e.tensor(a["input"]), out.element_type)
    rank, order, keep = rank_of(x), a.get("ord"), bool(a["keepdim"])
    order = order if order is None or isinstance(order, str) else float(order)
    if order is None:
        return norm_of(e, x, 2.0, norm_dims(a["dim"], rank), keep)
    dims = _two_dims(a["dim"], rank)
    if dims is None and isinstance(order, str):
        raise AtenImportError(f"norm ord='{order}' needs a matrix: a 2-D input or two dims")
    if dims is None:
        return norm_of(e, x, order, norm_dims(a["dim"], rank), keep)
    return _matrix_norm(e, x, order, dims, keep, out)


@handles(
    aten.cosine_similarity.default,
    emits=(T.ExpandOp, T.MulOp, T.SumOp, T.SqrtOp, T.ClampOp, T.DivOp),
)
def _cosine_similarity(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`sum((x1 / n1) * (x2 / n2))` along `dim`, each norm `n = max(||x||, eps)`, as ATen
    computes it (the operands broadcast first)."""
    x1, x2 = (e.cast(e.tensor(a[k]), out.element_type) for k in ("x1", "x2"))
    shape = T.broadcast_shapes("cosine_similarity", tensor_shape(x1), tensor_shape(x2))
    dim = norm_dim(a["dim"], len(shape))
    unit = []
    for x in (x1, x2):
        x = x if tensor_shape(x) == shape else e.emit(T.ExpandOp(x, shape))
        norm = e.emit(T.SqrtOp(e.emit(T.SumOp(e.emit(T.MulOp(x, x)), [dim], keepdim=True))))
        unit.append(e.emit(T.DivOp(x, e.emit(T.ClampOp(norm, min=float(a["eps"]))))))
    return e.emit(T.SumOp(e.emit(T.MulOp(unit[0], unit[1])), [dim]))


def pairwise_distance(e: Emitter, x1: Any, x2: Any, p: float, eps: float, elt: Any) -> SSAValue:
    """`||x1 - x2 + eps||_p` along the last dim (ATen's `pairwise_distance`)."""
    difference = e.binary(T.AddOp, e.binary(T.SubOp, x1, x2, elt), eps)
    return norm_of(e, difference, p, [rank_of(difference) - 1], False)


@handles(aten.pairwise_distance.default, emits=(T.SubOp, T.AddOp, *VECTOR_NORM_OPS))
def _pairwise(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    if a["keepdim"]:
        raise AtenImportError("pairwise_distance with keepdim")
    elt = out.element_type
    return pairwise_distance(e, a["x1"], a["x2"], float(a["p"]), float(a["eps"]), elt)


@handles(aten._cdist_forward.default, emits=(T.UnsqueezeOp, T.SubOp, *VECTOR_NORM_OPS))
def _cdist(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`||x1[..., i, :] - x2[..., j, :]||_p` for every pair of rows: the difference
    broadcast over `(..., P, R, M)`, its p-norm over the last dim."""
    x1, x2 = (e.cast(e.tensor(a[k]), out.element_type) for k in ("x1", "x2"))
    rank = rank_of(x1)
    d = e.emit(T.SubOp(e.emit(T.UnsqueezeOp(x1, rank - 1)), e.emit(T.UnsqueezeOp(x2, rank - 2))))
    return norm_of(e, d, float(a["p"]), [rank], False)


@handles(
    aten._pdist_forward.default,
    emits=(T.UnsqueezeOp, T.SubOp, T.SliceOp, T.CatOp, T.ReshapeOp, *VECTOR_NORM_OPS),
)
def _pdist(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """The distances of the row pairs `i < j` in row-major order: the full `(N, N)`
    distance matrix, row `i` sliced from `i + 1`, the slices concatenated."""
    x = e.cast(e.tensor(a["input"]), out.element_type)
    n = tensor_shape(x)[0]
    d = e.emit(T.SubOp(e.emit(T.UnsqueezeOp(x, 1)), e.emit(T.UnsqueezeOp(x, 0))))
    full = norm_of(e, d, float(a["p"]), [2], False)
    rows = [
        e.emit(
            T.ReshapeOp(
                e.emit(T.SliceOp(e.emit(T.SliceOp(full, 0, i, i + 1)), 1, i + 1, n)), [n - 1 - i]
            )
        )
        for i in range(n - 1)
    ]
    return rows[0] if len(rows) == 1 else e.emit(T.CatOp(rows, 0))
