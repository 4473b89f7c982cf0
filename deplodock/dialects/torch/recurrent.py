"""The recurrent op of the torch dialect: one RNN / LSTM / GRU layer over a sequence.

PyTorch's `aten.lstm` / `aten.gru` / `aten.rnn_tanh` / `aten.rnn_relu` take every layer and
direction at once, with their weights as a list; the frontend takes them apart into the
input projections (`torch.linear`), one `torch.recurrence` per layer and direction, and the
slices and concatenations that assemble outputs and final states. What stays one op is the
part that cannot be written with other torch ops without unrolling the sequence.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import TensorType
from xdsl.irdl import (
    irdl_op_definition,
)

from deplodock.dialects.cell_kind import CellKindAttr, RecurrenceOpBase
from deplodock.dialects.torch.base import Props, TorchOp, Types, fail


@irdl_op_definition
class RecurrenceOp(TorchOp, RecurrenceOpBase):
    """Every step's state of one layer, `(T, B, states * H)` (h, then c for the LSTM), from
    the input projection `gates` `(T, B, gates * H)`, the hidden-to-hidden `weight` and
    `bias`, and the initial `h0` (and `c0`) `(B, H)`; `reverse` walks the steps backwards.
    The same contract as `tensor.recurrence`, which it lowers to one to one."""

    name = "torch.recurrence"
    SAME_OPERAND_TYPES: ClassVar[bool] = True

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        cell = props["cell"]
        assert isinstance(cell, CellKindAttr)
        try:
            return cell.data.result_type(types)
        except ValueError as error:
            fail(cls.name, str(error))


OPS: tuple[type[TorchOp], ...] = (RecurrenceOp,)
"""The ops of this module, in the order the `Torch` dialect lists them."""

__all__ = [op.__name__ for op in OPS]
