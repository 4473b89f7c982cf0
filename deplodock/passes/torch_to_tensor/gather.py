"""`torch.embedding` and `torch.index` -> `tensor.gather` (one data-dependent read).

An embedding is a gather of whole rows along dim 0. Advanced indexing of the leading `k`
dims with broadcast index tensors is the same gather once the indexed dims are flattened
into one: the source is reshaped to `(prod(shape[:k]), *shape[k:])` (an index map) and the
`k` indices are combined into one flat index by an elementwise op over their broadcast shape,
which also wraps negative indices (`i < 0 ? i + size : i`) as PyTorch does.
"""

from __future__ import annotations

from math import prod

from xdsl.dialects.builtin import i64
from xdsl.ir import SSAValue

from deplodock.dialects import torch as t
from deplodock.passes.torch_to_tensor.builders import (
    ScalarBuilder,
    TensorBuilder,
    TorchLowering,
    shape_of,
)
from deplodock.passes.torch_to_tensor.layout import reshape_map


class EmbeddingLowering(TorchLowering):
    """out[i..., d...] = weight[indices[i...], d...]."""

    op_type = t.EmbeddingOp

    def lower(self, op: t.EmbeddingOp, b: TensorBuilder) -> SSAValue:
        return b.gather(op.weight, op.indices, 0)


class IndexLowering(TorchLowering):
    """Flatten the indexed dims, combine the (wrapped) indices into one, gather dim 0."""

    op_type = t.IndexOp

    def lower(self, op: t.IndexOp, b: TensorBuilder) -> SSAValue:
        src = shape_of(op.input)
        indices = list(op.indices)
        k = len(indices)
        batch = shape_of(op.results[0])[: len(shape_of(op.results[0])) - (len(src) - k)]
        sizes = src[:k]

        def flat_index(s: ScalarBuilder, *idx: SSAValue) -> SSAValue:
            flat: SSAValue | None = None
            for j, (i, size) in enumerate(zip(idx, sizes, strict=True)):
                i = s.cast(i, i64)
                wrapped = s.select(s.cmp("lt", i, 0), s.add(i, size), i)
                stride = prod(sizes[j + 1 :])
                term = s.mul(wrapped, stride) if stride != 1 else wrapped
                flat = term if flat is None else s.add(flat, term)
            assert flat is not None
            return flat

        flat = b.elementwise(indices, batch, i64, flat_index)
        source = op.input
        if k > 1:
            shape = (prod(sizes), *src[k:])
            source = b.index_map(source, reshape_map(src, shape), shape)
        return b.gather(source, flat, 0)


PATTERNS: tuple[TorchLowering, ...] = (EmbeddingLowering(), IndexLowering())
