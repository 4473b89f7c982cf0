"""`tile-loops-to-threads`: the threads of a block share a row's free loops.

Trigger: a `tile.kernel` whose threads body has serial loops at its top (a row body after
`tile-rows-to-blocks`, or a whole kernel that is one block).

Rewrite: first the block size. `T` (knob `threads`) is the largest loop nest of the body
rounded up to a power of two, at least a warp and at most `max_threads`, so a short row
does not idle most of a big block. Then every top-level nest of *free* loops is flattened
and strided over the threads: thread `t` runs `lin = t, t + T, ...`. Reduce loops are left
serial here (`tile-cooperative-reduce` splits them); loops nested inside a strided loop stay
serial per thread.

    tile.threads %t to 32 {                     tile.threads %t to 256 {
      tile.for %j = %c0 to 2048 {       ==>       tile.for %j = %t to 2048 step 256 {
"""

from __future__ import annotations

from dataclasses import dataclass

from deplodock.dialects import tile
from deplodock.dialects.hardware import WARP_SIZE
from deplodock.dialects.queries import written_buffers
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.kernel_pass import TileKernelPass
from deplodock.passes.tile.nests import free_chain, is_serial, loop_work, next_power_of_two


def loops_to_threads(kernel: tile.KernelOp, max_threads: int) -> None:
    """Chooses the block size and strides the top-level free nests (see module doc)."""
    threads = schedule.threads_of(kernel)
    if threads is None:
        return
    loops = [loop for loop in schedule.top_loops(threads) if is_serial(loop)]
    if not loops:
        return
    written = written_buffers(kernel)
    largest = max(loop_work(loop, written) for loop in loops)
    derived = min(max_threads, max(WARP_SIZE, next_power_of_two(largest)))
    count = schedule.read_knob(kernel, "threads", derived)
    schedule.check_threads(kernel, count, "threads")
    schedule.set_count(threads, count)
    schedule.write_knob(kernel, "threads", count)
    nests = [free_chain(loop, written) for loop in loops if not loop.is_reduce]
    pool = ConstantPool.adopting(threads.body.block)
    schedule.stride_free_nests(threads, nests, threads.iv, count, pool)


@dataclass(frozen=True)
class TileLoopsToThreadsPass(TileKernelPass):
    """Free loops of a row: strided over `T <= max_threads` threads (see module doc)."""

    name = "tile-loops-to-threads"

    max_threads: int = 256

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        if not schedule.is_tiled_contraction(kernel):
            loops_to_threads(kernel, self.max_threads)
