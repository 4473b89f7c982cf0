"""Constants, binary and unary torch ops -> one `tensor.elementwise` each.

All of them are one pattern, `ElementwiseLowering`: the op's operands broadcast to the result
shape with index maps, then a scalar body. Ops differ only in that body, so they are two
tables (op -> body, op -> body builder for ops with properties) rather than a class each.
A splat-constant operand is folded into the body as an `arith.constant`, so `x * 0.5` is a
one-input elementwise. Activations are written out in scalar `arith`/`math` (relu =
max(x, 0), sigmoid = 1 / (1 + exp(-x)), gelu with erf or tanh, clamp, hardswish,
maximum/minimum and the other piecewise activations with compare-and-select, ...); triu/tril
select on the coordinates `tensor.index` of the last two dims. Integer tensors use the
integer `arith` ops. Comparisons are `arith.cmpf`/`cmpi` producing `i1`, logical ops
`andi`/`ori`/`xori` on `i1`, `where` an `arith.select`, casts the `arith` conversion ops, and
`arange` a zero-input elementwise over the coordinate `tensor.index 0`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from xdsl.dialects import math as m
from xdsl.dialects.builtin import Float32Type, IntegerType, i64
from xdsl.ir import Operation, SSAValue

from deplodock.dialects import torch as t
from deplodock.passes.torch_to_tensor.builders import (
    ScalarBuilder,
    TensorBuilder,
    TorchLowering,
    is_float_type,
    result_type_of,
)

#: integer exponents up to this are expanded into repeated multiplications
MAX_UNROLLED_POWER = 8

ScalarFn = Callable[..., SSAValue]
"""A scalar body `f(s, *xs)`: `s` appends to the body (its `elt` is the result element
type), `xs` holds one scalar per operand of the torch op."""

BodyOf = Callable[[Any], ScalarFn]
"""The scalar body of one op instance, for ops whose body depends on their properties."""


class ElementwiseLowering(TorchLowering):
    """`op_type` -> one `tensor.elementwise` over its operands broadcast to the result shape,
    with the body `body_of(op)`: one parameterised pattern instead of a class per op."""

    def __init__(self, op_type: type[Operation], body_of: BodyOf) -> None:
        self.op_type = op_type
        self.body_of = body_of

    def lower(self, op: Operation, b: TensorBuilder) -> SSAValue:
        rt = result_type_of(op)
        return b.elementwise(op.operands, rt.get_shape(), rt.element_type, self.body_of(op))


# -- bodies that depend on the operands only ----------------------------------------------


def _relu(s: ScalarBuilder, x: SSAValue) -> SSAValue:
    """relu(x) = maximumf(x, 0) (NaN propagates, as in torch)."""
    return s.max(x, 0.0)


def _sigmoid(s: ScalarBuilder, x: SSAValue) -> SSAValue:
    """sigmoid(x) = 1 / (1 + exp(-x))."""
    return s.div(1.0, s.add(1.0, s.exp(s.neg(x))))


def _silu(s: ScalarBuilder, x: SSAValue) -> SSAValue:
    """silu(x) = x * sigmoid(x), written x / (1 + exp(-x))."""
    return s.div(x, s.add(1.0, s.exp(s.neg(x))))


def _clamp(s: ScalarBuilder, x: SSAValue, low: float | None, high: float | None) -> SSAValue:
    """`min(max(x, low), high)` as compare-and-select: `x < low ? low : x`, then
    `y > high ? high : y`. A NaN `x` fails both (ordered) comparisons and comes through,
    as in PyTorch, whatever the target's `fmax` does with NaN (CUDA's drops it); `low > high`
    gives `high`. A NaN bound makes every element NaN, as in PyTorch."""
    if any(bound is not None and math.isnan(bound) for bound in (low, high)):
        return s.const(math.nan)
    y = x if low is None else s.select(s.cmp("lt", x, low), low, x)
    return y if high is None else s.select(s.cmp("gt", y, high), high, y)


def _hardswish(s: ScalarBuilder, x: SSAValue) -> SSAValue:
    """hardswish(x) = x * relu6(x + 3) / 6, in PyTorch's order of operations (relu6 is the
    clamp to [0, 6])."""
    return s.div(s.mul(x, _clamp(s, s.add(x, 3.0), 0.0, 6.0)), 6.0)


def _hardsigmoid(s: ScalarBuilder, x: SSAValue) -> SSAValue:
    """hardsigmoid(x) = relu6(x + 3) / 6, the same clamp as hardswish's."""
    return s.div(_clamp(s, s.add(x, 3.0), 0.0, 6.0), 6.0)


