"""`tile-causal-skip`: a block of causal attention's P.V stops at the diagonal.

Trigger: a staged contraction (`tile-stage` and the passes after it have run) whose K chunks
are copied into a slab by a copy that computes its value and masks it, `key <= query` (or
`<`), where the key moves with K and the query with the block's rows, and whose value is
provably 0 wherever the mask is false: the causal softmax's `exp(-inf - max) / sum` before
`@ V`. A chunk whose every key lies past every query of the block then adds 0 to every
accumulator. The check is `zero_when_masked`: it follows the value back through `select`,
`exp`, `subf`, `mulf`, `divf` and roundings, with every mask false, to a 0 or a `-inf` that
`exp` turns into 0; per-row values (the row max and sum) ride along unknown.

Rewrite: the block computes `kend`, the end of the last chunk that holds a key at or before
its last query (at most K), and the K loop runs only over `[0, kend)`. Its bound is a
constant, so the loop is shifted instead: `%j` runs from `K - kend` to K, and `%ko = %j -
(K - kend)` is the chunk's start. The pipeline's test for a next chunk (`%ko_next < K`) and
`tile-register-prefetch`'s clamp (`min(%ko_next, K - BK)`) take `kend` for K.

    tile.for %ko = %c0 to 512 step 32 ... {           %kend = min(512, ((%m0 + 127) / 32 + 1) * 32)
      %has_next = arith.cmpi slt, %ko_next, %c512     %skip = 512 - %kend
      ...                                     ==>     tile.for %j = %skip to 512 step 32 ... {
                                                        %ko = arith.subi %j, %skip
                                                        %has_next = arith.cmpi slt, %ko_next, %kend

With 128-row blocks over 512 keys the blocks run 4, 8, 12 and 16 of 16 chunks: 62.5 % of the
P.V work. Rows past the diagonal computed 0 times a value of V; skipping them also skips a
V that is infinite or NaN there, which PyTorch's fused attention kernels skip as well.

Knob `causal_skip` (0 or 1) on the kernel's `schedule`; default the `enable` option (true).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from xdsl.dialects import arith
from xdsl.dialects import math as math_dialect
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.dialects.hardware import is_shared
from deplodock.dialects.queries import computed_from, constant_index
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.choices import Tunable, grid
from deplodock.passes.tile.streaming_softmax import SCORES_ATTR

MARK = "causal_skip"


@dataclass(frozen=True)
class Offset:
    """An index known to be `base + [low, high]` (`base` None: a plain integer range)."""

    base: SSAValue | None
    low: int
    high: int


def offset_of(value: SSAValue) -> Offset | None:
    """What the index arithmetic of a copy says about `value`: a constant, a block's tile
    origin (a symbolic base), a loop or thread index (its range), and sums, constant
    multiples, quotients and remainders of those. None when it says nothing."""
    owner = value.owner
    if isinstance(owner, tile.BlockTileOp):
        return Offset(value, 0, 0)
    if isinstance(owner, tile.ThreadTileOp):  # a register cell: somewhere in the block tile
        return Offset(None, 0, owner.cell_count * owner.thread_grid[owner.axis] - 1)
    if isinstance(value, BlockArgument):
        parent = value.block.parent_op()
        if isinstance(parent, tile.ThreadsOp):
            return Offset(None, 0, parent.count - 1)
        if isinstance(parent, tile.ForOp) and value is parent.induction_var:
            start = offset_of(parent.lb)
            if start is None or start.base is not None or start.low < 0:
                return None
            return Offset(None, start.low, parent.upper - 1)
        return None
    if (constant := constant_index(value)) is not None:
        return Offset(None, constant, constant)
    if not isinstance(owner, arith.AddiOp | arith.MuliOp | arith.DivSIOp | arith.RemSIOp):
        return None
    lhs, rhs = offset_of(owner.lhs), offset_of(owner.rhs)
    if lhs is None or rhs is None:
        return None
    if isinstance(owner, arith.AddiOp):
        if lhs.base is not None and rhs.base is not None:
            return None
        return Offset(lhs.base or rhs.base, lhs.low + rhs.low, lhs.high + rhs.high)
    if lhs.base is not None or rhs.base is not None or rhs.low != rhs.high or lhs.low < 0:
        return None
    factor = rhs.low
    if isinstance(owner, arith.MuliOp):
        return Offset(None, lhs.low * factor, lhs.high * factor) if factor >= 0 else None
    if factor <= 0:
        return None
    if isinstance(owner, arith.DivSIOp):
        return Offset(None, lhs.low // factor, lhs.high // factor)
    if lhs.high < factor:
        return lhs
    return Offset(None, 0, factor - 1)


@dataclass(frozen=True)
class Mask:
    """`key <= query` (`strict`: `<`) with the keys at `key.low..key.high` past the chunk's
    start and the queries at `query.base + query.low..query.high`."""

    key: Offset
    query: Offset
    strict: bool


#: `cmpi` predicates that hold for keys up to a query, with the key on the left (and
#: whether strictly), and their mirror images with it on the right.
_KEY_FIRST = {"sle": False, "slt": True}
_QUERY_FIRST = {"sge": False, "sgt": True}


def key_bound(op: arith.CmpiOp) -> tuple[SSAValue, SSAValue, bool] | None:
    """`(key, query, strict)` when `op` is `key <= query` (`strict`: `<`), written either
    way round; None for any other comparison."""
    predicate = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
    if predicate in _KEY_FIRST:
        return op.lhs, op.rhs, _KEY_FIRST[predicate]
    if predicate in _QUERY_FIRST:
        return op.rhs, op.lhs, _QUERY_FIRST[predicate]
    return None


def mask_of(op: arith.CmpiOp) -> Mask | None:
    """The causal mask `op` is, when its key is an offset within the chunk and its query an
    offset from a block's origin."""
    if (bound := key_bound(op)) is None:
        return None
    key, query, strict = bound
    return _mask(key, query, strict)


