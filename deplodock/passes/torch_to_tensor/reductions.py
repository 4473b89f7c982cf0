"""Reductions and softmaxes -> `tensor.reduce` + elementwise + index maps.

`tensor.reduce` keeps the rank; `keepdim = false` is an index-map squeeze afterwards.
A mean multiplies the sum by the reciprocal of the element count. Softmax and log-softmax
are the numerically safe forms: subtract the max before exponentiating; like PyTorch's
kernels they compute f16/bf16 inputs in f32 (max, exponentials, sum) and round once, at the
end (rounding each step to bf16 doubled the error of a bf16 attention). Softmax multiplies
by the reciprocal of the row sum: one division per row instead of one per element, at the
price of one more rounding (a correctly rounded division brings a slow-path call into the
SASS; the row kernel of a (28, 512, 512) softmax went from 720 to 464 instructions).

A cumulative sum along a dim of size `n` is a masked sum over an extra trailing dim `j`:
`out[..., i, ...] = sum_j (j <= i ? x[..., j, ...] : 0)` (`n^2` work, no sequential scan).
"""

from __future__ import annotations

from math import prod

from xdsl.dialects.builtin import i64
from xdsl.ir import SSAValue

from deplodock.dialects import torch as t
from deplodock.dialects.element_types import accumulator_type
from deplodock.dialects.tensor import ReduceKind
from deplodock.passes.torch_to_tensor.builders import (
    ScalarBuilder,
    TensorBuilder,
    TorchLowering,
    element_type_of,
    is_float_type,
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


class ProdLowering(ReductionLowering):
    op_type = t.ProdOp
    kind = ReduceKind.MUL


class MeanLowering(ReductionLowering):
    """mean = sum * (1 / N)."""

    op_type = t.MeanOp

    def scale(self, op: t.ReductionOp) -> float | None:
        shape = shape_of(op.input)
        return 1.0 / prod(shape[int(d)] for d in op.dims.get_values())


class AmaxLowering(ReductionLowering):
    op_type = t.AmaxOp
    kind = ReduceKind.MAX


class AminLowering(ReductionLowering):
    op_type = t.AminOp
    kind = ReduceKind.MIN


class ArgExtremumLowering(TorchLowering):
    """The first index of the extreme value `m` along `dim` (or of the first NaN) as a
    min-reduction of candidates: for floats, position `j` offers `j` if it holds NaN,
    `n + j` if it holds `m`, `2n` otherwise, and the minimum `r` is `j` or `n + j`, so the
    index is `r mod n`, written `r >= n ? r - n : r`. A NaN thus wins whatever `m`'s max
    does with NaN (the CUDA printer's `fmaxf` drops it), and ties go to the first index.
    Integers offer `j` or `n`."""

    def __init__(self, op_type: type[t.ArgExtremumOp], kind: ReduceKind) -> None:
        self.op_type = op_type
        self.kind = kind

    def lower(self, op: t.ArgExtremumOp, b: TensorBuilder) -> SSAValue:
        x, dim = op.input, op.dim.value.data
        shape, n = shape_of(x), shape_of(x)[op.dim.value.data]
        extreme = b.broadcast_to(b.reduce(x, self.kind, [dim]), shape)
        is_float = is_float_type(element_type_of(x))

        def offer(s: ScalarBuilder, v: SSAValue, m: SSAValue) -> SSAValue:
            j = s.cast(s.index(dim), i64)
            if not is_float:
                return s.select(s.cmp("eq", v, m), j, float(n))
            at_extreme = s.select(s.cmp("eq", v, m), s.add(j, float(n)), float(2 * n))
            return s.select(s.cmp("ne", v, v), j, at_extreme)

        offers = b.elementwise([x, extreme], shape, i64, offer)
        first = b.reduce(offers, ReduceKind.MIN, [dim])
        if is_float:
            first = b.elementwise(
                [first],
                shape_of(first),
                i64,
                lambda s, r: s.select(s.cmp("ge", r, float(n)), s.sub(r, float(n)), r),
            )
        return first if op.keepdim.value.data else b.squeeze(first, [dim])


def _shifted_exp(b: TensorBuilder, x: SSAValue, dim: int) -> tuple[SSAValue, SSAValue]:
    """(x - max, sum(exp(x - max))) along `dim`, in `x`'s type; the sum keeps the rank."""
    shape, elt = shape_of(x), element_type_of(x)
    peak = b.broadcast_to(b.reduce(x, ReduceKind.MAX, [dim]), shape)
    shifted = b.elementwise([x, peak], shape, elt, lambda s, v, m: s.sub(v, m))
    exps = b.elementwise([shifted], shape, elt, lambda s, v: s.exp(v))
    return shifted, b.reduce(exps, ReduceKind.ADD, [dim])


class SoftmaxLowering(TorchLowering):
    """softmax = exp(x - max) * (1 / sum(exp(x - max))), rounded to the input's type once."""

    op_type = t.SoftmaxOp

    def lower(self, op: t.SoftmaxOp, b: TensorBuilder) -> SSAValue:
        dim, elt = op.dim.value.data, element_type_of(op.input)
        x = b.cast(op.input, accumulator_type(elt))  # f32 for f16/bf16
        shape, compute = shape_of(x), element_type_of(x)
        peak = b.broadcast_to(b.reduce(x, ReduceKind.MAX, [dim]), shape)
        exps = b.elementwise([x, peak], shape, compute, lambda s, v, m: s.exp(s.sub(v, m)))
        total = b.reduce(exps, ReduceKind.ADD, [dim])
        inverse = b.elementwise([total], shape_of(total), compute, lambda s, z: s.div(1.0, z))
        return b.elementwise(
            [exps, b.broadcast_to(inverse, shape)], shape, elt, lambda s, e, r: s.mul(e, r)
        )


class LogSoftmaxLowering(TorchLowering):
    """log_softmax = (x - max) - log(sum(exp(x - max))), rounded to the input's type once."""

    op_type = t.LogSoftmaxOp

    def lower(self, op: t.LogSoftmaxOp, b: TensorBuilder) -> SSAValue:
        dim, elt = op.dim.value.data, element_type_of(op.input)
        x = b.cast(op.input, accumulator_type(elt))  # f32 for f16/bf16
        shape, compute = shape_of(x), element_type_of(x)
        shifted, total = _shifted_exp(b, x, dim)
        log_total = b.elementwise([total], shape_of(total), compute, lambda s, z: s.log(z))
        return b.elementwise([shifted, log_total], shape, elt, lambda s, v, lz: s.sub(v, lz))


class CumsumLowering(TorchLowering):
    """x converted to the result type (bool and integers sum as i64, like PyTorch), then
    one `tensor.scan add` along `dim`."""

    op_type = t.CumsumOp

    def lower(self, op: t.CumsumOp, b: TensorBuilder) -> SSAValue:
        x = b.cast(op.input, result_type_of(op).element_type)
        return b.scan(x, ReduceKind.ADD, op.dim.value.data)


class CumprodLowering(TorchLowering):
    """As `CumsumLowering`, with `tensor.scan mul`."""

    op_type = t.CumprodOp

    def lower(self, op: t.CumprodOp, b: TensorBuilder) -> SSAValue:
        x = b.cast(op.input, result_type_of(op).element_type)
        return b.scan(x, ReduceKind.MUL, op.dim.value.data)


PATTERNS: tuple[TorchLowering, ...] = (
    SumLowering(),
    ProdLowering(),
    MeanLowering(),
    AmaxLowering(),
    AminLowering(),
    ArgExtremumLowering(t.ArgmaxOp, ReduceKind.MAX),
    ArgExtremumLowering(t.ArgminOp, ReduceKind.MIN),
    SoftmaxLowering(),
    LogSoftmaxLowering(),
    CumsumLowering(),
    CumprodLowering(),
)
