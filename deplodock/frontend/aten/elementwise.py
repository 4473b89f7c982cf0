"""Elementwise aten ops: arithmetic (with promotion), activations, clamps, comparisons, bool
logic, where / masked_fill, dtype conversions and generated tensors (arange, full, ones, ...)."""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import TensorType, i1
from xdsl.ir import Attribute, SSAValue

from deplodock.dialects import torch as T
from deplodock.frontend.aten.core import (
    AtenImportError,
    Emitter,
    Handler,
    aten,
    handles,
)

# --- elementwise ------------------------------------------------------------------------------


def arithmetic_type(out: TensorType) -> Attribute:
    """Arithmetic computes in the result's dtype (already promoted by PyTorch)."""
    if out.element_type == i1:
        raise AtenImportError("arithmetic on bool tensors")
    return out.element_type


#: Arithmetic whose result PyTorch keeps bool (both operands bool): `+` and `maximum` are
#: `or`, `*` and `minimum` are `and` (PyTorch's own decompositions multiply masks).
_BOOL_ARITHMETIC: dict[type[T.BinaryOp], type[T.LogicalBinaryOp]] = {
    T.AddOp: T.LogicalOrOp,
    T.MaximumOp: T.LogicalOrOp,
    T.MulOp: T.LogicalAndOp,
    T.MinimumOp: T.LogicalAndOp,
}


def _bool_arithmetic(e: Emitter, op: type[T.BinaryOp], a: dict[str, Any]) -> SSAValue:
    logical = _BOOL_ARITHMETIC.get(op)
    if logical is None or a.get("alpha", 1) != 1:
        raise AtenImportError("arithmetic on bool tensors")
    return e.emit(logical(e.boolean(a["input"]), e.boolean(a["other"])))


def _binary_handler(op: type[T.BinaryOp]) -> Handler:
    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        if out.element_type == i1:
            return _bool_arithmetic(e, op, a)
        elt = arithmetic_type(out)
        rhs, alpha = a["other"], a.get("alpha", 1)
        if alpha != 1:
            rhs = e.binary(T.MulOp, rhs, alpha, elt)
        return e.binary(op, a["input"], rhs, elt)

    return handler


for _ops, _op in [
    ((aten.add.Tensor, aten.add.Scalar), T.AddOp),
    ((aten.sub.Tensor, aten.sub.Scalar), T.SubOp),
    ((aten.mul.Tensor, aten.mul.Scalar), T.MulOp),
    ((aten.div.Tensor, aten.div.Scalar), T.DivOp),
]:
    _logical = (_BOOL_ARITHMETIC[_op],) if _op in _BOOL_ARITHMETIC else ()
    handles(*_ops, emits=(_op, T.MulOp, *_logical))(_binary_handler(_op))