def _mask(key: SSAValue, query: SSAValue, strict: bool) -> Mask | None:
    """The mask `key <= query` (`<`: `strict`) when the key is an offset within the chunk
    and the query an offset from a block's origin; else None."""
    key_offset, query_offset = offset_of(key), offset_of(_unclamped(query))
    if key_offset is None or query_offset is None:
        return None
    if key_offset.base is not None or key_offset.low < 0 or query_offset.base is None:
        return None
    return Mask(key_offset, query_offset, strict)


def _unclamped(query: SSAValue) -> SSAValue:
    """The row before a partial tile's clamp `min(m, M - 1)`: never below the clamped row,
    so its last value bounds the block's last query."""
    owner = query.owner
    if isinstance(owner, arith.MinSIOp) and constant_index(owner.rhs) is not None:
        return owner.lhs
    return query


class Known(Enum):
    """What a value is when every mask is false (`zero_when_masked`)."""

    ZERO = "0"
    NEG_INF = "-inf"
    FALSE = "false"
    ROW = "the same for the row"  # a value that does not move with the key


def _known(value: SSAValue, masks: dict[Operation, Mask], key_values: set[SSAValue]):
    owner = value.owner
    if owner in masks:
        return Known.FALSE
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, FloatAttr):
        number = owner.value.value.data
        return Known.ZERO if number == 0 else Known.NEG_INF if number == -math.inf else None
    if value not in key_values:
        return Known.ROW
    if not isinstance(owner, Operation):
        return None
    operands = [_known(v, masks, key_values) for v in owner.operands]
    if isinstance(owner, arith.SelectOp):
        condition, if_true, if_false = operands
        if condition is Known.FALSE:
            return if_false
        return if_true if if_true == if_false and if_true in (Known.ZERO, Known.NEG_INF) else None
    if isinstance(owner, math_dialect.ExpOp | math_dialect.Exp2Op):
        return Known.ZERO if operands[0] is Known.NEG_INF else None
    if isinstance(owner, arith.SubfOp):
        return Known.NEG_INF if operands == [Known.NEG_INF, Known.ROW] else None
    if isinstance(owner, arith.MulfOp | arith.DivfOp):
        return Known.ZERO if operands[0] is Known.ZERO and operands[1] is Known.ROW else None
    if isinstance(owner, arith.TruncFOp | arith.ExtFOp):
        return operands[0] if operands[0] in (Known.ZERO, Known.NEG_INF) else None
    return None


@dataclass
class ChunkCopy:
    """A copy of the first K chunk into a slab, as the scheduling passes left it (scalar,
    vector or asynchronous): its loop, its column (`%l % C`) and its stores."""

    loop: tile.ForOp
    col: arith.RemSIOp
    stores: list[tile.StoreOp | tile.StoreVectorOp]


