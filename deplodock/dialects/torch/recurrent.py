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
from xdsl.ir import SSAValue
from xdsl.irdl import (
    irdl_op_definition,
)

from deplodock.dialects.cell_kind import CellKind, CellKindAttr, RecurrenceOpBase
from deplodock.dialects.queries import shape_of
from deplodock.dialects.torch.base import Props, TorchOp, Types, fail, like


@irdl_op_definition
class RecurrenceOp(TorchOp, RecurrenceOpBase):
    """Every step's state of one layer, `(T, B, states * H)` (h, then c for the LSTM), from
    the input projection `gates` `(T, B, gates * H)`, the hidden-to-hidden `weight` and
    `bias`, and the initial `h0` (and `c0`) `(B, H)`; `reverse` walks the steps backwards.
    The same contract as `tensor.recurrence`, which it lowers to one to one."""

    name = "torch.recurrence"
    SAME_OPERAND_TYPES: ClassVar[bool] = True

    def __init__(
        self,
        cell: CellKind | str,
        gates: SSAValue,
        weight: SSAValue,
        bias: SSAValue,
        h0: SSAValue,
        c0: SSAValue | None = None,
        reverse: bool = False,
    ):
        self._init([gates, weight, bias, h0, c0], self.properties_of(cell, reverse))

    @classmethod
    def infer(cls, types: Types, props: Props) -> TensorType:
        cell = props["cell"]
        assert isinstance(cell, CellKindAttr)
        shapes = [shape_of(t) if t is not None else None for t in types]
        try:
            return like(types[0], cell.data.result_shape(shapes))
        except ValueError as error:
            fail(cls.name, str(error))


OPS: tuple[type[TorchOp], ...] = (RecurrenceOp,)
"""The ops of this module, in the order the `Torch` dialect lists them."""

__all__ = [op.__name__ for op in OPS]
