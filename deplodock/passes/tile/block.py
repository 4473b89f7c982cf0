"""`tile-block`: each block of the grid computes one BM x BN tile of a contraction's output.

Trigger: an unscheduled contraction kernel (`contraction.find_contraction`: output loops
over M, N and batch axes around a reduce loop `acc += a * b`, M and N at least 16).

Rewrite: the grid gets `batch x ceil(M / BM) x ceil(N / BN)` blocks; a `tile.block_tile`
gives each block the origin `(m0, n0)` of its tile, walking the tiles in groups of `group`
tile rows so that blocks that run at the same time share rows of A and columns of B in L2.
Inside the block, two serial loops `mm < BM`, `nn < BN` sweep the tile (still run whole by
every thread: `tile-thread` maps them onto threads and registers next). The row and column
of a cell are clamped to the matrix for everything the cell *computes* (so a partial tile
never reads out of bounds) and a `tile.if` keeps its *stores* to the cells inside the matrix.
A reduce nest over several axes (a convolution's cin, kh, kw) becomes one K loop. Row
statistics (`contraction.py`) move into the cell with the other per-row ops, recomputed per
cell until `tile-shared-statistics` shares them.

    tile.for %i = %c0 to 128 {                  %m0, %n0 = tile.block_tile %b counts [2, 4]
      tile.for %j = %c0 to 256 {                            sizes [64, 64] group 8
        %acc = tile.for %k ... { a*b }   ==>    tile.for %mm = %c0 to 64 {
        tile.store ... [%i, %j]                   tile.for %nn = %c0 to 64 {
                                                    %m = arith.addi %m0, %mm ...

Knobs (`schedule`): `bm`, `bn` (tile extents) and `group` (raster). The default heuristic
(`default_block`) scores each tile of `DEFAULT_TILES` by its data reuse (`tile_reuse`: on
the FMA pipe that of the register cells the tile gets, so 128 x 64 with 8 x 8 cells counts
as fully as 128 x 128; on tensor cores the block's), the share of its area inside the matrix
and how evenly its blocks fill the SMs (`tile_score`), and takes the best (on a tie, one
keeping at least half the SMs busy, then the larger): large tiles for large outputs, smaller
ones when those leave SMs idle (modeled on H100, Qwen2.5-7B's fp32 gate_proj at 512 tokens:
128 x 128 in 5 rounds of blocks, 1543 us; 128 x 64 in 9 rounds of half the work, 1414 us).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.dialects.effects import is_pure
from deplodock.dialects.hardware import MAX_SHARED_BYTES
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.choices import Tunable
from deplodock.passes.tile.contraction import (
    Contraction,
    find_contraction,
    nested_product,
    sixteen_bit_product,
)
from deplodock.passes.tile.nests import body_ops, trip_count
from deplodock.passes.tile.thread import default_cells

#: Tile extents the pass accepts (and the tuner may choose from).
TILE_EXTENTS: tuple[int, ...] = (16, 32, 64, 96, 112, 128, 256)

#: Raster group sizes (tile rows walked together) the tuner may choose from.
GROUPS: tuple[int, ...] = (1, 4, 8, 16)

#: The tiles the default heuristic weighs (BM, BN), largest first.
DEFAULT_TILES: tuple[tuple[int, int], ...] = (
    (128, 128),
    (128, 112),
    (112, 128),
    (128, 96),
    (128, 64),
    (64, 128),
    (64, 64),
    (32, 64),
    (32, 32),
)

#: The larger tiles it also weighs for a product on tensor cores, which need more reuse of
#: each loaded element to outrun L2 (their 8 x 16 MMA cells on 256 threads fit the registers;
#: an FMA-pipe thread would need 8 x 16 scalar cells), where they keep at least half the SMs
#: busy: fewer of them would leave the work to `tile-split-k`, whose partial sums cost more
#: than the reuse saves (modeled on H100, bf16 q_proj of Qwen2.5-7B at 128 tokens: 14 tiles
#: of 128 x 256 in 8 splits, 42.7 us; 28 of 128 x 112 in 4 splits, 39.9 us).
TENSOR_CORE_TILES: tuple[tuple[int, int], ...] = ((256, 128), (128, 256))

#: Streaming multiprocessors the default heuristic fills (an H100 SXM5 has 132); a pass
#: option, so another target can say its own.
DEFAULT_SMS = 132


#: Multiply-adds per value read that 8 x 8 register cells reach (16 values, 64 multiply-adds):
#: the most `tile-thread`'s default gives a thread on the FMA pipe.
FULL_CELL_REUSE = 8 * 8 / (8 + 8)
#: Multiply-adds per element loaded from global memory of a 256 x 128 block tile, the
#: largest tensor-core tile.
FULL_BLOCK_REUSE = 256 * 128 / (256 + 128)


def tile_reuse(bm: int, bn: int, tensor_cores: bool = False) -> float:
    """The data reuse of a BM x BN tile relative to the best (1 at most).

    On the FMA pipe the shared-memory reads of the register cells bind first, so it is the
    reuse of the cells `tile-thread` gives the tile (`default_cells`): a 128 x 64 tile gets
    8 x 8 cells on 128 threads and counts as fully as 128 x 128. On tensor cores, about ten
    times faster, it is the block's own reuse of what it loads, full at 256 x 128."""
    if tensor_cores:
        return min(1.0, bm * bn / (bm + bn) / FULL_BLOCK_REUSE)
    fm, fn = default_cells(bm, bn)
    return min(1.0, fm * fn / (fm + fn) / FULL_CELL_REUSE)


