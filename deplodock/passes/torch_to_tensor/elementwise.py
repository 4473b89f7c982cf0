"""Constants, binary and unary torch ops -> one `tensor.elementwise` each.

Binary operands are broadcast to the result shape with index maps; a splat-constant operand
is folded into the body as an `arith.constant`, so `x * 0.5` is a one-input elementwise.
Activations are written out in scalar `arith`/`math` (relu = max(x, 0), sigmoid =
1 / (1 + exp(-x)), gelu with erf or tanh, ...). Integer tensors use the integer `arith` ops.
Comparisons are `arith.cmpf`/`cmpi` producing `i1`, logical ops `andi`/`ori`/`xori` on `i1`,
`where` an `arith.select`, casts the `arith` conversion ops, and `arange` a zero-input
elementwise over the coordinate `tensor.index 0`.
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import Float32Type, IntegerType, i64
from xdsl.ir import SSAValue

from deplodock.dialects import torch as t
from deplodock.passes.torch_to_tensor.builders import (
    ScalarBuilder,
    TensorBuilder,
    TorchLowering,
    result_type_of,
)

#: integer exponents up to this are expanded into repeated multiplications
MAX_UNROLLED_POWER = 8


class ConstantLowering(TorchLowering):
    """`torch.constant` -> a zero-input (splat) elementwise. Consumers that are
    elementwise fold it into their body instead, and this op then dies."""

    op_type = t.ConstantOp

    def lower(self, op: t.ConstantOp, b: TensorBuilder) -> SSAValue:
        rt = result_type_of(op)
        value = op.value.value.data
        return b.elementwise([value], rt.get_shape(), rt.element_type, lambda s, c: c)


class BinaryLowering(TorchLowering):
    """Broadcast both operands to the result shape, then one scalar op."""

    def scalar(self, s: ScalarBuilder, x: SSAValue, y: SSAValue) -> SSAValue:
        raise NotImplementedError

    def lower(self, op: t.BinaryOp, b: TensorBuilder) -> SSAValue:
        rt = result_type_of(op)
        return b.elementwise([op.lhs, op.rhs], rt.get_shape(), rt.element_type, self.scalar)


class AddLowering(BinaryLowering):
    op_type = t.AddOp

    def scalar(self, s: ScalarBuilder, x: SSAValue, y: SSAValue) -> SSAValue:
        return s.add(x, y)


class SubLowering(BinaryLowering):
    op_type = t.SubOp

    def scalar(self, s: ScalarBuilder, x: SSAValue, y: SSAValue) -> SSAValue:
        return s.sub(x, y)


class MulLowering(BinaryLowering):
    op_type = t.MulOp

    def scalar(self, s: ScalarBuilder, x: SSAValue, y: SSAValue) -> SSAValue:
        return s.mul(x, y)


class DivLowering(BinaryLowering):
    op_type = t.DivOp

    def scalar(self, s: ScalarBuilder, x: SSAValue, y: SSAValue) -> SSAValue:
        return s.div(x, y)


class UnaryLowering(TorchLowering):
    """One input, same shape: only the scalar body differs between ops."""

    def scalar(self, s: ScalarBuilder, x: SSAValue, op: t.UnaryOp) -> SSAValue:
        raise NotImplementedError

    def lower(self, op: t.UnaryOp, b: TensorBuilder) -> SSAValue:
        rt = result_type_of(op)
        return b.elementwise(
            [op.input], rt.get_shape(), rt.element_type, lambda s, x: self.scalar(s, x, op)
        )


class NegLowering(UnaryLowering):
    op_type = t.NegOp

    def scalar(self, s: ScalarBuilder, x: SSAValue, op: t.UnaryOp) -> SSAValue:
        return s.neg(x)


class ExpLowering(UnaryLowering):
    op_type = t.ExpOp

    def scalar(self, s: ScalarBuilder, x: SSAValue, op: t.UnaryOp) -> SSAValue:
        return s.exp(x)


class LogLowering(UnaryLowering):
    op_type = t.LogOp

    def scalar(self, s: ScalarBuilder, x: SSAValue, op: t.UnaryOp) -> SSAValue:
        return s.log(x)


class SqrtLowering(UnaryLowering):
    op_type = t.SqrtOp

    def scalar(self, s: ScalarBuilder, x: SSAValue, op: t.UnaryOp) -> SSAValue:
        return s.sqrt(x)


class RsqrtLowering(UnaryLowering):
    op_type = t.RsqrtOp

    def scalar(self, s: ScalarBuilder, x: SSAValue, op: t.UnaryOp) -> SSAValue:
        return s.rsqrt(x)


class AbsLowering(UnaryLowering):
    op_type = t.AbsOp

    def scalar(self, s: ScalarBuilder, x: SSAValue, op: t.UnaryOp) -> SSAValue:
        return s.abs(x)


class TanhLowering(UnaryLowering):
    op_type = t.TanhOp

    def scalar(self, s: ScalarBuilder, x: SSAValue, op: t.UnaryOp) -> SSAValue:
        return s.tanh(x)


class ReluLowering(UnaryLowering):
    """relu(x) = maximumf(x, 0) (NaN propagates, as in torch)."""

    op_type = t.ReluOp

    def scalar(self, s: ScalarBuilder, x: SSAValue, op: t.UnaryOp) -> SSAValue:
        return s.max(x, 0.0)


class SigmoidLowering(UnaryLowering):
    """sigmoid(x) = 1 / (1 + exp(-x))."""

    op_type = t.SigmoidOp

    def scalar(self, s: ScalarBuilder, x: SSAValue, op: t.UnaryOp) -> SSAValue:
        return s.div(1.0, s.add(1.0, s.exp(s.neg(x))))


class SiluLowering(UnaryLowering):
    """silu(x) = x * sigmoid(x), written x / (1 + exp(-x))."""

    op_type = t.SiluOp

    def scalar(self, s: ScalarBuilder, x: SSAValue, op: t.UnaryOp) -> SSAValue:
        return s.div(x, s.add(1.0, s.exp(s.neg(x))))


class GeluLowering(UnaryLowering):
    """erf form 0.5 x (1 + erf(x / sqrt 2)); tanh form
    0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""

    op_type = t.GeluOp

    def scalar(self, s: ScalarBuilder, x: SSAValue, op: t.GeluOp) -> SSAValue:
        half_x = s.mul(x, 0.5)
        if op.approximate.data == "tanh":
            cube = s.mul(s.mul(x, x), x)
            inner = s.mul(s.add(x, s.mul(cube, 0.044715)), math.sqrt(2.0 / math.pi))
            return s.mul(half_x, s.add(1.0, s.tanh(inner)))
        return s.mul(half_x, s.add(1.0, s.erf(s.mul(x, 1.0 / math.sqrt(2.0)))))


