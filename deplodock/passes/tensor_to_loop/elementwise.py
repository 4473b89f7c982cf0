"""`tensor.elementwise` -> free loops over the output, a load of each input at the same
indices, the cloned scalar body (`tensor.index d` becomes the loop index of dim `d`), a store.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.ir import SSAValue
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import loop, tensor
from deplodock.dialects.queries import shape_of
from deplodock.passes.loop_utils import KernelBuilder
from deplodock.passes.tensor_to_loop.lift import Args, LiftPattern, output_nest


class LiftElementwise(LiftPattern[tensor.ElementwiseOp]):
    op_type = tensor.ElementwiseOp

    def build(self, op: tensor.ElementwiseOp, kb: KernelBuilder, args: Args, out: SSAValue) -> None:
        builder, idx = output_nest(kb, [(0, s) for s in shape_of(op.result.type)])
        mapping: dict[SSAValue, SSAValue] = {}
        loaded: dict[SSAValue, SSAValue] = {}
        for block_arg, operand in zip(op.body.block.args, op.inputs, strict=True):
            if operand not in loaded:
                load = builder.insert(loop.LoadOp(args[operand], idx))
                load.res.name_hint = block_arg.name_hint
                loaded[operand] = load.res
            mapping[block_arg] = loaded[operand]
        value = clone_scalar_body(op, kb, builder, mapping, idx)
        builder.insert(loop.StoreOp(value, out, idx))


def clone_scalar_body(
    op: tensor.ElementwiseOp,
    kb: KernelBuilder,
    builder: Builder,
    mapping: dict[SSAValue, SSAValue],
    idx: Sequence[SSAValue],
) -> SSAValue:
    """Clones the scalar body into the loop nest; its constants go to the kernel top and
    `tensor.index d` is the index `idx[d]` of the element being computed."""
    for inner in op.body.block.ops:
        if isinstance(inner, tensor.YieldOp):
            return mapping.get(inner.value, inner.value)
        if isinstance(inner, tensor.IndexOp):
            mapping[inner.result] = idx[inner.dim_value]
            continue
        if isinstance(inner, arith.ConstantOp) and isinstance(inner.value, IntegerAttr | FloatAttr):
            mapping[inner.result] = kb.constant(inner.value, inner.result.name_hint)
            continue
        builder.insert(inner.clone(mapping))
    raise PassFailedException("tensor.elementwise: body has no tensor.yield")
