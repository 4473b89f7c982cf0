"""RMSNorm and LayerNorm over the trailing `normalized_shape` dims.

rms_norm   = x * rsqrt(sum(x * x) / N + eps) * w
layer_norm = (x - mean) * rsqrt(var + eps) * w + b, with the biased variance computed in a
second pass over the centred values (sum((x - mean)^2) / N), which stays accurate in f32.
The per-row statistic is computed on the reduced (rank-kept) shape; the final elementwise
broadcasts it back with an index map. Like PyTorch, a bf16/f16 norm computes in f32 (the
accumulator type) and rounds once, at the output: rounding the mean, the centred values and
the scale to bf16 would lose several times PyTorch's accuracy.
"""

from __future__ import annotations

from math import prod

from xdsl.ir import Operation, SSAValue

from deplodock.dialects import torch as t
from deplodock.dialects.element_types import accumulator_type
from deplodock.dialects.tensor import ReduceKind
from deplodock.passes.torch_to_tensor.builders import (
    ScalarBuilder,
    TensorBuilder,
    TorchLowering,
    element_type_of,
    shape_of,
)


def _norm_dims(x: SSAValue, normalized_shape: tuple[int, ...]) -> tuple[list[int], float]:
    """The reduced (trailing) dims and 1 / (number of normalized elements)."""
    rank = len(shape_of(x))
    return list(range(rank - len(normalized_shape), rank)), 1.0 / prod(normalized_shape)


def _affine(
    s: ScalarBuilder, y: SSAValue, params: list[SSAValue], has_weight: bool, has_bias: bool
) -> SSAValue:
    """y * w + b for whichever of weight / bias are present (in that order in `params`)."""
    it = iter(params)
    if has_weight:
        y = s.mul(y, next(it))
    if has_bias:
        y = s.add(y, next(it))
    return y


class NormLowering(TorchLowering):
    """Both norms are `v * rsqrt(sum(v * v) / N + eps) * w (+ b)` over the trailing dims,
    with `v = x` (rms_norm) or `v = x - mean` (layer_norm): only `centre` differs."""

    def centre(self, b: TensorBuilder, x: SSAValue, dims: list[int], inv_n: float) -> SSAValue:
        """The values that are normalized: the input itself for rms_norm."""
        return x

    def lower(self, op: Operation, b: TensorBuilder) -> SSAValue:
        assert isinstance(op, t.RmsNormOp | t.LayerNormOp)
        x, eps = op.input, op.eps.value.data
        shape, elt = shape_of(x), element_type_of(x)
        acc = accumulator_type(elt)
        x = b.cast(x, acc)
        dims, inv_n = _norm_dims(x, tuple(op.normalized_shape.get_values()))
        v = self.centre(b, x, dims, inv_n)
        squares = b.elementwise([v], shape, acc, lambda s, c: s.mul(c, c))
        total = b.reduce(squares, ReduceKind.ADD, dims)
        scale = b.elementwise(
            [total], shape_of(total), acc, lambda s, z: s.rsqrt(s.add(s.mul(z, inv_n), eps))
        )
        weight = op.weight
        bias = op.bias if isinstance(op, t.LayerNormOp) else None
        params = [p for p in (weight, bias) if p is not None]
        has_w, has_b = weight is not None, bias is not None

        def output(s: ScalarBuilder, c: SSAValue, r: SSAValue, *p: SSAValue) -> SSAValue:
            wide = [s.cast(param, acc) for param in p]
            return s.cast(_affine(s, s.mul(c, r), wide, has_w, has_b), elt)

        return b.elementwise([v, scale, *params], shape, elt, output)


class RmsNormLowering(NormLowering):
    op_type = t.RmsNormOp


class LayerNormLowering(NormLowering):
    """Centres first; the variance is then a second pass over the centred values.

    The mean is refined once, `m = m1 + sum(x - m1) / N` with `m1 = sum(x) / N` (the
    corrected two-pass mean): a row of equal values then gets its value back exactly and
    centres to exact zeros, as PyTorch's Welford update does, where `m1` alone is off by an
    ulp that `rsqrt(0 + eps)` turns into ~1e-5; other rows get a mean closer to exact."""

    op_type = t.LayerNormOp

    def centre(self, b: TensorBuilder, x: SSAValue, dims: list[int], inv_n: float) -> SSAValue:
        shape, elt = shape_of(x), element_type_of(x)
        total = b.reduce(x, ReduceKind.ADD, dims)
        rough = b.elementwise([total], shape_of(total), elt, lambda s, z: s.mul(z, inv_n))
        residual = b.elementwise([x, rough], shape, elt, lambda s, v, m: s.sub(v, m))
        correction = b.reduce(residual, ReduceKind.ADD, dims)
        mean = b.elementwise(
            [rough, correction], shape_of(total), elt, lambda s, m, c: s.add(m, s.mul(c, inv_n))
        )
        return b.elementwise([x, mean], shape, elt, lambda s, v, m: s.sub(v, m))


PATTERNS: tuple[TorchLowering, ...] = (RmsNormLowering(), LayerNormLowering())
