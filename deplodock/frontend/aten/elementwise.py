"""Elementwise aten ops: arithmetic (with promotion), activations, comparisons, bool logic,
where / masked_fill, dtype conversions and generated tensors (arange, full, ones, ...)."""

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


def _arithmetic_type(out: TensorType) -> Attribute:
    """Arithmetic computes in the result's dtype (already promoted by PyTorch)."""
    if out.element_type == i1:
        raise AtenImportError("arithmetic on bool tensors")
    return out.element_type


def _binary_handler(op: type[T.BinaryOp]) -> Handler:
    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        elt = _arithmetic_type(out)
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
    handles(*_ops)(_binary_handler(_op))


@handles(aten.rsub.Scalar, aten.rsub.Tensor)
def _rsub(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    elt = _arithmetic_type(out)
    x = a["input"] if a["alpha"] == 1 else e.binary(T.MulOp, a["input"], a["alpha"], elt)
    return e.binary(T.SubOp, a["other"], x, elt)


def _unary_handler(op: type[T.UnaryOp]) -> Handler:
    return lambda e, a, out: e.emit(op(e.tensor(a["input"])))


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
]:
    handles(_target)(_unary_handler(_uop))


@handles(aten.reciprocal.default)
def _reciprocal(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return e.binary(T.DivOp, 1.0, a["input"], _arithmetic_type(out))


@handles(aten.gelu.default)
def _gelu(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return e.emit(T.GeluOp(e.tensor(a["input"]), a["approximate"]))


@handles(aten.pow.Tensor_Scalar)
def _pow(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return e.emit(T.PowOp(e.tensor(a["input"]), float(a["exponent"])))


@handles(aten.clone.default, aten.contiguous.default, aten.alias.default, aten.detach.default)
@handles(aten.lift_fresh_copy.default, aten._to_copy.default, aten.to.dtype)
@handles(aten.to.dtype_layout, aten.to.device, aten.type_as.default)
def _copy(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """Copies and conversions: values are immutable, so only a dtype change is an op."""
    x = e.tensor(a["input"])
    assert isinstance(x.type, TensorType)
    if x.type.get_shape() != out.get_shape():
        raise AtenImportError(f"conversion {x.type} -> {out} changes the shape")
    return e.cast(x, out.element_type)


@handles(aten.dropout.default)
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
    handles(*_ops)(_compare_handler(_cmp))


def _logical_handler(op: type[T.LogicalBinaryOp], bitwise: bool) -> Handler:
    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        if bitwise and out.element_type != i1:
            raise AtenImportError("bitwise ops on integer tensors are not supported")
        return e.emit(op(e.boolean(a["input"]), e.boolean(a["other"])))

    return handler


handles(aten.logical_and.default)(_logical_handler(T.LogicalAndOp, False))
handles(aten.logical_or.default)(_logical_handler(T.LogicalOrOp, False))
handles(aten.__and__.Tensor, aten.bitwise_and.Tensor)(_logical_handler(T.LogicalAndOp, True))
handles(aten.__or__.Tensor, aten.bitwise_or.Tensor)(_logical_handler(T.LogicalOrOp, True))


@handles(aten.logical_not.default, aten.bitwise_not.default)
def _logical_not(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    if out.element_type != i1:
        raise AtenImportError("bitwise_not on integer tensors is not supported")
    return e.emit(T.LogicalNotOp(e.boolean(a["input"])))


@handles(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def _where(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    elt = out.element_type
    x, y = e.operand(a["input"], elt), e.operand(a["other"], elt)
    return e.emit(T.WhereOp(e.boolean(a["condition"]), x, y))


@handles(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def _masked_fill(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`masked_fill(x, mask, v)` is `where(mask, v, x)`."""
    elt = out.element_type
    value = e.operand(a["value"], elt)
    return e.emit(T.WhereOp(e.boolean(a["mask"]), value, e.operand(a["input"], elt)))


# --- generated tensors -------------------------------------------------------------------------


@handles(aten.arange.default, aten.arange.start, aten.arange.start_step)
def _arange(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return e.emit(T.ArangeOp(float(a.get("start", 0)), float(a.get("step", 1)), out))


def _fill_handler(default: float | None) -> Handler:
    """`full`-like factories: a splat `torch.constant` of the result type."""

    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        value = a.get("fill_value", default)
        if not isinstance(value, int | float):
            raise AtenImportError(f"unsupported fill value {value!r}")
        if out.element_type == i1:
            value = bool(value)
        return e.emit(T.ConstantOp(float(value), out))

    return handler


handles(aten.full.default, aten.new_full.default, aten.full_like.default)(_fill_handler(None))
handles(aten.ones.default, aten.new_ones.default, aten.ones_like.default)(_fill_handler(1.0))
handles(aten.zeros.default, aten.new_zeros.default, aten.zeros_like.default)(_fill_handler(0.0))


@handles(aten.scalar_tensor.default)
def _scalar_tensor(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return e.emit(T.ConstantOp(float(a["s"]), out))
