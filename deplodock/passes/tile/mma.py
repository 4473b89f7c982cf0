"""`tile-mma`: a bf16, f16 or fp32 contraction multiplies on the tensor cores (`mma.sync`).

Trigger: a staged contraction whose threads own MMA fragment cells (`tile-thread` with
`mma = 1`: `tile.thread_tile ... mma`), and whose `ki` loop (one K chunk: from 0, step 1, BK
a multiple of the MMA's k) is exactly FM x FN fp32 accumulators `acc += extf(a_s[.., row
cell, .., ki]) * extf(b_s[.., col cell, .., ki])` over two shared slabs of bf16 (or f16),
or `acc += a_s[..] * b_s[..]` over two fp32 slabs. Anything else in the loop (a guard, a
fused computation) leaves the kernel on the FMA pipe.

Rewrite: `ki` steps by 16. Per step each thread loads, for each 16-row MMA tile it is part
of, its 8-element A fragment (the rows of its cells `2i`, `2i+1`; `k = ki + 2q + {0, 1}` and
`+ 8`, lane `l`, `q = l % 4`), for each 8-column tile its 4-element B fragment (column
`8j + g` of the warp tile, `g = l / 4`, the same `k`), and issues (FM/2) x (FN/2)
`tile.mma_sync`, each taking and giving back the four accumulators of cells `(2i|2i+1,
2j|2j+1)`. A slab whose rows run along K reads each k pair with one 32-bit
`tile.load_vector ... width 2`; one whose rows run along M or N reads the pair one element
at a time.

fp32 slabs (tf32x3): `ki` steps by 8, each step an m16n8k8 on tf32 values. A thread loads
its 4 A elements per row tile (rows of cells `2i`, `2i+1`, `k = ki + q` and `+ 4`) and 2 B
elements per column tile, splits each once into tf32 values `hi + lo` (`tile.split_tf32`),
and issues three MMAs per tile: `lo_a hi_b` and `hi_a lo_b` (marked `correction`), then
`hi_a hi_b`. The products come out as accurate as fp32 FMAs (`common/mma.split_tf32`).

Why: the FMA pipe of an H100 SM does 128 fp32 multiply-adds a clock; its tensor cores do an
m16n8k16 (2,048 multiply-adds) per clock at the dense bf16 peak. Kept on FMAs, a bf16
GEMM runs at a fraction of the fp32 peak (each element also pays a conversion); on tensor
cores the same staged tiles feed several times the math. tf32 runs at half the bf16 rate, so
three tf32 MMAs per product still outrun the FMA pipe: 2.5 times at the datasheet peaks,
about 1.5 times through `mma.sync` on an H100 (the rate `perf/devices.py` models).

    %0 = tile.for %ki = %c0 to 16 iter_args(%acc = ..) {
      %a = tile.load %a_s[%mm, %ki]
      %b = tile.load %b_s[%nn, %ki]
      %p = arith.mulf (extf %a), (extf %b)
      %s = arith.addf %acc, %p ...
        ==>
    %0 = tile.for %ki = %c0 to 16 step 16 iter_args(%acc = ..) {
      %kq = arith.addi %ki, %quad2
      %a, %a_1 = tile.load_vector %a_s[%mm, %kq] width 2     (4 pairs per A fragment)
      %b, %b_1 = tile.load_vector %b_s[%bcol_0, %kq] width 2  (2 pairs per B fragment)
      %d:4 = tile.mma_sync a(%a, %a_1, ..) b(%b, ..) c(%acc, ..) : bf16
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, MemRefType
from xdsl.ir import SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import tile
from deplodock.dialects.common.mma import MMA_M16N8K8_TF32, MMA_M16N8K16, MmaShape
from deplodock.dialects.hardware import WARP_SIZE, is_shared
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.contraction import (
    accumulated_product,
    defined_in,
)
from deplodock.passes.tile.kernel_pass import TileKernelPass
from deplodock.passes.tile.nests import body_ops, is_serial, start_of

#: One MMA operand: a 16-bit fragment, or a tf32 one as its (hi, lo) fragments.
Fragment = Sequence[SSAValue] | tuple[Sequence[SSAValue], Sequence[SSAValue]]

#: The ops a `ki` loop may hold to be rewritten (besides its terminator).
_PRODUCT_OPS = (tile.LoadOp, arith.ExtFOp, arith.MulfOp, arith.AddfOp)


@dataclass(frozen=True)
class Product:
    """One accumulator of the `ki` loop: `acc += a * b` for one row cell and column cell."""

    acc: int
    row: int
    col: int
    a: tile.LoadOp
    b: tile.LoadOp


@dataclass(frozen=True)
class MmaLoop:
    """A `ki` loop `tile-mma` can rewrite, with the thread tiles its cells come from."""

    loop: tile.ForOp
    rows: tile.ThreadTileOp
    cols: tile.ThreadTileOp
    products: tuple[Product, ...]

    @property
    def shape(self) -> MmaShape:
        return shape_of(self.products[0].a)

    def product(self, row: int, col: int) -> Product:
        return next(p for p in self.products if p.row == row and p.col == col)

    def load(self, side: str, cell: int) -> tile.LoadOp:
        """A load of the A slab at row cell `cell` (side "a") or of B at a column cell."""
        found = (p for p in self.products if (p.row if side == "a" else p.col) == cell)
        product = next(found)
        return product.a if side == "a" else product.b


def _is_mma_slab(load: tile.LoadOp) -> bool:
    """A shared slab of bf16, f16 or f32 (read as tf32 pairs `hi + lo`) elements."""
    memref = load.memref.type
    return (
        is_shared(memref)
        and isinstance(memref, MemRefType)
        and isinstance(memref.element_type, BFloat16Type | Float16Type | Float32Type)
    )


def shape_of(load: tile.LoadOp) -> MmaShape:
    """The MMA a slab's elements go in: m16n8k8 on tf32 for f32, m16n8k16 for 16-bit ones."""
    element = load.memref.type.element_type  # type: ignore[union-attr]
    return MMA_M16N8K8_TF32 if isinstance(element, Float32Type) else MMA_M16N8K16


