"""The `tensor` dialect: three primitives every torch op decomposes into.

`tensor.elementwise` (a scalar `arith`/`math` body applied at every coordinate),
`tensor.reduce` (add/mul/max/min over some dims, rank kept) and `tensor.index_map`
(out[c] = in[map(c)] with an affine map: transpose, reshape, slice, broadcast, concat...).
Broadcasting is never implicit: it is an index map. See docs/ir.md section 2.

The dialect is named `tensor` and replaces xDSL's own `tensor` dialect in our tools.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from itertools import pairwise

from xdsl.dialects.builtin import (
    I64,
    AffineMapAttr,
    ArrayAttr,
    DenseArrayBase,
    IntegerAttr,
    TensorType,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Block, Dialect, Region, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineMap
from xdsl.ir.affine.affine_expr import AffineConstantExpr, AffineDimExpr, AffineExpr
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, Pure, ReturnLike
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

# ---------------------------------------------------------------------------------------
# Reduction kinds (shared with the loop / tile / kernel dialects)
# ---------------------------------------------------------------------------------------


class ReduceKind(StrEnum):
    """A reduction combiner; `identity` is the initial accumulator value."""

    ADD = "add"
    MUL = "mul"
    MAX = "max"
    MIN = "min"

    @property
    def identity(self) -> float:
        return _IDENTITY[self]


_IDENTITY: dict[ReduceKind, float] = {
    ReduceKind.ADD: 0.0,
    ReduceKind.MUL: 1.0,
    ReduceKind.MAX: -math.inf,
    ReduceKind.MIN: math.inf,
}


@irdl_attr_definition
class ReduceKindAttr(EnumAttribute[ReduceKind], SpacedOpaqueSyntaxAttribute):
    """`#tensor<kind add>` in generic form; printed as a bare keyword by the ops."""

    name = "tensor.kind"


def _shape(t: Attribute) -> tuple[int, ...]:
    assert isinstance(t, TensorType)
    return tuple(t.get_shape())


# ---------------------------------------------------------------------------------------
# tensor.elementwise / tensor.yield
# ---------------------------------------------------------------------------------------


@irdl_op_definition
class ElementwiseOp(IRDLOperation):
    """`out[c] = body(in_0[c], ..., in_n[c])`; every input has the result's shape.

    Zero inputs make a splat constant. The body is a single block of scalar `arith`/`math`
    ops ending in `tensor.yield`.
    """

    name = "tensor.elementwise"

    inputs = var_operand_def(TensorType)
    result = result_def(TensorType)
    body = region_def("single_block")

    traits = traits_def(Pure())

    def __init__(self, inputs: Sequence[SSAValue], result_type: TensorType, body: Region):
        super().__init__(operands=[inputs], result_types=[result_type], regions=[body])

    @classmethod
    def build_with_body(
        cls,
        inputs: Sequence[SSAValue],
        result_type: TensorType,
        body_fn: Callable[[Block, Sequence[SSAValue]], SSAValue],
    ) -> ElementwiseOp:
        """Build the op; `body_fn(block, args)` appends scalar ops and returns the value
        to yield (the `tensor.yield` is added here)."""
        block = Block(arg_types=[element_type(v.type) for v in inputs])
        value = body_fn(block, block.args)
        block.add_op(YieldOp(value))
        return cls(inputs, result_type, Region(block))

    def verify_(self) -> None:
        out_shape = _shape(self.result.type)
        for i, v in enumerate(self.inputs):
            if _shape(v.type) != out_shape:
                raise VerifyException(
                    f"tensor.elementwise: input {i} has shape {list(_shape(v.type))}, "
                    f"expected the result shape {list(out_shape)}"
                )
        block = self.body.block
        if len(block.args) != len(self.inputs):
            raise VerifyException(
                f"tensor.elementwise: body has {len(block.args)} arguments, "
                f"expected one per input ({len(self.inputs)})"
            )
        for i, (arg, v) in enumerate(zip(block.args, self.inputs, strict=True)):
            elt = element_type(v.type)
            if arg.type != elt:
                raise VerifyException(
                    f"tensor.elementwise: body argument {i} has type {arg.type}, "
                    f"expected the input element type {elt}"
                )
        last = block.last_op
        if not isinstance(last, YieldOp):
            raise VerifyException("tensor.elementwise: body must end in tensor.yield")
        out_elt = element_type(self.result.type)
        if last.value.type != out_elt:
            raise VerifyException(
                f"tensor.elementwise: body yields {last.value.type}, "
                f"expected the result element type {out_elt}"
            )

    @classmethod
    def parse(cls, parser: Parser) -> ElementwiseOp:
        operands = parser.parse_comma_separated_list(
            Parser.Delimiter.PAREN, parser.parse_unresolved_operand
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        ftype = parser.parse_function_type()
        if len(ftype.outputs.data) != 1:
            parser.raise_error("tensor.elementwise: expected one result type", pos)
        inputs = parser.resolve_operands(operands, ftype.inputs.data, pos)
        body = parser.parse_region()
        result_type = ftype.outputs.data[0]
        if not isinstance(result_type, TensorType):
            parser.raise_error("tensor.elementwise: result must be a tensor", pos)
        op = cls(inputs, result_type, body)
        op.attributes.update(attrs)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_operands(self.inputs)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_function_type(self.inputs.types, [self.result.type])
        printer.print_string(" ")
        printer.print_region(self.body)


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Terminator of a `tensor.elementwise` body: the scalar value at this coordinate."""

    name = "tensor.yield"

    value = operand_def()

    assembly_format = "$value attr-dict `:` type($value)"

    traits = lazy_traits_def(
        lambda: (IsTerminator(), ReturnLike(), Pure(), HasParent(ElementwiseOp))
    )

    def __init__(self, value: SSAValue):
        super().__init__(operands=[value])


