"""The losses: each a few elementwise ops and reductions, ending in PyTorch's `reduction`
(`0` none, `1` mean, `2` sum); the margin losses measure with `norms.pairwise_distance`.
"""

from __future__ import annotations

import math
from typing import Any

from xdsl.dialects.builtin import TensorType, i32, i64
from xdsl.ir import SSAValue

from deplodock.dialects import torch as T
from deplodock.frontend.aten.composite.common import reshaped, tensor_shape
from deplodock.frontend.aten.composite.norms import VECTOR_NORM_OPS, pairwise_distance
from deplodock.frontend.aten.core import AtenImportError, Emitter, aten, elt_of, handles, rank_of


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


_MARGIN_LOSS_OPS = (*_LOSS_OPS, *VECTOR_NORM_OPS, T.AddOp, T.ClampOp, T.MinimumOp, T.NegOp)


@handles(aten.triplet_margin_loss.default, emits=_MARGIN_LOSS_OPS)
def _triplet_margin_loss(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`max(margin + d(anchor, positive) - d(anchor, negative), 0)`, `d` the pairwise
    distance; with `swap`, `d(anchor, negative)` is at most `d(positive, negative)`."""
    elt, p, eps = out.element_type, float(a["p"]), float(a["eps"])
    positive = pairwise_distance(e, a["anchor"], a["positive"], p, eps, elt)
    negative = pairwise_distance(e, a["anchor"], a["negative"], p, eps, elt)
    if a["swap"]:
        swapped = pairwise_distance(e, a["positive"], a["negative"], p, eps, elt)
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
    return reshaped(e, v, [tensor_shape(v)[0]] + [1] * (rank_of(x) - 1 - _class_dim(x)))


def _nll(e: Emitter, logp: SSAValue, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`nll_loss` of log-probabilities `logp` with integer targets: `-w[t] * logp[t]` per
    sample (a one-hot select along the class dim), 0 where `t == ignore_index`; mean divides
    by the summed weights of the kept samples, as PyTorch. With `label_smoothing` the loss
    is `(1 - s) nll + s / C * smooth`, `smooth = -sum_c w_c logp_c`, reduced as ATen does."""
    target, elt = e.tensor(a["target"]), elt_of(logp)
    if elt_of(target) not in (i64, i32):
        raise AtenImportError("cross_entropy with probability (float) targets is not supported")
    cdim, classes = _class_dim(logp), tensor_shape(logp)[_class_dim(logp)]
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