def _cell_of(load: tile.LoadOp, tile_op: tile.ThreadTileOp, loop: tile.ForOp) -> int | None:
    """The cell of `tile_op` the load reads at, if the load reads one slab element per
    (cell, ki): exactly one index is a cell position, one is `ki`, the rest loop-invariant."""
    if not _is_mma_slab(load):
        return None
    cells = [k for k, index in enumerate(load.indices) if index in tile_op.positions]
    chunk = [k for k, index in enumerate(load.indices) if index == loop.induction_var]
    if len(cells) != 1 or len(chunk) != 1:
        return None
    others = [index for k, index in enumerate(load.indices) if k not in (*cells, *chunk)]
    if any(defined_in(index, loop.body.block) for index in others):
        return None
    return tile_op.positions.index(load.indices[cells[0]])


def _product_of(
    acc: SSAValue, update: SSAValue, rows: tile.ThreadTileOp, cols: tile.ThreadTileOp
) -> tuple[int, int, tile.LoadOp, tile.LoadOp] | None:
    """(row, col, a, b) of `update = acc + extf(a) * extf(b)` (16-bit slabs) or `acc + a * b`
    (f32 slabs), else None."""
    mul = accumulated_product(acc, update)
    if mul is None:
        return None
    sources = [operand.owner for operand in mul.operands]
    if all(isinstance(s, arith.ExtFOp) for s in sources):  # 16-bit operands, widened
        loads = [s.input.owner for s in sources]  # type: ignore[union-attr]
    else:  # fp32 operands (tf32x3)
        loads = sources
    if not all(isinstance(load, tile.LoadOp) for load in loads):
        return None
    loop = update.owner.parent_op()  # the addf's loop
    assert isinstance(loop, tile.ForOp)
    for a, b in (loads, loads[::-1]):
        row, col = _cell_of(a, rows, loop), _cell_of(b, cols, loop)
        if (
            row is not None
            and col is not None
            and a.memref.type.element_type
            == (  # type: ignore[union-attr]
                b.memref.type.element_type  # type: ignore[union-attr]
            )
        ):
            return row, col, a, b  # type: ignore[return-value]
    return None


