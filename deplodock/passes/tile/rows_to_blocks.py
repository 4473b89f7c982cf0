"""`tile-rows-to-blocks`: one block per row of a reducing kernel.

Trigger: an unscheduled `tile.kernel` (one block) that reduces, whose threads body is one
serial free loop nest (plus recomputable ops: constants, read-only loads); the *rows* are
the perfect nest of free loops at the top, the *row body* what is inside the innermost.

Rewrite: the grid gets one block per row (`G` = product of the rows' trip counts), the row
loops disappear, and their indices are delinearized from the block id `%b`; the row body
moves up into the threads body, still serial, for the next passes to map onto threads.
Rows are independent (free loops), so blocks need no synchronization.

    tile.grid %b to 1 {                           tile.grid %b to 32 {
      tile.threads %t to 32 {                       tile.threads %t to 32 {
        tile.for %i = %c0 to 32 {         ==>         %sum = tile.for %k = %c0 to 2048 ...
          %sum = tile.for %k = %c0 to 2048 ...          (uses of %i are now %b)
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import tile
from deplodock.dialects.queries import written_buffers
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.kernel_pass import TileKernelPass
from deplodock.passes.tile.nests import (
    body_ops,
    chain_size,
    free_chain,
    has_reduce_loop,
    is_hoistable,
    is_serial,
)


def rows_to_blocks(kernel: tile.KernelOp) -> None:
    """Maps the row nest of an unscheduled reducing kernel onto blocks (see module doc)."""
    threads = schedule.threads_of(kernel)
    if threads is None or kernel.grid.count != 1 or not has_reduce_loop(kernel):
        return
    if schedule.read_knob(kernel, "row_threads", 0) > 0:
        return  # `tile-rows` maps several rows per block here
    written = written_buffers(kernel)
    top = list(threads.body.block.ops)
    loops = [op for op in top if isinstance(op, tile.ForOp)]
    others = [op for op in top if not isinstance(op, tile.ForOp)]
    if len(loops) != 1 or loops[0].is_reduce or not is_serial(loops[0]):
        return
    if not all(is_hoistable(op, written) for op in others):
        return
    rows = free_chain(loops[0], written)
    root = rows[0]
    before_rows = InsertPoint.before(root)
    # Recomputable ops after the rows go before them, with the rest.
    schedule.move_ops([op for op in others if root.is_before_in_block(op)], before_rows)
    pool = ConstantPool.adopting(threads.body.block)
    schedule.IndexBuilder(before_rows, pool).delinearize(kernel.grid.iv, rows)
    for outer, inner in zip(rows, [*rows[1:], None], strict=True):
        schedule.move_ops([op for op in body_ops(outer) if op is not inner], before_rows)
    schedule.set_count(kernel.grid, chain_size(rows))
    Rewriter.erase_op(root)
    schedule.drop_unused_constants(threads)


@dataclass(frozen=True)
class TileRowsToBlocksPass(TileKernelPass):
    """Reducing kernels: one block per row of the outer free nest (see module doc)."""

    name = "tile-rows-to-blocks"

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        rows_to_blocks(kernel)
