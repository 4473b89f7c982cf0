"""`tile-prologue-product`: a slab copy that computes dot products does so as a register tile.

Trigger: a staged contraction (`tile-stage` has run) with a copy loop, strided over the
block's threads, whose element is computed from a dot product: a reduce loop `acc += a * b`
where `a` follows the slab's row position and `b` its column in the chunk. This is
attention in one kernel: `loop-fusion{attention-scores}` puts the score `q . k` inside the
softmax's prologue of `P @ V`, and `tile-stage` copies `P = exp(q . k * scale - max) / sum`
into the `a` slab of each K chunk, one element per copy iteration, each with its own
dot product over the head dimension.

Rewrite: the copy's `BM x BK` elements become a register tile: two `tile.thread_tile` ops
give each thread `FM x FN` of them (the layout of `mma.sync`'s accumulators when the kernel
runs on tensor cores, `tile-thread`'s otherwise), the dot product becomes one loop carrying
the `FM x FN` sums (each step loads `FM` values of one operand and `FN` of the other for
`FM x FN` multiply-adds, where the copy loaded two per multiply-add), and the rest of the
element (scale, mask, `exp`, the store into the slab) is replicated per cell, as
`tile-thread` replicates a cell body.

    tile.for %l = %t to 4096 step 256 {       %r:8 = tile.thread_tile %t dim 0 of [16, 16] cells 8
      %row = arith.divsi %l, %c64             %c:2 = tile.thread_tile %t dim 1 of [16, 16] cells 2
      %col = arith.remsi %l, %c64       ==>   %s:16 = tile.for %e = %c0 to 128 iter_args(...) {
      %s = tile.for %e ... { q[row] * k[col] }  8 loads of q, 2 of k, 16 mulf + addf }
      ... exp(%s - max[row]) ...              16 x (... exp(%s_ij - max[r_i]) ...)
      tile.store %p, %a_s[%col, %row] }       16 x tile.store %p_ij, %a_s[%c_j, %r_i]

Knob `prologue_product` (0 or 1) on the kernel's `schedule`; default 1 where it applies.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.ir import SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.dialects.effects import erase_dead
from deplodock.dialects.hardware import is_shared
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.choices import Tunable, grid
from deplodock.passes.tile.contraction import accumulated_product, block_slice
from deplodock.passes.tile.nests import body_ops
from deplodock.passes.tile.stage import build_stage, find_prologue_stages, find_stages
from deplodock.passes.tile.thread import BOTH, CellTiles, mma_grid


@dataclass
class ProductCopy:
    """A slab copy whose element is computed from a dot product (module docstring)."""

    copy: tile.ForOp
    #: The copy's slab row position (`l / inner` or `l % inner`) and chunk column.
    position: SSAValue
    column: SSAValue
    #: Their extents: the block's rows (BM) and the chunk (BK).
    rows: int
    columns: int
    #: The chunked K loop the copy runs in.
    ko: tile.ForOp


def _index_ops(copy: tile.ForOp) -> tuple[arith.DivSIOp, arith.RemSIOp] | None:
    """The `l / inner` and `l % inner` that split the copy's linear index."""
    lin = copy.induction_var
    divs = [op for op in body_ops(copy) if isinstance(op, arith.DivSIOp) and op.lhs is lin]
    rems = [op for op in body_ops(copy) if isinstance(op, arith.RemSIOp) and op.lhs is lin]
    if len(divs) != 1 or len(rems) != 1:
        return None
    return divs[0], rems[0]


def _constant(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp):
        return owner.value.value.data  # type: ignore[union-attr]
    return None


def _dot_loop(copy: tile.ForOp) -> tile.ForOp | None:
    """The copy's one reduce loop carrying `acc + a * b`, if that is what it holds."""
    loops = [op for op in body_ops(copy) if isinstance(op, tile.ForOp)]
    if len(loops) != 1 or not loops[0].is_reduce or len(loops[0].iter_args) != 1:
        return None
    loop = loops[0]
    yielded = loop.body.block.last_op
    assert isinstance(yielded, tile.YieldOp)
    if accumulated_product(loop.iter_args[0], yielded.arguments[0]) is None:
        return None
    return loop


def _moves_with_chunk(value: SSAValue, ko: SSAValue) -> bool:
    """Whether `value` is added to the chunk's start `ko` (the copy's column in K)."""
    return any(
        isinstance(use.operation, arith.AddiOp) and ko in use.operation.operands
        for use in value.uses
    )


