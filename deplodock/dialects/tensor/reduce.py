"""`tensor.reduce`: reduce some dims of a tensor with one of the `ReduceKind`s."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import DenseArrayBase, TensorType, i64
from xdsl.ir import SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from deplodock.dialects.queries import element_type_of, shape_of
from deplodock.dialects.reduce_kind import ReduceKind, ReduceKindAttr


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
        in_shape = shape_of(self.input.type)
        dims = self.reduce_dims
        if list(dims) != sorted(set(dims)):
            raise VerifyException(f"tensor.reduce: dims {list(dims)} must be sorted and unique")
        for d in dims:
            if not 0 <= d < len(in_shape):
                raise VerifyException(
                    f"tensor.reduce: dim {d} out of range for rank {len(in_shape)}"
                )
        expected = [1 if i in dims else s for i, s in enumerate(in_shape)]
        if list(shape_of(self.result.type)) != expected:
            raise VerifyException(
                f"tensor.reduce: result shape {list(shape_of(self.result.type))} must be "
                f"{expected} (reduced dims kept as 1)"
            )
        if element_type_of(self.input.type) != element_type_of(self.result.type):
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
