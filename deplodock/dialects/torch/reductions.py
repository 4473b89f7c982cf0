"""Reductions, softmaxes, normalizations and the prefix sum of the torch dialect."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I64,
    BoolAttr,
    DenseArrayBase,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    TensorType,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    prop_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer

from deplodock.dialects.queries import element_type_of, shape_of
from deplodock.dialects.torch.base import (
    DimOp,
    Props,
    ReductionOp,
    Shape,
    SoftmaxLikeOp,
    TorchOp,
    Types,
    array_attr,
    check_dim,
    fail,
    fmt,
    i64_attr,
    int_prop,
    ints_prop,
    is_integer,
)


@irdl_op_definition
class SumOp(ReductionOp):
    name = "torch.sum"


@irdl_op_definition
class ProdOp(ReductionOp):
    """The product over `dims` (`torch.prod`; the frontend casts integers to i64 first)."""

    name = "torch.prod"


@irdl_op_definition
class MeanOp(ReductionOp):
    name = "torch.mean"


@irdl_op_definition
class AmaxOp(ReductionOp):
    name = "torch.amax"


@irdl_op_definition
class AminOp(ReductionOp):
    name = "torch.amin"


class ArgExtremumOp(TorchOp):
    """The index (i64) of the extreme value along the non-negative `dim`: the first one on a
    tie and the first NaN if there is one, as PyTorch; `keepdim` keeps a size-1 `dim`. (The
    frontend flattens for the `dim=None` form.)"""

    input = operand_def(TensorType)
    dim = prop_def(IntegerAttr[I64])
    keepdim = prop_def(BoolAttr)

    def __init__(self, input: SSAValue, dim: int, keepdim: bool = False):
        self._init([input], {"dim": i64_attr(dim), "keepdim": BoolAttr.from_bool(keepdim)})

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        shape, dim = shape_of(types[0]), int_prop(props, "dim")
        check_dim(cls.name, "dim", dim, len(shape))
        if element_type_of(types[0]) == i1:
            fail(cls.name, "bool tensors have no order here")
        if shape[dim] == 0:
            fail(cls.name, f"dim {dim} is empty: there is no extreme value")
        keep = int_prop(props, "keepdim") != 0
        return TensorType(
            i64, [1 if i == dim else s for i, s in enumerate(shape) if keep or i != dim]
        )


@irdl_op_definition
class ArgmaxOp(ArgExtremumOp):
    name = "torch.argmax"


@irdl_op_definition
class ArgminOp(ArgExtremumOp):
    name = "torch.argmin"


@irdl_op_definition
class SoftmaxOp(SoftmaxLikeOp):
    name = "torch.softmax"


@irdl_op_definition
class LogSoftmaxOp(SoftmaxLikeOp):
    name = "torch.log_softmax"


def _check_norm(op: str, types: Types, props: Props) -> Shape:
    """The trailing dims of the input must equal `normalized_shape`; params must match it."""
    shape, norm = shape_of(types[0]), ints_prop(props, "normalized_shape")
    if not norm or tuple(shape[len(shape) - len(norm) :]) != norm or len(norm) > len(shape):
        fail(op, f"normalized_shape {fmt(norm)} is not the trailing shape of {fmt(shape)}")
    for param in types[1:]:
        if param is not None and shape_of(param) != norm:
            fail(op, f"parameter shape {fmt(shape_of(param))} differs from {fmt(norm)}")
    return shape


def _norm_props(normalized_shape: Sequence[int], eps: float) -> dict[str, Attribute]:
    return {"normalized_shape": array_attr(normalized_shape), "eps": FloatAttr(eps, f64)}


@irdl_op_definition
class RmsNormOp(TorchOp):
    """`x * rsqrt(mean(x^2 over the trailing dims) + eps) * weight`."""

    name = "torch.rms_norm"
    input = operand_def(TensorType)
    weight = opt_operand_def(TensorType)
    normalized_shape = prop_def(DenseArrayBase.constr(i64))
    eps = prop_def(FloatAttr[Float64Type])

    def __init__(
        self, input: SSAValue, weight: SSAValue | None, normalized_shape: Sequence[int], eps: float
    ):
        self._init([input, weight], _norm_props(normalized_shape, eps))

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        _check_norm(cls.name, types, props)
        return types[0]  # type: ignore[return-value]


@irdl_op_definition
class LayerNormOp(TorchOp):
    """`(x - mean) * rsqrt(var + eps) * weight + bias` over the trailing dims.

    Two optional operands need segment sizes; the custom syntax derives them from the operand
    count (input, weight, bias) and only prints `operandSegmentSizes` for bias-without-weight.
    """

    name = "torch.layer_norm"
    input = operand_def(TensorType)
    weight = opt_operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    normalized_shape = prop_def(DenseArrayBase.constr(i64))
    eps = prop_def(FloatAttr[Float64Type])
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = None

    def __init__(
        self,
        input: SSAValue,
        weight: SSAValue | None,
        bias: SSAValue | None,
        normalized_shape: Sequence[int],
        eps: float,
    ):
        self._init([input, weight, bias], _norm_props(normalized_shape, eps))

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        _check_norm(cls.name, types, props)
        return types[0]  # type: ignore[return-value]

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.operands, printer.print_operand)
        props = {k: v for k, v in self.properties.items() if k != "operandSegmentSizes"}
        if self.weight is None and self.bias is not None:
            props["operandSegmentSizes"] = self.properties["operandSegmentSizes"]
        printer.print_op_attributes(props | dict(self.attributes))
        printer.print_string(" : ")
        printer.print_operation_type(self)

    @classmethod
    def parse(cls, parser: Parser) -> LayerNormOp:
        pos = parser.pos
        args = parser.parse_comma_separated_list(
            Parser.Delimiter.NONE, parser.parse_unresolved_operand
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        ftype = parser.parse_function_type()
        operands = parser.resolve_operands(args, ftype.inputs.data, pos)
        segments = attrs.pop("operandSegmentSizes", None)
        sizes = [1, int(len(operands) > 1), int(len(operands) > 2)]
        if isinstance(segments, DenseArrayBase):
            sizes = [int(v) for v in segments.get_values()]
        props = {k: v for k, v in attrs.items() if k in ("normalized_shape", "eps")}
        it = iter(operands)
        groups = [[next(it)] if n else [] for n in sizes]
        op = cls.build(operands=groups, result_types=ftype.outputs.data, properties=props)
        op.attributes |= {k: v for k, v in attrs.items() if k not in props}
        return op


class PrefixOp(DimOp):
    """An inclusive prefix reduction along `dim`; integer and bool inputs accumulate in
    i64, as in PyTorch."""

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        shape, elt = shape_of(types[0]), element_type_of(types[0])
        check_dim(cls.name, "dim", int_prop(props, "dim"), len(shape))
        return TensorType(i64 if is_integer(elt) else elt, shape)


@irdl_op_definition
class CumsumOp(PrefixOp):
    """Inclusive prefix sum along `dim`."""

    name = "torch.cumsum"


@irdl_op_definition
class CumprodOp(PrefixOp):
    """Inclusive prefix product along `dim`."""

    name = "torch.cumprod"


OPS: tuple[type[TorchOp], ...] = (
    SumOp,
    ProdOp,
    MeanOp,
    AmaxOp,
    AminOp,
    ArgmaxOp,
    ArgminOp,
    SoftmaxOp,
    LogSoftmaxOp,
    RmsNormOp,
    LayerNormOp,
    CumsumOp,
    CumprodOp,
)
"""The ops of this module, in the order the `Torch` dialect lists them."""

__all__ = ["ArgExtremumOp", "PrefixOp", *(op.__name__ for op in OPS)]