class PowLowering(UnaryLowering):
    """Small integer exponents as repeated mulf, 0.5 as sqrt, -0.5 as rsqrt, -1 as a
    reciprocal, anything else `math.powf`."""

    op_type = t.PowOp

    def scalar(self, s: ScalarBuilder, x: SSAValue, op: t.PowOp) -> SSAValue:
        e = op.exponent.value.data
        if e == 0.5:
            return s.sqrt(x)
        if e == -0.5:
            return s.rsqrt(x)
        if e == -1.0:
            return s.div(1.0, x)
        if e == 0.0:
            return s.const(1.0)
        if e.is_integer() and 1 <= e <= MAX_UNROLLED_POWER:
            acc = x
            for _ in range(int(e) - 1):
                acc = s.mul(acc, x)
            return acc
        return s.powf(x, e)


class CosLowering(UnaryLowering):
    op_type = t.CosOp

    def scalar(self, s: ScalarBuilder, x: SSAValue, op: t.UnaryOp) -> SSAValue:
        return s.cos(x)


class SinLowering(UnaryLowering):
    op_type = t.SinOp

    def scalar(self, s: ScalarBuilder, x: SSAValue, op: t.UnaryOp) -> SSAValue:
        return s.sin(x)


class CompareLowering(BinaryLowering):
    """One `arith.cmpf` / `arith.cmpi` (`COMPARISONS` has the predicates)."""

    comparison: str

    def scalar(self, s: ScalarBuilder, x: SSAValue, y: SSAValue) -> SSAValue:
        return s.cmp(self.comparison, x, y)


