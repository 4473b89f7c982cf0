"""`tile-thread`: the threads of a block share its tile, each holding FM x FN cells in registers.

Trigger: a kernel that `tile-block` has tiled (knobs `bm`, `bn`) and whose cell loops
`mm < BM`, `nn < BN` are still serial.

Rewrite: the block gets `(BM / FM) x (BN / FN)` threads. Two `tile.thread_tile` ops say
which FM rows and FN columns each thread owns: `interleaved` (a thread's cells a thread-grid
apart, so neighbouring threads own neighbouring columns: a warp's stores are coalesced and
its shared-memory reads of B hit distinct banks), with the threads in 2 x 2 quads (`quads`).
The cell loops disappear: every op of the cell body is *replicated by what it depends on*:
once if it depends on neither the row nor the column, FM times if on the row only (the loads
of A), FN times if on the column only (the loads of B, a bias), FM x FN times if on both.
The K loop is interchanged with the cells: one loop carries all FM x FN accumulators, so
each iteration loads FM values of A and FN of B and does FM x FN multiply-adds (an outer
product), instead of 2 loads per multiply-add.

    tile.for %mm = %c0 to 64 {                  %mm:4 = tile.thread_tile %t dim 0 of [16, 16] ...
      tile.for %nn = %c0 to 64 {        ==>     %nn:4 = tile.thread_tile %t dim 1 of [16, 16] ...
        %acc = tile.for %k ... {                %acc:16 = tile.for %k ... iter_args(... x16) {
          a[m, k] * b[n, k] }                     4 loads of a, 4 of b, 16 mulf + addf }

Knobs (`schedule`): `fm`, `fn` (register cells per thread). Default: `bm/16 x bn/16`, at
most 8 x 8 (128 x 128 -> 256 threads of 8 x 8 cells, 64 x 64 -> 256 of 4 x 4), so a thread
keeps at most 64 accumulators, well within the 255 registers a thread may use.

Knob `quads` (1 or 0): order the threads in 2 x 2 quads, so that lanes n and n ^ 1 share a
row and lanes n and n ^ 2 a column. A warp covers the same rows and columns as in row
order, but once `tile-vectorize` reads both slabs 16 bytes at a time, each read comes in pairs
of equal addresses, which shared memory packs two to a register: half the wavefronts
(`hardware.shared_wavefronts`; modeled on H100, q_proj of Qwen2.5-7B at 512 tokens in fp32
takes 293 us in row order, 282 us in quads). Default on wherever the thread grid is even in
both axes; with 0 the threads go row by row and a thread's rows are adjacent (`blocked`).

Knob `mma` (1 or 0): lay the cells out as the accumulator fragments of `mma.sync` m16n8k16
(`tile.thread_tile ... mma`), so that `tile-mma` can then hand the inner product to the
tensor cores. Default on when both operands are bf16 or f16 products summed in fp32 and the
block has a legal MMA grid: a thread grid of multiples of 8 x 4 with even cell counts
(`mma_grid`; for 128 x 112 on 256 threads, 32 x 8 threads of 4 x 14 cells, because 7 cells
cannot pair; a 16 x 8 tile, one warp of 2 x 2 cells). The scalar inner product is correct
on either layout.

fp32 products too take MMA cells by default (option `tf32x3`, 1): `tile-mma` then runs them
as three tf32 MMAs per tile, `lo_a hi_b + hi_a lo_b + hi_a hi_b`, as accurate as fp32 FMAs
(about 2^-21 relative per product) and faster: tf32 runs at half the bf16 tensor rate, so
three passes still beat the FMA pipe (modeled on H100, Qwen2.5-7B's fp32 q_proj at 512
tokens: 278 -> 153 us). `tf32x3=0` keeps every fp32 contraction on FMAs, bit for bit the
IEEE multiply-adds; single-pass TF32, which would lose 13 mantissa bits, is never chosen.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.dialects.hardware import WARP_SIZE, is_valid_block_size
from deplodock.passes.tile import schedule
from deplodock.passes.tile.choices import Tunable
from deplodock.passes.tile.contraction import (
    fp32_product,
    operand_bytes,
    sixteen_bit_product,
    tensor_core_product,
)
from deplodock.passes.tile.nests import body_ops

#: What a value depends on: the row cell ("m"), the column cell ("n"), both, or neither.
Axes = frozenset[str]
NONE: Axes = frozenset()
ROW: Axes = frozenset({"m"})
COL: Axes = frozenset({"n"})
BOTH: Axes = frozenset({"m", "n"})

#: Register cells per thread the pass accepts along one axis.
CELL_COUNTS: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 16)


#: Tiles whose fp32 default is 8 x 8 cells on a 16 x 8 thread grid (see `default_cells`).
WIDE_FP32_TILES: frozenset[tuple[int, int]] = frozenset({(128, 64)})


def default_cells(bm: int, bn: int, element_bytes: int = 4) -> tuple[int, int]:
    """FM x FN: a 16 x 16 thread grid (256 threads) when the tile allows, each thread
    `bm/16 x bn/16` cells (8 x 8 for 128 x 128), at most 8 per axis.

    Except a 128 x 64 tile of fp32 operands, which gets 8 x 8 cells on 128 threads: 8 x 4
    cells read 12 shared words per 32 multiply-adds and the shared pipe binds before the
    FMA pipe; 8 x 8 read 16 per 64 (modeled on H100: q_proj of TinyLlama at 512 tokens
    133 -> 111 us). A bf16 operand adds a conversion per element read, and there the
    256-thread grid stays ahead (the same q_proj in bf16: 131 -> 270 us with 8 x 8)."""
    if element_bytes == 4 and (bm, bn) in WIDE_FP32_TILES:
        return 8, 8
    return max(1, min(8, bm // 16)), max(1, min(8, bn // 16))


def mma_grid(bm: int, bn: int, threads: int) -> tuple[int, int] | None:
    """Cells (FM, FN) of an MMA layout of a BM x BN tile on `threads` threads, or None.

    The thread grid must be whole 8 x 4 warps (`tile.ThreadTileOp.MMA_WARP_THREADS`) and
    each thread's cells whole fragment pairs. Among the legal grids, the one whose thread
    loads the fewest fragment words per 16-deep K step (4 per A tile of 16 rows, 2 per B
    tile of 8 columns: `2 FM + FN`), then the squarer one."""
    rows_per_warp, cols_per_warp = tile.ThreadTileOp.MMA_WARP_THREADS
    best: tuple[tuple[int, int], tuple[int, int]] | None = None
    for rows in range(rows_per_warp, threads + 1, rows_per_warp):
        if threads % rows or (threads // rows) % cols_per_warp:
            continue
        cols = threads // rows
        if bm % rows or bn % cols or (bm // rows) % 2 or (bn // cols) % 2:
            continue
        fm, fn = bm // rows, bn // cols
        rank = (2 * fm + fn, abs(fm - fn))
        if best is None or rank < best[0]:
            best = (rank, (fm, fn))
    return None if best is None else best[1]


#: The most accumulators the MMA heuristic gives a thread: 8 x 16, a 64 x 64 warp tile of a
#: 128 x 256 block on 256 threads (about 190 registers, no spills on sm_90).
MAX_MMA_CELLS = 128
#: The threads the MMA heuristic starts from: 8 warps. A 128 x 256 tile on the 512 threads
#: of its FMA layout would give each warp a 32 x 64 tile, which reads a third more fragment
#: words per MMA from shared memory than a 64 x 64 one.
MMA_THREADS = 256


def default_mma_cells(bm: int, bn: int, threads: int) -> tuple[int, int] | None:
    """`mma_grid` on `threads`, else on half as many, down to one warp (a 16 x 8 tile has
    no MMA grid on 128 threads, one on 32), keeping at most `MAX_MMA_CELLS` per thread."""
    while threads >= WARP_SIZE:
        cells = mma_grid(bm, bn, threads)
        if cells is not None:
            return cells if cells[0] * cells[1] <= MAX_MMA_CELLS else None
        threads //= 2
    return None


def legal_cells(bm: int, bn: int) -> list[tuple[int, int]]:
    """The (FM, FN) pairs giving a legal block for a BM x BN tile."""
    return [
        (fm, fn)
        for fm in CELL_COUNTS
        for fn in CELL_COUNTS
        if bm % fm == 0 and bn % fn == 0 and is_valid_block_size(bm // fm * (bn // fn))
    ]


@dataclass
class Replicator:
    """Clones the ops of one cell once per register cell they depend on.

    `axes[v]` says what a value depends on; `copies[v][(i, j)]` is the clone of `v` for row
    cell `i` and column cell `j` (an index is 0 on an axis the value does not depend on).
    """

    fm: int
    fn: int
    axes: dict[SSAValue, Axes] = field(default_factory=dict)
    copies: dict[SSAValue, dict[tuple[int, int], SSAValue]] = field(default_factory=dict)

    def seed(self, value: SSAValue, axes: Axes, copies: dict[tuple[int, int], SSAValue]):
        self.axes[value] = axes
        self.copies[value] = copies

    def axes_of(self, value: SSAValue) -> Axes:
        return self.axes.get(value, NONE)

    def cells(self, axes: Axes) -> list[tuple[int, int]]:
        rows = range(self.fm) if "m" in axes else range(1)
        cols = range(self.fn) if "n" in axes else range(1)
        return list(itertools.product(rows, cols))

    def lookup(self, value: SSAValue, cell: tuple[int, int]) -> SSAValue:
        axes = self.axes_of(value)
        if not axes:
            return value
        i, j = cell
        return self.copies[value][(i if "m" in axes else 0, j if "n" in axes else 0)]

    def op_axes(self, op: Operation) -> Axes:
        """Union over the operands and the outside values used in its regions."""
        found: set[str] = set()
        for operand in op.operands:
            found |= self.axes_of(operand)
        for inner in op.walk():
            if inner is op:
                continue
            for operand in inner.operands:
                found |= self.axes_of(operand)
        return frozenset(found)

    def mapper(self, op: Operation, cell: tuple[int, int]) -> dict[SSAValue, SSAValue]:
        values = {v for inner in op.walk() for v in inner.operands}
        return {v: self.lookup(v, cell) for v in values if self.axes_of(v)}

    def replicate(self, ops: list[Operation], point: InsertPoint) -> None:
        """Moves (no dependence) or clones (per cell) every op of `ops` to `point`."""
        for op in ops:
            axes = self.op_axes(op)
            if not axes:
                op.detach()
                Rewriter.insert_op(op, point)
                continue
            clones: list[Operation] = []
            for cell in self.cells(axes):
                clone = op.clone(value_mapper=self.mapper(op, cell))
                Rewriter.insert_op(clone, point)
                clones.append(clone)
                _name_clone(op, clone, cell, axes)
            cells = self.cells(axes)
            for k, result in enumerate(op.results):
                per_cell = {c: clone.results[k] for c, clone in zip(cells, clones, strict=True)}
                self.seed(result, axes, per_cell)

    def interchange(self, loop: tile.ForOp, point: InsertPoint) -> tile.ForOp:
        """The cell's reduce loop, once, carrying one accumulator per (cell, iter_arg)."""
        cells = self.cells(BOTH)
        inits = [self.lookup(init, cell) for init in loop.inits for cell in cells]
        new = tile.ForOp(loop.lb, loop.upper, loop.step_value, inits)
        Rewriter.insert_op(new, point)
        new.induction_var.name_hint = loop.induction_var.name_hint
        self.seed(loop.induction_var, NONE, {})
        loop.induction_var.replace_all_uses_with(new.induction_var)
        count = len(cells)
        for k, arg in enumerate(loop.iter_args):
            mine = new.iter_args[k * count : (k + 1) * count]
            for cell, new_arg in zip(cells, mine, strict=True):
                new_arg.name_hint = _cell_name(arg.name_hint, cell, BOTH)
            self.seed(arg, BOTH, dict(zip(cells, mine, strict=True)))
        body_end = InsertPoint.at_end(new.body.block)
        self.replicate(body_ops(loop), body_end)
        old_yield = loop.body.block.last_op
        assert isinstance(old_yield, tile.YieldOp)
        yielded = [self.lookup(v, cell) for v in old_yield.arguments for cell in cells]
        new.body.block.add_op(tile.YieldOp(*yielded))
        for k, result in enumerate(loop.res):
            mine = new.res[k * count : (k + 1) * count]
            for cell, new_result in zip(cells, mine, strict=True):
                new_result.name_hint = _cell_name(result.name_hint, cell, BOTH)
            self.seed(result, BOTH, dict(zip(cells, mine, strict=True)))
        return new