def _softplus(s: ScalarBuilder, x: SSAValue, beta: float, threshold: float) -> SSAValue:
    """`beta * x > threshold ? x : log1p(exp(beta * x)) / beta`, PyTorch's formula (a NaN
    fails the comparison and goes through the log). `beta = 1` costs no multiplies."""
    bx = x if beta == 1.0 else s.mul(x, beta)
    soft = s.log1p(s.exp(bx))
    soft = soft if beta == 1.0 else s.div(soft, beta)
    return soft if math.isinf(threshold) else s.select(s.cmp("gt", bx, threshold), x, soft)


def _mish(s: ScalarBuilder, x: SSAValue) -> SSAValue:
    """mish(x) = x * tanh(log1p(exp(x))) (PyTorch's softplus here has no threshold:
    exp overflows to inf for large x, and tanh(inf) = 1 gives x)."""
    return s.mul(x, s.tanh(s.log1p(s.exp(x))))


def _log_sigmoid(s: ScalarBuilder, x: SSAValue) -> SSAValue:
    """log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|)): exp never overflows, and for large x
    the result keeps its tiny value -exp(-x) instead of rounding to 0 through sigmoid."""
    negative_part = s.select(s.cmp("lt", x, 0.0), x, 0.0)
    return s.sub(negative_part, s.log1p(s.exp(s.neg(s.abs(x)))))


def _extremum(pick: str) -> ScalarFn:
    """`a <pick> b ? a : b`, then NaN from `a` kept: an ordered compare with NaN is false,
    so a NaN `b` is picked by the first select and a NaN `a` by the second (as in
    `torch.maximum`; `arith.maximumf` would do but prints as CUDA's NaN-dropping `fmaxf`)."""

    def body(s: ScalarBuilder, a: SSAValue, b: SSAValue) -> SSAValue:
        picked = s.select(s.cmp(pick, a, b), a, b)
        if not is_float_type(a.type):
            return picked
        return s.select(s.cmp("ne", a, a), a, picked)

    return body


def _compare(name: str) -> ScalarFn:
    """One `arith.cmpf` / `arith.cmpi` (`COMPARISONS` has the predicates)."""

    def body(s: ScalarBuilder, x: SSAValue, y: SSAValue) -> SSAValue:
        return s.cmp(name, x, y)

    return body


def _cast(s: ScalarBuilder, x: SSAValue) -> SSAValue:
    """One conversion op to the result type (two for f16 <-> bf16, via f32; a comparison
    with 0 to bool)."""
    return s.cast(x, s.elt)


def _math(op_type: type[Operation]) -> ScalarFn:
    """One float `math` op of the operands (`MATH` has the pairs)."""
    return lambda s, *xs: s.math(op_type, *xs)


