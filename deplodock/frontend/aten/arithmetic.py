"""Elementwise math the Core ATen opset adds to the basic arithmetic of `elementwise`: the
float functions (`acos` ... `trunc`, `atan2`, `pow` with a tensor exponent), division with a
rounding mode, the two remainders, bitwise ops on integers, and the predicates `sign`,
`isnan`, `isinf`.

The float functions are one torch op each; the rest are written with existing torch ops:
`fmod(a, b) = a - trunc(a / b) * b` and `remainder(a, b) = a - floor(a / b) * b` (Python's
`%`, the sign of `b`), integer division rounds toward zero (`arith.divsi`), and a floor
division subtracts one where the remainder is nonzero and the signs differ.
"""

from __future__ import annotations

import math
from typing import Any

from xdsl.dialects.builtin import TensorType, i1
from xdsl.ir import Attribute, SSAValue

from deplodock.dialects import torch as T
from deplodock.frontend.aten.core import AtenImportError, Emitter, Handler, aten, elt_of, handles
from deplodock.frontend.aten.elementwise import arithmetic_type, unary_handler

for _target, _uop in [
    (aten.acos.default, T.AcosOp),
    (aten.acosh.default, T.AcoshOp),
    (aten.asin.default, T.AsinOp),
    (aten.asinh.default, T.AsinhOp),
    (aten.atan.default, T.AtanOp),
    (aten.atanh.default, T.AtanhOp),
    (aten.cosh.default, T.CoshOp),
    (aten.sinh.default, T.SinhOp),
    (aten.tan.default, T.TanOp),
    (aten.expm1.default, T.Expm1Op),
    (aten.log1p.default, T.Log1pOp),
    (aten.log2.default, T.Log2Op),
    (aten.log10.default, T.Log10Op),
]:
    handles(_target, emits=_uop)(unary_handler(_uop))


def _rounding_handler(op: type[T.UnaryOp]) -> Handler:
    """`ceil`, `floor`, `round`, `trunc`: an integer tensor is already integral (itself)."""

    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        x = e.tensor(a["input"])
        return e.emit(op(x)) if T.is_float(out.element_type) else x

    return handler


for _target, _rop in [
    (aten.ceil.default, T.CeilOp),
    (aten.floor.default, T.FloorOp),
    (aten.round.default, T.RoundOp),
    (aten.trunc.default, T.TruncOp),
]:
    handles(_target, emits=_rop)(_rounding_handler(_rop))


def _float_type(out: TensorType, what: str) -> Attribute:
    if not T.is_float(out.element_type):
        raise AtenImportError(f"{what} of integer tensors is not supported")
    return out.element_type