def find_product_copy(copy: tile.ForOp, ko: SSAValue, count: int) -> ProductCopy | None:
    """`copy` as a `ProductCopy`: strided over the block's `count` threads, storing one
    element of a shared slab computed from a dot product, or None."""
    if copy.iter_args or copy.step_value != count or _dot_loop(copy) is None:
        return None
    stores = [op for op in body_ops(copy) if isinstance(op, tile.StoreOp)]
    if len(stores) != 1 or not is_shared(stores[0].memref.type):
        return None
    if (split := _index_ops(copy)) is None:
        return None
    outer, inner = split
    inner_extent = _constant(inner.rhs)
    if inner_extent is None or _constant(outer.rhs) != inner_extent or copy.upper % inner_extent:
        return None
    extents = {outer.result: copy.upper // inner_extent, inner.result: inner_extent}
    columns = [v for v in extents if _moves_with_chunk(v, ko)]
    if len(columns) != 1:
        return None
    (column,) = columns
    (position,) = [v for v in extents if v is not column]
    ko_loop = copy.parent_op()
    assert isinstance(ko_loop, tile.ForOp)
    return ProductCopy(copy, position, column, extents[position], extents[column], ko_loop)


def product_copies(kernel: tile.KernelOp) -> list[ProductCopy]:
    """The product copies of the kernel's chunked K loop."""
    threads = schedule.threads_of(kernel)
    if threads is None:
        return []
    found = []
    for ko in schedule.top_loops(threads):
        if not ko.is_reduce:
            continue
        for op in body_ops(ko):
            if isinstance(op, tile.ForOp):
                copy = find_product_copy(op, ko.induction_var, threads.count)
                if copy is not None:
                    found.append(copy)
    return found


def copy_cells(rows: int, columns: int, threads: int, mma: bool) -> tuple[int, int] | None:
    """(FM, FN) for the copy's tile: `mma.sync`'s layout when the kernel has MMA cells (so
    the product can go to the tensor cores), else the squarest grid of whole cells."""
    if mma:
        return mma_grid(rows, columns, threads)
    best: tuple[int, int] | None = None
    for thread_rows in range(1, threads + 1):
        if threads % thread_rows or rows % thread_rows:
            continue
        thread_cols = threads // thread_rows
        if columns % thread_cols:
            continue
        cells = (rows // thread_rows, columns // thread_cols)
        if best is None or abs(cells[0] - cells[1]) < abs(best[0] - best[1]):
            best = cells
    return best


def tile_product_copy(found: ProductCopy, threads: tile.ThreadsOp, mma: bool) -> bool:
    """Rewrites one product copy as a register tile (module docstring). A chunk too small
    for whole MMA fragments on every thread of the block (32 x 16 on 256 threads) keeps
    the FMA pipe's layout."""
    cells = copy_cells(found.rows, found.columns, threads.count, mma)
    if cells is None and mma:
        mma, cells = False, copy_cells(found.rows, found.columns, threads.count, False)
    if cells is None:
        return False
    fm, fn = cells
    thread_grid = (found.rows // fm, found.columns // fn)
    layouts = ("mma", "mma") if mma else ("blocked", "interleaved")
    point = InsertPoint.before(found.copy)
    tiles = CellTiles(threads.iv, thread_grid, (fm, fn), layouts, "rows", ("pr", "pc"))
    rep = tiles.insert(point, found.position, found.column)
    split = {found.position.owner, found.column.owner}
    product: tile.ForOp | None = None
    for op in body_ops(found.copy):
        if op in split:
            continue
        if isinstance(op, tile.ForOp) and op.is_reduce and rep.op_axes(op) == BOTH:
            product = rep.interchange(op, point)
        else:
            rep.replicate([op], point)
    Rewriter.erase_op(found.copy, safe_erase=False)
    if product is not None:
        _stage_product(product, found.ko, threads)
    return True


def _stage_product(product: tile.ForOp, ko: tile.ForOp, threads: tile.ThreadsOp) -> None:
    """The product's operands through shared memory: each row's (and each chunk column's)
    vector read once per block, as `tile-stage` stages a contraction's operands, over the
    whole reduced length. An operand that does not move with the chunk (attention's
    queries) is copied once, before the K loop."""
    pool = ConstantPool.adopting(threads.body.block)
    built = False
    # as `tile-stage` does: a computed operand (RoPE's rotation of q and k) as its value, in
    # one slab, then the plain loads
    for find in (find_prologue_stages, find_stages):
        for stage in find(product, threads):
            template = stage.template
            ops = [*block_slice(template.root.operands, threads), template.root]
            moves = any(ko.induction_var in op.operands for op in ops)
            point = InsertPoint.before(product) if moves else InsertPoint.before(ko)
            build_stage(stage, ko, product, threads, pool, point)
            built = True
        erase_dead(list(product.body.block.ops))
    if built:
        Rewriter.insert_op(tile.BarrierOp(), InsertPoint.before(product))


def tile_prologue_products(kernel: tile.KernelOp) -> bool:
    threads = schedule.threads_of(kernel)
    copies = product_copies(kernel)
    if threads is None or not copies:
        return False
    mma = schedule.read_knob(kernel, "mma", 0) == 1
    done = [tile_product_copy(found, threads, mma) for found in copies]
    schedule.drop_unused_constants(threads)
    return any(done)


@dataclass(frozen=True)
class TilePrologueProductPass(Tunable):
    """Slab copies computing dot products: as register tiles (see the module docstring)."""

    name = "tile-prologue-product"
    knobs = ("prologue_product",)

    #: 0 keeps each element's dot product in the copy loop (to compare).
    enable: bool = True

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        return bool(product_copies(kernel)) and not schedule.has_knob(kernel, "prologue_product")

    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        return grid(prologue_product=[0, 1])

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        if not product_copies(kernel):
            return
        chosen = schedule.read_knob(kernel, "prologue_product", int(self.enable))
        if chosen == 1 and not tile_prologue_products(kernel):
            chosen = 0
        schedule.write_knob(kernel, "prologue_product", chosen)
