"""Reductions and softmaxes -> `tensor.reduce` + elementwise + index maps.

`tensor.reduce` keeps the rank; `keepdim = false` is an index-map squeeze afterwards.
A mean multiplies the sum by the reciprocal of the element count. Softmax and log-softmax
are the numerically safe forms: subtract the max before exponentiating. A cumulative sum
along a dim of size `n` is a masked sum over an extra trailing dim `j`:
`out[..., i, ...] = sum_j (j <= i ? x[..., j, ...] : 0)` (`n^2` work, no sequential scan).
"""

from __future__ import annotations

from math import prod

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


class ReductionLowering(TorchLowering):
    """reduce over `dims`, optional post-scale, squeeze unless `keepdim`."""

    kind: ReduceKind = ReduceKind.ADD

    def scale(self, op: t.ReductionOp) -> float | None:
        return None

    def lower(self, op: t.ReductionOp, b: TensorBuilder) -> SSAValue:
        dims = [int(d) for d in op.dims.get_values()]
        value = b.reduce(op.input, self.kind, dims)
        if (factor := self.scale(op)) is not None:
            value = b.elementwise(
                [value], shape_of(value), element_type_of(value), lambda s, x: s.mul(x, factor)
            )
        if not op.keepdim.value.data:
            value = b.squeeze(value, dims)
        return value


class SumLowering(ReductionLowering):
    op_type = t.SumOp


class MeanLowering(ReductionLowering):
    """mean = sum * (1 / N)."""

    op_type = t.MeanOp

    def scale(self, op: t.ReductionOp) -> float | None:
        shape = shape_of(op.input)
        return 1.0 / prod(shape[int(d)] for d in op.dims.get_values())


class AmaxLowering(ReductionLowering):
    op_type = t.AmaxOp
    kind = ReduceKind.MAX


def _shifted_exp(b: TensorBuilder, x: SSAValue, dim: int) -> tuple[SSAValue, SSAValue]:
    """(x - max, sum(exp(x - max))) along `dim`; the sum keeps the rank."""
    shape, elt = shape_of(x), element_type_of(x)
    peak = b.broadcast_to(b.reduce(x, ReduceKind.MAX, [dim]), shape)
    shifted = b.elementwise([x, peak], shape, elt, lambda s, v, m: s.sub(v, m))
    exps = b.elementwise([shifted], shape, elt, lambda s, v: s.exp(v))
    return shifted, b.reduce(exps, ReduceKind.ADD, [dim])


class SoftmaxLowering(TorchLowering):
    """softmax = exp(x - max) / sum(exp(x - max))."""

    op_type = t.SoftmaxOp

    def lower(self, op: t.SoftmaxOp, b: TensorBuilder) -> SSAValue:
        x, dim = op.input, op.dim.value.data
        shape, elt = shape_of(x), element_type_of(x)
        peak = b.broadcast_to(b.reduce(x, ReduceKind.MAX, [dim]), shape)
        exps = b.elementwise([x, peak], shape, elt, lambda s, v, m: s.exp(s.sub(v, m)))
        total = b.broadcast_to(b.reduce(exps, ReduceKind.ADD, [dim]), shape)
        return b.elementwise([exps, total], shape, elt, lambda s, e, z: s.div(e, z))


class LogSoftmaxLowering(TorchLowering):
    """log_softmax = (x - max) - log(sum(exp(x - max)))."""

    op_type = t.LogSoftmaxOp

    def lower(self, op: t.LogSoftmaxOp, b: TensorBuilder) -> SSAValue:
        x, dim = op.input, op.dim.value.data
        shape, elt = shape_of(x), element_type_of(x)
        shifted, total = _shifted_exp(b, x, dim)
        log_total = b.elementwise([total], shape_of(total), elt, lambda s, z: s.log(z))
        return b.elementwise([shifted, log_total], shape, elt, lambda s, v, lz: s.sub(v, lz))


class CumsumLowering(TorchLowering):
    """Broadcast x over (..., n) with x's dim moved to the new last dim j, keep j <= i
    (converted to the result type), sum over j, drop j."""

    op_type = t.CumsumOp

    def lower(self, op: t.CumsumOp, b: TensorBuilder) -> SSAValue:
        x, dim = op.input, op.dim.value.data
        shape, elt = shape_of(x), result_type_of(op).element_type
        rank = len(shape)
        space = (*shape, shape[dim])
        exprs = [AffineExpr.dimension(d) for d in range(rank)]
        exprs[dim] = AffineExpr.dimension(rank)
        spread = b.index_map(x, AffineMap(rank + 1, 0, tuple(exprs)), space)
        masked = b.elementwise(
            [spread],
            space,
            elt,
            lambda s, v: s.select(s.cmp("le", s.index(rank), s.index(dim)), s.cast(v, elt), 0.0),
        )
        return b.squeeze(b.reduce(masked, ReduceKind.ADD, [rank]), [rank])


PATTERNS: tuple[TorchLowering, ...] = (
    SumLowering(),
    MeanLowering(),
    AmaxLowering(),
    SoftmaxLowering(),
    LogSoftmaxLowering(),
    CumsumLowering(),
)
