"""Composite aten ops: the norm family and the losses, written with existing torch ops.

These have no torch op of their own: each is a few reductions and elementwise ops that the
`tensor` level fuses anyway, so one handler here is the whole of the op (as `addmm` and
`diff` are in `structured`). Per-channel parameters of the norms are reshaped to
`(C, 1, ..., 1)` so they broadcast against `(N, C, *spatial)`; losses end in PyTorch's
reduction (`0` none, `1` mean, `2` sum).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import TensorType, i32, i64
from xdsl.ir import SSAValue

from deplodock.dialects import torch as T
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


def _shape(x: SSAValue) -> tuple[int, ...]:
    assert isinstance(x.type, TensorType)
    return tuple(x.type.get_shape())


def _reshaped(e: Emitter, x: SSAValue, shape: Sequence[int]) -> SSAValue:
    return x if _shape(x) == tuple(shape) else e.emit(T.ReshapeOp(x, shape))


def _per_channel(e: Emitter, p: Any, rank: int) -> SSAValue | None:
    """A `(C,)` parameter as `(C, 1, ..., 1)`, to broadcast along dim 1 of a rank-`rank`
    input (None stays None)."""
    if p is None:
        return None
    value = e.tensor(p)
    return _reshaped(e, value, [_shape(value)[0]] + [1] * (rank - 2))


def _affine(e: Emitter, y: SSAValue, weight: Any, bias: Any) -> SSAValue:
    """`y * weight + bias` per channel, for whichever of the two is given."""
    rank = rank_of(y)
    if (w := _per_channel(e, weight, rank)) is not None:
        y = e.emit(T.MulOp(y, e.cast(w, elt_of(y))))
    if (b := _per_channel(e, bias, rank)) is not None:
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
    mean = e.cast(_per_channel(e, a["running_mean"], rank), elt)  # type: ignore[arg-type]
    var = e.cast(_per_channel(e, a["running_var"], rank), elt)  # type: ignore[arg-type]
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
        y = e.emit(T.LayerNormOp(x, None, None, _shape(x)[2:], float(a["eps"])))
    else:
        y = _with_running_stats(e, x, a)
    return _affine(e, y, a["weight"], a["bias"])


@handles(aten.group_norm.default, emits=(*_NORM_OPS, T.LayerNormOp))
def _group_norm(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`(N, C, *S)` viewed as `(N, G, C/G * prod(S))`, a layer norm over the last dim, the
    view undone, then the per-channel affine."""
    x = e.tensor(a["input"])
    shape, groups = _shape(x), int(a["num_groups"])
    if len(shape) < 2 or shape[1] % groups:
        raise AtenImportError(f"group_norm: {groups} groups do not divide the channels")
    grouped = [shape[0], groups, math.prod(shape[1:]) // groups]
    y = e.emit(T.LayerNormOp(_reshaped(e, x, grouped), None, None, grouped[2:], float(a["eps"])))
    return _affine(e, _reshaped(e, y, shape), a["weight"], a["bias"])


_VECTOR_NORM_OPS = (
    T.MulOp,
    T.SumOp,
    T.SqrtOp,
    T.AbsOp,
    T.AmaxOp,
    T.AminOp,
    T.PowOp,
    T.NeOp,
)


@handles(aten.linalg_vector_norm.default, emits=_VECTOR_NORM_OPS)
def _vector_norm(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.cast(e.tensor(a["input"]), out.element_type)
    return _norm(e, x, float(a["ord"]), norm_dims(a["dim"], rank_of(x)), bool(a["keepdim"]))


def _norm(e: Emitter, x: SSAValue, order: float, dims: list[int], keep: bool) -> SSAValue:
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
        return _norm(e, x, 2.0, sorted(dims), keep)
    if not isinstance(order, float) or abs(order) not in (1.0, math.inf):
        raise AtenImportError(f"matrix norm ord={order!r} needs singular values (unsupported)")
    rows, cols = dims
    summed, across = (rows, cols) if abs(order) == 1 else (cols, rows)
    sums = e.emit(T.SumOp(e.emit(T.AbsOp(x)), [summed], True))
    extreme = e.emit((T.AmaxOp if order > 0 else T.AminOp)(sums, [across], True))
    return _reshaped(e, extreme, out.get_shape())


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
    emits=(*_VECTOR_NORM_OPS, T.ReshapeOp),
)
def _linalg_norm(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`torch.linalg.norm` and `matrix_norm`: without `ord`, the 2-norm of all entries (or
    along `dim`); with `ord`, a matrix norm when two dims are named (or the input is 2-D and
    none are), else a vector norm along the one dim (or of a 1-D input)."""
    x = e.cast(e.tensor(a["input"]), out.element_type)
    rank, order, keep = rank_of(x), a.get("ord"), bool(a["keepdim"])
    order = order if order is None or isinstance(order, str) else float(order)
    if order is None:
        return _norm(e, x, 2.0, norm_dims(a["dim"], rank), keep)
    dims = _two_dims(a["dim"], rank)
    if dims is None and isinstance(order, str):
        raise AtenImportError(f"norm ord='{order}' needs a matrix: a 2-D input or two dims")
    if dims is None:
        return _norm(e, x, order, norm_dims(a["dim"], rank), keep)
    return _matrix_norm(e, x, order, dims, keep, out)


# --- losses -------------------------------------------------------------------------------


def _reduced(e: Emitter, loss: SSAValue, reduction: int) -> SSAValue:
    """PyTorch's `reduction` enum: 0 none, 1 mean, 2 sum (over every element)."""
    if reduction == 0:
        return loss
    everything = list(range(rank_of(loss)))
    return e.emit((T.MeanOp if reduction == 1 else T.SumOp)(loss, everything))


def _difference(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`input - target`, in the loss's dtype (the two already broadcast)."""
    return e.binary(T.SubOp, a["input"], a["target"], out.element_type)


_LOSS_OPS = (T.SubOp, T.MulOp, T.AbsOp, T.MeanOp, T.SumOp)


@handles(aten.mse_loss.default, emits=_LOSS_OPS)
def _mse_loss(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    d = _difference(e, a, out)
    return _reduced(e, e.emit(T.MulOp(d, d)), a["reduction"])


@handles(aten.l1_loss.default, emits=_LOSS_OPS)
def _l1_loss(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return _reduced(e, e.emit(T.AbsOp(_difference(e, a, out))), a["reduction"])


def _quadratic_below(e: Emitter, d: SSAValue, edge: float, scale: float) -> SSAValue:
    """`|d| < edge ? 0.5 d^2 / scale : |d| - 0.5 edge`, times `scale` on the linear side
    when `scale` is not `edge`: smooth L1 is `(edge, scale) = (beta, beta)`, Huber
    `(delta, 1)` with the linear side times delta."""
    size = e.emit(T.AbsOp(d))
    quadratic = e.binary(T.MulOp, e.emit(T.MulOp(d, d)), 0.5 / scale)
    linear = e.binary(T.SubOp, size, 0.5 * edge)
    if scale != edge:
        linear = e.binary(T.MulOp, linear, edge)
    return e.emit(T.WhereOp(e.binary(T.LtOp, size, edge), quadratic, linear))


_PIECEWISE_LOSS_OPS = (*_LOSS_OPS, T.WhereOp, T.LtOp)


@handles(aten.smooth_l1_loss.default, emits=_PIECEWISE_LOSS_OPS)
def _smooth_l1_loss(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """Quadratic `0.5 d^2 / beta` below `beta`, `|d| - 0.5 beta` above; beta = 0 is L1."""
    d, beta = _difference(e, a, out), float(a["beta"])
    loss = e.emit(T.AbsOp(d)) if beta == 0 else _quadratic_below(e, d, beta, beta)
    return _reduced(e, loss, a["reduction"])


@handles(aten.huber_loss.default, emits=_PIECEWISE_LOSS_OPS)
def _huber_loss(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """Quadratic `0.5 d^2` below `delta`, `delta (|d| - 0.5 delta)` above."""
    d, delta = _difference(e, a, out), float(a["delta"])
    return _reduced(e, _quadratic_below(e, d, delta, 1.0), a["reduction"])


@handles(
    aten.kl_div.default,
    emits=(*_LOSS_OPS, T.ExpOp, T.LogOp, T.WhereOp, T.EqOp),
)
def _kl_div(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`target * (log(target) - input)` pointwise (one product: the difference of two, as
    ATen writes it, cancels in f32), 0 where `target` is 0 (`xlogy`); with
    `log_target`, `exp(target) * (target - input)`. Mean is over every element (the
    `batchmean` of `F.kl_div` divides a sum by the batch size itself)."""
    elt = out.element_type
    x, t = e.operand(a["input"], elt), e.operand(a["target"], elt)
    if a["log_target"]:
        loss = e.emit(T.MulOp(e.emit(T.ExpOp(t)), e.emit(T.SubOp(t, x))))
    else:
        pointwise = e.emit(T.MulOp(t, e.emit(T.SubOp(e.emit(T.LogOp(t)), x))))
        loss = e.emit(T.WhereOp(e.binary(T.EqOp, t, 0.0), e.scalar(0.0, elt), pointwise))
    return _reduced(e, loss, a["reduction"])


@handles(
    aten.cosine_similarity.default,
    emits=(T.ExpandOp, T.MulOp, T.SumOp, T.SqrtOp, T.ClampOp, T.DivOp),
)
def _cosine_similarity(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`sum((x1 / n1) * (x2 / n2))` along `dim`, each norm `n = max(||x||, eps)`, as ATen
    computes it (the operands broadcast first)."""
    x1, x2 = (e.cast(e.tensor(a[k]), out.element_type) for k in ("x1", "x2"))
    shape = T.broadcast_shapes("cosine_similarity", _shape(x1), _shape(x2))
    dim = norm_dim(a["dim"], len(shape))
    unit = []
    for x in (x1, x2):
        x = x if _shape(x) == shape else e.emit(T.ExpandOp(x, shape))
        norm = e.emit(T.SqrtOp(e.emit(T.SumOp(e.emit(T.MulOp(x, x)), [dim], keepdim=True))))
        unit.append(e.emit(T.DivOp(x, e.emit(T.ClampOp(norm, min=float(a["eps"]))))))
    return e.emit(T.SumOp(e.emit(T.MulOp(unit[0], unit[1])), [dim]))


def _pairwise_distance(e: Emitter, x1: Any, x2: Any, p: float, eps: float, elt: Any) -> SSAValue:
    """`||x1 - x2 + eps||_p` along the last dim (ATen's `pairwise_distance`)."""
    difference = e.binary(T.AddOp, e.binary(T.SubOp, x1, x2, elt), eps)
    return _norm(e, difference, p, [rank_of(difference) - 1], False)


@handles(aten.pairwise_distance.default, emits=(T.SubOp, T.AddOp, *_VECTOR_NORM_OPS))
def _pairwise(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    if a["keepdim"]:
        raise AtenImportError("pairwise_distance with keepdim")
    elt = out.element_type
    return _pairwise_distance(e, a["x1"], a["x2"], float(a["p"]), float(a["eps"]), elt)


_MARGIN_LOSS_OPS = (*_LOSS_OPS, *_VECTOR_NORM_OPS, T.AddOp, T.ClampOp, T.MinimumOp, T.NegOp)


@handles(aten.triplet_margin_loss.default, emits=_MARGIN_LOSS_OPS)
def _triplet_margin_loss(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`max(margin + d(anchor, positive) - d(anchor, negative), 0)`, `d` the pairwise
    distance; with `swap`, `d(anchor, negative)` is at most `d(positive, negative)`."""
    elt, p, eps = out.element_type, float(a["p"]), float(a["eps"])
    positive = _pairwise_distance(e, a["anchor"], a["positive"], p, eps, elt)
    negative = _pairwise_distance(e, a["anchor"], a["negative"], p, eps, elt)
    if a["swap"]:
        swapped = _pairwise_distance(e, a["positive"], a["negative"], p, eps, elt)
        negative = e.emit(T.MinimumOp(negative, swapped))
    gap = e.binary(T.AddOp, e.emit(T.SubOp(positive, negative)), float(a["margin"]))
    return _reduced(e, e.emit(T.ClampOp(gap, min=0.0)), a["reduction"])


@handles(aten.margin_ranking_loss.default, emits=_MARGIN_LOSS_OPS)
def _margin_ranking_loss(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`max(-target * (input1 - input2) + margin, 0)`."""
    elt = out.element_type
    difference = e.binary(T.SubOp, a["input1"], a["input2"], elt)
    signed = e.emit(T.NegOp(e.binary(T.MulOp, a["target"], difference, elt)))
    gap = e.binary(T.AddOp, signed, float(a["margin"]))
    return _reduced(e, e.emit(T.ClampOp(gap, min=0.0)), a["reduction"])


@handles(aten.hinge_embedding_loss.default, emits=(*_MARGIN_LOSS_OPS, T.WhereOp, T.NeOp))
def _hinge_embedding_loss(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`(target != 1 ? max(margin - x, 0) : 0) + (target != -1 ? x : 0)`, ATen's form (a
    target of 1 gives x, of -1 the hinge)."""
    elt = out.element_type
    x, target, zero = e.operand(a["input"], elt), e.operand(a["target"], elt), e.scalar(0.0, elt)
    hinge = e.emit(T.ClampOp(e.binary(T.SubOp, float(a["margin"]), x, elt), min=0.0))
    margin_part = e.emit(T.WhereOp(e.binary(T.NeOp, target, 1.0), hinge, zero))
    self_part = e.emit(T.WhereOp(e.binary(T.NeOp, target, -1.0), x, zero))
    return _reduced(e, e.emit(T.AddOp(margin_part, self_part)), a["reduction"])


@handles(aten.soft_margin_loss.default, emits=(*_LOSS_OPS, T.NegOp, T.SoftplusOp))
def _soft_margin_loss(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`log(1 + exp(-target * x))`: a softplus without threshold, as ATen writes it."""
    product = e.binary(T.MulOp, a["input"], a["target"], out.element_type)
    loss = e.emit(T.SoftplusOp(e.emit(T.NegOp(product)), 1.0, math.inf))
    return _reduced(e, loss, a["reduction"])


def _weighted(e: Emitter, loss: SSAValue, weight: Any) -> SSAValue:
    return loss if weight is None else e.binary(T.MulOp, loss, weight, elt_of(loss))


@handles(
    aten.binary_cross_entropy.default,
    emits=(*_LOSS_OPS, T.LogOp, T.ClampOp, T.AddOp, T.NegOp),
)
def _binary_cross_entropy(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`-w (t log(x) + (1 - t) log(1 - x))`, each log clamped at -100 as in PyTorch (so a
    probability of exactly 0 or 1 costs 100, not inf)."""
    elt = out.element_type
    x, t = e.operand(a["input"], elt), e.operand(a["target"], elt)
    log_x = e.emit(T.ClampOp(e.emit(T.LogOp(x)), min=-100.0))
    log_rest = e.emit(T.ClampOp(e.emit(T.LogOp(e.binary(T.SubOp, 1.0, x, elt))), min=-100.0))
    rest = e.binary(T.SubOp, 1.0, t, elt)
    total = e.emit(T.AddOp(e.emit(T.MulOp(t, log_x)), e.emit(T.MulOp(rest, log_rest))))
    return _reduced(e, _weighted(e, e.emit(T.NegOp(total)), a["weight"]), a["reduction"])


@handles(
    aten.binary_cross_entropy_with_logits.default,
    emits=(*_LOSS_OPS, T.LogSigmoidOp, T.AddOp),
)
def _bce_with_logits(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`(1 - t) x - (1 + (pos_weight - 1) t) log_sigmoid(x)`, times `weight`: the stable
    form (`log_sigmoid` never overflows)."""
    elt = out.element_type
    x, t = e.operand(a["input"], elt), e.operand(a["target"], elt)
    log_weight: SSAValue | float = 1.0
    if a["pos_weight"] is not None:
        excess = e.binary(T.SubOp, a["pos_weight"], 1.0, elt)
        log_weight = e.binary(T.AddOp, e.binary(T.MulOp, excess, t, elt), 1.0)
    soft = e.binary(T.MulOp, e.emit(T.LogSigmoidOp(x)), log_weight, elt)
    loss = e.emit(T.SubOp(e.emit(T.MulOp(e.binary(T.SubOp, 1.0, t, elt), x)), soft))
    return _reduced(e, _weighted(e, loss, a["weight"]), a["reduction"])


_CLASS_LOSS_OPS = (
    T.LogSoftmaxOp,
    T.ArangeOp,
    T.ReshapeOp,
    T.UnsqueezeOp,
    T.EqOp,
    T.NeOp,
    T.WhereOp,
    T.MulOp,
    T.SumOp,
    T.MeanOp,
    T.DivOp,
    T.AddOp,
    T.NegOp,
    T.CastOp,
)


def _class_dim(x: SSAValue) -> int:
    """The class dim of a `(C,)` or `(N, C, *d)` input."""
    return 0 if rank_of(x) == 1 else 1


def _per_class(e: Emitter, v: SSAValue, x: SSAValue) -> SSAValue:
    """A `(C,)` vector shaped to broadcast along the class dim of `x`."""
    return _reshaped(e, v, [_shape(v)[0]] + [1] * (rank_of(x) - 1 - _class_dim(x)))


def _nll(e: Emitter, logp: SSAValue, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`nll_loss` of log-probabilities `logp` with integer targets: `-w[t] * logp[t]` per
    sample (a one-hot select along the class dim), 0 where `t == ignore_index`; mean divides
    by the summed weights of the kept samples, as PyTorch. With `label_smoothing` the loss
    is `(1 - s) nll + s / C * smooth`, `smooth = -sum_c w_c logp_c`, reduced as ATen does."""
    target, elt = e.tensor(a["target"]), elt_of(logp)
    if elt_of(target) not in (i64, i32):
        raise AtenImportError("cross_entropy with probability (float) targets is not supported")
    cdim, classes = _class_dim(logp), _shape(logp)[_class_dim(logp)]
    labels = e.emit(T.ArangeOp(0.0, 1.0, TensorType(elt_of(target), [classes])))
    one_hot = e.emit(T.EqOp(_per_class(e, labels, logp), e.emit(T.UnsqueezeOp(target, cdim))))
    zero = e.scalar(0.0, elt)
    picked = e.emit(T.SumOp(e.emit(T.WhereOp(one_hot, logp, zero)), [cdim]))
    valid = e.cast(e.binary(T.NeOp, target, int(a["ignore_index"])), elt)
    kept = valid
    weight = (
        None if a["weight"] is None else _per_class(e, e.cast(e.tensor(a["weight"]), elt), logp)
    )
    if weight is not None:  # w[t], and 0 for an ignored t
        kept = e.emit(
            T.MulOp(kept, e.emit(T.SumOp(e.emit(T.WhereOp(one_hot, weight, zero)), [cdim])))
        )
    loss = e.emit(T.MulOp(e.emit(T.NegOp(picked)), kept))
    reduction, smoothing = a["reduction"], float(a.get("label_smoothing", 0.0))
    if reduction == 1:
        everything = list(range(rank_of(loss)))
        total_weight = e.emit(T.SumOp(kept, everything))
        loss = e.emit(T.DivOp(e.emit(T.SumOp(loss, everything)), total_weight))
    else:
        loss = _reduced(e, loss, reduction)
    if not smoothing:
        return loss
    weighted = logp if weight is None else e.emit(T.MulOp(logp, weight))
    smooth = e.emit(T.NegOp(e.emit(T.SumOp(weighted, [cdim]))))
    smooth = e.emit(T.MulOp(smooth, valid))
    if reduction == 1 and weight is not None:
        everything = list(range(rank_of(smooth)))
        smooth = e.emit(T.DivOp(e.emit(T.SumOp(smooth, everything)), total_weight))
    else:
        smooth = _reduced(e, smooth, reduction)
    nll = e.binary(T.MulOp, loss, 1.0 - smoothing)
    return e.emit(T.AddOp(nll, e.binary(T.MulOp, smooth, smoothing / classes)))


@handles(aten.cross_entropy_loss.default, emits=_CLASS_LOSS_OPS)
def _cross_entropy(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`nll_loss(log_softmax(input, class dim), target)`."""
    x = e.tensor(a["input"])
    return _nll(e, e.emit(T.LogSoftmaxOp(x, _class_dim(x))), a, out)


@handles(aten.nll_loss_nd.default, aten.nll_loss.default, emits=_CLASS_LOSS_OPS)
def _nll_loss(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return _nll(e, e.tensor(a["input"]), a, out)


# --- pooling and convolution: sliding windows ---------------------------------------------


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
        for i, n in enumerate(_shape(x)[-k:]):
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
    sizes = list(_shape(x)[-k:])
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
    n = _shape(x)[0]
    out_channels, group_channels, *kernel = _shape(weight)
    windows = e.emit(T.WindowOp(x, **w))
    outputs = _shape(windows)[2 : 2 + k]
    positions, taps = math.prod(outputs), group_channels * math.prod(kernel)
    grouped = _reshaped(e, windows, [n, groups, group_channels, *outputs, *kernel])
    order = [0, 1, *range(3, 3 + k), 2, *range(3 + k, 3 + 2 * k)]
    patches = _reshaped(e, e.emit(T.PermuteOp(grouped, order)), [n, groups, positions, taps])
    per_group = _reshaped(e, weight, [groups, out_channels // groups, taps])
    product = e.emit(T.MatmulOp(patches, e.emit(T.TransposeOp(per_group, 1, 2))))
    y = _reshaped(e, e.emit(T.PermuteOp(product, [0, 1, 3, 2])), [n, out_channels, *outputs])
    if bias is not None:
        y = e.emit(T.AddOp(y, _per_channel(e, bias, rank_of(y))))
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
            x = _reshaped(e, x, [1, *_shape(x)])
        kernel = list(_shape(weight)[2:])
        low, high = _conv_padding(a, kernel, k)
        w = {"kernel": kernel, "stride": _spatial(a["stride"], k)}
        w |= {"dilation": _spatial(a["dilation"], k), "low": low, "high": high}
        y = _convolve(e, x, weight, a["bias"], w, int(a["groups"]))
        return _reshaped(e, y, out.get_shape()) if unbatched else y

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
        shape = _shape(x)
        column = e.emit(T.UnsqueezeOp(x, dim + 1))
        zeros_shape = [*shape[: dim + 1], s - 1, *shape[dim + 1 :]]
        zeros = e.emit(T.ConstantOp(0.0, TensorType(elt_of(x), zeros_shape)))
        pairs = e.emit(T.CatOp([column, zeros], dim + 1))
        merged = _reshaped(e, pairs, [*shape[:dim], shape[dim] * s, *shape[dim + 1 :]])
        x = e.emit(T.SliceOp(merged, dim, 0, (shape[dim] - 1) * s + 1))
    return x


def _flipped(e: Emitter, x: SSAValue, dims: Sequence[int]) -> SSAValue:
    """`x` reversed along `dims`: each moved to the front, gathered with a descending
    `arange`, and moved back."""
    for dim in dims:
        size = _shape(x)[dim]
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
            x = _reshaped(e, x, [1, *_shape(x)])
        stride, pad = _spatial(a["stride"], k), _spatial(a["padding"], k)
        dilation, extra = _spatial(a["dilation"], k), _spatial(a["output_padding"], k)
        groups = int(a["groups"])
        in_channels, group_out, *kernel = _shape(weight)
        low = [d * (n - 1) - p for d, n, p in zip(dilation, kernel, pad, strict=True)]
        if min(low) < 0:
            raise AtenImportError("conv_transpose with padding > dilation * (kernel - 1)")
        per_group = [groups, in_channels // groups, group_out, *kernel]
        swapped = e.emit(T.PermuteOp(_reshaped(e, weight, per_group), [0, 2, 1, *range(3, 3 + k)]))
        regrouped = _reshaped(e, swapped, [groups * group_out, in_channels // groups, *kernel])
        flipped = _flipped(e, regrouped, range(2, 2 + k))
        high = [lo + x for lo, x in zip(low, extra, strict=True)]
        w = {"kernel": kernel, "stride": [1] * k, "dilation": dilation, "low": low, "high": high}
        y = _convolve(e, _spread(e, x, stride), flipped, a["bias"], w, groups)
        return _reshaped(e, y, out.get_shape()) if unbatched else y

    return handler


for _k, _target in (
    (1, aten.conv_transpose1d.default),
    (2, aten.conv_transpose2d.input),
    (3, aten.conv_transpose3d.input),
):
    handles(_target, emits=_CONV_TRANSPOSE_OPS)(_conv_transpose_handler(_k))


# --- einsum: permutes, reshapes and batched matmuls -----------------------------------------


def _einsum_terms(equation: str, ranks: Sequence[int]) -> tuple[list[str], str]:
    """The operands' subscripts and the output's, one character per dim: `...` becomes
    fresh labels aligned to the right (broadcast like numpy), and an implicit output is the
    labels seen once, sorted, after the broadcast ones (PyTorch's rule)."""
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise AtenImportError(f"einsum '{equation}' has {len(terms)} terms for {len(ranks)}")
    fresh = [chr(0x100 + i) for i in range(max(ranks, default=0))]
    widest = 0
    for i, (term, rank) in enumerate(zip(terms, ranks, strict=True)):
        if "..." in term:
            width = rank - (len(term) - 3)
            widest = max(widest, width)
            terms[i] = term.replace("...", "".join(fresh[len(fresh) - width :]))
    broadcast = "".join(fresh[len(fresh) - widest :]) if widest else ""
    if arrow:
        out = rhs.replace("...", broadcast)
    else:
        counts = {c: sum(t.count(c) for t in terms) for c in set("".join(terms))}
        once = sorted(c for c, n in counts.items() if n == 1 and c not in fresh)
        out = broadcast + "".join(once)
    return terms, out


def _einsum_diagonal(e: Emitter, x: SSAValue, term: str) -> tuple[SSAValue, str]:
    """`x` reduced to its diagonal over each label its term repeats (`x[i, i]` for every
    `i`, the label kept once): the repeated dims permuted to the front and gathered with
    one `arange` per dim. The new dim comes first; the contraction permutes at the end."""
    for label in dict.fromkeys(c for c in term if term.count(c) > 1):
        same = [i for i, c in enumerate(term) if c == label]
        if len({_shape(x)[i] for i in same}) != 1:
            raise AtenImportError(f"einsum repeats a subscript over dims of sizes {_shape(x)}")
        order = same + [i for i, c in enumerate(term) if c != label]
        front = e.emit(T.PermuteOp(x, order)) if order != sorted(order) else x
        size = _shape(x)[same[0]]
        steps = e.emit(T.ArangeOp(0.0, 1.0, TensorType(i64, [size])))
        x = e.emit(T.IndexOp(front, [steps] * len(same)))
        term = label + "".join(c for c in term if c != label)
    return x, term


def _einsum_sum_out(e: Emitter, x: SSAValue, term: str, keep: str) -> tuple[SSAValue, str]:
    """Sums the dims of `x` whose labels are not in `keep`."""
    gone = [i for i, c in enumerate(term) if c not in keep]
    if not gone:
        return x, term
    return e.emit(T.SumOp(x, gone)), "".join(c for c in term if c in keep)


def _einsum_pair(
    e: Emitter, a: SSAValue, ta: str, b: SSAValue, tb: str, keep: str
) -> tuple[SSAValue, str]:
    """`a` and `b` contracted over their common labels not in `keep`, as one batched
    matmul: `a` as (batch, a-only, contracted), `b` as (batch, contracted, b-only)."""
    sizes = {
        c: n for t, v in ((ta, a), (tb, b)) for c, n in zip(t, _shape(v), strict=True) if n != 1
    }
    sizes |= {c: 1 for c in ta + tb if c not in sizes}
    batch = [c for c in ta if c in tb and c in keep]
    summed = [c for c in ta if c in tb and c not in keep]
    only_a, only_b = [c for c in ta if c not in tb], [c for c in tb if c not in ta]

    def arrange(x: SSAValue, term: str, groups: list[list[str]]) -> SSAValue:
        labels = [c for group in groups for c in group]
        x = e.emit(T.PermuteOp(x, [term.index(c) for c in labels])) if list(term) != labels else x
        full = [sizes[c] for c in labels]
        if list(_shape(x)) != full:  # a size-1 (broadcast) batch dim
            x = e.emit(T.ExpandOp(x, full))
        return _reshaped(e, x, [math.prod(sizes[c] for c in group) for group in groups])

    lhs = arrange(a, ta, [batch, only_a, summed])
    rhs = arrange(b, tb, [batch, summed, only_b])
    product = e.emit(T.MatmulOp(lhs, rhs))
    term = "".join(batch + only_a + only_b)
    return _reshaped(e, product, [sizes[c] for c in term]), term


@handles(
    aten.einsum.default,
    emits=(T.SumOp, T.PermuteOp, T.ExpandOp, T.ReshapeOp, T.MatmulOp, T.ArangeOp, T.IndexOp),
)
def _einsum(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """Any einsum: each operand is first reduced to its diagonals (repeated subscripts),
    then labels no later term needs are summed out, then the operands are contracted left
    to right, two at a time, each pair one batched matmul; the result is permuted to the
    output's order."""
    xs = [e.tensor(x) for x in a["tensors"]]
    terms, target = _einsum_terms(a["equation"], [rank_of(x) for x in xs])
    pairs = [_einsum_diagonal(e, x, term) for x, term in zip(xs, terms, strict=True)]
    xs, terms = [x for x, _ in pairs], [term for _, term in pairs]
    value, term = xs[0], terms[0]
    for i in range(1, len(xs) + 1):
        value, term = _einsum_sum_out(e, value, term, target + "".join(terms[i:]))
        if i == len(xs):
            break
        later = target + "".join(terms[i + 1 :])  # what the pair's result must keep
        other, other_term = _einsum_sum_out(e, xs[i], terms[i], later + term)
        value, term = _einsum_pair(e, value, term, other, other_term, later)
    if term != target:
        value = e.emit(T.PermuteOp(value, [term.index(c) for c in target]))
    return value
