"""`tensor.gather` -> free loops over the output, a load of the index, `arith.index_cast` to
`index`, the load of the source at that index, a store."""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType
from xdsl.ir import SSAValue

from deplodock.dialects import loop, tensor
from deplodock.dialects.queries import shape_of
from deplodock.passes.loop_utils import KernelBuilder
from deplodock.passes.tensor_to_loop.lift import Args, LiftPattern, output_nest


class LiftGather(LiftPattern[tensor.GatherOp]):
    op_type = tensor.GatherOp

    def build(self, op: tensor.GatherOp, kb: KernelBuilder, args: Args, out: SSAValue) -> None:
        builder, idx = output_nest(kb, [(0, s) for s in shape_of(op.result.type)])
        dim, rank = op.dim_value, len(shape_of(op.indices.type))
        position = builder.insert(loop.LoadOp(args[op.indices], idx[dim : dim + rank]))
        position.res.name_hint = op.indices.name_hint
        row = builder.insert(arith.IndexCastOp(position.res, IndexType()))
        src_idx = [*idx[:dim], row.result, *idx[dim + rank :]]
        load = builder.insert(loop.LoadOp(args[op.source], src_idx))
        builder.insert(loop.StoreOp(load.res, out, idx))
