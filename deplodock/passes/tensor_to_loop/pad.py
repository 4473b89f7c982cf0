"""A pad (a concat of one tensor with constant fills) -> one loop nest with a select.

Trigger: a `tensor.index_map` concat of which every input but one is a splat constant (a
zero-input `tensor.elementwise` that yields one `arith.constant`): what a convolution's or a
pool's `padding`, and `F.pad(mode="constant")`, lower to.

Rewrite: one free nest over the whole output instead of one nest per piece. The source is
loaded at the concat index clamped into its own segment (so the load is always in bounds),
and a chain of `arith.select`s on that index keeps it inside the segment and each fill
outside:

    %lo = arith.maxsi %i2, %c1 : index             // clamp into the source's [1, 16]
    %in = arith.minsi %lo, %c16 : index
    %r = arith.addi %in, %c_neg1 : index
    %x = loop.load %x0[%i0, %i1, %r, %i3]
    %before = arith.cmpi slt, %i2, %c1 : index
    %v1 = arith.select %before, %zero, %x : f32
    %inside = arith.cmpi slt, %i2, %c17 : index
    %v = arith.select %inside, %v1, %zero : f32
    loop.store %v, %pad[%i0, %i1, %i2, %i3]

Why: the piecewise form (a nest per piece, `index_map.py`) writes the output with several
stores, which `loop-fusion` cannot clone into a consumer, so every padded convolution read a
padded copy made by kernels of its own (two per 2-D convolution). One store of the output's
free indices is a producer like any other: the padding fuses into the convolution's loads,
and conv + padding + batch norm + activation is one kernel. The fills are not inputs of the
kernel, so their own kernels have no reader and go.
"""

from __future__ import annotations

from collections.abc import Mapping

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from deplodock.dialects import loop, tensor
from deplodock.dialects.queries import shape_of
from deplodock.passes.loop_utils import KernelBuilder
from deplodock.passes.tensor_to_loop.index_map import IndexEmitter
from deplodock.passes.tensor_to_loop.lift import Args, KernelNamer, LiftPattern, output_nest

Fill = FloatAttr | IntegerAttr
"""The constant a splat fills its tensor with."""
Pad = tuple[Fill | None, ...]
"""Per input of a pad concat: its fill, or None for the one source."""


def splat_fill(value: SSAValue) -> Fill | None:
    """The constant `value` is filled with, if a zero-input `tensor.elementwise` that yields
    one `arith.constant` defines it."""
    op = value.owner
    if not isinstance(op, tensor.ElementwiseOp) or op.inputs:
        return None
    ops = list(op.body.block.ops)
    if len(ops) != 2 or not isinstance(constant := ops[0], arith.ConstantOp):
        return None
    if tuple(ops[1].operands) != (constant.result,) or not isinstance(constant.value, Fill):
        return None
    return constant.value


def find_pads(module: ModuleOp) -> dict[Operation, Pad]:
    """Each pad concat of `module` -> per input, its fill (None for the one source). Taken
    before lifting, while the fills are still `tensor.elementwise` ops."""
    pads: dict[Operation, Pad] = {}
    for op in module.walk():
        if not isinstance(op, tensor.IndexMapOp) or op.concat_info is None:
            continue
        fills = tuple(splat_fill(v) for v in op.inputs)
        if sum(fill is None for fill in fills) == 1 and len(fills) > 1:
            pads[op] = fills
    return pads


class LiftPad(LiftPattern[tensor.IndexMapOp]):
    """Lifts a pad concat (see `find_pads`) into one nest; others are `LiftIndexMap`'s."""

    op_type = tensor.IndexMapOp

    def __init__(self, namer: KernelNamer, pads: Mapping[Operation, Pad]):
        super().__init__(namer)
        self.pads = pads

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if op in self.pads:
            super().match_and_rewrite(op, rewriter)

    def kernel_inputs(self, op: Operation) -> list[SSAValue]:
        """Only the source: the fills are constants of the kernel."""
        fills = self.pads[op]
        return [v for v, fill in zip(op.operands, fills, strict=True) if fill is None]

    def build(self, op: tensor.IndexMapOp, kb: KernelBuilder, args: Args, out: SSAValue) -> None:
        fills = self.pads[op]
        shape = shape_of(op.result.type)
        info = op.concat_info
        assert info is not None
        dim, offsets = info
        ends = [*offsets[1:], shape[dim]]
        builder, idx = output_nest(kb, [(0, s) for s in shape])
        pieces: list[tuple[int, SSAValue]] = []  # (end of the piece, its value), in order
        for k, (fill, start, end) in enumerate(zip(fills, offsets, ends, strict=True)):
            if start == end:
                continue
            if fill is not None:
                pieces.append((end, kb.constant(fill)))
                continue
            inside = _clamp(kb, builder, idx[dim], start, end - 1, shape[dim])
            emitter = IndexEmitter(kb, builder, [*idx[:dim], inside, *idx[dim + 1 :]])
            source_idx = [emitter.emit(e) for e in op.affine_maps[k].results]
            load = builder.insert(loop.LoadOp(args[op.inputs[k]], source_idx))
            pieces.append((end, load.res))
        value = pieces[-1][1]
        for end, piece in reversed(pieces[:-1]):
            before_end = builder.insert(arith.CmpiOp(idx[dim], kb.index(end), "slt"))
            value = builder.insert(arith.SelectOp(before_end.result, piece, value)).result
        builder.insert(loop.StoreOp(value, out, idx))


def _clamp(
    kb: KernelBuilder, builder: Builder, index: SSAValue, low: int, high: int, extent: int
) -> SSAValue:
    """`index` (in [0, extent)) clamped into [low, high], with no op for a bound it already
    respects."""
    if low > 0:
        index = builder.insert(arith.MaxSIOp(index, kb.index(low))).result
    if high < extent - 1:
        index = builder.insert(arith.MinSIOp(index, kb.index(high))).result
    return index
