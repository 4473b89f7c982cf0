"""The cooperative copy loops of a staged kernel, and when they may move a vector at a time.

`tile-stage` fills each shared slab with a loop strided over the block's threads:

    tile.for %l = %t to E*BK step T {
      %row = arith.divsi %l, %cBK        %col = arith.remsi %l, %cBK
      %v = tile.load %x[..., U + %col]            (or a fused prologue of several loads)
      tile.store %v, %x_s[..., %row, %col]
    }

Two passes widen such a loop to `width` elements per iteration: `tile-async-copy` (a plain
copy becomes one 16-byte `cp.async`) and `tile-vectorize` (a prologue copy, which computes
and so cannot be a `cp.async`, loads and stores vectors). Both need the same fact, decided
here: every global load that depends on the column, and the slab store, read `width`
consecutive elements starting at a multiple of `width`, i.e. their last index is `%col + U`
with `U` a multiple of `width`, `%col` appears nowhere else but in comparisons, and the slab
row, the source row and `BK` are multiples of `width`. A load that does not depend on the
column (a per-row value of a prologue: the row max and sum of a softmax before `@ V`) is the
same for the `width` elements: it stays one scalar load, used by each of them (`row_loads`).
A comparison of the column (a causal mask's `key <= query`) differs per element: each element
compares its own index (`lane_compares`). `widen` then rewrites the loop's count and the
column to step by `width`.

A copy that stores `select(%r < N, load[..., min(%r, N - 1), ...], 0)`, a zero pad past the
end of its source folded into the copy (attention's padded keys), counts as a plain copy
whose `predicate` is `%r < N`: `tile-async-copy` makes it a predicated `cp.async`, which
lands zeros where the predicate is false.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, MemRefType, StringAttr
from xdsl.ir import BlockArgument, Operation, SSAValue, Use
from xdsl.rewriter import InsertPoint

from deplodock.dialects import tile
from deplodock.dialects.queries import constant_index, indices_reach
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule


def staged_slabs(threads: tile.ThreadsOp) -> set[SSAValue]:
    """The shared slabs `tile-stage` allocated in the block."""
    return {
        op.result
        for op in threads.body.ops
        if isinstance(op, tile.SharedAllocOp) and isinstance(op.attributes.get("stage"), StringAttr)
    }


@dataclass
class CopyLoop:
    """A cooperative copy loop of a stage: global loads (and, for a prologue, arithmetic)
    feeding one store into a slab."""

    loop: tile.ForOp
    store: tile.StoreOp
    row: arith.DivSIOp
    col: arith.RemSIOp

    @property
    def loads(self) -> list[tile.LoadOp]:
        """What the copy reads: global loads, and the row statistics that
        `tile-shared-statistics` keeps in shared memory (slabs are only written here)."""
        return [op for op in self.loop.body.block.ops if isinstance(op, tile.LoadOp)]

    @property
    def direct_load(self) -> tile.LoadOp | None:
        """The load whose value is stored unchanged (a plain copy), or stored where a
        condition of the row holds and zero elsewhere (a masked copy, `predicate`); else
        None."""
        owner = self.store.value.owner
        if isinstance(owner, tile.LoadOp):
            return owner
        masked = self._masked
        return masked[1] if masked is not None else None

    @property
    def predicate(self) -> SSAValue | None:
        """A masked copy's condition (where it copies; zeros land elsewhere), else None."""
        masked = self._masked
        return masked[0] if masked is not None else None

    @cached_property
    def _masked(self) -> tuple[SSAValue, tile.LoadOp] | None:
        """A zero-padded copy, as a fused pad reads its source (`tensor_to_loop/pad.py`):
        `select(%r < N, load[..., min(%r, N - 1), ...], 0)` stored, `%r` not the column (a
        vector of the row copies or zero-fills as one: padded keys past the last real one,
        `torch_to_tensor/attention.py`): (the condition, the load)."""
        select = self.store.value.owner
        if not isinstance(select, arith.SelectOp) or len(list(select.result.uses)) != 1:
            return None
        load = select.lhs.owner
        if not isinstance(load, tile.LoadOp) or len(list(load.res.uses)) != 1:
            return None
        zero = select.rhs.owner
        if not isinstance(zero, arith.ConstantOp) or not isinstance(zero.value, FloatAttr):
            return None
        if zero.value.value.data != 0 or indices_reach([select.cond], self.col.result):
            return None
        if not _pads_past_the_end(select.cond, load):
            return None
        return select.cond, load


#: `arith.cmpi slt`'s predicate.
_LESS_THAN = arith.CMPI_COMPARISON_OPERATIONS.index("slt")


def _pads_past_the_end(cond: SSAValue, load: tile.LoadOp) -> bool:
    """Whether `cond` is `%r < N` and an index of `load` is `min(%r, N - 1)`: the clamped
    read of a pad past the end of its source, which the condition zeroes."""
    compare = cond.owner
    if not isinstance(compare, arith.CmpiOp) or compare.predicate.value.data != _LESS_THAN:
        return False
    end = constant_index(compare.rhs)
    if end is None:
        return False
    return any(
        isinstance(clamp := index.owner, arith.MinSIOp)
        and clamp.lhs is compare.lhs
        and constant_index(clamp.rhs) == end - 1
        for index in load.indices
    )


