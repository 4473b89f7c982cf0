"""`tile-shared-statistics`: a contraction's row statistics, computed once per block row.

Trigger: a register-tiled contraction (`tile-thread` has run) whose block still holds row
statistics (`contraction.py`): serial reduce loops beside the K loop that depend on one row
cell each. SDPA fused with `@ V` is the case: every thread computes the row max and the row
sum of the scores for each of its FM rows, and the BN / FN threads sharing a row all do.

Rewrite: the block's warps take its BM rows in turn (trip `%rr` of a loop every thread runs:
warp `w` takes row `%rr * warps + w`); for each row, the statistics' loops are strided over
the 32 lanes, and where a lane holds at most `MAX_CELLS` elements of the row they are
unrolled into its cells (`row_on_chip.sweep_cells`): each element is loaded once, for every
statistic. `tile.combine <kind> width 32` finishes each one (a statistic that reads another,
the sum reading the max, sees the combined value), and lane 0 stores it to a shared array
`stats_s[S][BM]`. A `tile.barrier` publishes it, and each cell's statistic becomes a load of
`stats_s[s, cell]`, which `tile-stage` copies along with the prologue.

    %max = tile.for %r = %c0 to 64 ...          %stats_s = tile.shared_alloc : memref<2x64xf32, 3>
    %max_1 = tile.for %r = %c0 to 64 ...        tile.for %rr = %c0 to 8 {  (%sr = %rr * 8 + %warp)
    %sum = tile.for ... (%max)           ==>      %x0 = tile.load %s[%sr, %lane]
    %sum_1 = tile.for ... (%max_1)                %x1 = tile.load %s[%sr, %lane + 32]
                                                  %max = tile.combine max (max(%x0, %x1)) width 32
                                                  %sum = tile.combine add (exp(%x0 - %max) + ...)
                                                  lane 0: tile.store %max, %stats_s[%c0, %sr] ...
                                                } {rolled}
                                                tile.barrier
                                                %max_0 = tile.load %stats_s[%c0, %mm] ...

Why: the statistics cost a launch and a round trip through memory as a kernel of their own
(10.9 us of the 38 us of SDPA at 32 tokens, modeled on H100), and per thread they would be
computed 8 to 16 times over; a warp per row reads each row once per block.

Knob (`schedule`): `shared_statistics` (1, the default, or 0: every thread keeps its own).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import MemRefType, UnitAttr
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.dialects.effects import erase_dead
from deplodock.dialects.hardware import WARP_SIZE, shared_memref
from deplodock.dialects.queries import written_buffers
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.choices import Tunable, grid
from deplodock.passes.tile.contraction import (
    block_slice,
    k_loop_of,
    program_order,
    thread_tiles_of,
)
from deplodock.passes.tile.cooperative_reduce import cooperative_reduce
from deplodock.passes.tile.nests import body_ops, is_plain_reduction, is_serial
from deplodock.passes.tile.row_on_chip import share_loads, sweep_cells, unroll_sweep
from deplodock.passes.tile.unroll import ROLLED

#: The attribute that marks the shared array of the statistics (`tile-stage` reads it).
STATISTICS_ATTR = "statistics"

#: Rows of at most this many elements a lane are kept in its registers (as in
#: `tile-row-on-chip`); longer ones are swept once per statistic.
MAX_CELLS = 32


@dataclass
class Statistics:
    """The row statistics of one block: per row cell, its loops in program order."""

    threads: tile.ThreadsOp
    row_tile: tile.ThreadTileOp
    by_cell: list[list[tile.ForOp]]

    @property
    def template(self) -> list[tile.ForOp]:
        """The loops of the first row cell, which the shared computation is cloned from."""
        return self.by_cell[0]


def _cells_reached(loop: tile.ForOp) -> set[SSAValue]:
    """The thread-tile cells the loop's computation depends on, through other statistics."""
    cells: set[SSAValue] = set()
    seen: set[SSAValue] = set()
    work = [v for op in loop.walk() for v in op.operands]
    while work:
        value = work.pop()
        if value in seen or isinstance(value, BlockArgument):
            continue
        seen.add(value)
        owner = value.owner
        if isinstance(owner, tile.ThreadTileOp):
            cells.add(value)
        elif isinstance(owner, tile.ForOp):
            work.extend(v for op in owner.walk() for v in op.operands)
        else:
            work.extend(owner.operands)
    return cells