@dataclass(frozen=True)
class CellTiles:
    """The row and column `tile.thread_tile` ops of a `grid` of threads holding `cells`
    register cells each (`layouts`, thread `order`), their positions named `names[0]_k` and
    `names[1]_k`: what `tile-thread` gives a contraction's output tile and
    `tile-prologue-product` a copy's chunk of scores."""

    thread: SSAValue
    grid: tuple[int, int]
    cells: tuple[int, int]
    layouts: tuple[str, str]
    order: str
    names: tuple[str, str]

    def insert(self, point: InsertPoint, row: SSAValue, column: SSAValue) -> Replicator:
        """Inserts the two tiles at `point`; returns a `Replicator` with the cell indices
        `row` and `column` seeded by their positions."""
        tiles = [
            tile.ThreadTileOp(self.thread, axis, self.grid, count, layout, self.order)
            for axis, (count, layout) in enumerate(zip(self.cells, self.layouts, strict=True))
        ]
        Rewriter.insert_op(tiles, point)
        for tile_op, name in zip(tiles, self.names, strict=True):
            for k, value in enumerate(tile_op.positions):
                value.name_hint = f"{name}_{k}"
        rep = Replicator(*self.cells)
        rep.seed(row, ROW, {(i, 0): v for i, v in enumerate(tiles[0].positions)})
        rep.seed(column, COL, {(0, j): v for j, v in enumerate(tiles[1].positions)})
        return rep


