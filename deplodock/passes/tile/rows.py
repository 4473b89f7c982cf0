"""`tile-rows`: several short rows per block, a group of `W` threads per row.

Trigger: the same kernels as `tile-rows-to-blocks` (an unscheduled reducing `tile.kernel`
whose threads body is one serial free nest of *rows*), when every reduce loop of the row
body is a plain reduction (`nests.combiner_of`) and the rows are short enough that one
block per row would leave most of a 256-thread block idle or launch too few threads per
block to hide latency.

Knobs (on the kernel's `schedule`): `row_threads` (`W`, the threads per row; 0 leaves the
kernel to `tile-rows-to-blocks`), `rows_per_block` (`R`) and `threads` (`W * R`).

Default heuristic, from the row length `L` (the largest loop nest of the row body) and the
row count `N`:

- `W = min(32, next_pow2(L))` for `L <= 1024` (at most a warp per row, its combine stays in
  shuffles), else `W = next_pow2(ceil(L / 32))` (a few warps, about 32 elements a thread);
  a `W` of `max_threads` or more is a whole block: left to `tile-rows-to-blocks`;
- `R = max_threads / W`, halved while the grid `ceil(N / R)` would have fewer than
  `min_blocks` blocks (one per SM of the device: more rows per block must not idle SMs) and
  the block keeps a whole warp;
- when `R` ends at 1 and `W` is smaller than the block `tile-loops-to-threads` would give
  the row, one block per row is better (more threads per row): the kernel is left alone;
- so is a row body whose loops hold serial inner loops (attention's softmax fused with
  `P @ V`: each output element is a serial dot product, so the row wants more threads,
  not fewer; on the H100 model a warp per row made such a kernel 14.8 -> 20.6 us).

Rewrite: thread `t` of block `b` works on row `b * R + t / W` at lane `t % W`; the row
indices are delinearized from that row (clamped to the last row, so a partial last block
reads in bounds). The row body's free nests are flattened and strided over the group
(`tile.for %i = %lane to L step W`), its reduce nests are too, each partial combined with
`tile.combine <kind> %p width W` (no width when `R = 1`). Every store is guarded: by
`row < N` when `N` is not a multiple of `R`, and a store outside the strided loops (the
row's result, which all `W` threads hold) by `lane == 0` as well.

    tile.grid %b to 1 {                          tile.grid %b to 4 {
      tile.threads %t to 32 {                      tile.threads %t to 256 {
        tile.for %i = %c0 to 32 {         ==>        %g = arith.floordivsi %t, %c32
          %s = tile.for %k = %c0 to 100 ...          %lane = arith.remsi %t, %c32
          tile.store %s, %y[%i]                      %i = (b * 8 + g)
                                                     %s_p = tile.for %k = %lane to 100 step 32 ...
                                                     %s = tile.combine add %s_p width 32 : f32
                                                     tile.if %lead { tile.store %s, %y[%i] }
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.dialects.hardware import WARP_SIZE
from deplodock.dialects.queries import written_buffers
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.choices import Tunable, grid
from deplodock.passes.tile.cooperative_reduce import cooperative_reduce
from deplodock.passes.tile.nests import (
    body_ops,
    chain_size,
    free_chain,
    has_reduce_loop,
    is_hoistable,
    is_plain_reduction,
    is_serial,
    loop_work,
    next_power_of_two,
    reduce_chain,
)


def choose(rows: int, length: int, max_threads: int, min_blocks: int) -> tuple[int, int]:
    """The default `(W, R)` for `rows` rows of `length` elements; `(0, 0)` = not taken."""
    if rows < 2:
        return 0, 0
    if length <= 1024:
        width = min(WARP_SIZE, next_power_of_two(length))
    else:
        width = next_power_of_two(-(-length // WARP_SIZE))
    if width >= max_threads:
        return 0, 0
    per_block = rows_per_block(rows, width, max_threads, min_blocks)
    one_block_per_row = min(max_threads, max(WARP_SIZE, next_power_of_two(length)))
    if per_block == 1 and width < one_block_per_row:
        return 0, 0
    return width, per_block


def rows_per_block(rows: int, width: int, max_threads: int, min_blocks: int) -> int:
    """The default `R` for groups of `width` threads: fill `max_threads`, halved while the
    grid would have fewer than `min_blocks` blocks and the block keeps a whole warp."""
    per_block = max(1, max_threads // width)
    per_block = min(per_block, max(next_power_of_two(rows), -(-WARP_SIZE // width)))
    while (
        per_block > 1
        and -(-rows // per_block) < min_blocks
        and width * (per_block // 2) >= WARP_SIZE
    ):
        per_block //= 2
    return per_block


def _row_nest(kernel: tile.KernelOp) -> list[tile.ForOp] | None:
    """The row nest of a kernel `tile-rows` may schedule (the module doc's trigger)."""
    threads = schedule.threads_of(kernel)
    if threads is None or kernel.grid.count != 1 or not has_reduce_loop(kernel):
        return None
    if schedule.is_tiled_contraction(kernel):
        return None
    written = written_buffers(kernel)
    top = list(threads.body.block.ops)
    loops = [op for op in top if isinstance(op, tile.ForOp)]
    others = [op for op in top if not isinstance(op, tile.ForOp)]
    if len(loops) != 1 or loops[0].is_reduce or not is_serial(loops[0]):
        return None
    if not all(is_hoistable(op, written) for op in others):
        return None
    rows = free_chain(loops[0], written)
    inner = [op for op in body_ops(rows[-1]) if isinstance(op, tile.ForOp)]
    if not inner or not all(is_serial(loop) for loop in inner):
        return None
    for loop in inner:
        chain = reduce_chain(loop, written) if loop.is_reduce else free_chain(loop, written)
        if any(isinstance(op, tile.ForOp) for op in chain[-1].body.walk() if op is not chain[-1]):
            return None  # serial work per element (attention's P @ V): more threads per row
        if loop.is_reduce and not is_plain_reduction(loop, written):
            return None  # not a plain reduction: it could not be split over a group
    if any(isinstance(op, tile.CombineOp) for op in kernel.walk()):
        return None
    return rows


def _in_strided_loop(op: Operation, threads: tile.ThreadsOp) -> bool:
    parent = op.parent_op()
    while parent is not None and parent is not threads:
        if isinstance(parent, tile.ForOp) and not is_serial(parent):
            return True
        parent = parent.parent_op()
    return False


def _guard(store: tile.StoreOp, cond: SSAValue) -> None:
    guard = tile.IfOp(cond)
    Rewriter.insert_op(guard, InsertPoint.before(store))
    store.detach()
    guard.body.block.insert_op_before(store, guard.body.block.first_op)  # before the yield


def schedule_rows(kernel: tile.KernelOp, max_threads: int, min_blocks: int) -> None:
    """Maps `R` rows per block, `W` threads per row (see module doc)."""
    rows = _row_nest(kernel)
    if rows is None:
        return
    threads = schedule.threads_of(kernel)
    assert threads is not None
    written = written_buffers(kernel)
    count = chain_size(rows)
    inner = [op for op in body_ops(rows[-1]) if isinstance(op, tile.ForOp)]
    length = max(loop_work(loop, written) for loop in inner)
    width, per_block = choose(count, length, max_threads, min_blocks)
    chosen = schedule.read_knob(kernel, "row_threads", width)
    if chosen <= 0:
        return
    if chosen != width:  # a width from a schedule: the default R follows it
        width, per_block = chosen, rows_per_block(count, chosen, max_threads, min_blocks)
    per_block = schedule.read_knob(kernel, "rows_per_block", per_block or 1)
    block = width * per_block
    schedule.check_threads(kernel, block, "row_threads * rows_per_block")
    if not (width & (width - 1) == 0 and width <= WARP_SIZE) and width % WARP_SIZE:
        schedule.check_threads(kernel, width, "row_threads")

    root = rows[0]
    before = InsertPoint.before(root)
    top = list(threads.body.block.ops)
    schedule.move_ops([op for op in top if op is not root and root.is_before_in_block(op)], before)
    pool = ConstantPool.adopting(threads.body.block)
    build = schedule.IndexBuilder(before, pool)
    t = threads.iv
    if per_block > 1:
        group = build.add(arith.FloorDivSIOp(t, pool.index(width)), "group")
        lane = build.add(arith.RemSIOp(t, pool.index(width)), "lane")
        row = build.addi(build.muli(kernel.grid.iv, per_block), group, "row")
    else:
        lane, row = t, kernel.grid.iv
    valid: SSAValue | None = None
    if count % per_block:
        valid = build.add(arith.CmpiOp(row, pool.index(count), "slt"), "in_rows")
        row = build.add(arith.MinSIOp(row, pool.index(count - 1)), "row_in")
    lead = lead_only = None
    if width > 1:
        lead = lead_only = build.add(arith.CmpiOp(lane, pool.index(0), "eq"), "is_lead")
        if valid is not None:
            lead = build.add(arith.AndIOp(lead, valid), "lead_in_rows")
    build.delinearize(row, rows)
    for outer, inner_loop in zip(rows, [*rows[1:], None], strict=True):
        schedule.move_ops([op for op in body_ops(outer) if op is not inner_loop], before)
    schedule.set_count(kernel.grid, -(-count // per_block))
    schedule.set_count(threads, block)
    Rewriter.erase_op(root)

    # The row body, strided over the group of W threads.
    combine_width = width if per_block > 1 else None
    for loop in [op for op in schedule.top_loops(threads) if is_serial(op)]:
        if loop.is_reduce:
            cooperative_reduce(loop, threads, written, lane, width, combine_width)
        else:
            schedule.flatten_into(free_chain(loop, written), lane, width, pool)
            Rewriter.erase_op(loop)
    schedule.drop_unused_constants(threads)

    # Guards: rows past N (partial last block) and the W copies of a row's result.
    for store in [op for op in threads.body.walk() if isinstance(op, tile.StoreOp)]:
        cond = valid if _in_strided_loop(store, threads) or lead is None else lead
        if cond is not None:
            _guard(store, cond)
    for value in (lead, lead_only):
        if value is not None and not value.uses and isinstance(value.owner, Operation):
            Rewriter.erase_op(value.owner)

    schedule.write_knob(kernel, "row_threads", width)
    schedule.write_knob(kernel, "rows_per_block", per_block)
    schedule.write_knob(kernel, "threads", block)


@dataclass(frozen=True)
class TileRowsPass(Tunable):
    """Short rows of reducing kernels: `R` rows per block, `W` threads each (module doc)."""

    name = "tile-rows"
    knobs = ("row_threads", "rows_per_block")

    #: The block size the heuristic aims at (threads = W * R).
    max_threads: int = 256
    #: Fewer blocks than this would idle SMs (132 on an H100): `R` shrinks instead.
    min_blocks: int = 132

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        return _row_nest(kernel) is not None and not schedule.has_knob(kernel, "row_threads")

    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        off = Schedule({"row_threads": 0, "rows_per_block": 1})  # left to tile-rows-to-blocks
        sizes = (1, 2, 4, 8, 16, 32, 64, 128, 256)
        return [off, *grid(row_threads=sizes[1:], rows_per_block=sizes)]

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        schedule_rows(kernel, self.max_threads, self.min_blocks)
