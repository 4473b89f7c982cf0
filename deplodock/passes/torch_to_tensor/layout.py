"""Layout ops -> one `tensor.index_map` each (none when the map is the identity).

The unary ones share one pattern, `IndexMapLowering`, and differ only in their map
(`INDEX_MAPS`: op -> map); `torch.cat` is a concat index map of its own.

Every map sends output coordinates to input coordinates. A reshape is split into groups of
dims whose sizes multiply to the same count; only inside a group are the output
coordinates linearized and delinearized with floordiv/mod, so `(2, 3, 4) -> (6, 4)` reads
`(d0 floordiv 3, d0 mod 3, d1)` rather than a 3-D delinearization of a flat index.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod
from typing import Any

from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import torch as t
from deplodock.passes.torch_to_tensor.builders import (
    Shape,
    TensorBuilder,
    TorchLowering,
    broadcast_map,
    element_type_of,
    result_type_of,
    shape_of,
)


def _dims(rank: int) -> list[AffineExpr]:
    return [AffineExpr.dimension(i) for i in range(rank)]


def _map(rank: int, results: Sequence[AffineExpr]) -> AffineMap:
    return AffineMap(rank, 0, tuple(results))


def reshape_groups(src: Sequence[int], dst: Sequence[int]) -> list[tuple[list[int], list[int]]]:
    """Pairs (dst dims, src dims) of equal element count, size-1 dims left out."""
    src_dims = [i for i, s in enumerate(src) if s != 1]
    dst_dims = [i for i, s in enumerate(dst) if s != 1]
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(dst_dims) and j < len(src_dims):
        g_dst, g_src = [dst_dims[i]], [src_dims[j]]
        n_dst, n_src = dst[dst_dims[i]], src[src_dims[j]]
        i, j = i + 1, j + 1
        while n_dst != n_src:
            if n_dst < n_src:
                g_dst.append(dst_dims[i])
                n_dst *= dst[dst_dims[i]]
                i += 1
            else:
                g_src.append(src_dims[j])
                n_src *= src[src_dims[j]]
                j += 1
        groups.append((g_dst, g_src))
    if i != len(dst_dims) or j != len(src_dims):
        raise PassFailedException(f"convert-torch-to-tensor: cannot reshape {src} to {dst}")
    return groups


def reshape_map(src: Sequence[int], dst: Sequence[int]) -> AffineMap:
    """Row-major reshape as a map from `dst` coordinates to `src` coordinates."""
    results: list[AffineExpr] = [AffineExpr.constant(0)] * len(src)
    for g_dst, g_src in reshape_groups(src, dst):
        flat: AffineExpr = AffineExpr.constant(0)
        for d in g_dst:  # linearize the output coordinates of the group
            flat = flat * dst[d] + AffineExpr.dimension(d)
        for pos, d in enumerate(g_src):  # delinearize into the input coordinates
            stride = prod(src[e] for e in g_src[pos + 1 :])
            expr = flat if stride == 1 else flat // stride
            results[d] = expr if pos == 0 else expr % src[d]
    return _map(len(dst), results)


MapFn = Callable[[Any, Shape, Shape], AffineMap]
"""`f(op, src, dst)`: the map from result (`dst`) to input (`src`) coordinates of one op."""


class IndexMapLowering(TorchLowering):
    """A unary layout op -> one `tensor.index_map` of its input; the ops differ only in the
    map (`map_of`), so one parameterised pattern serves them all."""

    def __init__(self, op_type: type[Operation], map_of: MapFn) -> None:
        self.op_type = op_type
        self.map_of = map_of

    def lower(self, op: Operation, b: TensorBuilder) -> SSAValue:
        assert isinstance(op, t.UnaryOp)
        src, dst = shape_of(op.input), result_type_of(op).get_shape()
        return b.index_map(op.input, self.map_of(op, src, dst), dst)


def _transpose_map(op: t.TransposeOp, src: Shape, dst: Shape) -> AffineMap:
    exprs = _dims(len(dst))
    d0, d1 = op.dim0.value.data, op.dim1.value.data
    exprs[d0], exprs[d1] = exprs[d1], exprs[d0]
    return _map(len(exprs), exprs)


def _permute_map(op: t.PermuteOp, src: Shape, dst: Shape) -> AffineMap:
    """out[c] = in[c'] with c'[dims[i]] = c[i]."""
    dims = [int(d) for d in op.dims.get_values()]
    exprs: list[AffineExpr] = [AffineExpr.constant(0)] * len(dims)
    for i, d in enumerate(dims):
        exprs[d] = AffineExpr.dimension(i)
    return _map(len(dims), exprs)


def _unsqueeze_map(op: t.UnsqueezeOp, src: Shape, dst: Shape) -> AffineMap:
    exprs = _dims(len(dst))
    del exprs[op.dim.value.data]
    return _map(len(dst), exprs)


def _slice_map(op: t.SliceOp, src: Shape, dst: Shape) -> AffineMap:
    """c[dim] -> start + step * c[dim]."""
    exprs = _dims(len(dst))
    dim = op.dim.value.data
    exprs[dim] = exprs[dim] * op.step.value.data + op.start.value.data
    return _map(len(exprs), exprs)


INDEX_MAPS: dict[type[Operation], MapFn] = {
    t.TransposeOp: _transpose_map,
    t.PermuteOp: _permute_map,
    t.ReshapeOp: lambda op, src, dst: reshape_map(src, dst),
    t.UnsqueezeOp: _unsqueeze_map,
    t.ExpandOp: lambda op, src, dst: broadcast_map(src, dst),
    t.SliceOp: _slice_map,
}
"""Unary layout op -> its index map."""


class CatLowering(TorchLowering):
    """One concat index map: input i reads c[dim] - offset_i."""

    op_type = t.CatOp

    def lower(self, op: t.CatOp, b: TensorBuilder) -> SSAValue:
        rt = result_type_of(op)
        rank, dim = rt.get_num_dims(), op.dim.value.data
        inputs = list(op.inputs)
        if len(inputs) == 1:
            return inputs[0]
        maps, offset = [], 0
        for v in inputs:
            exprs = _dims(rank)
            exprs[dim] = exprs[dim] - offset
            maps.append(_map(rank, exprs))
            offset += shape_of(v)[dim]
        return b.concat(inputs, maps, rt.get_shape(), dim)


class WindowLowering(TorchLowering):
    """Pads each windowed dim with concats of splat constants (only where `low` / `high`
    are nonzero), then one index map reads `o * stride + j * dilation`: a strided view,
    which the loop level can fuse into its consumer (no window is materialised there)."""

    op_type = t.WindowOp

    def lower(self, op: t.WindowOp, b: TensorBuilder) -> SSAValue:
        kernel = tuple(op.kernel.get_values())
        stride, dilation = tuple(op.stride.get_values()), tuple(op.dilation.get_values())
        low, high = tuple(op.low.get_values()), tuple(op.high.get_values())
        value, k = op.input, len(kernel)
        rank = len(shape_of(value))
        lead = rank - k
        for i in range(k):
            value = pad(b, value, lead + i, low[i], high[i], op.pad_value.value.data)
        out_rank = rank + k
        exprs = _dims(out_rank)[:lead]
        for i in range(k):
            o, j = AffineExpr.dimension(lead + i), AffineExpr.dimension(rank + i)
            exprs.append(o * stride[i] + j * dilation[i])
        return b.index_map(value, _map(out_rank, exprs), result_type_of(op).get_shape())


def pad(b: TensorBuilder, x: SSAValue, dim: int, low: int, high: int, fill: float) -> SSAValue:
    """`x` with `low` / `high` elements of `fill` before / after it along `dim`."""
    if not low and not high:
        return x
    shape, elt = shape_of(x), element_type_of(x)
    parts = []
    for size, inner in ((low, False), (shape[dim], True), (high, False)):
        if inner:
            parts.append(x)
        elif size:
            side = tuple(size if d == dim else n for d, n in enumerate(shape))
            parts.append(b.elementwise([], side, elt, lambda s: s.const(fill)))
    rank = len(shape)
    maps, offset = [], 0
    for part in parts:
        exprs = _dims(rank)
        exprs[dim] = exprs[dim] - offset
        maps.append(_map(rank, exprs))
        offset += shape_of(part)[dim]
    padded = tuple(offset if d == dim else n for d, n in enumerate(shape))
    return b.concat(parts, maps, padded, dim)


PATTERNS: tuple[TorchLowering, ...] = (
    *(IndexMapLowering(op_type, map_of) for op_type, map_of in INDEX_MAPS.items()),
    CatLowering(),
    WindowLowering(),
)
