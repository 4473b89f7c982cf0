"""`tensor.recurrence`: one recurrent layer (RNN, LSTM, GRU cell) carried over a sequence."""

from __future__ import annotations

from xdsl.dialects.builtin import TensorType
from xdsl.irdl import (
    irdl_op_definition,
    result_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from deplodock.dialects.cell_kind import CellKind, RecurrenceOpBase
from deplodock.dialects.common.syntax import parse_operand_list, parse_signature, print_signature
from deplodock.dialects.queries import element_type_of, shape_of


@irdl_op_definition
class RecurrenceOp(RecurrenceOpBase):
    """`states[t] = cell(gates[t], weight @ h[t-1] + bias, h[t-1], c[t-1])` for every step.

    `gates` is the input's projection `(T, B, gates * H)`, an operand rather than part of
    the cell because it does not depend on the state (a contraction over all steps, which
    `loop-fusion` may inline into the recurrence's loads: each value is read once);
    `weight` `(gates * H, H)` and `bias` `(gates * H)` are the hidden-to-hidden ones, applied
    at each step. The result holds every step's
    state, `(T, B, states * H)`: h, then c for the LSTM (the last h and c are slices of it).
    `reverse` runs the steps from T-1 down to 0 (the backward direction of a bidirectional
    layer); the states stay at their own step's position.

    Why a primitive and not elementwise/reduce ops per step: unrolled, a sequence of T steps
    is T times the ops, and lowering time, kernel count and launches all grow with it; as one
    op it is one kernel whose step loop carries the state (`tensor_to_loop/recurrence.py`).
    """

    name = "tensor.recurrence"

    result = result_def(TensorType)

    traits = traits_def(Pure())

    def verify_(self) -> None:
        try:
            expected = self.cell_kind.result_shape(self.operand_shapes())
        except ValueError as error:
            raise VerifyException(f"tensor.recurrence: {error}") from None
        elts = {element_type_of(v.type) for v in (*self.operands, self.result)}
        if len(elts) != 1:
            raise VerifyException("tensor.recurrence: operands and result differ in element type")
        if shape_of(self.result.type) != expected:
            raise VerifyException(
                f"tensor.recurrence: result shape {list(shape_of(self.result.type))} must be "
                f"{list(expected)}"
            )

    @classmethod
    def parse(cls, parser: Parser) -> RecurrenceOp:
        kind = parser.parse_str_enum(CellKind)
        reverse = parser.parse_optional_keyword("reverse") is not None
        operands = parse_operand_list(parser)
        sig = parse_signature(
            parser,
            operands,
            lambda ftype: len(ftype.inputs.data) in (4, 5) and len(ftype.outputs.data) == 1,
            "tensor.recurrence: expected (gates, weight, bias, h0[, c0]) -> states types",
        )
        op = cls(kind, *sig.inputs, reverse=reverse)
        op.attributes.update(sig.attrs)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.cell_kind.value}{' reverse' if self.is_reverse else ''} (")
        printer.print_list(self.operands, printer.print_operand)
        printer.print_string(")")
        print_signature(printer, self.attributes, list(self.operands), [self.result.type])