def copy_loops(threads: tile.ThreadsOp) -> list[CopyLoop]:
    """Every copy loop in the block (prologue, steady state and prefetch copies)."""
    slabs = staged_slabs(threads)
    found: list[CopyLoop] = []
    for op in threads.walk():
        if not isinstance(op, tile.ForOp):
            continue
        stores = [s for s in op.body.block.ops if isinstance(s, tile.StoreOp)]
        if len(stores) != 1 or stores[0].memref not in slabs:
            continue
        iv = op.induction_var
        row = next(
            (o for o in op.body.block.ops if isinstance(o, arith.DivSIOp) and o.lhs == iv), None
        )
        col = next(
            (o for o in op.body.block.ops if isinstance(o, arith.RemSIOp) and o.lhs == iv), None
        )
        if row is not None and col is not None:
            found.append(CopyLoop(op, stores[0], row, col))
    return found


def multiple_of(value: SSAValue, width: int) -> bool:
    """Whether `value` is provably a multiple of `width` for every thread and iteration."""
    if (constant := constant_index(value)) is not None:
        return constant % width == 0
    if isinstance(value, BlockArgument):
        owner = value.block.parent_op()
        if isinstance(owner, tile.ForOp) and value.index == 0:
            return owner.step_value % width == 0 and multiple_of(owner.lb, width)
        return False
    op = value.owner
    if isinstance(op, tile.BlockTileOp):
        return op.tile_sizes[op.results.index(value)] % width == 0
    if isinstance(op, arith.AddiOp):
        return multiple_of(op.lhs, width) and multiple_of(op.rhs, width)
    if isinstance(op, arith.MuliOp):
        return multiple_of(op.lhs, width) or multiple_of(op.rhs, width)
    return False


def _column_plus_aligned(value: SSAValue, col: SSAValue, width: int) -> bool:
    """Whether `value` is `col + U` (a chain of additions), `U` a multiple of `width`."""
    if value is col:
        return True
    op = value.owner
    if not isinstance(op, arith.AddiOp):
        return False
    for inner, other in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
        if _column_plus_aligned(inner, col, width) and multiple_of(other, width):
            return True
    return False


def _column_uses(column: SSAValue) -> Iterator[Use]:
    """Every use of the column and of the additions computed from it (through which it
    reaches an address or a comparison); the additions' own uses follow theirs."""
    work = [column]
    while work:
        for use in work.pop().uses:
            if isinstance(use.operation, arith.AddiOp):
                work.append(use.operation.result)
            yield use


def _column_only_offsets(copy: CopyLoop) -> bool:
    """Every use of the column is an addition that ends in a last index (of a load or of
    the slab store) or in a comparison (`lane_compares`): replacing it by `col * width` then
    shifts exactly those addresses, and each element's comparison gets its own index."""
    for use in _column_uses(copy.col.result):
        user: Operation = use.operation
        if isinstance(user, tile.LoadOp | tile.StoreOp):
            last = len(user.operands) - 1
            if use.index != last or (isinstance(user, tile.StoreOp) and user is not copy.store):
                return False
        elif not isinstance(user, arith.AddiOp | arith.CmpiOp):
            return False
    return True


def lane_compares(column: SSAValue) -> dict[arith.CmpiOp, set[SSAValue]]:
    """The comparisons of a widened copy that read its column (`column`, the first element's
    column, or an addition chain from it): a causal mask's `key <= query`. Element `k` of the
    vector compares that index plus `k`, so each comparison maps to the operands to offset."""
    compares: dict[arith.CmpiOp, set[SSAValue]] = {}
    for use in _column_uses(column):
        if isinstance(use.operation, arith.CmpiOp):
            compares.setdefault(use.operation, set()).add(use.operation.operands[use.index])
    return compares


def row_loads(copy: CopyLoop) -> list[tile.LoadOp]:
    """The copy's global loads whose address does not depend on the column (module doc)."""
    return [load for load in copy.loads if not indices_reach(load.indices, copy.col.result)]


def vector_width(copy: CopyLoop, width: int) -> int:
    """`width` when every access of the copy moves `width` aligned consecutive elements
    (module docstring), else 1."""
    inner = constant_index(copy.col.rhs)
    slab = copy.store.memref.type
    assert isinstance(slab, MemRefType)
    if width <= 1 or inner is None or inner % width or copy.loop.upper % width:
        return 1
    if slab.get_shape()[-1] % width or copy.store.indices[-1] is not copy.col.result:
        return 1
    per_row = row_loads(copy)
    if len(per_row) == len(copy.loads) or not _column_only_offsets(copy):
        return 1
    for load in copy.loads:
        if load in per_row:
            continue
        source = load.memref.type
        assert isinstance(source, MemRefType)
        if source.get_shape()[-1] % width:
            return 1
        if not _column_plus_aligned(load.indices[-1], copy.col.result, width):
            return 1
    return width


def widen(copy: CopyLoop, width: int, pool: ConstantPool) -> SSAValue:
    """Makes the loop run `1/width` as many iterations, its column stepping by `width`
    (`%col4 = (%l % (BK / width)) * width`): each iteration starts a vector. Returns the
    new column (the vector's first element)."""
    inner = constant_index(copy.col.rhs)
    assert inner is not None
    copy.loop.ub = IntegerAttr(copy.loop.upper // width, 64)
    copy.row.operands[1] = pool.index(inner // width)
    copy.col.operands[1] = pool.index(inner // width)
    build = schedule.IndexBuilder(InsertPoint.after(copy.col), pool)
    scaled = build.add(arith.MuliOp(copy.col.result, pool.index(width)), f"col{width}")
    for use in list(copy.col.result.uses):
        if use.operation is not scaled.owner:
            use.operation.operands[use.index] = scaled
    return scaled