def _compare(op_class: type[t.CompareOp], name: str) -> CompareLowering:
    pattern = CompareLowering()
    pattern.op_type = op_class  # type: ignore[misc]
    pattern.comparison = name
    return pattern


class LogicalAndLowering(BinaryLowering):
    op_type = t.LogicalAndOp

    def scalar(self, s: ScalarBuilder, x: SSAValue, y: SSAValue) -> SSAValue:
        return s.and_(x, y)


class LogicalOrLowering(BinaryLowering):
    op_type = t.LogicalOrOp

    def scalar(self, s: ScalarBuilder, x: SSAValue, y: SSAValue) -> SSAValue:
        return s.or_(x, y)


class LogicalNotLowering(UnaryLowering):
    op_type = t.LogicalNotOp

    def scalar(self, s: ScalarBuilder, x: SSAValue, op: t.UnaryOp) -> SSAValue:
        return s.not_(x)


class WhereLowering(TorchLowering):
    """`arith.select` of the three broadcast operands."""

    op_type = t.WhereOp

    def lower(self, op: t.WhereOp, b: TensorBuilder) -> SSAValue:
        rt = result_type_of(op)
        inputs = [op.condition, op.input, op.other]
        return b.elementwise(
            inputs, rt.get_shape(), rt.element_type, lambda s, c, x, y: s.select(c, x, y)
        )


class CastLowering(TorchLowering):
    """One conversion op (two for f16 <-> bf16, via f32; a comparison with 0 to bool)."""

    op_type = t.CastOp

    def lower(self, op: t.CastOp, b: TensorBuilder) -> SSAValue:
        rt = result_type_of(op)
        elt = rt.element_type
        return b.elementwise([op.input], rt.get_shape(), elt, lambda s, x: s.cast(x, elt))


class ArangeLowering(TorchLowering):
    """`start + i * step` with `i = tensor.index 0`, computed in i64 (integer results) or
    f32 (float results, rounded once to f16/bf16)."""

    op_type = t.ArangeOp

    def lower(self, op: t.ArangeOp, b: TensorBuilder) -> SSAValue:
        rt = result_type_of(op)
        elt = rt.element_type
        start, step = op.start.value.data, op.step.value.data
        compute = elt if isinstance(elt, IntegerType) else Float32Type()

        def body(s: ScalarBuilder) -> SSAValue:
            i = s.cast(s.cast(s.index(0), i64), compute)
            value = s.mul(i, step) if step != 1 else i
            value = s.add(value, start) if start != 0 else value
            return s.cast(value, elt)

        return b.elementwise([], rt.get_shape(), elt, body)


PATTERNS: tuple[TorchLowering, ...] = (
    ConstantLowering(),
    AddLowering(),
    SubLowering(),
    MulLowering(),
    DivLowering(),
    NegLowering(),
    ExpLowering(),
    LogLowering(),
    SqrtLowering(),
    RsqrtLowering(),
    AbsLowering(),
    TanhLowering(),
    ReluLowering(),
    SigmoidLowering(),
    SiluLowering(),
    GeluLowering(),
    PowLowering(),
    CosLowering(),
    SinLowering(),
    _compare(t.EqOp, "eq"),
    _compare(t.NeOp, "ne"),
    _compare(t.LtOp, "lt"),
    _compare(t.LeOp, "le"),
    _compare(t.GtOp, "gt"),
    _compare(t.GeOp, "ge"),
    LogicalAndLowering(),
    LogicalOrLowering(),
    LogicalNotLowering(),
    WhereLowering(),
    CastLowering(),
    ArangeLowering(),
)
