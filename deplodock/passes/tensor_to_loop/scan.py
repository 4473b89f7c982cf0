"""`tensor.scan` -> free loops over the other dims around one carried loop along the scan
dim, which stores its running value at every step:

```mlir
%add = loop.for %r1 = 0 to 8 iter_args(%acc = %init) -> (f32) {
  %0 = loop.load %x[%i0, %r1] : memref<4x8xf32>
  %1 = arith.addf %acc, %0 : f32
  loop.store %1, %out[%i0, %r1] : memref<4x8xf32>
  loop.yield %1 : f32
}
```

The store inside the carried loop is what keeps the scheduling passes from splitting it
between threads (the running value is not a plain reduction: see `tile/nests.combiner_of`).
f16/bf16 inputs carry an f32 value and round each stored prefix.
"""

from __future__ import annotations

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.ir import SSAValue
from xdsl.rewriter import InsertPoint

from deplodock.dialects import loop, tensor
from deplodock.dialects.element_types import accumulator_type
from deplodock.dialects.queries import element_type_of, shape_of
from deplodock.passes.loop_utils import KernelBuilder, free_nest
from deplodock.passes.tensor_to_loop.lift import Args, LiftPattern


class LiftScan(LiftPattern[tensor.ScanOp]):
    op_type = tensor.ScanOp

    def build(self, op: tensor.ScanOp, kb: KernelBuilder, args: Args, out: SSAValue) -> None:
        shape, dim, kind = shape_of(op.input.type), op.scan_dim, op.scan_kind
        kept = [d for d in range(len(shape)) if d != dim]
        names = [f"i{d}" for d in kept]
        builder, kept_idx = free_nest(kb, kb.body_builder(), [(0, shape[d]) for d in kept], names)
        element = element_type_of(op.input.type)
        init = kb.constant(kind.identity_attr(accumulator_type(element)), "init")
        carried = builder.insert(loop.ForOp(0, shape[dim], 1, [init]))
        iv, acc = carried.body.block.args
        iv.name_hint, acc.name_hint = f"r{dim}", "acc"
        carried.res[0].name_hint = kind.value
        index = dict(zip(kept, kept_idx, strict=True)) | {dim: iv}
        coords = [index[d] for d in range(len(shape))]
        body = Builder(InsertPoint.at_end(carried.body.block))
        value: SSAValue = body.insert(loop.LoadOp(args[op.input], coords)).res
        if value.type != init.type:
            value = body.insert(arith.ExtFOp(value, init.type)).result
        running = body.insert(kind.combine(acc, value)).results[0]
        stored = running
        if init.type != element:
            stored = body.insert(arith.TruncFOp(running, element)).result
        body.insert(loop.StoreOp(stored, out, coords))
        body.insert(loop.YieldOp(running))