def find_mma_loop(kernel: tile.KernelOp) -> MmaLoop | None:
    """The kernel's `ki` loop if `tile-mma` applies to it (module docstring), else None."""
    found = find_mma_loops(kernel)
    return found[0] if found else None


def find_mma_loops(kernel: tile.KernelOp) -> list[MmaLoop]:
    """Every loop of the kernel `tile-mma` applies to: the `ki` loop over the block's
    thread tiles, and a product with thread tiles of its own (attention's scores, which
    `tile-prologue-product` computes into the `P` slab of each K chunk)."""
    threads = schedule.threads_of(kernel)
    if threads is None:
        return []
    found = []
    for loop in threads.walk():
        # A lane-strided sweep (`tile-shared-statistics` over a row too long to keep in
        # registers) carries values too, but it is a row statistic, never the K loop.
        if isinstance(loop, tile.ForOp) and loop.is_reduce and loop.iter_args and is_serial(loop):
            tiles = _mma_tiles_read(loop)
            if tiles is not None and (match := _match_loop(loop, *tiles)) is not None:
                found.append(match)
    return found


def _mma_tiles_read(loop: tile.ForOp) -> tuple[tile.ThreadTileOp, tile.ThreadTileOp] | None:
    """The row and column `tile.thread_tile ... mma` whose cells the loop's loads index."""
    tiles = {
        index.owner
        for op in body_ops(loop)
        if isinstance(op, tile.LoadOp)
        for index in op.indices
        if isinstance(index.owner, tile.ThreadTileOp) and index.owner.layout.data == "mma"
    }
    rows = [t for t in tiles if t.axis == 0]
    cols = [t for t in tiles if t.axis == 1]
    if len(rows) != 1 or len(cols) != 1:
        return None
    return rows[0], cols[0]


def _match_loop(
    loop: tile.ForOp, rows: tile.ThreadTileOp, cols: tile.ThreadTileOp
) -> MmaLoop | None:
    if start_of(loop) != 0 or loop.step_value != 1:
        return None
    if not all(isinstance(op, _PRODUCT_OPS) for op in body_ops(loop)):
        return None
    yielded = loop.body.block.last_op
    assert isinstance(yielded, tile.YieldOp)
    products = []
    for k, (acc, update) in enumerate(zip(loop.iter_args, yielded.arguments, strict=True)):
        found = _product_of(acc, update, rows, cols)
        if found is None:
            return None
        products.append(Product(k, *found))
    cells = {(p.row, p.col) for p in products}
    if len(cells) != len(products) or len(cells) != rows.cell_count * cols.cell_count:
        return None
    if not products or loop.upper % shape_of(products[0].a).k:
        return None
    return MmaLoop(loop, rows, cols, tuple(products))


@dataclass
class _Fragments:
    """Builds one K step's fragment loads at the end of the new loop's body, from the old
    loop's loads as templates (same slab, same invariant indices)."""

    build: schedule.IndexBuilder
    #: The old loop's `ki`: which index of a template is K.
    chunk: SSAValue
    #: Each template load's cell index (a `tile.thread_tile` position).
    cells: dict[tile.LoadOp, int]

    def pair(self, template: tile.LoadOp, k: SSAValue, cell: SSAValue | None) -> list[SSAValue]:
        """Elements `k`, `k + 1` of the slab `template` reads, at `cell` instead of its cell
        index when given: one 32-bit vector load when K is the slab's contiguous axis."""
        indices = list(template.indices)
        chunk = indices.index(self.chunk)
        if chunk != len(indices) - 1:  # K is not contiguous: one element at a time
            return [self.single(template, self.build.addi(k, offset), cell) for offset in (0, 1)]
        if cell is not None:
            indices[self.cells[template]] = cell
        indices[chunk] = k
        vector = tile.LoadVectorOp(template.memref, indices, 2)
        self.build.add(vector)
        return list(vector.res)

    def single(self, template: tile.LoadOp, k: SSAValue, cell: SSAValue | None) -> SSAValue:
        """Element `k` of the slab `template` reads (at `cell` when given): what a tf32
        fragment holds per register (its k are 4 apart), and half of a pair `pair` cannot
        read as one vector."""
        indices = list(template.indices)
        indices[indices.index(self.chunk)] = k
        if cell is not None:
            indices[self.cells[template]] = cell
        load = tile.LoadOp(template.memref, indices)
        self.build.add(load)
        return load.res

    def split(self, value: SSAValue) -> tuple[SSAValue, SSAValue]:
        """`value = hi + lo` in two tf32 values (`common/mma.split_tf32`)."""
        split = tile.SplitTf32Op(value)
        self.build.add(split)
        split.hi.name_hint, split.lo.name_hint = "hi", "lo"
        return split.hi, split.lo