def element_type(t: Attribute) -> Attribute:
    """Element type of a tensor type (asserted)."""
    assert isinstance(t, TensorType), f"expected a tensor type, got {t}"
    return t.get_element_type()


# ---------------------------------------------------------------------------------------
# tensor.reduce
# ---------------------------------------------------------------------------------------


@irdl_op_definition
class ReduceOp(IRDLOperation):
    """Reduce `dims` with `kind`; the result keeps the rank (reduced dims become 1)."""

    name = "tensor.reduce"

    input = operand_def(TensorType)
    result = result_def(TensorType)
    kind = prop_def(ReduceKindAttr)
    dims = prop_def(DenseArrayBase.constr(i64))

    traits = traits_def(Pure())

    def __init__(
        self,
        input: SSAValue,
        kind: ReduceKind | str,
        dims: Sequence[int],
        result_type: TensorType | None = None,
    ):
        if result_type is None:
            in_t = input.type
            assert isinstance(in_t, TensorType)
            shape = [1 if i in dims else s for i, s in enumerate(in_t.get_shape())]
            result_type = TensorType(in_t.get_element_type(), shape)
        super().__init__(
            operands=[input],
            result_types=[result_type],
            properties={
                "kind": ReduceKindAttr(ReduceKind(kind)),
                "dims": DenseArrayBase.from_list(i64, list(dims)),
            },
        )

    @property
    def reduce_kind(self) -> ReduceKind:
        return self.kind.data

    @property
    def reduce_dims(self) -> tuple[int, ...]:
        return tuple(self.dims.get_values())

    def verify_(self) -> None:
        in_shape = _shape(self.input.type)
        dims = self.reduce_dims
        if list(dims) != sorted(set(dims)):
            raise VerifyException(f"tensor.reduce: dims {list(dims)} must be sorted and unique")
        for d in dims:
            if not 0 <= d < len(in_shape):
                raise VerifyException(
                    f"tensor.reduce: dim {d} out of range for rank {len(in_shape)}"
                )
        expected = [1 if i in dims else s for i, s in enumerate(in_shape)]
        if list(_shape(self.result.type)) != expected:
            raise VerifyException(
                f"tensor.reduce: result shape {list(_shape(self.result.type))} must be "
                f"{expected} (reduced dims kept as 1)"
            )
        if element_type(self.input.type) != element_type(self.result.type):
            raise VerifyException("tensor.reduce: input and result element types differ")

    @classmethod
    def parse(cls, parser: Parser) -> ReduceOp:
        kind = parser.parse_str_enum(ReduceKind)
        operand = parser.parse_unresolved_operand()
        parser.parse_keyword("dims")
        dims = parser.parse_comma_separated_list(Parser.Delimiter.SQUARE, parser.parse_integer)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        in_type = parser.parse_type()
        parser.parse_punctuation("->")
        pos = parser.pos
        out_type = parser.parse_type()
        if not isinstance(out_type, TensorType):
            parser.raise_error("tensor.reduce: result must be a tensor", pos)
        op = cls(parser.resolve_operand(operand, in_type), kind, dims, out_type)
        op.attributes.update(attrs)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.reduce_kind.value} ")
        printer.print_operand(self.input)
        printer.print_string(" dims [" + ", ".join(str(d) for d in self.reduce_dims) + "]")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.input.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)