def find_statistics(kernel: tile.KernelOp) -> Statistics | None:
    """The row statistics of a register-tiled contraction, grouped by row cell, or None."""
    threads = schedule.threads_of(kernel)
    if threads is None or not schedule.is_tiled_contraction(kernel):
        return None
    tiles = thread_tiles_of(threads)
    k_loop = k_loop_of(threads)
    if not tiles or tiles[0].axis != 0 or k_loop is None:
        return None
    row_tile = tiles[0]
    loops = [
        loop
        for loop in schedule.top_loops(threads)
        if loop.is_reduce and loop is not k_loop and is_serial(loop)
    ]
    if not loops:
        return None
    written = written_buffers(kernel)
    positions = list(row_tile.positions)
    by_cell: list[list[tile.ForOp]] = [[] for _ in positions]
    types: set[Attribute] = set()
    for loop in loops:
        cells = _cells_reached(loop)
        if len(cells) != 1 or (cell := cells.pop()) not in positions:
            return None
        if not is_plain_reduction(loop, written):
            return None
        by_cell[positions.index(cell)].append(loop)
        types |= {result.type for result in loop.res}
    if len({len(group) for group in by_cell}) != 1 or len(types) != 1:
        return None
    return Statistics(threads, row_tile, by_cell)


def _slice(loops: list[tile.ForOp], threads: tile.ThreadsOp) -> list[Operation]:
    """The ops of the block the loops read (index math of the row: its origin, clamp and
    delinearization; arithmetic on an earlier statistic, LayerNorm's mean), in program
    order; the loops themselves (cloned on their own) excluded."""
    inside = {op for loop in loops for op in loop.walk()}
    found = block_slice((v for op in inside for v in op.operands), threads)
    return [op for op in found if op not in inside and not isinstance(op, tile.ForOp)]


