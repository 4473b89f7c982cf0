"""RMSNorm and LayerNorm over the trailing `normalized_shape` dims.

rms_norm   = x * rsqrt(sum(x * x) / N + eps) * w
layer_norm = (x - mean) * rsqrt(var + eps) * w + b, with the biased variance computed in a
second pass over the centred values (sum((x - mean)^2) / N), which stays accurate in f32.
The per-row statistic is computed on the reduced (rank-kept) shape; the final elementwise
broadcasts it back with an index map.
"""

from __future__ import annotations

from math import prod

from xdsl.ir import SSAValue

from deplodock.dialects import torch as t
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


class RmsNormLowering(TorchLowering):
    op_type = t.RmsNormOp

    def lower(self, op: t.RmsNormOp, b: TensorBuilder) -> SSAValue:
        x, eps = op.input, op.eps.value.data
        shape, elt = shape_of(x), element_type_of(x)
        dims, inv_n = _norm_dims(x, tuple(op.normalized_shape.get_values()))
        squares = b.elementwise([x], shape, elt, lambda s, v: s.mul(v, v))
        total = b.reduce(squares, ReduceKind.ADD, dims)
        scale = b.elementwise(
            [total], shape_of(total), elt, lambda s, z: s.rsqrt(s.add(s.mul(z, inv_n), eps))
        )
        params = [op.weight] if op.weight is not None else []
        return b.elementwise(
            [x, scale, *params],
            shape,
            elt,
            lambda s, v, r, *p: _affine(s, s.mul(v, r), list(p), op.weight is not None, False),
        )


class LayerNormLowering(TorchLowering):
    op_type = t.LayerNormOp

    def lower(self, op: t.LayerNormOp, b: TensorBuilder) -> SSAValue:
        x, eps = op.input, op.eps.value.data
        shape, elt = shape_of(x), element_type_of(x)
        dims, inv_n = _norm_dims(x, tuple(op.normalized_shape.get_values()))
        total = b.reduce(x, ReduceKind.ADD, dims)
        mean = b.elementwise([total], shape_of(total), elt, lambda s, z: s.mul(z, inv_n))
        centred = b.elementwise([x, mean], shape, elt, lambda s, v, m: s.sub(v, m))
        squares = b.elementwise([centred], shape, elt, lambda s, c: s.mul(c, c))
        var_total = b.reduce(squares, ReduceKind.ADD, dims)
        scale = b.elementwise(
            [var_total], shape_of(var_total), elt, lambda s, z: s.rsqrt(s.add(s.mul(z, inv_n), eps))
        )
        params = [p for p in (op.weight, op.bias) if p is not None]
        has_w, has_b = op.weight is not None, op.bias is not None
        return b.elementwise(
            [centred, scale, *params],
            shape,
            elt,
            lambda s, c, r, *p: _affine(s, s.mul(c, r), list(p), has_w, has_b),
        )


PATTERNS: tuple[TorchLowering, ...] = (RmsNormLowering(), LayerNormLowering())
