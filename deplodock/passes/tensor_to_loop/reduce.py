"""`tensor.reduce` -> free loops over the kept dims, nested reduce loops (iter_args, init =
the kind's identity) over the reduced dims, a store at index 0 of the reduced dims. f16/bf16
inputs accumulate in f32 (`arith.extf` of each load, one `arith.truncf` before the store).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.ir import SSAValue
from xdsl.rewriter import InsertPoint

from deplodock.dialects import loop, tensor
from deplodock.dialects.element_types import accumulator_type
from deplodock.dialects.queries import element_type_of, shape_of
from deplodock.passes.loop_utils import KernelBuilder, free_nest
from deplodock.passes.tensor_to_loop.lift import Args, LiftPattern


class LiftReduce(LiftPattern[tensor.ReduceOp]):
    op_type = tensor.ReduceOp

    def build(self, op: tensor.ReduceOp, kb: KernelBuilder, args: Args, out: SSAValue) -> None:
        kind = op.reduce_kind
        in_shape = shape_of(op.input.type)
        dims = set(op.reduce_dims)
        kept = [d for d in range(len(in_shape)) if d not in dims]
        builder, kept_idx = free_nest(
            kb,
            kb.body_builder(),
            [(0, in_shape[d]) for d in kept],
            [f"i{d}" for d in kept],
        )
        element = element_type_of(op.input.type)
        accumulator = accumulator_type(element)
        init = kb.constant(kind.identity_attr(accumulator), "init")
        loop_dims = [d for d in sorted(dims) if in_shape[d] > 1]
        index: dict[int, SSAValue] = dict(zip(kept, kept_idx, strict=True))
        index.update({d: kb.index(0) for d in dims if in_shape[d] == 1})
        value = reduce_nest(builder, args[op.input], loop_dims, in_shape, index, init, kind)
        if accumulator != element:
            value = builder.insert(arith.TruncFOp(value, element)).result
        out_idx = [kb.index(0) if d in dims else index[d] for d in range(len(in_shape))]
        builder.insert(loop.StoreOp(value, out, out_idx))


def reduce_nest(
    builder: Builder,
    src: SSAValue,
    loop_dims: Sequence[int],
    shape: Sequence[int],
    index: dict[int, SSAValue],
    init: SSAValue,
    kind: tensor.ReduceKind,
) -> SSAValue:
    """Nested reduce loops over `loop_dims` accumulating `src` with `kind` in the type of
    `init` (loads are widened to it); the result."""
    if not loop_dims:
        load = builder.insert(loop.LoadOp(src, [index[d] for d in range(len(shape))]))
        value: SSAValue = load.res
        if value.type != init.type:
            value = builder.insert(arith.ExtFOp(value, init.type)).result
        return builder.insert(kind.combine(init, value)).results[0]
    dim, *rest = loop_dims
    for_op = builder.insert(loop.ForOp(0, shape[dim], 1, [init]))
    iv, acc = for_op.body.block.args
    iv.name_hint, acc.name_hint = f"r{dim}", "acc"
    inner = Builder(InsertPoint.at_end(for_op.body.block))
    value = reduce_nest(inner, src, rest, shape, {**index, dim: iv}, acc, kind)
    inner.insert(loop.YieldOp(value))
    for_op.res[0].name_hint = kind.value
    return for_op.res[0]
