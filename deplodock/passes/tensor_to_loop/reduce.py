"""`tensor.reduce` -> free loops over the kept dims, nested reduce loops (iter_args, init =
the kind's identity) over the reduced dims, a store at index 0 of the reduced dims. f16/bf16
inputs accumulate in f32 (`arith.extf` of each load, one `arith.truncf` before the store).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import AnyFloat, BFloat16Type, Float16Type, Float32Type
from xdsl.ir import Attribute, SSAValue
from xdsl.rewriter import InsertPoint

from deplodock.dialects import loop, tensor
from deplodock.passes.loop_utils import KernelBuilder, free_nest
from deplodock.passes.schedule_utils import identity_attr
from deplodock.passes.tensor_to_loop.lift import Args, LiftPattern, element_type_of, shape_of

_COMBINE: dict[tensor.ReduceKind, type[arith.FloatingPointLikeBinaryOperation]] = {
    tensor.ReduceKind.ADD: arith.AddfOp,
    tensor.ReduceKind.MUL: arith.MulfOp,
    tensor.ReduceKind.MAX: arith.MaximumfOp,
    tensor.ReduceKind.MIN: arith.MinimumfOp,
}
_COMBINE_INT: dict[tensor.ReduceKind, type[arith.SignlessIntegerBinaryOperation]] = {
    tensor.ReduceKind.ADD: arith.AddiOp,
    tensor.ReduceKind.MUL: arith.MuliOp,
    tensor.ReduceKind.MAX: arith.MaxSIOp,
    tensor.ReduceKind.MIN: arith.MinSIOp,
}


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
        init = kb.constant(identity_attr(kind, accumulator), "init")  # type: ignore[arg-type]
        loop_dims = [d for d in sorted(dims) if in_shape[d] > 1]
        index: dict[int, SSAValue] = dict(zip(kept, kept_idx, strict=True))
        index.update({d: kb.index(0) for d in dims if in_shape[d] == 1})
        value = reduce_nest(builder, args[op.input], loop_dims, in_shape, index, init, kind)
        if accumulator != element:
            value = builder.insert(arith.TruncFOp(value, element)).result
        out_idx = [kb.index(0) if d in dims else index[d] for d in range(len(in_shape))]
        builder.insert(loop.StoreOp(value, out, out_idx))


def accumulator_type(element: Attribute) -> Attribute:
    """f16/bf16 sums accumulate in f32 and round once at the store, as GPU kernels (and the
    tensor interpreter) do; other types accumulate in themselves."""
    return Float32Type() if isinstance(element, Float16Type | BFloat16Type) else element


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
        table = _COMBINE if isinstance(value.type, AnyFloat) else _COMBINE_INT
        return builder.insert(table[kind](init, value)).result
    dim, *rest = loop_dims
    for_op = builder.insert(loop.ForOp(0, shape[dim], 1, [init]))
    iv, acc = for_op.body.block.args
    iv.name_hint, acc.name_hint = f"r{dim}", "acc"
    inner = Builder(InsertPoint.at_end(for_op.body.block))
    value = reduce_nest(inner, src, rest, shape, {**index, dim: iv}, acc, kind)
    inner.insert(loop.YieldOp(value))
    for_op.res[0].name_hint = kind.value
    return for_op.res[0]