#: torch op -> the `math` op that is its whole body.
MATH: dict[type[Operation], type[Operation]] = {
    t.AcosOp: m.AcosOp,
    t.AcoshOp: m.AcoshOp,
    t.AsinOp: m.AsinOp,
    t.AsinhOp: m.AsinhOp,
    t.AtanOp: m.AtanOp,
    t.AtanhOp: m.AtanhOp,
    t.CoshOp: m.CoshOp,
    t.SinhOp: m.SinhOp,
    t.TanOp: m.TanOp,
    t.Expm1Op: m.ExpM1Op,
    t.Log1pOp: m.Log1pOp,
    t.Log2Op: m.Log2Op,
    t.Log10Op: m.Log10Op,
    t.CeilOp: m.CeilOp,
    t.FloorOp: m.FloorOp,
    t.RoundOp: m.RoundEvenOp,
    t.TruncOp: m.TruncOp,
    t.Atan2Op: m.Atan2Op,
    t.PowTensorOp: m.PowFOp,
}


BODIES: dict[type[Operation], ScalarFn] = {
    **{op: _math(math_op) for op, math_op in MATH.items()},
    t.BitwiseAndOp: ScalarBuilder.and_,
    t.BitwiseOrOp: ScalarBuilder.or_,
    t.BitwiseXorOp: ScalarBuilder.xor,
    t.AddOp: ScalarBuilder.add,
    t.SubOp: ScalarBuilder.sub,
    t.MulOp: ScalarBuilder.mul,
    t.DivOp: ScalarBuilder.div,
    t.NegOp: ScalarBuilder.neg,
    t.ExpOp: ScalarBuilder.exp,
    t.LogOp: ScalarBuilder.log,
    t.SqrtOp: ScalarBuilder.sqrt,
    t.RsqrtOp: ScalarBuilder.rsqrt,
    t.AbsOp: ScalarBuilder.abs,
    t.TanhOp: ScalarBuilder.tanh,
    t.ErfOp: ScalarBuilder.erf,
    t.ReluOp: _relu,
    t.HardswishOp: _hardswish,
    t.SigmoidOp: _sigmoid,
    t.HardsigmoidOp: _hardsigmoid,
    t.MishOp: _mish,
    t.LogSigmoidOp: _log_sigmoid,
    t.MaximumOp: _extremum("gt"),
    t.MinimumOp: _extremum("lt"),
    t.SiluOp: _silu,
    t.CosOp: ScalarBuilder.cos,
    t.SinOp: ScalarBuilder.sin,
    t.EqOp: _compare("eq"),
    t.NeOp: _compare("ne"),
    t.LtOp: _compare("lt"),
    t.LeOp: _compare("le"),
    t.GtOp: _compare("gt"),
    t.GeOp: _compare("ge"),
    t.LogicalAndOp: ScalarBuilder.and_,
    t.LogicalOrOp: ScalarBuilder.or_,
    t.LogicalNotOp: ScalarBuilder.not_,
    t.WhereOp: ScalarBuilder.select,
    t.CastOp: _cast,
}
"""torch op -> scalar body, for ops without properties that change it."""


# -- bodies that depend on the op's properties --------------------------------------------


def _constant(op: t.ConstantOp) -> ScalarFn:
    """A zero-input (splat) elementwise. Consumers that are elementwise fold it into their
    body instead, and this op then dies."""
    value = op.value.value.data
    return lambda s: s.const(value)


def _gelu(op: t.GeluOp) -> ScalarFn:
    """erf form 0.5 x (1 + erf(x / sqrt 2)); tanh form
    0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""
    approximate = op.approximate.data

    def body(s: ScalarBuilder, x: SSAValue) -> SSAValue:
        half_x = s.mul(x, 0.5)
        if approximate == "tanh":
            cube = s.mul(s.mul(x, x), x)
            inner = s.mul(s.add(x, s.mul(cube, 0.044715)), math.sqrt(2.0 / math.pi))
            return s.mul(half_x, s.add(1.0, s.tanh(inner)))
        return s.mul(half_x, s.add(1.0, s.erf(s.mul(x, 1.0 / math.sqrt(2.0)))))

    return body


def _clamp_body(op: t.ClampOp) -> ScalarFn:
    """The clamp to the op's bounds (either may be absent)."""
    low, high = (None if b is None else b.value.data for b in (op.min, op.max))
    return lambda s, x: _clamp(s, x, low, high)