def first_chunk_copies(threads: tile.ThreadsOp) -> list[ChunkCopy]:
    """The copies of the first chunk (`chunk = 0`, before the K loop): there the chunk's
    start is the constant 0, so a key's offset is its whole value."""
    found = []
    for loop in schedule.top_loops(threads):
        if loop.attributes.get("chunk") != IntegerAttr(0, 64):
            continue
        ops = list(loop.body.block.ops)
        iv = loop.induction_var
        col = next((o for o in ops if isinstance(o, arith.RemSIOp) and o.lhs is iv), None)
        stores = [
            o
            for o in ops
            if isinstance(o, tile.StoreOp | tile.StoreVectorOp) and is_shared(o.memref.type)
        ]
        if col is not None and stores:
            found.append(ChunkCopy(loop, col, stores))
    return found


def zero_when_masked(copy: ChunkCopy) -> list[Mask]:
    """The masks under which every value `copy` stores is 0 (empty: not provably 0).

    A value is followed back with every mask false; a value that does not move with the
    copy's column (a row max, a row sum, a scale) is the same for the whole row, and is
    allowed where it cannot turn the 0 into anything else in a row that still has a
    visible key: as what `-inf` is reduced by, or what 0 is multiplied or divided by."""
    masks = {
        op: mask
        for op in copy.loop.body.block.ops
        if isinstance(op, arith.CmpiOp) and (mask := mask_of(op)) is not None
    }
    if not masks:
        return []
    key_values = computed_from([copy.col.result], copy.loop.body.block.ops)
    values = [v for store in copy.stores for v in _stored(store)]
    if any(_known(v, masks, key_values) is not Known.ZERO for v in values):
        return []
    return list(masks.values())


def _stored(store: tile.StoreOp | tile.StoreVectorOp) -> list[SSAValue]:
    return [store.value] if isinstance(store, tile.StoreOp) else list(store.values)


def chunk_mask_of(op: arith.CmpiOp, ko: SSAValue) -> Mask | None:
    """The causal mask `op` is, when its key is the chunk's start `ko` plus an offset
    within the chunk (a register cell of the chunk's scores) and its query an offset from
    a block's origin."""
    if (bound := key_bound(op)) is None:
        return None
    key, query, strict = bound
    owner = key.owner
    if not isinstance(owner, arith.AddiOp) or ko not in (owner.lhs, owner.rhs):
        return None
    within = owner.rhs if owner.lhs is ko else owner.lhs
    return _mask(within, query, strict)


def scores_masks(loop: tile.ForOp) -> list[Mask]:
    """The masks under which every score a chunk stores for `tile-streaming-softmax` is
    `-inf` (empty: not provably): such a score adds nothing to the row's maximum, and its
    probability `exp(-inf - max)` is 0, so a chunk whose every score is masked changes
    neither the running statistics nor the accumulators."""
    ops = list(loop.body.block.ops)
    ko = loop.induction_var
    stores = [
        op
        for op in ops
        if isinstance(op, tile.StoreOp)
        and isinstance(alloc := op.memref.owner, tile.SharedAllocOp)
        and SCORES_ATTR in alloc.attributes
    ]
    masks = {
        op: mask
        for op in ops
        if isinstance(op, arith.CmpiOp) and (mask := chunk_mask_of(op, ko)) is not None
    }
    if not stores or not masks:
        return []
    key_values = computed_from([ko], ops)
    if any(_known(store.value, masks, key_values) is not Known.NEG_INF for store in stores):
        return []
    found = list(masks.values())
    return found if len({(m.query.base, m.query.high, m.strict) for m in found}) == 1 else []


def k_loop(threads: tile.ThreadsOp) -> tile.ForOp | None:
    """The chunked K loop of a staged contraction: the block's top-level loop that carries
    the accumulators around an inner reduction (`%ki`), starting at a constant."""
    for loop in schedule.top_loops(threads):
        inner = any(isinstance(op, tile.ForOp) and op.is_reduce for op in loop.body.walk())
        if loop.is_reduce and inner and isinstance(loop.lb.owner, arith.ConstantOp):
            return loop
    return None


def causal_masks(threads: tile.ThreadsOp) -> list[Mask]:
    """The masks of a first-chunk copy that stores 0 wherever they are false, when they
    compare against the same queries (the lanes of a vector copy compare their own keys)."""
    for copy in first_chunk_copies(threads):
        masks = zero_when_masked(copy)
        if masks and len({(m.query.base, m.query.high, m.strict) for m in masks}) == 1:
            return masks
    return []


