"""`tile-grid-stride`: an elementwise kernel's loop nests run over all blocks and threads.

Trigger: a `tile.kernel` without reduce loops whose threads body still holds serial loop
nests (as `convert-loop-to-tile` leaves them).

Rewrite: each top-level nest is flattened into one linear loop that every thread strides
through: with `N` the nest's element count, `T` threads per block (knob `threads`) and
`G = min(ceil(N / T), max_blocks)` blocks (knob `max_blocks`; the largest nest decides),
thread `t` of block `b` runs `lin = b*T + t, b*T + t + G*T, ...` and delinearizes `lin`
into the nest's indices. Sibling nests (a concat) get one such loop each. A kernel without
loops keeps one warp.

    tile.grid %b to 1 {                         tile.grid %b to 2 {
      tile.threads %t to 32 {                     tile.threads %t to 256 {
        tile.for %i = %c0 to 300 {       ==>        %start = <b * 256 + t>
          ...                                       tile.for %i = %start to 300 step 512 {
                                                      ...
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.dialects.hardware import WARP_SIZE
from deplodock.dialects.queries import read_buffers, written_buffers
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.choices import Tunable, grid
from deplodock.passes.tile.nests import chain_size, free_chain, has_reduce_loop, is_serial


def _check_siblings_independent(kernel: tile.KernelOp, threads: tile.ThreadsOp) -> None:
    """Sibling nests run concurrently: none may read what an earlier one writes."""
    written: set[SSAValue] = set()
    for op in threads.body.block.ops:
        if clash := read_buffers(op) & written:
            name = next(iter(clash)).name_hint or "a buffer"
            raise PassFailedException(
                f"tile-grid-stride: @{kernel.sym_name.data} reads %{name} after a sibling "
                "loop nest writes it (needs a grid-wide barrier)"
            )
        written |= written_buffers(op)


def grid_stride(kernel: tile.KernelOp, threads_default: int, max_blocks_default: int) -> None:
    """Maps every top-level nest of an unscheduled elementwise kernel (see module doc)."""
    threads = schedule.threads_of(kernel)
    if threads is None or has_reduce_loop(kernel):
        return
    loops = schedule.top_loops(threads)
    if not all(is_serial(loop) for loop in loops):
        return  # already mapped
    _check_siblings_independent(kernel, threads)
    written = written_buffers(kernel)
    nests = [free_chain(loop, written) for loop in loops]
    count = schedule.read_knob(kernel, "threads", threads_default) if nests else WARP_SIZE
    schedule.check_threads(kernel, count, "threads")
    max_blocks = schedule.read_knob(kernel, "max_blocks", max_blocks_default)
    if max_blocks < 1:
        raise PassFailedException(f"tile-grid-stride: max_blocks must be >= 1, got {max_blocks}")
    largest = max((chain_size(nest) for nest in nests), default=1)
    blocks = min(max(1, -(-largest // count)), max_blocks)
    schedule.set_count(kernel.grid, blocks)
    schedule.set_count(threads, count)
    if nests:
        schedule.write_knob(kernel, "threads", count)
        schedule.write_knob(kernel, "max_blocks", max_blocks)
        pool = ConstantPool.adopting(threads.body.block)
        at_first = schedule.IndexBuilder(InsertPoint.before(nests[0][0]), pool)
        start = at_first.addi(at_first.muli(kernel.grid.iv, count), threads.iv, name="start")
        schedule.stride_free_nests(threads, nests, start, blocks * count, pool)


@dataclass(frozen=True)
class TileGridStridePass(Tunable):
    """Elementwise kernels: every nest over `threads` x blocks, grid-stride (module doc)."""

    name = "tile-grid-stride"
    knobs = ("threads", "max_blocks")

    threads: int = 256
    max_blocks: int = 1024

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        threads = schedule.threads_of(kernel)
        if threads is None or has_reduce_loop(kernel) or schedule.has_knob(kernel, "threads"):
            return False
        loops = schedule.top_loops(threads)
        return bool(loops) and all(is_serial(loop) for loop in loops)

    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        return grid(threads=(64, 128, 256, 512, 1024), max_blocks=(132, 264, 528, 1024, 2048))

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        grid_stride(kernel, self.threads, self.max_blocks)
