"""matmul / bmm / linear as broadcast-multiply-reduce.

Both operands are index-mapped onto one iteration space `(batch..., M, K, N)`, multiplied
elementwise, summed over `K` and squeezed to the result shape (in f32 for f16/bf16
operands, rounded once at the end). Nothing is materialized
this way after loop fusion: the index maps become the loads of a single loop nest. The
transpose of `linear`'s weight is part of its index map, not a separate op.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap

from deplodock.dialects import torch as t
from deplodock.dialects.tensor import ReduceKind
from deplodock.passes.torch_to_tensor.builders import (
    TensorBuilder,
    TorchLowering,
    element_type_of,
    result_type_of,
    shape_of,
)


def _batch_exprs(src_batch: Sequence[int], batch: Sequence[int]) -> list[AffineExpr]:
    """Coordinates of an operand's batch dims in the broadcast batch (trailing-aligned)."""
    lead = len(batch) - len(src_batch)
    return [
        AffineExpr.constant(0)
        if size == 1 and batch[lead + j] != 1
        else AffineExpr.dimension(lead + j)
        for j, size in enumerate(src_batch)
    ]


def contract(
    b: TensorBuilder,
    lhs: SSAValue,
    rhs: SSAValue,
    lhs_map: AffineMap,
    rhs_map: AffineMap,
    space: Sequence[int],
    k_dim: int,
    squeeze: Sequence[int],
) -> SSAValue:
    """sum over `k_dim` of lhs[lhs_map(c)] * rhs[rhs_map(c)], c in `space`; then drop
    `squeeze` (which includes `k_dim`). f16/bf16 operands multiply and sum in f32 and the
    result is rounded once, as tensor-core and CPU kernels do."""
    elt = element_type_of(lhs)
    acc = Float32Type() if isinstance(elt, Float16Type | BFloat16Type) else elt
    a = b.index_map(lhs, lhs_map, space)
    w = b.index_map(rhs, rhs_map, space)
    products = b.elementwise(
        [a, w], space, acc, lambda s, x, y: s.mul(s.cast(x, acc), s.cast(y, acc))
    )
    summed = b.squeeze(b.reduce(products, ReduceKind.ADD, [k_dim]), sorted(squeeze))
    if acc == elt:
        return summed
    return b.elementwise([summed], shape_of(summed), elt, lambda s, x: s.cast(x, elt))


def lower_matmul(b: TensorBuilder, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
    """torch.matmul semantics over the space (batch..., [M], K, [N]): a 1-D operand has no
    M (lhs) or N (rhs) dim, and batch dims broadcast."""
    a, w = shape_of(lhs), shape_of(rhs)
    a_batch, w_batch = a[:-2], w[:-2]
    batch = [max(x, y) for x, y in zip(_pad(a_batch, w_batch), _pad(w_batch, a_batch), strict=True)]
    has_m, has_n = len(a) > 1, len(w) > 1
    nb = len(batch)
    k_dim = nb + int(has_m)
    space = [*batch, *([a[-2]] if has_m else []), a[-1], *([w[-1]] if has_n else [])]
    m, k, n = (AffineExpr.dimension(d) for d in (nb, k_dim, k_dim + 1))
    a_exprs = [*_batch_exprs(a_batch, batch), m, k] if has_m else [k]
    w_exprs = [*_batch_exprs(w_batch, batch), k, n] if has_n else [k]
    rank = len(space)
    return contract(
        b,
        lhs,
        rhs,
        AffineMap(rank, 0, tuple(a_exprs)),
        AffineMap(rank, 0, tuple(w_exprs)),
        space,
        k_dim,
        [k_dim],
    )


def _pad(shape: Sequence[int], other: Sequence[int]) -> list[int]:
    """`shape` left-padded with 1s to the length of the longer of the two."""
    return [1] * (max(len(shape), len(other)) - len(shape)) + list(shape)


class MatmulLowering(TorchLowering):
    op_type = t.MatmulOp

    def lower(self, op: t.MatmulOp, b: TensorBuilder) -> SSAValue:
        return lower_matmul(b, op.lhs, op.rhs)


class BmmLowering(TorchLowering):
    op_type = t.BmmOp

    def lower(self, op: t.BmmOp, b: TensorBuilder) -> SSAValue:
        return lower_matmul(b, op.lhs, op.rhs)


class LinearLowering(TorchLowering):
    """x @ w.T + bias over the space (rows..., K, N); w is read as w[n, k]."""

    op_type = t.LinearOp

    def lower(self, op: t.LinearOp, b: TensorBuilder) -> SSAValue:
        x, w = shape_of(op.input), shape_of(op.weight)
        rows = list(x[:-1])
        space = [*rows, x[-1], w[0]]
        r, rank = len(rows), len(space)
        k, n = AffineExpr.dimension(r), AffineExpr.dimension(r + 1)
        x_map = AffineMap(rank, 0, (*(AffineExpr.dimension(i) for i in range(r)), k))
        w_map = AffineMap(rank, 0, (n, k))
        out = contract(b, op.input, op.weight, x_map, w_map, space, r, [r])
        if op.bias is None:
            return out
        rt = result_type_of(op)
        return b.elementwise(
            [out, op.bias], rt.get_shape(), rt.element_type, lambda s, y, c: s.add(y, c)
        )


PATTERNS: tuple[TorchLowering, ...] = (MatmulLowering(), BmmLowering(), LinearLowering())
