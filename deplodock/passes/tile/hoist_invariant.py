"""`tile-hoist-invariant`: move loop-invariant work out of `tile.for` bodies.

Trigger: an op directly in a `tile.for` body whose operands are all defined outside the loop
(or by ops already hoisted), and that is

- pure scalar work: an `arith` or `math` op (index arithmetic, float math on values from
  outside). Integer division and remainder only by a non-zero constant, so a hoisted op
  never divides by zero where the loop would not have run it;
- or a `tile.load` of a global buffer the kernel never writes (the same value wherever it is
  read), when it cannot go out of bounds before the loop: its indices are provably in bounds
  there (`index_range`), or every thread runs the loop at least once (a constant start below
  the bound, or the thread id as start with a bound of at least the block size), so the
  load would have run anyway.

Never hoisted: anything with side effects (stores), `tile.combine`, `tile.barrier`, loads of
shared memory (a stage may rewrite a shared array between iterations), loads of buffers the
kernel writes, and ops nested in a `tile.if` or an inner loop of the body (they are hoisted
out of that inner loop first, to just before it, and then out of this one if still
invariant). Loops are visited innermost first, so an op climbs as many levels as it is
invariant in.

Rewrite: the op moves, with its name, to just before the loop.

    tile.for %i = %c0 to 16 {                   %s = arith.mulf %a, %scale : f32
      %s = arith.mulf %a, %scale : f32          %w = tile.load %gamma[%c3] : memref<8xf32>
      %w = tile.load %gamma[%c3] : ...   ==>    tile.for %i = %c0 to 16 {
      %v = tile.load %x[%i] : ...                 %v = tile.load %x[%i] : ...
      %o = arith.mulf %v, %s : f32                %o = arith.mulf %v, %s : f32
      ...                                         ...
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, MemRefType
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import tile
from deplodock.dialects.common.memory import index_range
from deplodock.dialects.effects import is_pure
from deplodock.dialects.hardware import is_shared
from deplodock.dialects.queries import constant_index, written_buffers
from deplodock.passes.tile.kernel_pass import TileKernelPass
from deplodock.passes.tile.nests import body_ops

#: Integer ops that trap (or are undefined) on a zero divisor.
DIVISIONS = (
    arith.DivSIOp,
    arith.DivUIOp,
    arith.RemSIOp,
    arith.RemUIOp,
    arith.FloorDivSIOp,
    arith.CeilDivSIOp,
    arith.CeilDivUIOp,
)


def _defined_in(value: SSAValue, loop: tile.ForOp) -> bool:
    """Whether `value` is defined inside `loop` (its induction variable and iter_args too)."""
    owner = value.block.parent_op() if isinstance(value, BlockArgument) else value.owner
    return isinstance(owner, Operation) and loop.is_ancestor(owner)


def runs_for_every_thread(loop: tile.ForOp) -> bool:
    """Whether every thread runs at least one trip of `loop`: a constant start below the
    bound, or the thread id as start and at least as many iterations as threads."""
    start = constant_index(loop.lb)
    if start is not None:
        return start < loop.upper
    owner = loop.lb.block.parent_op() if isinstance(loop.lb, BlockArgument) else None
    return isinstance(owner, tile.ThreadsOp) and owner.count <= loop.upper


def _in_bounds_before(load: tile.LoadOp, loop: tile.ForOp) -> bool:
    """Whether every index of `load`, evaluated just before `loop`, is provably in bounds."""
    shape = load.memref.type.get_shape()  # type: ignore[union-attr]
    for index, size in zip(load.indices, shape, strict=True):
        bounds = index_range(loop, index)
        if bounds is None or size < 0 or bounds[0] < 0 or bounds[1] >= size:
            return False
    return True


def is_hoistable(op: Operation, loop: tile.ForOp, written: set[SSAValue]) -> bool:
    """Whether `op`, invariant in `loop`, may run once before it instead (module doc)."""
    if isinstance(op, tile.LoadOp):
        buffer = op.memref
        if not isinstance(buffer.type, MemRefType) or is_shared(buffer.type) or buffer in written:
            return False
        return runs_for_every_thread(loop) or _in_bounds_before(op, loop)
    if not is_pure(op):
        return False
    if isinstance(op, DIVISIONS):
        return _nonzero_int_constant(op.operands[1])
    return True


def _nonzero_int_constant(value: SSAValue) -> bool:
    """Whether `value` is an integer (or index) `arith.constant` other than 0."""
    owner = value.owner
    return (
        isinstance(owner, arith.ConstantOp)
        and isinstance(owner.value, IntegerAttr)
        and owner.value.value.data != 0
    )


def hoist_out_of(loop: tile.ForOp, written: set[SSAValue]) -> int:
    """Moves the invariant hoistable ops of `loop`'s body before it; returns how many."""
    moved = 0
    for op in body_ops(loop):
        if any(_defined_in(v, loop) for v in op.operands):
            continue
        if not is_hoistable(op, loop, written):
            continue
        op.detach()
        Rewriter.insert_op(op, InsertPoint.before(loop))
        moved += 1
    return moved


def hoist_invariant(kernel: tile.KernelOp) -> int:
    """Hoists out of every loop of `kernel`, innermost loops first."""
    written = written_buffers(kernel)
    loops = [op for op in kernel.walk(region_first=True) if isinstance(op, tile.ForOp)]
    return sum(hoist_out_of(loop, written) for loop in loops)


@dataclass(frozen=True)
class TileHoistInvariantPass(TileKernelPass):
    """Loop-invariant pure ops and read-only loads moved before their loop (module doc)."""

    name = "tile-hoist-invariant"

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        hoist_invariant(kernel)
