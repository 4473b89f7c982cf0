"""Helpers and base classes of the `torch` dialect (the ops live in the sibling modules).

Every torch op re-infers its result type from operand types and properties (`infer`) in its
verifier and names the op and the broken rule. The helpers here are shared with the frontend
and the decompositions (`broadcast_shapes`, `matmul_shape`, the element-type predicates).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar, NoReturn

from xdsl.dialects.builtin import (
    I64,
    BFloat16Type,
    BoolAttr,
    DenseArrayBase,
    Float16Type,
    Float32Type,
    IntegerAttr,
    TensorType,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from deplodock.dialects.queries import shape_of

Shape = tuple[int, ...]
Types = Sequence["TensorType | Sequence[TensorType] | None"]
Props = Mapping[str, Attribute]

FORMAT = "operands attr-dict `:` functional-type(operands, results)"

#: What the package re-exports (`T.TorchOp`, `T.broadcast_shapes`, ...); the ops' own
#: modules export their ops.
__all__ = [
    "BinaryOp",
    "DimOp",
    "ReductionOp",
    "Shape",
    "ShapedByResultOp",
    "SoftmaxLikeOp",
    "TorchOp",
    "UnaryOp",
    "broadcast_shapes",
    "fmt",
    "is_float",
    "is_integer",
    "is_supported_element_type",
    "matmul_shape",
]


# --- helpers shared by the verifiers and the frontend -------------------------------------


def fail(op: str, rule: str) -> NoReturn:
    raise VerifyException(f"{op}: {rule}")


def fmt(shape: Sequence[int]) -> str:
    """`4x8`, or `scalar` for rank 0: how shapes appear in verifier messages."""
    return "x".join(map(str, shape)) if shape else "scalar"


def is_float(t: Attribute) -> bool:
    return isinstance(t, Float32Type | Float16Type | BFloat16Type)


def is_integer(t: Attribute) -> bool:
    """i64 / i32 (indices, positions) and i1 (bool masks)."""
    return t in (i64, i32, i1)


def is_supported_element_type(t: Attribute) -> bool:
    """f32 first, f16 and bf16 admitted everywhere; i64/i32 for index-like tensors and i1
    for masks (what comparisons produce and `where` consumes)."""
    return is_float(t) or is_integer(t)


def broadcast_shapes(op: str, a: Sequence[int], b: Sequence[int]) -> Shape:
    """numpy/PyTorch broadcasting of two shapes (trailing dims aligned, 1 stretches)."""
    out: list[int] = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            fail(op, f"shapes {fmt(a)} and {fmt(b)} are not broadcastable")
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


def matmul_shape(op: str, a: Sequence[int], b: Sequence[int]) -> Shape:
    """Result shape of `torch.matmul` (1-D operands are promoted, batch dims broadcast)."""
    if not a or not b:
        fail(op, "operands must have rank >= 1")
    a2 = (1, *a) if len(a) == 1 else tuple(a)
    b2 = (*b, 1) if len(b) == 1 else tuple(b)
    if a2[-1] != b2[-2]:
        fail(op, f"inner dimensions {a2[-1]} and {b2[-2]} differ")
    batch = broadcast_shapes(op, a2[:-2], b2[:-2])
    return (*batch, *a2[-2:-1][len(a) == 1 :], *b2[-1:][len(b) == 1 :])


def like(t: TensorType | Sequence[TensorType] | None, shape: Sequence[int]) -> TensorType:
    assert isinstance(t, TensorType)
    return TensorType(t.element_type, shape)


def int_prop(props: Props, name: str) -> int:
    attr = props[name]
    assert isinstance(attr, IntegerAttr)
    return attr.value.data


def ints_prop(props: Props, name: str) -> Shape:
    attr = props[name]
    assert isinstance(attr, DenseArrayBase)
    return tuple(int(v) for v in attr.get_values())


def check_dim(op: str, name: str, dim: int, rank: int) -> None:
    if not 0 <= dim < rank:
        fail(op, f"{name} {dim} out of range [0, {rank}) (dims are normalized, non-negative)")


def type_of(v: SSAValue | Sequence[SSAValue] | None) -> TensorType | list[TensorType] | None:
    if v is None:
        return None
    if isinstance(v, SSAValue):
        assert isinstance(v.type, TensorType)
        return v.type
    return [type_of(x) for x in v]  # type: ignore[misc]


def i64_attr(v: int) -> IntegerAttr:
    return IntegerAttr(v, i64)


def array_attr(vs: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(vs))


# --- base classes ---------------------------------------------------------------------------


class TorchOp(IRDLOperation):
    """Base of all torch ops: pure, one tensor result, verified by type inference."""

    result = result_def(TensorType)
    traits = traits_def(Pure())
    SAME_OPERAND_TYPES: ClassVar[bool] = True
    """Whether all operands must share one element type (false for where, index, ...)."""
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = FORMAT

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        """Result type from operand types (one entry per operand def) and properties."""
        raise NotImplementedError

    def _init(self, operands: Sequence[SSAValue | Sequence[SSAValue] | None], props: Props):
        """Initialise with the inferred result type (shared by the typed constructors)."""
        types = [type_of(o) for o in operands]
        IRDLOperation.__init__(
            self,
            operands=[[] if o is None else o for o in operands],
            result_types=[self.infer(types, props)],
            properties=dict(props),
        )

    def field_types(self) -> list[TensorType | Sequence[TensorType] | None]:
        """Operand types per operand def (None for an absent optional, a list if variadic)."""
        return [type_of(getattr(self, n)) for n, _ in self.get_irdl_definition().operands]

    def verify_(self) -> None:
        for v in (*self.operands, self.result):
            t = v.type
            assert isinstance(t, TensorType)
            if not is_supported_element_type(t.element_type):
                fail(self.name, f"element type {t.element_type} is not supported")
        elts = {o.type.element_type for o in self.operands}  # type: ignore[attr-defined]
        if self.SAME_OPERAND_TYPES and len(elts) > 1:
            fail(self.name, "operands must have the same element type")
        expected = self.infer(self.field_types(), self.properties)
        if expected != self.result.type:
            fail(self.name, f"result type {self.result.type} differs from inferred {expected}")


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
        return like(types[0], broadcast_shapes(cls.name, shape_of(types[0]), shape_of(types[1])))


class ReductionOp(TorchOp):
    """Reduction over `dims` (sorted, unique, non-negative); `keepdim` keeps size-1 dims."""

    input = operand_def(TensorType)
    dims = prop_def(DenseArrayBase.constr(i64))
    keepdim = prop_def(BoolAttr)

    def __init__(self, input: SSAValue, dims: Sequence[int], keepdim: bool = False):
        self._init([input], {"dims": array_attr(dims), "keepdim": BoolAttr.from_bool(keepdim)})

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        shape, dims = shape_of(types[0]), ints_prop(props, "dims")
        if list(dims) != sorted(set(dims)):
            fail(cls.name, f"dims {list(dims)} must be sorted and unique")
        for d in dims:
            check_dim(cls.name, "dim", d, len(shape))
        keep = int_prop(props, "keepdim") != 0
        out = [1 if i in dims else s for i, s in enumerate(shape) if keep or i not in dims]
        return like(types[0], out)


class DimOp(UnaryOp):
    """A unary op along one non-negative `dim` (softmaxes, unsqueeze, cumsum): the shared
    property and constructor; each op checks `dim` against its own rank in `infer`."""

    dim = prop_def(IntegerAttr[I64])

    def __init__(self, input: SSAValue, dim: int):
        super().__init__(input, dim=i64_attr(dim))


class SoftmaxLikeOp(DimOp):
    """Normalization along one (non-negative) `dim`; the result type is the input type."""

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        check_dim(cls.name, "dim", int_prop(props, "dim"), len(shape_of(types[0])))
        return super().infer(types, props)


class ShapedByResultOp(UnaryOp):
    """An op whose result shape is given by its result type (reshape, expand)."""

    def __init__(self, input: SSAValue, shape: Sequence[int]):
        assert isinstance(input.type, TensorType)
        t = TensorType(input.type.element_type, shape)
        IRDLOperation.__init__(self, operands=[input], result_types=[t])

    def verify_(self) -> None:
        if self.input.type.element_type != self.result.type.element_type:  # type: ignore[attr-defined]
            fail(self.name, "result element type differs from the input's")
        self.check(shape_of(self.input.type), shape_of(self.result.type))  # type: ignore[arg-type]

    def check(self, src: Shape, dst: Shape) -> None:
        raise NotImplementedError
