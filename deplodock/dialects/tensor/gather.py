"""`tensor.gather`: the one data-dependent read (embedding lookups, advanced indexing)."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import I64, IntegerAttr, TensorType, i32, i64
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

from deplodock.dialects.common.syntax import parse_signature, print_signature
from deplodock.dialects.queries import element_type_of, shape_of


def gather_shape(source: Sequence[int], indices: Sequence[int], dim: int) -> tuple[int, ...]:
    """`source.shape[:dim] + indices.shape + source.shape[dim + 1:]`."""
    return (*source[:dim], *indices, *source[dim + 1 :])


@irdl_op_definition
class GatherOp(IRDLOperation):
    """`out[a..., i..., b...] = source[a..., indices[i...], b...]` with `a` the `dim`
    leading coordinates: a data-dependent read along `dim` (embedding, index_select).

    Indices are i64 or i32 and must lie in `[0, source.shape[dim])`.
    """

    name = "tensor.gather"

    source = operand_def(TensorType)
    indices = operand_def(TensorType)
    result = result_def(TensorType)
    dim = prop_def(IntegerAttr[I64])

    traits = traits_def(Pure())

    def __init__(self, source: SSAValue, indices: SSAValue, dim: int = 0):
        src, idx = shape_of(source.type), shape_of(indices.type)
        elt = element_type_of(source.type)
        super().__init__(
            operands=[source, indices],
            result_types=[TensorType(elt, gather_shape(src, idx, dim))],
            properties={"dim": IntegerAttr(dim, i64)},
        )

    @property
    def dim_value(self) -> int:
        return self.dim.value.data

    def verify_(self) -> None:
        src, idx = shape_of(self.source.type), shape_of(self.indices.type)
        dim = self.dim_value
        if not 0 <= dim < len(src):
            raise VerifyException(f"tensor.gather: dim {dim} out of range for rank {len(src)}")
        if (index_type := element_type_of(self.indices.type)) not in (i64, i32):
            raise VerifyException(f"tensor.gather: indices must be i64 or i32, got {index_type}")
        if element_type_of(self.result.type) != element_type_of(self.source.type):
            raise VerifyException("tensor.gather: result element type differs from the source's")
        expected = gather_shape(src, idx, dim)
        if shape_of(self.result.type) != expected:
            raise VerifyException(
                f"tensor.gather: result shape {list(shape_of(self.result.type))} must be "
                f"{list(expected)} (source dims before and after dim {dim} around the "
                "indices shape)"
            )

    @classmethod
    def parse(cls, parser: Parser) -> GatherOp:
        source = parser.parse_unresolved_operand()
        parser.parse_punctuation("[")
        indices = parser.parse_unresolved_operand()
        parser.parse_punctuation("]")
        parser.parse_keyword("dim")
        dim = parser.parse_integer()
        sig = parse_signature(
            parser,
            [source, indices],
            lambda ftype: len(ftype.inputs.data) == 2 and len(ftype.outputs.data) == 1,
            "tensor.gather: expected (source, indices) -> result types",
        )
        op = cls.build(
            operands=sig.inputs,
            result_types=[sig.outputs[0]],
            properties={"dim": IntegerAttr(dim, i64)},
        )
        op.attributes.update(sig.attrs)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.source)
        printer.print_string("[")
        printer.print_operand(self.indices)
        printer.print_string(f"] dim {self.dim_value}")
        print_signature(printer, self.attributes, [self.source, self.indices], [self.result.type])