def block_count(m: int, n: int, batch: int, bm: int, bn: int) -> int:
    """Blocks of a BM x BN tiling (partial tiles included)."""
    return batch * -(-m // bm) * -(-n // bn)


def tile_score(
    m: int, n: int, batch: int, bm: int, bn: int, sms: int, tensor_cores: bool = False
) -> float:
    """How well a BM x BN tiling should run, relative to an ideal large tile.

    Two factors: the *reuse* of a tile (`tile_reuse`), and the *balance* of the work over
    the SMs: the output area an SM should compute (`batch*m*n / sms`) over the area the
    busiest SM computes (whole tiles, partial tiles included).
    """
    reuse = tile_reuse(bm, bn, tensor_cores)
    busiest = -(-block_count(m, n, batch, bm, bn) // sms) * bm * bn
    balance = min(1.0, batch * m * n / sms / busiest)
    return reuse * balance


def default_block(
    m: int,
    n: int,
    batch: int,
    sms: int = DEFAULT_SMS,
    tensor_cores: bool = False,
    max_rows: int | None = None,
) -> tuple[int, int]:
    """The heuristic BM x BN: the best `tile_score` among `DEFAULT_TILES`. On a tie, a tile
    whose grid keeps at least half the SMs busy, then the first listed (the larger: a fused
    prologue is recomputed once per tile, so fewer tiles recompute it less often). With
    `max_rows` (`prologue_product_rows`: attention in one kernel), no taller tile than that,
    and none narrower than the output: a block of columns would compute every score again."""
    large = [
        (bm, bn)
        for bm, bn in TENSOR_CORE_TILES
        if min(m, n) >= max(bm, bn) and 2 * block_count(m, n, batch, bm, bn) >= sms
    ]
    tiles = (*large, *DEFAULT_TILES) if tensor_cores else DEFAULT_TILES
    candidates = [(bm, bn) for bm, bn in tiles if bm <= 2 * m and bn <= 2 * n]
    if max_rows is not None:  # and every column in one block: each block computes the scores
        candidates = [(bm, bn) for bm, bn in candidates if bm <= max_rows and bn >= n]
    if not candidates:
        return (32, 32)

    def rank(tile: tuple[int, int]) -> tuple[float, bool]:
        busy_half = 2 * block_count(m, n, batch, *tile) >= sms
        return tile_score(m, n, batch, *tile, sms, tensor_cores), busy_half

    return max(candidates, key=rank)


#: The most rows a block of attention in one kernel takes: each thread holds its cells of the
#: chunk's scores beside its P.V accumulators, and 128 rows leave too few blocks and too many
#: registers (modeled on H100, bf16 at 512 tokens: Qwen2.5-7B's SDPA 37.4 -> 33.3 us and
#: TinyLlama's written-out attention 61.6 -> 47.7 us with 64 rows).
MAX_PRODUCT_ROWS = 64


def prologue_product_rows(found: Contraction) -> int | None:
    """The most rows a block may take when its K loop computes its row operand by a dot
    product of its own (attention in one kernel: `P = softmax(q . k)` before `@ V`):
    `tile-prologue-product` stages the block's rows of that product's row operand (the
    queries) whole, which must leave half of a block's shared memory to the K and V
    chunks and the `P` slab (fp32 queries of head dim 128: 64 rows of 512 bytes)."""
    if (product := nested_product(found.reduce[-1])) is None:
        return None
    length, element = product
    return min(MAX_PRODUCT_ROWS, MAX_SHARED_BYTES // (2 * length * element))


def legal_blocks(found: Contraction) -> list[tuple[int, int]]:
    """The (BM, BN) pairs the tuner may try for this kernel."""
    return [
        (bm, bn)
        for bm in TILE_EXTENTS
        for bn in TILE_EXTENTS
        if bm <= 2 * max(found.m, 16) and bn <= 2 * max(found.n, 16)
    ]


def _flatten_reduce(found: Contraction, pool: ConstantPool) -> None:
    """A reduce nest over several axes becomes one loop over their product."""
    if len(found.reduce) == 1:
        return
    root = found.reduce[0]
    flat = schedule.flatten_into(found.reduce, pool.index(0), 1, pool, list(root.inits))
    flat.res[0].name_hint = root.res[0].name_hint
    root.res[0].replace_all_uses_with(flat.res[0])
    Rewriter.erase_op(root)
    found.reduce = [flat]


def _cell_loop(extent: int, name: str, pool: ConstantPool, point: InsertPoint) -> tile.ForOp:
    loop = tile.ForOp(pool.index(0), extent, 1, [])
    loop.induction_var.name_hint = name
    loop.body.block.add_op(tile.YieldOp())
    Rewriter.insert_op(loop, point)
    return loop


def _guard(build: schedule.IndexBuilder, pool: ConstantPool, checks: list[tuple[SSAValue, int]]):
    """`v0 < e0 and v1 < e1 ...` (None when nothing needs checking)."""
    cond: SSAValue | None = None
    for value, extent in checks:
        less = build.add(arith.CmpiOp(value, pool.index(extent), "slt"), "inside")
        cond = less if cond is None else build.add(arith.AndIOp(cond, less), "inside")
    return cond


def _clamped(
    build: schedule.IndexBuilder, pool: ConstantPool, value: SSAValue, extent: int, tile: int
) -> SSAValue:
    """`min(value, extent - 1)` when the tiles overhang the extent, else `value`."""
    if extent % tile == 0:
        return value
    return build.add(arith.MinSIOp(value, pool.index(extent - 1)), f"{value.name_hint}_c")


def block_contraction(found: Contraction, bm: int, bn: int, group: int) -> None:
    """Rewrites one contraction kernel onto BM x BN tiles (see the module docstring)."""
    kernel, threads = found.kernel, found.threads
    pool = ConstantPool.adopting(threads.body.block)
    _flatten_reduce(found, pool)
    m, n = found.m, found.n
    counts = [trip_count(loop) for loop in found.batch_axes] + [-(-m // bm), -(-n // bn)]
    sizes = [1] * len(found.batch_axes) + [bm, bn]
    origin = tile.BlockTileOp(kernel.grid.iv, counts, sizes, group)
    names = [f"z{k}" for k in range(len(found.batch_axes))] + ["m0", "n0"]
    for result, name in zip(origin.origins, names, strict=True):
        result.name_hint = name
    Rewriter.insert_op(origin, InsertPoint.before(threads))
    schedule.set_count(kernel.grid, _product(counts))

    root = found.free[0]
    rows = _cell_loop(bm, "mm", pool, InsertPoint.before(root))
    cols = _cell_loop(bn, "nn", pool, InsertPoint.at_start(rows.body.block))
    point = InsertPoint.before(cols.body.block.last_op)  # type: ignore[arg-type]
    build = schedule.IndexBuilder(point, pool)
    *batch_origins, m0, n0 = origin.origins
    row = build.add(arith.AddiOp(m0, rows.induction_var), "m")
    col = build.add(arith.AddiOp(n0, cols.induction_var), "n")
    build.delinearize(_clamped(build, pool, row, m, bm), found.m_axes)
    build.delinearize(_clamped(build, pool, col, n, bn), found.n_axes)
    for z, loop in zip(batch_origins, found.batch_axes, strict=True):
        build.delinearize(z, [loop])
    for outer in found.free[:-1]:
        schedule.move_ops([op for op in body_ops(outer) if op not in found.free], point)
    cell_ops = body_ops(found.free[-1])
    schedule.move_ops(cell_ops, point)
    stores = [op for op in cell_ops if not _is_pure(op)]
    cond = _guard(build, pool, [(v, e) for v, e, t in ((row, m, bm), (col, n, bn)) if e % t])
    if cond is not None and stores:
        guard = tile.IfOp(cond)
        Rewriter.insert_op(guard, point)
        schedule.move_ops(stores, InsertPoint.before(guard.body.block.last_op))  # type: ignore[arg-type]
    Rewriter.erase_op(root)
    schedule.drop_unused_constants(threads)


def _is_pure(op: Operation) -> bool:
    """What a cell computes without storing: loads, loops (its sums) and pure ops; the
    rest (its stores) goes under the guard."""
    return isinstance(op, tile.LoadOp | tile.ForOp) or is_pure(op)


def _product(values: list[int]) -> int:
    total = 1
    for value in values:
        total *= value
    return total


@dataclass(frozen=True)
class TileBlockPass(Tunable):
    """Contractions: one BM x BN output tile per block (see the module docstring).

    `bm`/`bn` 0 means "the heuristic's choice"; a kernel's `schedule` knobs win over both.
    """

    name = "tile-block"
    knobs = ("bm", "bn", "group")

    bm: int = 0
    bn: int = 0
    group: int = 8
    sms: int = DEFAULT_SMS

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        return find_contraction(kernel) is not None

    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        found = find_contraction(kernel)
        assert found is not None
        return [
            Schedule({"bm": bm, "bn": bn, "group": group})
            for bm, bn in legal_blocks(found)
            for group in GROUPS
        ]

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        found = find_contraction(kernel)
        if found is None:
            return
        guess_m, guess_n = default_block(
            found.m,
            found.n,
            found.batch,
            self.sms,
            sixteen_bit_product(kernel),
            prologue_product_rows(found),
        )
        bm = schedule.read_knob(kernel, "bm", self.bm or guess_m)
        bn = schedule.read_knob(kernel, "bn", self.bn or guess_n)
        group = schedule.read_knob(kernel, "group", self.group)
        for knob, value in (("bm", bm), ("bn", bn), ("group", group)):
            if value <= 0:
                raise PassFailedException(
                    f"tile.kernel @{kernel.sym_name.data}: {knob} must be positive, got {value}"
                )
        block_contraction(found, bm, bn, group)
        for knob, value in (("bm", bm), ("bn", bn), ("group", group)):
            schedule.write_knob(kernel, knob, value)
