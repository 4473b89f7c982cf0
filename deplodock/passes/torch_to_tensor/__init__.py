"""Decomposition patterns of `convert-torch-to-tensor`, one `RewritePattern` per torch op.

- `builders`: the tensor/scalar builders and the `TorchLowering` pattern base;
- `elementwise`: constants, binary and unary ops, comparisons, logic, where, casts, arange;
- `reductions`: sum, mean, amax, softmax, log_softmax, cumsum;
- `normalization`: rms_norm, layer_norm;
- `matmul`: matmul, bmm, linear;
- `attention`: scaled_dot_product_attention;
- `layout`: transpose, permute, reshape, unsqueeze, expand, slice, cat;
- `gather`: embedding, index;
- `recurrent`: one RNN/LSTM/GRU layer (`torch.recurrence`).

`lowered_op_types()` says which torch ops have a pattern (`tests/test_op_registry.py`
compares it with the dialect).
"""

from __future__ import annotations

from xdsl.ir import Operation

from deplodock.passes.torch_to_tensor import (
    attention,
    elementwise,
    gather,
    layout,
    matmul,
    normalization,
    recurrent,
    reductions,
)
from deplodock.passes.torch_to_tensor.builders import TorchLowering

ALL_PATTERNS: tuple[TorchLowering, ...] = (
    *elementwise.PATTERNS,
    *reductions.PATTERNS,
    *normalization.PATTERNS,
    *matmul.PATTERNS,
    *attention.PATTERNS,
    *layout.PATTERNS,
    *gather.PATTERNS,
    *recurrent.PATTERNS,
)


def lowered_op_types() -> frozenset[type[Operation]]:
    """The torch ops `convert-torch-to-tensor` decomposes: one pattern's `op_type` each."""
    return frozenset(pattern.op_type for pattern in ALL_PATTERNS)