def rewrite(found: MmaLoop, pool: ConstantPool) -> tile.ForOp:
    """Replaces the `ki` loop by its MMA form (module docstring); returns the new loop."""
    loop, rows, cols = found.loop, found.rows, found.cols
    shape = found.shape
    lane_point = InsertPoint.after(cols if rows.is_before_in_block(cols) else rows)
    lanes = schedule.IndexBuilder(lane_point, pool)
    lane = lanes.add(arith.RemSIOp(rows.thread, pool.index(WARP_SIZE)), "lane")
    group = lanes.add(arith.DivSIOp(lane, pool.index(4)), "group")
    quad = lanes.add(arith.RemSIOp(lane, pool.index(4)), "quad")
    quad_pair = lanes.muli(quad, 2, "quad2")
    b_columns = [
        lanes.addi(lanes.add(arith.SubiOp(cols.positions[2 * j], quad_pair)), group, f"bcol_{j}")
        for j in range(cols.cell_count // 2)
    ]
    new = tile.ForOp(loop.lb, loop.upper, shape.k, list(loop.inits))
    new.induction_var.name_hint = loop.induction_var.name_hint
    Rewriter.insert_op(new, InsertPoint.before(loop))
    build = schedule.IndexBuilder(InsertPoint.at_end(new.body.block), pool)
    cells = {p.a: _cell_index(p.a, rows) for p in found.products}
    cells |= {p.b: _cell_index(p.b, cols) for p in found.products}
    fragments = _Fragments(build, loop.induction_var, cells)
    if shape.packed:  # k pairs at 2q and 2q + 8
        k_low = build.addi(new.induction_var, quad_pair, "kq")
        k_high = build.addi(k_low, 8, "kq8")
    else:  # single elements at q and q + 4
        k_low = build.addi(new.induction_var, quad, "kq")
        k_high = build.addi(k_low, 4, "kq4")
    a_frags = [_a_fragment(fragments, found, i, k_low, k_high) for i in range(rows.cell_count // 2)]
    b_frags = [
        _b_fragment(fragments, found, j, b_columns[j], k_low, k_high)
        for j in range(cols.cell_count // 2)
    ]
    if not shape.packed:  # every fragment element as hi + lo, once, shared by its MMAs
        a_frags = [_split(fragments, a) for a in a_frags]  # type: ignore[misc]
        b_frags = [_split(fragments, b) for b in b_frags]  # type: ignore[misc]
    results: dict[int, SSAValue] = {}
    for i, a in enumerate(a_frags):
        for j, b in enumerate(b_frags):
            cells = [(2 * i, 2 * j), (2 * i, 2 * j + 1), (2 * i + 1, 2 * j), (2 * i + 1, 2 * j + 1)]
            accs = [found.product(r, c).acc for r, c in cells]
            d = _products(build, shape, a, b, [new.iter_args[acc] for acc in accs])
            for acc, value in zip(accs, d, strict=True):
                value.name_hint = f"d_{i}{j}"
                results[acc] = value
    new.body.block.add_op(tile.YieldOp(*(results[k] for k in range(len(loop.iter_args)))))
    for old, result in zip(loop.res, new.res, strict=True):
        result.name_hint = old.name_hint
        old.replace_all_uses_with(result)
    Rewriter.erase_op(loop, safe_erase=False)
    return new


def _split(fragments: _Fragments, values: Sequence[SSAValue]) -> tuple[list[SSAValue], ...]:
    """A tf32 fragment as (hi, lo) fragments."""
    pairs = [fragments.split(v) for v in values]
    return [hi for hi, _ in pairs], [lo for _, lo in pairs]


def _products(
    build: schedule.IndexBuilder, shape: MmaShape, a: Fragment, b: Fragment, acc: list[SSAValue]
) -> list[SSAValue]:
    """The MMAs adding one A tile times one B tile to the four accumulators: one for 16-bit
    fragments; for tf32 (`a`, `b` as (hi, lo)) the two corrections `lo_a hi_b` and
    `hi_a lo_b`, small terms first, then `hi_a hi_b`."""
    if shape.packed:
        return _mma(build, a, b, acc)  # type: ignore[arg-type]
    (a_hi, a_lo), (b_hi, b_lo) = a, b
    acc = _mma(build, a_lo, b_hi, acc, correction=True)
    acc = _mma(build, a_hi, b_lo, acc, correction=True)
    return _mma(build, a_hi, b_hi, acc)


def _mma(
    build: schedule.IndexBuilder,
    a: Sequence[SSAValue],
    b: Sequence[SSAValue],
    acc: Sequence[SSAValue],
    correction: bool = False,
) -> list[SSAValue]:
    op = tile.MmaSyncOp(a, b, acc, correction)
    build.add(op)
    return list(op.d)


def _cell_index(load: tile.LoadOp, tile_op: tile.ThreadTileOp) -> int:
    return next(k for k, v in enumerate(load.indices) if v in tile_op.positions)


def _a_fragment(
    fragments: _Fragments, found: MmaLoop, i: int, k_low: SSAValue, k_high: SSAValue
) -> Sequence[SSAValue]:
    """a0..a7 of MMA row tile `i`: rows of cells 2i (g) and 2i+1 (g + 8), k pairs at
    `k_low` then `k_high` (`MmaShape.a_position`); for tf32 a0..a3, single elements."""
    top, bottom = found.load("a", 2 * i), found.load("a", 2 * i + 1)
    if not found.shape.packed:
        return [
            fragments.single(top, k_low, None),
            fragments.single(bottom, k_low, None),
            fragments.single(top, k_high, None),
            fragments.single(bottom, k_high, None),
        ]
    return [
        *fragments.pair(top, k_low, None),
        *fragments.pair(bottom, k_low, None),
        *fragments.pair(top, k_high, None),
        *fragments.pair(bottom, k_high, None),
    ]


def _b_fragment(
    fragments: _Fragments,
    found: MmaLoop,
    j: int,
    column: SSAValue,
    k_low: SSAValue,
    k_high: SSAValue,
) -> Sequence[SSAValue]:
    """b0..b3 of MMA column tile `j`: column `8j + g` of the warp tile, k pairs at `k_low`
    then `k_high` (`MmaShape.b_position`); for tf32 b0, b1, single elements."""
    template = found.load("b", 2 * j)
    if not found.shape.packed:
        return [
            fragments.single(template, k_low, column),
            fragments.single(template, k_high, column),
        ]
    return [*fragments.pair(template, k_low, column), *fragments.pair(template, k_high, column)]


def mma_contraction(kernel: tile.KernelOp) -> bool:
    """Rewrites the kernel's `ki` loop onto tensor cores; False when it does not apply."""
    found = find_mma_loops(kernel)
    if not found:
        return False
    threads = schedule.threads_of(kernel)
    assert threads is not None
    pool = ConstantPool.adopting(threads.body.block)
    for loop in found:
        rewrite(loop, pool)
    return True


@dataclass(frozen=True)
class TileMmaPass(TileKernelPass):
    """bf16/f16/fp32 contractions laid out as MMA fragments: `ki` on tensor cores (module
    doc; fp32 as tf32x3).

    The decision is `tile-thread`'s `mma` knob; this pass carries it out where the loop is
    the plain product it can rewrite."""

    name = "tile-mma"

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        mma_contraction(kernel)
