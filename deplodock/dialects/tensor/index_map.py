"""`tensor.index_map`: out[c] = in[map(c)] with affine maps (layout ops and concat)."""

from __future__ import annotations

from collections.abc import Sequence
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
from xdsl.ir import Attribute, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineMap
from xdsl.ir.affine.affine_expr import AffineConstantExpr, AffineDimExpr, AffineExpr
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from deplodock.dialects.common.syntax import parse_operand_list, parse_signature, print_signature
from deplodock.dialects.queries import element_type_of, shape_of


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
        out_shape = shape_of(self.result.type)
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
        out_shape = shape_of(self.result.type)
        maps = self.affine_maps
        if not self.inputs:
            raise VerifyException("tensor.index_map: needs at least one input")
        if len(maps) != len(self.inputs):
            raise VerifyException(
                f"tensor.index_map: {len(maps)} maps for {len(self.inputs)} inputs"
            )
        out_elt = element_type_of(self.result.type)
        for i, (v, m) in enumerate(zip(self.inputs, maps, strict=True)):
            if element_type_of(v.type) != out_elt:
                raise VerifyException(
                    f"tensor.index_map: input {i} element type differs from the result's"
                )
            in_rank = len(shape_of(v.type))
            if m.num_dims != len(out_shape) or m.num_symbols != 0 or len(m.results) != in_rank:
                raise VerifyException(
                    f"tensor.index_map: map {i} must have {len(out_shape)} dims, no symbols "
                    f"and {in_rank} results (input rank), got {m}"
                )
        self._verify_concat(out_shape)
        if any(s == 0 for s in out_shape):
            return
        for i, (v, m, box) in enumerate(zip(self.inputs, maps, self.input_regions(), strict=True)):
            in_shape = shape_of(v.type)
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
        operands = parse_operand_list(parser)

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
        sig = parse_signature(
            parser,
            operands,
            lambda ftype: len(outs := ftype.outputs.data) == 1 and isinstance(outs[0], TensorType),
            "tensor.index_map: expected one tensor result type",
        )
        result_type = sig.outputs[0]
        assert isinstance(result_type, TensorType)
        op = cls(sig.inputs, maps, result_type, concat)
        op.attributes.update(sig.attrs)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_operands(self.inputs)
        printer.print_string(" [")
        printer.print_list(self.maps.data, printer.print_attribute)
        printer.print_string("]")
        if (info := self.concat_info) is not None:
            dim, offs = info
            printer.print_string(f" concat {dim} offsets [" + ", ".join(map(str, offs)) + "]")
        print_signature(printer, self.attributes, self.inputs, [self.result.type])
