"""Constants, binary and unary torch ops -> one `tensor.elementwise` each.

Binary operands are broadcast to the result shape with index maps; a splat-constant operand
is folded into the body as an `arith.constant`, so `x * 0.5` is a one-input elementwise.
Activations are written out in scalar `arith`/`math` (relu = max(x, 0), sigmoid =
1 / (1 + exp(-x)), gelu with erf or tanh, ...).
"""

from __future__ import annotations

import math

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
)