def _chunk_end(
    build: schedule.IndexBuilder, pool: ConstantPool, masks: list[Mask], bound: int, chunk: int
) -> SSAValue:
    """`kend`: the end of the last chunk that holds a key some mask lets through for some
    query of the block, at most `bound` (module docstring). A chunk starting at `ko` has
    its first key at `ko + key.low`; the block's last query is `base + query.high`."""
    first = masks[0]
    assert first.query.base is not None
    reach = first.query.high - int(first.strict) - min(m.key.low for m in masks)
    last = build.addi(first.query.base, reach, "last_key") if reach else first.query.base
    before = build.add(arith.FloorDivSIOp(last, pool.index(chunk)), "last_key_chunk")
    chunks = build.addi(before, 1, "visible_chunks")
    end = build.muli(chunks, chunk, "visible_end")
    return build.add(arith.MinSIOp(end, pool.index(bound)), "kend")


def _retarget_bounds(loop: tile.ForOp, ko: SSAValue, kend: SSAValue, pool: ConstantPool) -> None:
    """`%ko_next < K` becomes `%ko_next < kend`, and `min(%ko_next, K - BK)` becomes
    `min(%ko_next, kend - BK)` (the pipeline's and the register prefetch's bounds)."""
    bound, chunk = loop.upper, loop.step_value
    last_start: SSAValue | None = None
    for op in loop.body.block.ops:
        if not any(v is ko or _from(v, ko) for v in op.operands):
            continue
        if isinstance(op, arith.CmpiOp) and constant_index(op.rhs) == bound:
            op.operands[1] = kend
        elif isinstance(op, arith.MinSIOp) and constant_index(op.rhs) == bound - chunk:
            if last_start is None:
                subtract = arith.SubiOp(kend, pool.index(chunk))
                subtract.result.name_hint = "last_chunk"
                Rewriter.insert_op(subtract, InsertPoint.after(kend.owner))  # type: ignore[arg-type]
                last_start = subtract.result
            op.operands[1] = last_start


def _from(value: SSAValue, source: SSAValue) -> bool:
    owner = value.owner
    return isinstance(owner, arith.AddiOp) and (owner.lhs is source or owner.rhs is source)


def skip_masked_chunks(threads: tile.ThreadsOp, loop: tile.ForOp, masks: list[Mask]) -> None:
    """Shifts the K loop to run `[0, kend)` only (module docstring)."""
    pool = ConstantPool.adopting(threads.body.block)
    build = schedule.IndexBuilder(InsertPoint.before(loop), pool)
    kend = _chunk_end(build, pool, masks, loop.upper, loop.step_value)
    skip = build.add(arith.SubiOp(pool.index(loop.upper), kend), "skip")
    name = loop.induction_var.name_hint
    shifted, ko = schedule.rebuild_loop(
        loop,
        skip,
        loop.upper,
        loop.step_value,
        lambda body, j: body.add(arith.SubiOp(j, skip), name),
        pool,
    )
    shifted.induction_var.name_hint = "j"
    _retarget_bounds(shifted, ko, kend, pool)


@dataclass(frozen=True)
class TileCausalSkipPass(Tunable):
    """Causal P.V: each block's K loop ends at its diagonal (module doc)."""

    name = "tile-causal-skip"
    knobs = (MARK,)

    #: The default where the schedule has no `causal_skip` (false: keep every chunk).
    enable: bool = True

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        return not schedule.has_knob(kernel, MARK) and _target(kernel) is not None

    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        return grid(causal_skip=(0, 1))

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        if (target := _target(kernel)) is None:
            return  # not causal, or already shifted (its K loop starts at %skip)
        on = schedule.read_knob(kernel, MARK, int(self.enable))
        if on:
            skip_masked_chunks(*target)
        schedule.write_knob(kernel, MARK, int(bool(on)))


def _target(kernel: tile.KernelOp) -> tuple[tile.ThreadsOp, tile.ForOp, list[Mask]] | None:
    """The block, its K loop and the causal masks of a kernel the pass applies to."""
    if (
        not schedule.is_tiled_contraction(kernel)
        or (threads := schedule.threads_of(kernel)) is None
    ):
        return None
    loop = k_loop(threads)
    masks = (causal_masks(threads) or scores_masks(loop)) if loop is not None else []
    return (threads, loop, masks) if loop is not None and masks else None