@handles(aten.atan2.default, aten.atan2.out, emits=T.Atan2Op)
def _atan2(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return e.binary(T.Atan2Op, a["input"], a["other"], _float_type(out, "atan2"))


@handles(aten.pow.Tensor_Tensor, aten.pow.Scalar, emits=T.PowTensorOp)
def _pow_tensor(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`x ** y` with a tensor exponent (or a scalar base, `pow.Scalar`)."""
    return e.binary(T.PowTensorOp, a["input"], a["exponent"], _float_type(out, "pow"))


# --- division with rounding, remainders --------------------------------------------------------


def _floor_quotient(e: Emitter, x: SSAValue, y: SSAValue) -> SSAValue:
    """`floor(x / y)` of integers: the truncated quotient, less one where the remainder is
    nonzero and the operands' signs differ."""
    q = e.emit(T.DivOp(x, y))
    r = e.emit(T.SubOp(x, e.emit(T.MulOp(q, y))))
    signs_differ = e.emit(T.NeOp(e.binary(T.LtOp, x, 0), e.binary(T.LtOp, y, 0)))
    fix = e.emit(T.LogicalAndOp(e.binary(T.NeOp, r, 0), signs_differ))
    return e.emit(T.SubOp(q, e.cast(fix, elt_of(q))))


def quotient(e: Emitter, lhs: Any, rhs: Any, mode: str | None, elt: Attribute) -> SSAValue:
    """`lhs / rhs` rounded as `torch.div(..., rounding_mode=mode)`: None (true division),
    'trunc' or 'floor'."""
    x, y = e.operand(lhs, elt), e.operand(rhs, elt)
    if not T.is_float(elt):
        if mode is None:
            raise AtenImportError("true division of integers computes in float")
        return e.emit(T.DivOp(x, y)) if mode == "trunc" else _floor_quotient(e, x, y)
    q = e.emit(T.DivOp(x, y))
    if mode is None:
        return q
    return e.emit((T.TruncOp if mode == "trunc" else T.FloorOp)(q))


_QUOTIENT_OPS = (T.DivOp, T.TruncOp, T.FloorOp, T.SubOp, T.MulOp, T.NeOp, T.LtOp, T.LogicalAndOp)


@handles(aten.div.Tensor_mode, aten.div.Scalar_mode, emits=_QUOTIENT_OPS)
def _div_mode(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    return quotient(e, a["input"], a["other"], a["rounding_mode"], arithmetic_type(out))


def _remainder_handler(mode: str) -> Handler:
    """`a - q * b` with `q` the quotient rounded by `mode`: 'trunc' is `fmod` (the sign of
    `a`), 'floor' is `remainder` (the sign of `b`)."""

    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        elt = arithmetic_type(out)
        x, y = e.operand(a["input"], elt), e.operand(a["other"], elt)
        q = quotient(e, x, y, mode, elt)
        return e.emit(T.SubOp(x, e.emit(T.MulOp(q, y))))

    return handler


handles(aten.fmod.Tensor, aten.fmod.Scalar, emits=_QUOTIENT_OPS)(_remainder_handler("trunc"))
handles(aten.remainder.Tensor, aten.remainder.Scalar, emits=_QUOTIENT_OPS)(
    _remainder_handler("floor")
)


# --- bitwise ops, predicates --------------------------------------------------------------------


def _bitwise_handler(op: type[T.BitwiseBinaryOp], logical: type[T.LogicalBinaryOp]) -> Handler:
    """On bools the logical op, on integers the bitwise one (in the promoted type)."""

    def handler(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
        if out.element_type == i1:
            return e.emit(logical(e.boolean(a["input"]), e.boolean(a["other"])))
        return e.binary(op, a["input"], a["other"], out.element_type)

    return handler


_AND = (aten.bitwise_and.Tensor, aten.bitwise_and.Scalar, aten.__and__.Tensor)
_OR = (aten.bitwise_or.Tensor, aten.bitwise_or.Scalar, aten.__or__.Tensor)
_XOR = (aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar, aten.__xor__.Tensor)
for _targets, _bop, _logical in [
    (_AND, T.BitwiseAndOp, T.LogicalAndOp),
    (_OR, T.BitwiseOrOp, T.LogicalOrOp),
    (_XOR, T.BitwiseXorOp, T.NeOp),
]:
    handles(*_targets, emits=(_bop, _logical, T.NeOp))(_bitwise_handler(_bop, _logical))


@handles(aten.bitwise_not.default, emits=(T.LogicalNotOp, T.BitwiseXorOp))
def _bitwise_not(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`~x`: logical not on bools, `x ^ -1` on integers (two's complement)."""
    x = e.tensor(a["input"])
    if out.element_type == i1:
        return e.emit(T.LogicalNotOp(x))
    return e.binary(T.BitwiseXorOp, x, -1, out.element_type)


@handles(aten.logical_xor.default, emits=T.NeOp)
def _logical_xor(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`bool(a) != bool(b)`."""
    return e.emit(T.NeOp(e.boolean(a["input"]), e.boolean(a["other"])))


@handles(aten.sign.default, emits=(T.GtOp, T.LtOp, T.SubOp, T.WhereOp, T.NeOp))
def _sign(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`(x > 0) - (x < 0)` in the input's type; NaN stays NaN (as in PyTorch)."""
    x = e.tensor(a["input"])
    elt = out.element_type
    if elt == i1:
        return x
    s = e.emit(T.SubOp(e.cast(e.binary(T.GtOp, x, 0), elt), e.cast(e.binary(T.LtOp, x, 0), elt)))
    if not T.is_float(elt):
        return s
    return e.emit(T.WhereOp(e.emit(T.NeOp(x, x)), x, s))


@handles(aten.isnan.default, emits=(T.NeOp, T.ConstantOp))
def _isnan(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`x != x`: true only for NaN."""
    x = e.tensor(a["input"])
    if not T.is_float(elt_of(x)):
        return e.emit(T.ConstantOp(0.0, out))
    return e.emit(T.NeOp(x, x))


@handles(aten.isinf.default, emits=(T.AbsOp, T.EqOp, T.ConstantOp))
def _isinf(e: Emitter, a: dict[str, Any], out: TensorType) -> SSAValue:
    """`|x| == inf`."""
    x = e.tensor(a["input"])
    if not T.is_float(elt_of(x)):
        return e.emit(T.ConstantOp(0.0, out))
    return e.binary(T.EqOp, e.emit(T.AbsOp(x)), math.inf)
