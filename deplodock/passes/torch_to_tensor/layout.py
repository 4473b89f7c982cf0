"""Layout ops -> one `tensor.index_map` each (none when the map is the identity).

Every map sends output coordinates to input coordinates. A reshape is split into groups of
dims whose sizes multiply to the same count; only inside a group are the output
coordinates linearized and delinearized with floordiv/mod, so `(2, 3, 4) -> (6, 4)` reads
`(d0 floordiv 3, d0 mod 3, d1)` rather than a 3-D delinearization of a flat index.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import torch as t
from deplodock.passes.torch_to_tensor.builders import (
    TensorBuilder,
    TorchLowering,
    broadcast_map,
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


class TransposeLowering(TorchLowering):
    op_type = t.TransposeOp

    def lower(self, op: t.TransposeOp, b: TensorBuilder) -> SSAValue:
        rt = result_type_of(op)
        exprs = _dims(rt.get_num_dims())
        d0, d1 = op.dim0.value.data, op.dim1.value.data
        exprs[d0], exprs[d1] = exprs[d1], exprs[d0]
        return b.index_map(op.input, _map(len(exprs), exprs), rt.get_shape())


class PermuteLowering(TorchLowering):
    """out[c] = in[c'] with c'[dims[i]] = c[i]."""

    op_type = t.PermuteOp

    def lower(self, op: t.PermuteOp, b: TensorBuilder) -> SSAValue:
        rt = result_type_of(op)
        dims = [int(d) for d in op.dims.get_values()]
        exprs: list[AffineExpr] = [AffineExpr.constant(0)] * len(dims)
        for i, d in enumerate(dims):
            exprs[d] = AffineExpr.dimension(i)
        return b.index_map(op.input, _map(len(dims), exprs), rt.get_shape())


class ReshapeLowering(TorchLowering):
    op_type = t.ReshapeOp

    def lower(self, op: t.ReshapeOp, b: TensorBuilder) -> SSAValue:
        dst = result_type_of(op).get_shape()
        return b.index_map(op.input, reshape_map(shape_of(op.input), dst), dst)


class UnsqueezeLowering(TorchLowering):
    op_type = t.UnsqueezeOp

    def lower(self, op: t.UnsqueezeOp, b: TensorBuilder) -> SSAValue:
        rt = result_type_of(op)
        exprs = _dims(rt.get_num_dims())
        del exprs[op.dim.value.data]
        return b.index_map(op.input, _map(rt.get_num_dims(), exprs), rt.get_shape())


class ExpandLowering(TorchLowering):
    op_type = t.ExpandOp

    def lower(self, op: t.ExpandOp, b: TensorBuilder) -> SSAValue:
        dst = result_type_of(op).get_shape()
        return b.index_map(op.input, broadcast_map(shape_of(op.input), dst), dst)


class SliceLowering(TorchLowering):
    """c[dim] -> start + step * c[dim]."""

    op_type = t.SliceOp

    def lower(self, op: t.SliceOp, b: TensorBuilder) -> SSAValue:
        rt = result_type_of(op)
        exprs = _dims(rt.get_num_dims())
        dim = op.dim.value.data
        exprs[dim] = exprs[dim] * op.step.value.data + op.start.value.data
        return b.index_map(op.input, _map(len(exprs), exprs), rt.get_shape())


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


PATTERNS: tuple[TorchLowering, ...] = (
    TransposeLowering(),
    PermuteLowering(),
    ReshapeLowering(),
    UnsqueezeLowering(),
    ExpandLowering(),
    SliceLowering(),
    CatLowering(),
)
