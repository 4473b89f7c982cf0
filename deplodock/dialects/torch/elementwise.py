"""Constants and elementwise torch ops: arithmetic, activations, comparisons, casts.

Binary ops broadcast (numpy rules). Comparisons and logical ops produce bool (`i1`)
tensors, `torch.where` selects with one; `torch.cast` changes the element type only and
`torch.arange` is a 1-D sequence typed by its result.

`OPS` at the bottom lists the ops this module adds to the dialect: a new op is its class
plus one entry there (the package builds the `Torch` dialect and its exports from it).
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    TensorType,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, opt_prop_def, prop_def

from deplodock.dialects.queries import element_type_of, shape_of
from deplodock.dialects.torch.base import (
    BinaryOp,
    Props,
    TorchOp,
    Types,
    UnaryOp,
    broadcast_shapes,
    fail,
    fmt,
    is_float,
    is_supported_element_type,
)


@irdl_op_definition
class ConstantOp(TorchOp):
    """A splat constant of any shape and element type: the scalar arguments of aten ops
    (rank 0), and `full`, `zeros`, `ones`, `new_ones`, ... (bool: value 0 or 1)."""

    name = "torch.constant"
    value = prop_def(FloatAttr[Float64Type])
    assembly_format = "attr-dict `:` `(` `)` `->` type($result)"

    def __init__(self, value: float, type: TensorType):
        super().__init__(result_types=[type], properties={"value": FloatAttr(value, f64)})

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        raise AssertionError("torch.constant takes its type from the result")

    def verify_(self) -> None:
        if not is_supported_element_type(self.result.type.element_type):
            fail(self.name, f"element type {self.result.type.element_type} is not supported")
        if self.result.type.element_type == i1 and self.value.value.data not in (0.0, 1.0):
            fail(self.name, "a bool constant must be 0 or 1")


@irdl_op_definition
class AddOp(BinaryOp):
    name = "torch.add"


@irdl_op_definition
class SubOp(BinaryOp):
    name = "torch.sub"


@irdl_op_definition
class MulOp(BinaryOp):
    name = "torch.mul"


@irdl_op_definition
class DivOp(BinaryOp):
    name = "torch.div"


@irdl_op_definition
class NegOp(UnaryOp):
    name = "torch.neg"


@irdl_op_definition
class ExpOp(UnaryOp):
    name = "torch.exp"


@irdl_op_definition
class LogOp(UnaryOp):
    name = "torch.log"


@irdl_op_definition
class SqrtOp(UnaryOp):
    name = "torch.sqrt"


@irdl_op_definition
class RsqrtOp(UnaryOp):
    name = "torch.rsqrt"


@irdl_op_definition
class AbsOp(UnaryOp):
    name = "torch.abs"


@irdl_op_definition
class ReluOp(UnaryOp):
    name = "torch.relu"


@irdl_op_definition
class SigmoidOp(UnaryOp):
    name = "torch.sigmoid"


@irdl_op_definition
class TanhOp(UnaryOp):
    name = "torch.tanh"


@irdl_op_definition
class SiluOp(UnaryOp):
    name = "torch.silu"


@irdl_op_definition
class GeluOp(UnaryOp):
    """`approximate` is "none" (erf) or "tanh", as in `F.gelu`."""

    name = "torch.gelu"
    approximate = prop_def(StringAttr)

    def __init__(self, input: SSAValue, approximate: str = "none"):
        super().__init__(input, approximate=StringAttr(approximate))

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        mode = props["approximate"]
        if not isinstance(mode, StringAttr) or mode.data not in ("none", "tanh"):
            fail(cls.name, f'approximate must be "none" or "tanh", got {mode}')
        return super().infer(types, props)


class FloatUnaryOp(UnaryOp):
    """A unary op PyTorch only defines on floats: an integer operand is a verifier error
    here rather than a failed lowering later (the frontend casts integer inputs first)."""

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        if not is_float(element_type_of(types[0])):
            fail(cls.name, f"needs a float tensor, got {element_type_of(types[0])}")
        return super().infer(types, props)


@irdl_op_definition
class ErfOp(FloatUnaryOp):
    """The Gauss error function `erf(x) = 2/sqrt(pi) * integral_0^x exp(-t^2) dt`."""

    name = "torch.erf"


@irdl_op_definition
class HardswishOp(FloatUnaryOp):
    """`x * relu6(x + 3) / 6`, as `F.hardswish`: 0 below -3, x above 3, a parabola between."""

    name = "torch.hardswish"


def _f64s(**values: float) -> dict[str, Attribute]:
    """Scalar options as the f64 properties every torch op stores them in."""
    return {name: FloatAttr(value, f64) for name, value in values.items()}


@irdl_op_definition
class HardsigmoidOp(FloatUnaryOp):
    """`relu6(x + 3) / 6`, as `F.hardsigmoid`: 0 below -3, 1 above 3, linear between."""

    name = "torch.hardsigmoid"


@irdl_op_definition
class MishOp(FloatUnaryOp):
    """`x * tanh(softplus(x))`, as `F.mish`."""

    name = "torch.mish"


@irdl_op_definition
class LogSigmoidOp(FloatUnaryOp):
    """`log(sigmoid(x))`, as `F.logsigmoid`, in the form that neither overflows nor loses the
    small values: `min(x, 0) - log1p(exp(-|x|))`."""

    name = "torch.log_sigmoid"


@irdl_op_definition
class LeakyReluOp(FloatUnaryOp):
    """`x > 0 ? x : negative_slope * x`, as `F.leaky_relu`."""

    name = "torch.leaky_relu"
    negative_slope = prop_def(FloatAttr[Float64Type])

    def __init__(self, input: SSAValue, negative_slope: float):
        super().__init__(input, **_f64s(negative_slope=negative_slope))


@irdl_op_definition
class EluOp(FloatUnaryOp):
    """`x > 0 ? scale * x : scale * alpha * (exp(input_scale * x) - 1)`: aten's one kernel
    behind `F.elu` (scale = input_scale = 1), `F.selu` (fixed alpha and scale) and `F.celu`
    (input_scale = 1 / alpha)."""

    name = "torch.elu"
    alpha = prop_def(FloatAttr[Float64Type])
    scale = prop_def(FloatAttr[Float64Type])
    input_scale = prop_def(FloatAttr[Float64Type])

    def __init__(
        self, input: SSAValue, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0
    ):
        super().__init__(input, **_f64s(alpha=alpha, scale=scale, input_scale=input_scale))


@irdl_op_definition
class SoftplusOp(FloatUnaryOp):
    """`log(1 + exp(beta * x)) / beta`, and `x` itself where `beta * x > threshold` (where
    the two agree to the last bit and the exponential would overflow), as `F.softplus`."""

    name = "torch.softplus"
    beta = prop_def(FloatAttr[Float64Type])
    threshold = prop_def(FloatAttr[Float64Type])

    def __init__(self, input: SSAValue, beta: float = 1.0, threshold: float = 20.0):
        super().__init__(input, **_f64s(beta=beta, threshold=threshold))

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        beta = props["beta"]
        if isinstance(beta, FloatAttr) and beta.value.data == 0:
            fail(cls.name, "beta must be nonzero")
        return super().infer(types, props)


@irdl_op_definition
class ClampOp(UnaryOp):
    """`min(max(x, min), max)` with scalar bounds, each optional, as `torch.clamp`.

    NaN propagates (from `x` and from a NaN bound) and `min > max` gives `max` everywhere,
    as in PyTorch. Bounds are f64 like every scalar property; on an integer tensor they must
    be integers (the frontend promotes `clamp(int_tensor, 0.5)` to float first).
    """

    name = "torch.clamp"
    min = opt_prop_def(FloatAttr[Float64Type])
    max = opt_prop_def(FloatAttr[Float64Type])

    def __init__(self, input: SSAValue, min: float | None = None, max: float | None = None):
        bounds = {"min": min, "max": max}
        super().__init__(
            input, **{k: FloatAttr(v, f64) for k, v in bounds.items() if v is not None}
        )

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        bounds = [b for b in (props.get("min"), props.get("max")) if isinstance(b, FloatAttr)]
        if not bounds:
            fail(cls.name, "needs a min or a max bound (or both)")
        elt = element_type_of(types[0])
        if elt == i1:
            fail(cls.name, "bool tensors cannot be clamped")
        if not is_float(elt) and not all(float(b.value.data).is_integer() for b in bounds):
            fail(cls.name, f"bounds of an {elt} tensor must be integers")
        return super().infer(types, props)


@irdl_op_definition
class PowOp(UnaryOp):
    """`input ** exponent` with a scalar exponent."""

    name = "torch.pow"
    exponent = prop_def(FloatAttr[Float64Type])

    def __init__(self, input: SSAValue, exponent: float):
        super().__init__(input, exponent=FloatAttr(exponent, f64))


@irdl_op_definition
class CosOp(UnaryOp):
    name = "torch.cos"


@irdl_op_definition
class SinOp(UnaryOp):
    name = "torch.sin"


# --- float math: one `math` dialect function each -----------------------------------------


@irdl_op_definition
class AcosOp(FloatUnaryOp):
    """`arccos(x)`, in radians; NaN outside [-1, 1]."""

    name = "torch.acos"


@irdl_op_definition
class AcoshOp(FloatUnaryOp):
    """The inverse hyperbolic cosine; NaN below 1."""

    name = "torch.acosh"


@irdl_op_definition
class AsinOp(FloatUnaryOp):
    """`arcsin(x)`, in radians; NaN outside [-1, 1]."""

    name = "torch.asin"


@irdl_op_definition
class AsinhOp(FloatUnaryOp):
    """The inverse hyperbolic sine."""

    name = "torch.asinh"


@irdl_op_definition
class AtanOp(FloatUnaryOp):
    """`arctan(x)`, in radians."""

    name = "torch.atan"


@irdl_op_definition
class AtanhOp(FloatUnaryOp):
    """The inverse hyperbolic tangent; NaN outside [-1, 1]."""

    name = "torch.atanh"


@irdl_op_definition
class CoshOp(FloatUnaryOp):
    """The hyperbolic cosine."""

    name = "torch.cosh"


@irdl_op_definition
class SinhOp(FloatUnaryOp):
    """The hyperbolic sine."""

    name = "torch.sinh"


@irdl_op_definition
class TanOp(FloatUnaryOp):
    """The tangent, of radians."""

    name = "torch.tan"


@irdl_op_definition
class Expm1Op(FloatUnaryOp):
    """`exp(x) - 1`, exact for small `x` (where the subtraction would cancel)."""

    name = "torch.expm1"


@irdl_op_definition
class Log1pOp(FloatUnaryOp):
    """`log(1 + x)`, exact for small `x` (where `1 + x` would round)."""

    name = "torch.log1p"


@irdl_op_definition
class Log2Op(FloatUnaryOp):
    """The base-2 logarithm."""

    name = "torch.log2"


@irdl_op_definition
class Log10Op(FloatUnaryOp):
    """The base-10 logarithm."""

    name = "torch.log10"


@irdl_op_definition
class CeilOp(FloatUnaryOp):
    """The smallest integer-valued float not below `x`."""

    name = "torch.ceil"


@irdl_op_definition
class FloorOp(FloatUnaryOp):
    """The largest integer-valued float not above `x`."""

    name = "torch.floor"


@irdl_op_definition
class RoundOp(FloatUnaryOp):
    """The nearest integer-valued float, halves to even (as `torch.round`)."""

    name = "torch.round"


@irdl_op_definition
class TruncOp(FloatUnaryOp):
    """`x` rounded toward zero."""

    name = "torch.trunc"


class FloatBinaryOp(BinaryOp):
    """A binary op PyTorch computes on floats only (the frontend casts integers first)."""

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        if not is_float(element_type_of(types[0])):
            fail(cls.name, f"needs float tensors, got {element_type_of(types[0])}")
        return super().infer(types, props)


@irdl_op_definition
class Atan2Op(FloatBinaryOp):
    """`atan2(input, other)`: the angle of the point (other, input), in (-pi, pi]."""

    name = "torch.atan2"


@irdl_op_definition
class PowTensorOp(FloatBinaryOp):
    """`input ** exponent` elementwise, both tensors (`torch.pow` with a tensor exponent;
    a scalar exponent is `torch.pow`)."""

    name = "torch.pow_tensor"


class BitwiseBinaryOp(BinaryOp):
    """A bitwise op of two integer or bool tensors (two's complement, as in PyTorch)."""

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        if is_float(element_type_of(types[0])):
            fail(cls.name, f"needs integer or bool tensors, got {element_type_of(types[0])}")
        return super().infer(types, props)


@irdl_op_definition
class BitwiseAndOp(BitwiseBinaryOp):
    name = "torch.bitwise_and"


@irdl_op_definition
class BitwiseOrOp(BitwiseBinaryOp):
    name = "torch.bitwise_or"


@irdl_op_definition
class BitwiseXorOp(BitwiseBinaryOp):
    name = "torch.bitwise_xor"


class ExtremumOp(BinaryOp):
    """The elementwise larger or smaller of two tensors; NaN in either operand propagates,
    as in `torch.maximum` / `torch.minimum` (and in `clamp` with tensor bounds, built from
    them)."""

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        if element_type_of(types[0]) == i1:
            fail(cls.name, "bool tensors have no order here; compare them instead")
        return super().infer(types, props)


@irdl_op_definition
class MaximumOp(ExtremumOp):
    name = "torch.maximum"


@irdl_op_definition
class MinimumOp(ExtremumOp):
    name = "torch.minimum"


class TriangleOp(UnaryOp):
    """Keeps one triangle of the last two dims (the rows and columns of each matrix) and
    zeroes the rest; `diagonal` shifts the boundary (0: the main diagonal, > 0 above it)."""

    diagonal = prop_def(IntegerAttr[I64])

    def __init__(self, input: SSAValue, diagonal: int = 0):
        super().__init__(input, diagonal=IntegerAttr(diagonal, i64))

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        if len(shape_of(types[0])) < 2:
            fail(cls.name, f"needs rank >= 2, got {fmt(shape_of(types[0]))}")
        return super().infer(types, props)


@irdl_op_definition
class TriuOp(TriangleOp):
    """`j - i >= diagonal ? x[..., i, j] : 0`, as `torch.triu`."""

    name = "torch.triu"


@irdl_op_definition
class TrilOp(TriangleOp):
    """`j - i <= diagonal ? x[..., i, j] : 0`, as `torch.tril`."""

    name = "torch.tril"


# --- comparisons, logical ops, where -------------------------------------------------------


class CompareOp(BinaryOp):
    """Elementwise comparison of two tensors of one element type; the result is `i1`."""

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        return TensorType(i1, broadcast_shapes(cls.name, shape_of(types[0]), shape_of(types[1])))


@irdl_op_definition
class EqOp(CompareOp):
    name = "torch.eq"


@irdl_op_definition
class NeOp(CompareOp):
    name = "torch.ne"


@irdl_op_definition
class LtOp(CompareOp):
    name = "torch.lt"


@irdl_op_definition
class LeOp(CompareOp):
    name = "torch.le"


@irdl_op_definition
class GtOp(CompareOp):
    name = "torch.gt"


@irdl_op_definition
class GeOp(CompareOp):
    name = "torch.ge"


class LogicalBinaryOp(CompareOp):
    """`and` / `or` of two bool (`i1`) tensors (the frontend compares others with 0)."""

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        if element_type_of(types[0]) != i1:
            fail(cls.name, f"operands must be i1, got {element_type_of(types[0])}")
        return super().infer(types, props)


@irdl_op_definition
class LogicalAndOp(LogicalBinaryOp):
    name = "torch.logical_and"


@irdl_op_definition
class LogicalOrOp(LogicalBinaryOp):
    name = "torch.logical_or"


@irdl_op_definition
class LogicalNotOp(UnaryOp):
    name = "torch.logical_not"

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        if element_type_of(types[0]) != i1:
            fail(cls.name, f"operand must be i1, got {element_type_of(types[0])}")
        return super().infer(types, props)


@irdl_op_definition
class WhereOp(TorchOp):
    """`condition ? input : other` elementwise; the three operands broadcast together."""

    name = "torch.where"
    condition = operand_def(TensorType)
    input = operand_def(TensorType)
    other = operand_def(TensorType)
    SAME_OPERAND_TYPES: ClassVar[bool] = False

    def __init__(self, condition: SSAValue, input: SSAValue, other: SSAValue):
        self._init([condition, input, other], {})

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        if element_type_of(types[0]) != i1:
            fail(cls.name, f"condition must be i1, got {element_type_of(types[0])}")
        if element_type_of(types[1]) != element_type_of(types[2]):
            fail(cls.name, "input and other must have the same element type")
        shape = broadcast_shapes(cls.name, shape_of(types[0]), shape_of(types[1]))
        shape = broadcast_shapes(cls.name, shape, shape_of(types[2]))
        return TensorType(element_type_of(types[1]), shape)


# --- element type changes and generated sequences -----------------------------------------


@irdl_op_definition
class CastOp(TorchOp):
    """`x.to(dtype)`: the same shape with the result's element type (float <-> float rounds
    to nearest even, float -> int truncates toward zero, to bool is `x != 0`)."""

    name = "torch.cast"
    input = operand_def(TensorType)

    def __init__(self, input: SSAValue, element_type: Attribute):
        assert isinstance(input.type, TensorType)
        t = TensorType(element_type, input.type.get_shape())
        IRDLOperation.__init__(self, operands=[input], result_types=[t])

    def verify_(self) -> None:
        for t in (self.input.type, self.result.type):
            assert isinstance(t, TensorType)
            if not is_supported_element_type(t.element_type):
                fail(self.name, f"element type {t.element_type} is not supported")
        src, dst = shape_of(self.input.type), shape_of(self.result.type)  # type: ignore[arg-type]
        if src != dst:
            fail(self.name, f"result shape {fmt(dst)} differs from the input shape {fmt(src)}")


@irdl_op_definition
class ArangeOp(TorchOp):
    """`out[i] = start + i * step` for `i` in `[0, n)`, `n` and the dtype from the result."""

    name = "torch.arange"
    start = prop_def(FloatAttr[Float64Type])
    step = prop_def(FloatAttr[Float64Type])
    assembly_format = "attr-dict `:` `(` `)` `->` type($result)"

    def __init__(self, start: float, step: float, type: TensorType):
        props = {"start": FloatAttr(start, f64), "step": FloatAttr(step, f64)}
        IRDLOperation.__init__(self, result_types=[type], properties=props)

    def verify_(self) -> None:
        t = self.result.type
        if not is_supported_element_type(t.element_type) or t.element_type == i1:
            fail(self.name, f"element type {t.element_type} is not supported")
        if t.get_num_dims() != 1:
            fail(self.name, f"result must have rank 1, got {fmt(t.get_shape())}")
        if self.step.value.data == 0:
            fail(self.name, "step must be nonzero")


OPS: tuple[type[TorchOp], ...] = (
    ConstantOp,
    AddOp,
    SubOp,
    MulOp,
    DivOp,
    NegOp,
    ExpOp,
    LogOp,
    SqrtOp,
    RsqrtOp,
    AbsOp,
    ReluOp,
    SigmoidOp,
    TanhOp,
    SiluOp,
    GeluOp,
    ErfOp,
    HardswishOp,
    ClampOp,
    HardsigmoidOp,
    MishOp,
    LogSigmoidOp,
    LeakyReluOp,
    EluOp,
    SoftplusOp,
    PowOp,
    CosOp,
    SinOp,
    AcosOp,
    AcoshOp,
    AsinOp,
    AsinhOp,
    AtanOp,
    AtanhOp,
    CoshOp,
    SinhOp,
    TanOp,
    Expm1Op,
    Log1pOp,
    Log2Op,
    Log10Op,
    CeilOp,
    FloorOp,
    RoundOp,
    TruncOp,
    Atan2Op,
    PowTensorOp,
    BitwiseAndOp,
    BitwiseOrOp,
    BitwiseXorOp,
    MaximumOp,
    MinimumOp,
    TriuOp,
    TrilOp,
    EqOp,
    NeOp,
    LtOp,
    LeOp,
    GtOp,
    GeOp,
    LogicalAndOp,
    LogicalOrOp,
    LogicalNotOp,
    WhereOp,
    CastOp,
    ArangeOp,
)
"""The ops of this module, in the order the `Torch` dialect lists them."""

__all__ = [
    "BitwiseBinaryOp",
    "CompareOp",
    "ExtremumOp",
    "FloatBinaryOp",
    "LogicalBinaryOp",
    "TriangleOp",
    *(op.__name__ for op in OPS),
]
