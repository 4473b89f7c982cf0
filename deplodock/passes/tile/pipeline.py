"""`tile-pipeline`: copy K chunks `depth - 1` iterations ahead of the chunk being computed.

Trigger: a multibuffered staged kernel (`tile-multibuffer` with `depth >= 2`), not yet
pipelined.

Rewrite: a *prologue* before the K loop copies the first `depth - 1` chunks into their slots;
each iteration then, in this order, waits for its own chunk (`tile.barrier`), starts the copy
of chunk `c + depth - 1` into the slot chunk `c - 1` used (every thread has passed the
barrier, so nobody still reads it; a `tile.if` skips it past the last chunk), and computes
chunk `c` while that copy is in flight. With `tile-async-copy` the copies become `cp.async`
and the barrier is preceded by `cp.async.wait_group(depth - 2)`: the memory latency of a
chunk is hidden behind the arithmetic of the `depth - 1` chunks before it.

    tile.for %ko ... {                       copy chunk 0 -> slot 0          (prologue)
      copy chunk(%ko) -> slot                tile.for %ko ... {
      tile.barrier                 ==>         tile.barrier
      compute slot                             tile.if %ko + 16 < K {
                                                 copy chunk(%ko + 16) -> next slot }
    }                                          compute slot
                                             }

Knob (`schedule`): `pipeline` (1 = on, the default; 0 = off).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.choices import Tunable, grid
from deplodock.passes.tile.multibuffer import StagedLoop, staged_loop


def _clone_copies(
    copies: list[Operation],
    mapping: dict[SSAValue, SSAValue],
    point: InsertPoint,
    chunk: int | None = None,
) -> None:
    """Clones the copy loops at `point`; prologue copies are tagged with their chunk (so
    `tile-async-copy` commits one group per chunk)."""
    for copy in copies:
        clone = copy.clone(value_mapper=dict(mapping))
        if chunk is not None:
            clone.attributes["chunk"] = IntegerAttr(chunk, 64)
        Rewriter.insert_op(clone, point)


def pipeline(staged: StagedLoop, depth: int) -> bool:
    """Rewrites the K loop into prologue + steady state (see the module docstring)."""
    slot = staged.slot
    barrier = staged.ki.prev_op
    if slot is None or not isinstance(barrier, tile.BarrierOp) or staged.chunks < 2:
        return False
    ahead = depth - 1
    pool = ConstantPool.adopting(staged.threads.body.block)
    ko, chunk = staged.ko.induction_var, staged.chunk
    # Prologue: the first `ahead` chunks, before the loop.
    for c in range(min(ahead, staged.chunks)):
        start = pool.index(c * chunk)
        _clone_copies(
            staged.copies,
            {ko: start, slot: pool.index(c % depth)},
            InsertPoint.before(staged.ko),
            chunk=c,
        )
    # Steady state: after the barrier, the copy of chunk c + ahead into its slot.
    after_barrier = InsertPoint.after(barrier)
    build = schedule.IndexBuilder(after_barrier, pool)
    next_start = build.addi(ko, ahead * chunk, "ko_next")
    inside = build.add(arith.CmpiOp(next_start, pool.index(staged.ko.upper), "slt"), "has_next")
    next_chunk = build.add(arith.DivSIOp(next_start, pool.index(chunk)), "chunk_next")
    next_slot = build.add(arith.RemSIOp(next_chunk, pool.index(depth)), "slot_next")
    guard = tile.IfOp(inside)
    guard.attributes["prefetch"] = IntegerAttr(ahead, 64)
    Rewriter.insert_op(guard, InsertPoint.before(staged.ki))
    _clone_copies(
        staged.copies,
        {ko: next_start, slot: next_slot},
        InsertPoint.before(guard.body.block.last_op),  # type: ignore[arg-type]
    )
    for copy in staged.copies:
        Rewriter.erase_op(copy)
    return True


@dataclass(frozen=True)
class TilePipelinePass(Tunable):
    """Multibuffered contractions: copies issued `depth - 1` chunks ahead (module doc)."""

    name = "tile-pipeline"
    knobs = ("pipeline",)

    enable: bool = True

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        return staged_loop(kernel) is not None and not schedule.has_knob(kernel, "pipeline")

    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        return grid(pipeline=(0, 1))

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        staged = staged_loop(kernel)
        if staged is None or "prefetch" in _if_attributes(staged):
            return
        depth = schedule.read_knob(kernel, "depth", 1)
        on = schedule.read_knob(kernel, "pipeline", int(self.enable))
        done = on and depth >= 2 and pipeline(staged, depth)
        schedule.write_knob(kernel, "pipeline", int(bool(done)))


def _if_attributes(staged: StagedLoop) -> set[str]:
    names: set[str] = set()
    for op in staged.ko.body.block.ops:
        if isinstance(op, tile.IfOp):
            names |= set(op.attributes)
    return names
