"""`tensor.scan`: the inclusive prefix combination of a tensor along one dim (cumsum)."""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerAttr, TensorType, i64
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

from deplodock.dialects.queries import shape_of
from deplodock.dialects.reduce_kind import ReduceKind, ReduceKindAttr


@irdl_op_definition
class ScanOp(IRDLOperation):
    """`out[.., i, ..] = in[.., 0, ..] <kind> ... <kind> in[.., i, ..]` along `dim`.

    A prefix sum is not a reduction of a bigger tensor: written as one (a masked sum over
    a new axis) it costs n² per row, where a scan carries one running value along the row
    and costs n. Narrow floats accumulate in f32 and round each output once, as PyTorch's
    cumsum does.
    """

    name = "tensor.scan"

    input = operand_def(TensorType)
    result = result_def(TensorType)
    kind = prop_def(ReduceKindAttr)
    dim = prop_def(IntegerAttr[i64])

    traits = traits_def(Pure())

    def __init__(self, input: SSAValue, kind: ReduceKind | str, dim: int):
        super().__init__(
            operands=[input],
            result_types=[input.type],
            properties={"kind": ReduceKindAttr(ReduceKind(kind)), "dim": IntegerAttr(dim, i64)},
        )

    @property
    def scan_kind(self) -> ReduceKind:
        return self.kind.data

    @property
    def scan_dim(self) -> int:
        return self.dim.value.data

    def verify_(self) -> None:
        rank = len(shape_of(self.input.type))
        if not 0 <= self.scan_dim < rank:
            raise VerifyException(f"tensor.scan: dim {self.scan_dim} out of range for rank {rank}")
        if self.input.type != self.result.type:
            raise VerifyException(
                f"tensor.scan: result type {self.result.type} must be the input's {self.input.type}"
            )

    @classmethod
    def parse(cls, parser: Parser) -> ScanOp:
        kind = parser.parse_str_enum(ReduceKind)
        operand = parser.parse_unresolved_operand()
        parser.parse_keyword("dim")
        dim = parser.parse_integer()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        in_type = parser.parse_type()
        if not isinstance(in_type, TensorType):
            parser.raise_error("tensor.scan: operand must be a tensor", pos)
        op = cls(parser.resolve_operand(operand, in_type), kind, dim)
        op.attributes.update(attrs)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.scan_kind.value} ")
        printer.print_operand(self.input)
        printer.print_string(f" dim {self.scan_dim}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.input.type)