# ---------------------------------------------------------------------------------------
# tensor.index_map
# ---------------------------------------------------------------------------------------


def expr_bounds(expr: AffineExpr, box: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """Inclusive [lo, hi] of an affine expression over a box of dim values.

    Interval arithmetic: exact for maps monotone in each dim (it is the corner
    evaluation), and a sound over-approximation for floordiv/mod of a linearized index.
    """
    if isinstance(expr, AffineConstantExpr):
        return expr.value, expr.value
    if isinstance(expr, AffineDimExpr):
        return box[expr.position]
    if not isinstance(expr, AffineBinaryOpExpr):
        raise VerifyException(f"unsupported affine expression {expr}")
    lo0, hi0 = expr_bounds(expr.lhs, box)
    lo1, hi1 = expr_bounds(expr.rhs, box)
    match expr.kind:
        case AffineBinaryOpKind.Add:
            return lo0 + lo1, hi0 + hi1
        case AffineBinaryOpKind.Mul:
            prods = [lo0 * lo1, lo0 * hi1, hi0 * lo1, hi0 * hi1]
            return min(prods), max(prods)
    if lo1 != hi1 or lo1 <= 0:
        raise VerifyException(f"divisor of {expr} must be a positive constant")
    c = lo1
    match expr.kind:
        case AffineBinaryOpKind.FloorDiv:
            return lo0 // c, hi0 // c
        case AffineBinaryOpKind.CeilDiv:
            return -(-lo0 // c), -(-hi0 // c)
        case _:  # Mod
            if lo0 // c == hi0 // c:
                return lo0 % c, hi0 % c
            return 0, c - 1


@irdl_op_definition
class IndexMapOp(IRDLOperation):
    """`out[c] = in_i[map_i(c)]`: transpose, permute, reshape, slice, (un)squeeze,
    broadcast and concat as affine maps from output coordinates to input coordinates.

    With several inputs, `concat D offsets [o_0, ...]` assigns to input `i` the output
    coordinates with `o_i <= c[D] < o_{i+1}`.
    """

    name = "tensor.index_map"

    inputs = var_operand_def(TensorType)
    result = result_def(TensorType)
    maps = prop_def(ArrayAttr[AffineMapAttr])
    concat_dim = opt_prop_def(IntegerAttr[I64], prop_name="concat")
    offsets = opt_prop_def(DenseArrayBase.constr(i64))

    traits = traits_def(Pure())

    def __init__(
        self,
        inputs: Sequence[SSAValue],
        maps: Sequence[AffineMap | AffineMapAttr],
        result_type: TensorType,
        concat: tuple[int, Sequence[int]] | None = None,
    ):
        props: dict[str, Attribute] = {
            "maps": ArrayAttr(m if isinstance(m, AffineMapAttr) else AffineMapAttr(m) for m in maps)
        }
        if concat is not None:
            props["concat"] = IntegerAttr(concat[0], i64)
            props["offsets"] = DenseArrayBase.from_list(i64, list(concat[1]))
        super().__init__(operands=[inputs], result_types=[result_type], properties=props)

    @property
    def affine_maps(self) -> tuple[AffineMap, ...]:
        return tuple(m.data for m in self.maps.data)

    @property
    def concat_info(self) -> tuple[int, tuple[int, ...]] | None:
        """(dim, offsets) for a concat, else None."""
        if self.concat_dim is None or self.offsets is None:
            return None
        return self.concat_dim.value.data, tuple(self.offsets.get_values())

    def input_regions(self) -> list[list[tuple[int, int]]]:
        """For each input, the inclusive box of output coordinates it supplies."""
        out_shape = _shape(self.result.type)
        full = [(0, s - 1) for s in out_shape]
        info = self.concat_info
        if info is None:
            return [full for _ in self.inputs]
        dim, offs = info
        ends = [*offs[1:], out_shape[dim]]
        boxes: list[list[tuple[int, int]]] = []
        for lo, end in zip(offs, ends, strict=True):
            box = list(full)
            box[dim] = (lo, end - 1)
            boxes.append(box)
        return boxes

    def verify_(self) -> None:
        out_shape = _shape(self.result.type)
        maps = self.affine_maps
        if not self.inputs:
            raise VerifyException("tensor.index_map: needs at least one input")
        if len(maps) != len(self.inputs):
            raise VerifyException(
                f"tensor.index_map: {len(maps)} maps for {len(self.inputs)} inputs"
            )
        out_elt = element_type(self.result.type)
        for i, (v, m) in enumerate(zip(self.inputs, maps, strict=True)):
            if element_type(v.type) != out_elt:
                raise VerifyException(
                    f"tensor.index_map: input {i} element type differs from the result's"
                )
            in_rank = len(_shape(v.type))
            if m.num_dims != len(out_shape) or m.num_symbols != 0 or len(m.results) != in_rank:
                raise VerifyException(
                    f"tensor.index_map: map {i} must have {len(out_shape)} dims, no symbols "
                    f"and {in_rank} results (input rank), got {m}"
                )
        self._verify_concat(out_shape)
        if any(s == 0 for s in out_shape):
            return
        for i, (v, m, box) in enumerate(zip(self.inputs, maps, self.input_regions(), strict=True)):
            in_shape = _shape(v.type)
            for k, (expr, size) in enumerate(zip(m.results, in_shape, strict=True)):
                lo, hi = expr_bounds(expr, box)
                if lo < 0 or hi >= size:
                    raise VerifyException(
                        f"tensor.index_map: map {i} result {k} ranges over [{lo}, {hi}], "
                        f"outside input dim of size {size}"
                    )

    def _verify_concat(self, out_shape: tuple[int, ...]) -> None:
        has_dim, has_offs = self.concat_dim is not None, self.offsets is not None
        if has_dim != has_offs:
            raise VerifyException("tensor.index_map: concat needs both a dim and offsets")
        info = self.concat_info
        if info is None:
            if len(self.inputs) > 1:
                raise VerifyException("tensor.index_map: several inputs need `concat D offsets`")
            return
        dim, offs = info
        if not 0 <= dim < len(out_shape):
            raise VerifyException(f"tensor.index_map: concat dim {dim} out of range")
        if len(offs) != len(self.inputs):
            raise VerifyException(
                f"tensor.index_map: {len(offs)} offsets for {len(self.inputs)} inputs"
            )
        bounds = [*offs, out_shape[dim]]
        if offs[0] != 0 or any(a >= b for a, b in pairwise(bounds)):
            raise VerifyException(
                f"tensor.index_map: offsets {list(offs)} must start at 0 and ascend "
                f"strictly below {out_shape[dim]}"
            )

    @classmethod
    def parse(cls, parser: Parser) -> IndexMapOp:
        operands = parser.parse_comma_separated_list(
            Parser.Delimiter.PAREN, parser.parse_unresolved_operand
        )

        def parse_map() -> AffineMapAttr:
            pos = parser.pos
            attr = parser.parse_attribute()
            if not isinstance(attr, AffineMapAttr):
                parser.raise_error("tensor.index_map: expected an affine_map", pos)
            return attr

        maps = parser.parse_comma_separated_list(Parser.Delimiter.SQUARE, parse_map)
        concat: tuple[int, list[int]] | None = None
        if parser.parse_optional_keyword("concat"):
            dim = parser.parse_integer()
            parser.parse_keyword("offsets")
            offs = parser.parse_comma_separated_list(Parser.Delimiter.SQUARE, parser.parse_integer)
            concat = (dim, offs)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        ftype = parser.parse_function_type()
        if len(ftype.outputs.data) != 1 or not isinstance(ftype.outputs.data[0], TensorType):
            parser.raise_error("tensor.index_map: expected one tensor result type", pos)
        inputs = parser.resolve_operands(operands, ftype.inputs.data, pos)
        op = cls(inputs, maps, ftype.outputs.data[0], concat)
        op.attributes.update(attrs)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_operands(self.inputs)
        printer.print_string(" [")
        printer.print_list(self.maps.data, printer.print_attribute)
        printer.print_string("]")
        if (info := self.concat_info) is not None:
            dim, offs = info
            printer.print_string(f" concat {dim} offsets [" + ", ".join(map(str, offs)) + "]")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_function_type(self.inputs.types, [self.result.type])


TensorDialect = Dialect(
    "tensor",
    [ElementwiseOp, YieldOp, ReduceOp, IndexMapOp],
    [ReduceKindAttr],
)