def share_statistics(stats: Statistics, kernel: tile.KernelOp) -> None:
    """Computes the statistics once per block row into shared memory (see module doc)."""
    threads, template = stats.threads, stats.template
    written = written_buffers(kernel)
    pool = ConstantPool.adopting(threads.body.block)
    rows = stats.row_tile.cell_count * stats.row_tile.thread_grid[0]
    values = [result for loop in template for result in loop.res]
    alloc = tile.SharedAllocOp(shared_memref(values[0].type, [len(values), rows]), "stats_s")
    alloc.attributes[STATISTICS_ATTR] = UnitAttr()
    first = min((loop for group in stats.by_cell for loop in group), key=program_order)
    Rewriter.insert_op(alloc, InsertPoint.before(first))
    build = schedule.IndexBuilder(InsertPoint.before(first), pool)
    warps = threads.count // WARP_SIZE
    warp = build.add(arith.FloorDivSIOp(threads.iv, pool.index(WARP_SIZE)), "warp")
    lane = build.add(arith.RemSIOp(threads.iv, pool.index(WARP_SIZE)), "lane")
    lead = build.add(arith.CmpiOp(lane, pool.index(0), "eq"), "is_lead")
    # Every thread runs the same trips (the combines need whole warps): warp w takes rows
    # w, w + warps, ...; past the last row a warp recomputes it and does not store.
    phase = tile.ForOp(pool.index(0), -(-rows // warps), 1, [])
    phase.attributes[ROLLED] = UnitAttr()  # each trip holds a row's cells (`tile-unroll`)
    phase.induction_var.name_hint = "rr"
    phase.body.block.add_op(tile.YieldOp())
    Rewriter.insert_op(phase, build.point)
    Rewriter.insert_op(tile.BarrierOp(), build.point)
    body = InsertPoint.before(phase.body.block.last_op)  # type: ignore[arg-type]
    inner = schedule.IndexBuilder(body, pool)
    row = inner.addi(inner.muli(phase.induction_var, warps), warp, "sr")
    if rows % warps:
        valid = inner.add(arith.CmpiOp(row, pool.index(rows), "slt"), "in_rows")
        lead = inner.add(arith.AndIOp(lead, valid), "lead_in_rows")
        row = inner.add(arith.MinSIOp(row, pool.index(rows - 1)), "sr_in")
    # The row's index math and the statistics, cloned for row `%sr` of the block.
    mapping: dict[SSAValue, SSAValue] = {stats.row_tile.positions[0]: row}
    for op in sorted([*_slice(template, threads), *template], key=program_order):
        clone = op.clone(value_mapper=mapping)
        Rewriter.insert_op(clone, body)
        for old, new in zip(op.results, clone.results, strict=True):
            mapping[old] = new
            new.name_hint = old.name_hint
    guard = tile.IfOp(lead)
    Rewriter.insert_op(guard, body)
    store_point = InsertPoint.before(guard.body.block.last_op)  # type: ignore[arg-type]
    for k, value in enumerate(values):
        slot = [pool.index(k), row]
        Rewriter.insert_op(tile.StoreOp(mapping[value], alloc.result, slot), store_point)
    for loop in template:
        clone = mapping[loop.res[0]].owner
        assert isinstance(clone, tile.ForOp)
        cooperative_reduce(clone, threads, written, lane, WARP_SIZE, WARP_SIZE)
    _row_in_registers(phase, pool, kernel, written)
    # Each cell reads its row's statistics.
    for cell, group in zip(stats.row_tile.positions, stats.by_cell, strict=True):
        results = [result for loop in group for result in loop.res]
        for k, result in enumerate(results):
            read = tile.LoadOp(alloc.result, [pool.index(k), cell])
            read.res.name_hint = result.name_hint
            Rewriter.insert_op(read, InsertPoint.before(group[0]))
            result.replace_all_uses_with(read.res)
    for group in stats.by_cell:
        for loop in reversed(group):
            Rewriter.erase_op(loop)
    erase_dead(list(threads.body.block.ops))


def _row_in_registers(
    phase: tile.ForOp, pool: ConstantPool, kernel: tile.KernelOp, written: set[SSAValue]
) -> None:
    """The lanes' sweeps over one row unrolled into their cells (`row_on_chip`'s registers):
    each lane loads its `ceil(L / 32)` elements once, all in flight together, and the later
    statistics (the sum after the max) reuse them instead of reading the row again."""
    sweeps = [op for op in body_ops(phase) if isinstance(op, tile.ForOp)]
    shapes = {(loop.lb, loop.upper, loop.step_value) for loop in sweeps}
    if not sweeps or len(shapes) != 1:
        return
    if -(-sweeps[0].upper // sweeps[0].step_value) > MAX_CELLS:
        return
    cells = sweep_cells(sweeps[0], pool)
    for sweep in sweeps:
        unroll_sweep(sweep, cells)
    arguments = {arg for arg in kernel.body.block.args if isinstance(arg.type, MemRefType)}
    share_loads(phase, arguments - written)


@dataclass(frozen=True)
class TileSharedStatisticsPass(Tunable):
    """Row statistics of a contraction once per block row, in shared memory (module doc)."""

    name = "tile-shared-statistics"
    knobs = ("shared_statistics",)

    #: 1: share them (the default), 0: every thread computes its own rows'.
    enable: int = 1

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        return find_statistics(kernel) is not None and not schedule.has_knob(
            kernel, "shared_statistics"
        )

    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        return grid(shared_statistics=(1, 0))

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        stats = find_statistics(kernel)
        if stats is None:
            return
        enable = schedule.read_knob(kernel, "shared_statistics", self.enable)
        if enable:
            share_statistics(stats, kernel)
        schedule.write_knob(kernel, "shared_statistics", enable)