def _cell_name(hint: str | None, cell: tuple[int, int], axes: Axes) -> str | None:
    if hint is None:
        return None
    suffix = "".join(str(c) for c, axis in zip(cell, ("m", "n"), strict=True) if axis in axes)
    return f"{hint}_{suffix}"


def _name_clone(op: Operation, clone: Operation, cell: tuple[int, int], axes: Axes) -> None:
    for old, new in zip(op.results, clone.results, strict=True):
        new.name_hint = _cell_name(old.name_hint, cell, axes)


def _cell_loops(threads: tile.ThreadsOp) -> tuple[tile.ForOp, tile.ForOp] | None:
    """The serial `mm` and `nn` loops `tile-block` left in the block, if still there."""
    loops = schedule.top_loops(threads)
    if len(loops) != 1 or loops[0].is_reduce:
        return None
    inner = [op for op in body_ops(loops[0])]
    if len(inner) != 1 or not isinstance(inner[0], tile.ForOp):
        return None
    return loops[0], inner[0]


def thread_contraction(
    kernel: tile.KernelOp, fm: int, fn: int, mma: bool = False, quads: bool = False
) -> bool:
    """Maps the tile of a blocked contraction onto threads x register cells (as MMA
    fragments with `mma`; threads in 2 x 2 quads with `quads`)."""
    threads = schedule.threads_of(kernel)
    if threads is None or (loops := _cell_loops(threads)) is None:
        return False
    rows, cols = loops
    bm, bn = rows.upper, cols.upper
    if bm % fm or bn % fn:
        raise PassFailedException(
            f"tile.kernel @{kernel.sym_name.data}: the {bm}x{bn} tile is not a whole number "
            f"of {fm}x{fn} register cells"
        )
    grid = (bm // fm, bn // fn)
    schedule.check_threads(kernel, grid[0] * grid[1], "threads (bm/fm * bn/fn)")
    schedule.set_count(threads, grid[0] * grid[1])
    point = InsertPoint.before(rows)
    layouts = ("mma", "mma") if mma else ("interleaved" if quads else "blocked", "interleaved")
    order = "quads" if quads else "rows"
    cells = CellTiles(threads.iv, grid, (fm, fn), layouts, order, ("mm", "nn"))
    rep = cells.insert(point, rows.induction_var, cols.induction_var)
    for op in body_ops(cols):
        if isinstance(op, tile.ForOp) and op.is_reduce and rep.op_axes(op) == BOTH:
            rep.interchange(op, point)
        else:
            rep.replicate([op], point)
    _erase_emptied(rows)
    schedule.drop_unused_constants(threads)
    return True


def _erase_emptied(rows: tile.ForOp) -> None:
    """The cell loops go, with the originals of every op that was cloned per cell."""
    inside = set(rows.walk())
    for op in inside:
        for result in op.results:
            if any(use.operation not in inside for use in result.uses):
                raise PassFailedException(f"tile-thread: {op.name} still used after the rewrite")
    Rewriter.erase_op(rows, safe_erase=False)


@dataclass(frozen=True)
class TileThreadPass(Tunable):
    """Blocked contractions: FM x FN register cells per thread (see the module docstring).

    `fm`/`fn` 0 means "the heuristic's choice"; a kernel's `schedule` knobs win over both.
    """

    name = "tile-thread"
    knobs = ("fm", "fn", "mma", "quads")

    fm: int = 0
    fn: int = 0
    #: 1: MMA fragment layout, 0: the scalar layout (see `quads`), -1: the heuristic.
    mma: int = -1
    #: 1: threads in 2 x 2 quads, 0: row by row, -1: the heuristic (quads where legal).
    quads: int = -1
    #: 1: the heuristic gives fp32 products MMA cells too (three tf32 MMAs, module doc);
    #: 0: only bf16 and f16 ones.
    tf32x3: int = 1

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        return schedule.has_knob(kernel, "bm") and not schedule.has_knob(kernel, "fm")

    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        bm, bn = schedule.read_knob(kernel, "bm", 0), schedule.read_knob(kernel, "bn", 0)
        layouts = (0, 1) if tensor_core_product(kernel) else (0,)
        return [
            Schedule({"fm": fm, "fn": fn, "mma": mma, "quads": quads})
            for fm, fn in legal_cells(bm, bn)
            for mma in layouts
            for quads in (0, 1)
            if quads == 0 or (not mma and tile.ThreadTileOp.quads_fit((bm // fm, bn // fn)))
        ]

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        if not schedule.has_knob(kernel, "bm"):
            return
        bm = schedule.read_knob(kernel, "bm", 0)
        bn = schedule.read_knob(kernel, "bn", 0)
        sixteen_bit, fp32 = sixteen_bit_product(kernel), fp32_product(kernel)
        can_mma = sixteen_bit or fp32  # `tensor_core_product`, from its two parts
        tensor_cores = sixteen_bit or (bool(self.tf32x3) and fp32)
        fm, fn, mma = self._choose(kernel, bm, bn, tensor_cores)
        grid = (bm // fm, bn // fn)
        quads = 0 if mma else schedule.read_knob(kernel, "quads", self.quads)
        if quads == -1:
            quads = int(tile.ThreadTileOp.quads_fit(grid))
        if quads and not tile.ThreadTileOp.quads_fit(grid):
            raise PassFailedException(
                f"tile.kernel @{kernel.sym_name.data}: quads need an even thread grid, "
                f"got {grid[0]}x{grid[1]}"
            )
        if thread_contraction(kernel, fm, fn, bool(mma), bool(quads)):
            schedule.write_knob(kernel, "fm", fm)
            schedule.write_knob(kernel, "fn", fn)
            if mma or can_mma:  # a decision only where MMAs can run
                schedule.write_knob(kernel, "mma", mma)
            if not mma and tile.ThreadTileOp.quads_fit(grid):  # only where quads can run
                schedule.write_knob(kernel, "quads", quads)
            schedule.write_knob(kernel, "threads", grid[0] * grid[1])

    def _choose(
        self, kernel: tile.KernelOp, bm: int, bn: int, tensor_cores: bool
    ) -> tuple[int, int, int]:
        """(fm, fn, mma): the kernel's knobs, else the options, else the heuristic."""
        guess_m, guess_n = default_cells(bm, bn, operand_bytes(kernel))
        fm = schedule.read_knob(kernel, "fm", self.fm or guess_m)
        fn = schedule.read_knob(kernel, "fn", self.fn or guess_n)
        mma = schedule.read_knob(kernel, "mma", self.mma)
        if mma == -1:  # the heuristic: MMA cells, on the default thread count if legal
            cells = None
            if tensor_cores and not (schedule.has_knob(kernel, "fm") or self.fm):
                cells = default_mma_cells(bm, bn, min(MMA_THREADS, bm // fm * (bn // fn)))
            mma = int(cells is not None)
            fm, fn = cells or (fm, fn)
        return fm, fn, mma
