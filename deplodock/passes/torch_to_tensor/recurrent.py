"""`torch.recurrence` -> `tensor.recurrence`, one to one.

The recurrence is a tensor-level primitive of its own (`dialects/tensor/recurrence.py` says
why): writing it with elementwise and reduce ops would unroll the sequence, one set of ops
per step. The input projection was already split off by the frontend as a `torch.linear`.
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from deplodock.dialects import tensor
from deplodock.dialects import torch as t
from deplodock.passes.torch_to_tensor.builders import TensorBuilder, TorchLowering


class RecurrenceLowering(TorchLowering):
    """The same operands, cell and direction, as one `tensor.recurrence`."""

    op_type = t.RecurrenceOp

    def lower(self, op: t.RecurrenceOp, b: TensorBuilder) -> SSAValue:
        return b.recurrence(
            tensor.RecurrenceOp(
                op.cell_kind, op.gates, op.weight, op.bias, op.h0, op.c0, op.is_reverse
            )
        )


PATTERNS: tuple[TorchLowering, ...] = (RecurrenceLowering(),)
