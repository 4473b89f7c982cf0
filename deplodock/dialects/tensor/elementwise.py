"""`tensor.elementwise`, its terminator `tensor.yield`, and `tensor.index` (the coordinate
of the element a body computes)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects.builtin import I64, IndexType, IntegerAttr, TensorType, i64
from xdsl.ir import Block, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
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

from deplodock.dialects.common.syntax import parse_operand_list, parse_signature, print_signature
from deplodock.dialects.queries import element_type_of, shape_of


@irdl_op_definition
class ElementwiseOp(IRDLOperation):
    """`out[c] = body(in_0[c], ..., in_n[c])`; every input has the result's shape.

    Zero inputs make a splat constant (or, with `tensor.index`, an iota). The body is a
    single block of scalar `arith`/`math` ops (and `tensor.index`) ending in `tensor.yield`;
    inputs may have element types other than the result's (casts, comparisons, select).
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
        block = Block(arg_types=[element_type_of(v.type) for v in inputs])
        value = body_fn(block, block.args)
        block.add_op(YieldOp(value))
        return cls(inputs, result_type, Region(block))

    def verify_(self) -> None:
        out_shape = shape_of(self.result.type)
        for i, v in enumerate(self.inputs):
            if shape_of(v.type) != out_shape:
                raise VerifyException(
                    f"tensor.elementwise: input {i} has shape {list(shape_of(v.type))}, "
                    f"expected the result shape {list(out_shape)}"
                )
        block = self.body.block
        if len(block.args) != len(self.inputs):
            raise VerifyException(
                f"tensor.elementwise: body has {len(block.args)} arguments, "
                f"expected one per input ({len(self.inputs)})"
            )
        for i, (arg, v) in enumerate(zip(block.args, self.inputs, strict=True)):
            elt = element_type_of(v.type)
            if arg.type != elt:
                raise VerifyException(
                    f"tensor.elementwise: body argument {i} has type {arg.type}, "
                    f"expected the input element type {elt}"
                )
        last = block.last_op
        if not isinstance(last, YieldOp):
            raise VerifyException("tensor.elementwise: body must end in tensor.yield")
        out_elt = element_type_of(self.result.type)
        if last.value.type != out_elt:
            raise VerifyException(
                f"tensor.elementwise: body yields {last.value.type}, "
                f"expected the result element type {out_elt}"
            )

    @classmethod
    def parse(cls, parser: Parser) -> ElementwiseOp:
        sig = parse_signature(
            parser,
            parse_operand_list(parser),
            lambda ftype: len(ftype.outputs.data) == 1,
            "tensor.elementwise: expected one result type",
        )
        body = parser.parse_region()
        result_type = sig.outputs[0]
        if not isinstance(result_type, TensorType):
            parser.raise_error("tensor.elementwise: result must be a tensor", sig.pos)
        op = cls(sig.inputs, result_type, body)
        op.attributes.update(sig.attrs)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_operands(self.inputs)
        print_signature(printer, self.attributes, self.inputs, [self.result.type])
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


@irdl_op_definition
class IndexOp(IRDLOperation):
    """`%i = tensor.index 1 : index`: coordinate `dim` of the element the enclosing
    `tensor.elementwise` computes (as `linalg.index`); it makes iotas and masks without
    constant tensors."""

    name = "tensor.index"

    dim = prop_def(IntegerAttr[I64])
    result = result_def(IndexType)

    assembly_format = "$dim attr-dict `:` type($result)"

    traits = lazy_traits_def(lambda: (Pure(), HasParent(ElementwiseOp)))

    def __init__(self, dim: int):
        super().__init__(properties={"dim": IntegerAttr(dim, i64)}, result_types=[IndexType()])

    @property
    def dim_value(self) -> int:
        return self.dim.value.data

    def verify_(self) -> None:
        parent = self.parent_op()
        if not isinstance(parent, ElementwiseOp):
            return  # HasParent reports it
        rank = len(shape_of(parent.result.type))
        if not 0 <= self.dim_value < rank:
            raise VerifyException(
                f"tensor.index: dim {self.dim_value} out of range for a result of rank {rank}"
            )
