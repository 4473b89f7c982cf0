"""The `torch` dialect: one op per PyTorch (aten) op, on builtin `tensor<...>` values.

It is the import format of the frontend and the highest level of the pipeline. Ops keep
PyTorch's semantics (broadcasting, `torch.matmul` batching, normalization over trailing dims)
so that the importer stays a 1:1 table. Options are properties printed in the attribute
dictionary: `%s = torch.sum %x {dims = array<i64: 1>, keepdim = false} : (...) -> ...`.
Every verifier re-infers the result type from operands and properties (`infer`) and names the
op and the broken rule, so shape bugs surface at import time, not in a kernel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import prod
from typing import NoReturn

from xdsl.dialects.builtin import (
    I64,
    BFloat16Type,
    BoolAttr,
    DenseArrayBase,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    TensorType,
    f64,
    i64,
)
from xdsl.ir import Attribute, Dialect, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

Shape = tuple[int, ...]
Types = Sequence["TensorType | Sequence[TensorType] | None"]
Props = Mapping[str, Attribute]

_FORMAT = "operands attr-dict `:` functional-type(operands, results)"


# --- helpers shared by the verifiers and the frontend -------------------------------------


def _fail(op: str, rule: str) -> NoReturn:
    raise VerifyException(f"{op}: {rule}")


def fmt(shape: Sequence[int]) -> str:
    """`4x8`, or `scalar` for rank 0: how shapes appear in verifier messages."""
    return "x".join(map(str, shape)) if shape else "scalar"


def is_supported_element_type(t: Attribute) -> bool:
    """f32 first, f16 and bf16 admitted everywhere; i64 for index-like tensors."""
    return isinstance(t, Float32Type | Float16Type | BFloat16Type) or t == i64


def broadcast_shapes(op: str, a: Sequence[int], b: Sequence[int]) -> Shape:
    """numpy/PyTorch broadcasting of two shapes (trailing dims aligned, 1 stretches)."""
    out: list[int] = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            _fail(op, f"shapes {fmt(a)} and {fmt(b)} are not broadcastable")
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


def matmul_shape(op: str, a: Sequence[int], b: Sequence[int]) -> Shape:
    """Result shape of `torch.matmul` (1-D operands are promoted, batch dims broadcast)."""
    if not a or not b:
        _fail(op, "operands must have rank >= 1")
    a2 = (1, *a) if len(a) == 1 else tuple(a)
    b2 = (*b, 1) if len(b) == 1 else tuple(b)
    if a2[-1] != b2[-2]:
        _fail(op, f"inner dimensions {a2[-1]} and {b2[-2]} differ")
    batch = broadcast_shapes(op, a2[:-2], b2[:-2])
    return (*batch, *a2[-2:-1][len(a) == 1 :], *b2[-1:][len(b) == 1 :])


def _shape(t: TensorType | Sequence[TensorType] | None) -> Shape:
    assert isinstance(t, TensorType)
    return tuple(t.get_shape())


def _like(t: TensorType | Sequence[TensorType] | None, shape: Sequence[int]) -> TensorType:
    assert isinstance(t, TensorType)
    return TensorType(t.element_type, shape)


def _int(props: Props, name: str) -> int:
    attr = props[name]
    assert isinstance(attr, IntegerAttr)
    return attr.value.data


def _ints(props: Props, name: str) -> Shape:
    attr = props[name]
    assert isinstance(attr, DenseArrayBase)
    return tuple(int(v) for v in attr.get_values())


def _check_dim(op: str, name: str, dim: int, rank: int) -> None:
    if not 0 <= dim < rank:
        _fail(op, f"{name} {dim} out of range [0, {rank}) (dims are normalized, non-negative)")


def _type_of(v: SSAValue | Sequence[SSAValue] | None) -> TensorType | list[TensorType] | None:
    if v is None:
        return None
    if isinstance(v, SSAValue):
        assert isinstance(v.type, TensorType)
        return v.type
    return [_type_of(x) for x in v]  # type: ignore[misc]


def _i64(v: int) -> IntegerAttr:
    return IntegerAttr(v, i64)


def _array(vs: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(vs))


# --- base classes ---------------------------------------------------------------------------


class TorchOp(IRDLOperation):
    """Base of all torch ops: pure, one tensor result, verified by type inference."""

    result = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = _FORMAT

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        """Result type from operand types (one entry per operand def) and properties."""
        raise NotImplementedError

    def _init(self, operands: Sequence[SSAValue | Sequence[SSAValue] | None], props: Props):
        """Initialise with the inferred result type (shared by the typed constructors)."""
        types = [_type_of(o) for o in operands]
        IRDLOperation.__init__(
            self,
            operands=[[] if o is None else o for o in operands],
            result_types=[self.infer(types, props)],
            properties=dict(props),
        )

    def field_types(self) -> list[TensorType | Sequence[TensorType] | None]:
        """Operand types per operand def (None for an absent optional, a list if variadic)."""
        return [_type_of(getattr(self, n)) for n, _ in self.get_irdl_definition().operands]

    def verify_(self) -> None:
        for v in (*self.operands, self.result):
            t = v.type
            assert isinstance(t, TensorType)
            if not is_supported_element_type(t.element_type):
                _fail(self.name, f"element type {t.element_type} is not f32, f16, bf16 or i64")
        elts = {o.type.element_type for o in self.operands}  # type: ignore[attr-defined]
        if len(elts) > 1:
            _fail(self.name, "operands must have the same element type")
        expected = self.infer(self.field_types(), self.properties)
        if expected != self.result.type:
            _fail(self.name, f"result type {self.result.type} differs from inferred {expected}")


class UnaryOp(TorchOp):
    """Elementwise op on one tensor: the result type is the input type."""

    input = operand_def(TensorType)

    def __init__(self, input: SSAValue, **props: Attribute):
        self._init([input], props)

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        assert isinstance(types[0], TensorType)
        return types[0]


class BinaryOp(TorchOp):
    """Elementwise op on two tensors with numpy broadcasting."""

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)

    def __init__(self, lhs: SSAValue, rhs: SSAValue):
        self._init([lhs, rhs], {})

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        return _like(types[0], broadcast_shapes(cls.name, _shape(types[0]), _shape(types[1])))


class ReductionOp(TorchOp):
    """Reduction over `dims` (sorted, unique, non-negative); `keepdim` keeps size-1 dims."""

    input = operand_def(TensorType)
    dims = prop_def(DenseArrayBase.constr(i64))
    keepdim = prop_def(BoolAttr)

    def __init__(self, input: SSAValue, dims: Sequence[int], keepdim: bool = False):
        self._init([input], {"dims": _array(dims), "keepdim": BoolAttr.from_bool(keepdim)})

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        shape, dims = _shape(types[0]), _ints(props, "dims")
        if list(dims) != sorted(set(dims)):
            _fail(cls.name, f"dims {list(dims)} must be sorted and unique")
        for d in dims:
            _check_dim(cls.name, "dim", d, len(shape))
        keep = _int(props, "keepdim") != 0
        out = [1 if i in dims else s for i, s in enumerate(shape) if keep or i not in dims]
        return _like(types[0], out)


class SoftmaxLikeOp(UnaryOp):
    """Normalization along one (non-negative) `dim`; the result type is the input type."""

    dim = prop_def(IntegerAttr[I64])

    def __init__(self, input: SSAValue, dim: int):
        super().__init__(input, dim=_i64(dim))

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        _check_dim(cls.name, "dim", _int(props, "dim"), len(_shape(types[0])))
        return super().infer(types, props)


# --- constants and elementwise ops -----------------------------------------------------------


@irdl_op_definition
class ConstantOp(TorchOp):
    """A splat constant of any shape (rank 0 for the scalar arguments of aten ops)."""

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
            _fail(self.name, f"element type {self.result.type.element_type} is not supported")


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
            _fail(cls.name, f'approximate must be "none" or "tanh", got {mode}')
        return super().infer(types, props)


@irdl_op_definition
class PowOp(UnaryOp):
    """`input ** exponent` with a scalar exponent."""

    name = "torch.pow"
    exponent = prop_def(FloatAttr[Float64Type])

    def __init__(self, input: SSAValue, exponent: float):
        super().__init__(input, exponent=FloatAttr(exponent, f64))


# --- reductions and normalizations -----------------------------------------------------------


@irdl_op_definition
class SumOp(ReductionOp):
    name = "torch.sum"


@irdl_op_definition
class MeanOp(ReductionOp):
    name = "torch.mean"


@irdl_op_definition
class AmaxOp(ReductionOp):
    name = "torch.amax"


@irdl_op_definition
class SoftmaxOp(SoftmaxLikeOp):
    name = "torch.softmax"


@irdl_op_definition
class LogSoftmaxOp(SoftmaxLikeOp):
    name = "torch.log_softmax"


def _check_norm(op: str, types: Types, props: Props) -> Shape:
    """The trailing dims of the input must equal `normalized_shape`; params must match it."""
    shape, norm = _shape(types[0]), _ints(props, "normalized_shape")
    if not norm or tuple(shape[len(shape) - len(norm) :]) != norm or len(norm) > len(shape):
        _fail(op, f"normalized_shape {fmt(norm)} is not the trailing shape of {fmt(shape)}")
    for param in types[1:]:
        if param is not None and _shape(param) != norm:
            _fail(op, f"parameter shape {fmt(_shape(param))} differs from {fmt(norm)}")
    return shape


def _norm_props(normalized_shape: Sequence[int], eps: float) -> dict[str, Attribute]:
    return {"normalized_shape": _array(normalized_shape), "eps": FloatAttr(eps, f64)}


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


# --- contractions ----------------------------------------------------------------------------


@irdl_op_definition
class MatmulOp(BinaryOp):
    """`torch.matmul`: 1-D..N-D operands, batch dims broadcast."""

    name = "torch.matmul"

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        return _like(types[0], matmul_shape(cls.name, _shape(types[0]), _shape(types[1])))


@irdl_op_definition
class BmmOp(BinaryOp):
    """Batched matmul of two rank-3 tensors with equal batch sizes."""

    name = "torch.bmm"

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        a, b = _shape(types[0]), _shape(types[1])
        if len(a) != 3 or len(b) != 3:
            _fail(cls.name, f"operands must have rank 3, got {fmt(a)} and {fmt(b)}")
        if a[0] != b[0]:
            _fail(cls.name, f"batch sizes {a[0]} and {b[0]} differ")
        return _like(types[0], matmul_shape(cls.name, a, b))


@irdl_op_definition
class LinearOp(TorchOp):
    """`input @ weight.T + bias` with weight `(out, in)` and bias `(out,)`."""

    name = "torch.linear"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    bias = opt_operand_def(TensorType)

    def __init__(self, input: SSAValue, weight: SSAValue, bias: SSAValue | None = None):
        self._init([input, weight, bias], {})

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        x, w = _shape(types[0]), _shape(types[1])
        if len(w) != 2 or not x:
            _fail(cls.name, f"weight must have rank 2 and input rank >= 1, got {fmt(w)}, {fmt(x)}")
        if x[-1] != w[1]:
            _fail(cls.name, f"inner dimensions {x[-1]} and {w[1]} differ")
        if types[2] is not None and _shape(types[2]) != (w[0],):
            _fail(cls.name, f"bias shape {fmt(_shape(types[2]))} is not {w[0]}")
        return _like(types[0], (*x[:-1], w[0]))


# --- layout ops ------------------------------------------------------------------------------


@irdl_op_definition
class TransposeOp(UnaryOp):
    name = "torch.transpose"
    dim0 = prop_def(IntegerAttr[I64])
    dim1 = prop_def(IntegerAttr[I64])

    def __init__(self, input: SSAValue, dim0: int, dim1: int):
        super().__init__(input, dim0=_i64(dim0), dim1=_i64(dim1))

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        shape, d0, d1 = list(_shape(types[0])), _int(props, "dim0"), _int(props, "dim1")
        _check_dim(cls.name, "dim0", d0, len(shape))
        _check_dim(cls.name, "dim1", d1, len(shape))
        shape[d0], shape[d1] = shape[d1], shape[d0]
        return _like(types[0], shape)


@irdl_op_definition
class PermuteOp(UnaryOp):
    name = "torch.permute"
    dims = prop_def(DenseArrayBase.constr(i64))

    def __init__(self, input: SSAValue, dims: Sequence[int]):
        super().__init__(input, dims=_array(dims))

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        shape, dims = _shape(types[0]), _ints(props, "dims")
        if sorted(dims) != list(range(len(shape))):
            _fail(cls.name, f"dims {list(dims)} are not a permutation of rank {len(shape)}")
        return _like(types[0], [shape[d] for d in dims])


class ShapedByResultOp(UnaryOp):
    """An op whose result shape is given by its result type (reshape, expand)."""

    def __init__(self, input: SSAValue, shape: Sequence[int]):
        assert isinstance(input.type, TensorType)
        t = TensorType(input.type.element_type, shape)
        IRDLOperation.__init__(self, operands=[input], result_types=[t])

    def verify_(self) -> None:
        if self.input.type.element_type != self.result.type.element_type:  # type: ignore[attr-defined]
            _fail(self.name, "result element type differs from the input's")
        self.check(_shape(self.input.type), _shape(self.result.type))  # type: ignore[arg-type]

    def check(self, src: Shape, dst: Shape) -> None:
        raise NotImplementedError


@irdl_op_definition
class ReshapeOp(ShapedByResultOp):
    """view / reshape / flatten / squeeze: same elements, row-major, new shape."""

    name = "torch.reshape"

    def check(self, src: Shape, dst: Shape) -> None:
        if prod(src) != prod(dst):
            _fail(self.name, f"cannot reshape {fmt(src)} ({prod(src)} elements) to {fmt(dst)}")


@irdl_op_definition
class ExpandOp(ShapedByResultOp):
    """Broadcast to the result shape (size-1 or missing leading dims stretch)."""

    name = "torch.expand"

    def check(self, src: Shape, dst: Shape) -> None:
        pairs = zip(reversed(src), reversed(dst), strict=False)
        if len(dst) < len(src) or any(s not in (1, d) for s, d in pairs):
            _fail(self.name, f"cannot expand {fmt(src)} to {fmt(dst)}")


@irdl_op_definition
class UnsqueezeOp(UnaryOp):
    name = "torch.unsqueeze"
    dim = prop_def(IntegerAttr[I64])

    def __init__(self, input: SSAValue, dim: int):
        super().__init__(input, dim=_i64(dim))

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        shape, dim = list(_shape(types[0])), _int(props, "dim")
        _check_dim(cls.name, "dim", dim, len(shape) + 1)
        return _like(types[0], [*shape[:dim], 1, *shape[dim:]])


@irdl_op_definition
class SliceOp(UnaryOp):
    """Elements `start, start+step, ... < end` along `dim`; 0 <= start <= end <= size."""

    name = "torch.slice"
    dim = prop_def(IntegerAttr[I64])
    start = prop_def(IntegerAttr[I64])
    end = prop_def(IntegerAttr[I64])
    step = prop_def(IntegerAttr[I64])

    def __init__(self, input: SSAValue, dim: int, start: int, end: int, step: int = 1):
        props = {"dim": _i64(dim), "start": _i64(start), "end": _i64(end), "step": _i64(step)}
        super().__init__(input, **props)

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        shape, dim = list(_shape(types[0])), _int(props, "dim")
        start, end, step = _int(props, "start"), _int(props, "end"), _int(props, "step")
        _check_dim(cls.name, "dim", dim, len(shape))
        if not (0 <= start <= end <= shape[dim] and step >= 1):
            _fail(cls.name, f"bounds {start}:{end}:{step} not normalized for size {shape[dim]}")
        shape[dim] = (end - start + step - 1) // step
        return _like(types[0], shape)


@irdl_op_definition
class CatOp(TorchOp):
    """Concatenation along `dim`; all other dims must agree."""

    name = "torch.cat"
    inputs = var_operand_def(TensorType)
    dim = prop_def(IntegerAttr[I64])

    def __init__(self, inputs: Sequence[SSAValue], dim: int):
        self._init([inputs], {"dim": _i64(dim)})

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        ts, dim = types[0], _int(props, "dim")
        assert isinstance(ts, Sequence)
        if not ts:
            _fail(cls.name, "needs at least one input")
        shapes = [_shape(t) for t in ts]
        _check_dim(cls.name, "dim", dim, len(shapes[0]))
        drop = [s[:dim] + s[dim + 1 :] for s in shapes]
        if any(len(s) != len(shapes[0]) or d != drop[0] for s, d in zip(shapes, drop, strict=True)):
            _fail(cls.name, f"input shapes {', '.join(map(fmt, shapes))} differ outside dim {dim}")
        out = list(shapes[0])
        out[dim] = sum(s[dim] for s in shapes)
        return _like(ts[0], out)


Torch = Dialect(
    "torch",
    [
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
        PowOp,
        SumOp,
        MeanOp,
        AmaxOp,
        SoftmaxOp,
        LogSoftmaxOp,
        RmsNormOp,
        LayerNormOp,
        MatmulOp,
        BmmOp,
        LinearOp,
        TransposeOp,
        PermuteOp,
        ReshapeOp,
        UnsqueezeOp,
        ExpandOp,
        SliceOp,
        CatOp,
    ],
    [],
)
