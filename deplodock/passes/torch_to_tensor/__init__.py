"""Decomposition patterns of `convert-torch-to-tensor`, one `RewritePattern` per torch op.

- `builders`: the tensor/scalar builders and the `TorchLowering` pattern base;
- `elementwise`: constants, binary and unary ops;
- `reductions`: sum, mean, amax, softmax, log_softmax;
- `normalization`: rms_norm, layer_norm;
- `matmul`: matmul, bmm, linear;
- `layout`: transpose, permute, reshape, unsqueeze, expand, slice, cat.
"""

from __future__ import annotations

from deplodock.passes.torch_to_tensor import elementwise, layout, matmul, normalization, reductions
from deplodock.passes.torch_to_tensor.builders import TorchLowering

ALL_PATTERNS: tuple[TorchLowering, ...] = (
    *elementwise.PATTERNS,
    *reductions.PATTERNS,
    *normalization.PATTERNS,
    *matmul.PATTERNS,
    *layout.PATTERNS,
)