def _leaky_relu(op: t.LeakyReluOp) -> ScalarFn:
    """`x > 0 ? x : x * slope` (NaN fails the comparison and stays NaN through the mul)."""
    slope = op.negative_slope.value.data
    return lambda s, x: s.select(s.cmp("gt", x, 0.0), x, s.mul(x, slope))


def _elu(op: t.EluOp) -> ScalarFn:
    """`x <= 0 ? expm1(x * input_scale) * (alpha * scale) : x * scale`, aten's formula with
    its coefficients folded; factors of 1 cost nothing."""
    alpha, scale, input_scale = (p.value.data for p in (op.alpha, op.scale, op.input_scale))

    def scaled(s: ScalarBuilder, x: SSAValue, factor: float) -> SSAValue:
        return x if factor == 1.0 else s.mul(x, factor)

    def body(s: ScalarBuilder, x: SSAValue) -> SSAValue:
        negative = scaled(s, s.expm1(scaled(s, x, input_scale)), alpha * scale)
        return s.select(s.cmp("le", x, 0.0), negative, scaled(s, x, scale))

    return body


def _softplus_body(op: t.SoftplusOp) -> ScalarFn:
    beta, threshold = op.beta.value.data, op.threshold.value.data
    return lambda s, x: _softplus(s, x, beta, threshold)


def _triangle(op: t.TriangleOp) -> ScalarFn:
    """`keep(j - i) ? x : 0` over the coordinates `i`, `j` of the last two dims (in i64, so a
    negative `diagonal` needs no signed index arithmetic)."""
    rank, diagonal = len(result_type_of(op).get_shape()), op.diagonal.value.data
    keep = "ge" if isinstance(op, t.TriuOp) else "le"

    def body(s: ScalarBuilder, x: SSAValue) -> SSAValue:
        row, col = (s.cast(s.index(d), i64) for d in (rank - 2, rank - 1))
        return s.select(s.cmp(keep, s.sub(col, row), diagonal), x, 0.0)

    return body


def _pow(op: t.PowOp) -> ScalarFn:
    """Small integer exponents as repeated mulf, 0.5 as sqrt, -0.5 as rsqrt, -1 as a
    reciprocal, anything else `math.powf`."""
    e = op.exponent.value.data

    def body(s: ScalarBuilder, x: SSAValue) -> SSAValue:
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

    return body


def _arange(op: t.ArangeOp) -> ScalarFn:
    """`start + i * step` with `i = tensor.index 0`, computed in i64 (integer results) or
    f32 (float results, rounded once to f16/bf16)."""
    start, step = op.start.value.data, op.step.value.data

    def body(s: ScalarBuilder) -> SSAValue:
        elt = s.elt
        compute = elt if isinstance(elt, IntegerType) else Float32Type()
        i = s.cast(s.cast(s.index(0), i64), compute)
        value = s.mul(i, step) if step != 1 else i
        value = s.add(value, start) if start != 0 else value
        return s.cast(value, elt)

    return body


BODY_BUILDERS: dict[type[Operation], BodyOf] = {
    t.ConstantOp: _constant,
    t.GeluOp: _gelu,
    t.ClampOp: _clamp_body,
    t.LeakyReluOp: _leaky_relu,
    t.EluOp: _elu,
    t.SoftplusOp: _softplus_body,
    t.TriuOp: _triangle,
    t.TrilOp: _triangle,
    t.PowOp: _pow,
    t.ArangeOp: _arange,
}
"""torch op -> the builder of its scalar body, which reads the op's properties."""


def _fixed(body: ScalarFn) -> BodyOf:
    return lambda op: body


PATTERNS: tuple[TorchLowering, ...] = (
    *(ElementwiseLowering(op_type, _fixed(body)) for op_type, body in BODIES.items()),
    *(ElementwiseLowering(op_type, body_of) for op_type, body_of in BODY_BUILDERS.items()),
)