@handles(aten.rsub.Scalar, aten.rsub.Tensor, emits=(T.SubOp, T.MulOp))
def _rsub(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    elt = arithmetic_type(out)
    x = a["input"] if a["alpha"] == 1 else e.binary(T.MulOp, a["input"], a["alpha"], elt)
    return e.binary(T.SubOp, a["other"], x, elt)


def unary_handler(op: type[T.UnaryOp]) -> Handler:
    """`op(x)` computed in the result's dtype (`exp` of an int tensor is float: cast first)."""
    return lambda e, a, out: e.emit(op(e.cast(e.tensor(a["input"]), out.element_type)))


for _target, _uop in [
    (aten.neg.default, T.NegOp),
    (aten.exp.default, T.ExpOp),
    (aten.log.default, T.LogOp),
    (aten.sqrt.default, T.SqrtOp),
    (aten.rsqrt.default, T.RsqrtOp),
    (aten.abs.default, T.AbsOp),
    (aten.relu.default, T.ReluOp),
    (aten.sigmoid.default, T.SigmoidOp),
    (aten.tanh.default, T.TanhOp),
    (aten.silu.default, T.SiluOp),
    (aten.cos.default, T.CosOp),
    (aten.sin.default, T.SinOp),
    (aten.erf.default, T.ErfOp),
    (aten.hardswish.default, T.HardswishOp),
    (aten.hardsigmoid.default, T.HardsigmoidOp),
    (aten.mish.default, T.MishOp),
    (aten.log_sigmoid.default, T.LogSigmoidOp),
]:
    handles(_target, emits=_uop)(unary_handler(_uop))


@handles(aten.reciprocal.default, emits=T.DivOp)
def _reciprocal(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return e.binary(T.DivOp, 1.0, a["input"], arithmetic_type(out))


@handles(aten.gelu.default, emits=T.GeluOp)
def _gelu(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return e.emit(T.GeluOp(e.tensor(a["input"]), a["approximate"]))


@handles(aten.pow.Tensor_Scalar, emits=T.PowOp)
def _pow(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return e.emit(T.PowOp(e.tensor(a["input"]), float(a["exponent"])))


_EXTREMA = (T.MaximumOp, T.MinimumOp)


def _extremum_handler(op: type[T.ExtremumOp]) -> Handler:
    """`torch.maximum` / `torch.minimum` (NaN-propagating), in the promoted dtype."""

    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        if out.element_type == i1:
            return _bool_arithmetic(e, op, a)
        return e.binary(op, a["input"], a["other"], arithmetic_type(out))

    return handler


for _target, _extremum in [
    (aten.maximum.default, T.MaximumOp),
    (aten.minimum.default, T.MinimumOp),
]:
    handles(_target, emits=(_extremum, _BOOL_ARITHMETIC[_extremum]))(_extremum_handler(_extremum))


def _bound(value: Any) -> float | None:
    """A clamp bound: a Python scalar or None (tensor bounds are `aten.clamp.Tensor`, which
    the table does not handle)."""
    if value is None:
        return None
    if not isinstance(value, int | float):
        raise AtenImportError(f"clamp with a tensor bound {value!r} is not supported")
    return float(value)


@handles(aten.clamp.default, aten.clamp_min.default, aten.clamp_max.default, emits=T.ClampOp)
def _clamp(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`clamp(x, min, max)`, `clamp_min(x, min)`, `clamp_max(x, max)`: one `torch.clamp`,
    computed in the promoted dtype (`clamp(int_tensor, 0.5)` is float)."""
    x = e.cast(e.tensor(a["input"]), arithmetic_type(out))
    return e.emit(T.ClampOp(x, _bound(a.get("min")), _bound(a.get("max"))))


@handles(aten.hardtanh.default, aten.relu6.default, emits=T.ClampOp)
def _hardtanh(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`hardtanh(x, min_val, max_val)` is a clamp, and `relu6(x)` is `hardtanh(x, 0, 6)`."""
    low, high = _bound(a.get("min_val", 0.0)), _bound(a.get("max_val", 6.0))
    return e.emit(T.ClampOp(e.tensor(a["input"]), low, high))


@handles(aten.clamp.Tensor, aten.clamp_min.Tensor, aten.clamp_max.Tensor, emits=_EXTREMA)
def _clamp_tensor(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`clamp` with tensor bounds: `minimum(maximum(x, min), max)`, so NaN in `x` or in a
    bound propagates and `min > max` gives `max`, as in PyTorch. Everything is computed in
    the promoted dtype, and the bounds broadcast."""
    elt = arithmetic_type(out)
    y = e.operand(a["input"], elt)
    if (low := a.get("min")) is not None:
        y = e.emit(T.MaximumOp(y, e.operand(low, elt)))
    if (high := a.get("max")) is not None:
        y = e.emit(T.MinimumOp(y, e.operand(high, elt)))
    return y


@handles(aten.leaky_relu.default, emits=T.LeakyReluOp)
def _leaky_relu(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return e.emit(T.LeakyReluOp(e.tensor(a["input"]), float(a["negative_slope"])))


#: `F.selu`'s fixed constants (Klambauer et al. 2017), as PyTorch spells them.
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


@handles(aten.elu.default, aten.selu.default, aten.celu.default, emits=T.EluOp)
def _elu(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """elu, selu and celu are one `torch.elu` with aten's three coefficients: selu fixes
    alpha and scale, `celu(x, alpha)` is `elu(x, alpha, input_scale=1/alpha)`."""
    x = e.tensor(a["input"])
    if "scale" in a:  # aten.elu
        coefficients = (a["alpha"], a["scale"], a["input_scale"])
    elif "alpha" in a:  # aten.celu
        coefficients = (a["alpha"], 1.0, 1.0 / a["alpha"])
    else:  # aten.selu
        coefficients = (SELU_ALPHA, SELU_SCALE, 1.0)
    return e.emit(T.EluOp(x, *(float(c) for c in coefficients)))


@handles(aten.softplus.default, emits=T.SoftplusOp)
def _softplus(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    x = e.tensor(a["input"])
    return e.emit(T.SoftplusOp(x, float(a["beta"]), float(a["threshold"])))


@handles(
    aten.clone.default,
    aten.contiguous.default,
    aten.alias.default,
    aten.detach.default,
    aten.detach_.default,
    aten.lift_fresh_copy.default,
    aten._to_copy.default,
    aten.to.dtype,
    aten.to.dtype_layout,
    aten.to.device,
    aten.type_as.default,
    emits=T.CastOp,
)
def _copy(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """Copies and conversions: values are immutable, so only a dtype change is an op."""
    x = e.tensor(a["input"])
    assert isinstance(x.type, TensorType)
    if x.type.get_shape() != out.get_shape():
        raise AtenImportError(f"conversion {x.type} -> {out} changes the shape")
    return e.cast(x, out.element_type)


@handles(aten.dropout.default, emits=())
def _dropout(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    if a["train"] and a["p"] > 0:
        raise AtenImportError("dropout in training mode is random; capture the module in eval()")
    return e.tensor(a["input"])


# --- comparisons, logic, selection ----------------------------------------------------------


def _compare_handler(op: type[T.CompareOp]) -> Handler:
    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        return e.binary(op, a["input"], a["other"])

    return handler


for _ops, _cmp in [
    ((aten.eq.Tensor, aten.eq.Scalar), T.EqOp),
    ((aten.ne.Tensor, aten.ne.Scalar), T.NeOp),
    ((aten.lt.Tensor, aten.lt.Scalar), T.LtOp),
    ((aten.le.Tensor, aten.le.Scalar), T.LeOp),
    ((aten.gt.Tensor, aten.gt.Scalar), T.GtOp),
    ((aten.ge.Tensor, aten.ge.Scalar), T.GeOp),
]:
    handles(*_ops, emits=_cmp)(_compare_handler(_cmp))


def _logical_handler(op: type[T.LogicalBinaryOp]) -> Handler:
    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        return e.emit(op(e.boolean(a["input"]), e.boolean(a["other"])))

    return handler


# Each also emits `torch.ne`: `Emitter.boolean` compares non-bool operands with 0. The
# bitwise ops (bools and integers) are in `arithmetic`.
for _target, _logical in [
    (aten.logical_and.default, T.LogicalAndOp),
    (aten.logical_or.default, T.LogicalOrOp),
]:
    handles(_target, emits=(_logical, T.NeOp))(_logical_handler(_logical))


@handles(aten.logical_not.default, emits=(T.LogicalNotOp, T.NeOp))
def _logical_not(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return e.emit(T.LogicalNotOp(e.boolean(a["input"])))


@handles(
    aten.where.self,
    aten.where.ScalarSelf,
    aten.where.ScalarOther,
    aten.where.Scalar,
    emits=(T.WhereOp, T.NeOp),
)
def _where(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    elt = out.element_type
    x, y = e.operand(a["input"], elt), e.operand(a["other"], elt)
    return e.emit(T.WhereOp(e.boolean(a["condition"]), x, y))


@handles(aten.masked_fill.Scalar, aten.masked_fill.Tensor, emits=(T.WhereOp, T.NeOp))
def _masked_fill(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`masked_fill(x, mask, v)` is `where(mask, v, x)`."""
    elt = out.element_type
    value = e.operand(a["value"], elt)
    return e.emit(T.WhereOp(e.boolean(a["mask"]), value, e.operand(a["input"], elt)))


# --- generated tensors -------------------------------------------------------------------------


@handles(aten.arange.default, aten.arange.start, aten.arange.start_step, emits=T.ArangeOp)
def _arange(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return e.emit(T.ArangeOp(float(a.get("start", 0)), float(a.get("step", 1)), out))


def _fill_handler(default: float | None) -> Handler:
    """`full`-like factories: a splat `torch.constant` of the result type."""

    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        value = a.get("fill_value", a.get("value", default))
        if not isinstance(value, int | float):
            raise AtenImportError(f"unsupported fill value {value!r}")
        if out.element_type == i1:
            value = bool(value)
        return e.emit(T.ConstantOp(float(value), out))

    return handler


for _fills, _value in [
    ((aten.full.default, aten.new_full.default, aten.full_like.default), None),
    ((aten.ones.default, aten.new_ones.default, aten.ones_like.default), 1.0),
    ((aten.zeros.default, aten.new_zeros.default, aten.zeros_like.default), 0.0),
    ((aten.fill.Scalar,), None),
    # uninitialized memory: any value is right, zeros are deterministic
    ((aten.empty.memory_format, aten.empty_strided.default, aten.empty_like.default), 0.0),
]:
    handles(*_fills, emits=T.ConstantOp)(_fill_handler(_value))


@handles(aten.scalar_tensor.default, emits=T.ConstantOp)
def _scalar_tensor(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return e.emit(T.ConstantOp(float(a["s"]), out))
