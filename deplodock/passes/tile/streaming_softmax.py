"""`tile-streaming-softmax`: the softmax before `@ V` keeps running statistics per K chunk.

Trigger: attention in one kernel after `tile-prologue-product`: each K chunk's `P` slab is
computed from the chunk's scores `y` (a register tile) as `exp(y - max) / sum`, where `max`
and `sum` are the row statistics that `tile-shared-statistics` computed before the K loop,
in two sweeps over every key that each compute every score again (a dot product per key).

Rewrite (the online softmax of FlashAttention): the statistics sweeps go. Each K chunk
stores its scores to a shared `scores_s`, and a *row pass* (`G` threads per row, combining
with `tile.combine ... width G`) takes the chunk's row maximum, the running maximum
`m' = max(m, chunk max)`, writes `P = exp(y - m')` (the slab's formula with `m'` for the
maximum and 1 for the sum), and updates the running sum `l' = l * alpha + sum(P)`, where
`alpha = exp(m - m')` rescales what earlier chunks added. Before the chunk's `P @ V`, each
accumulator is multiplied by its row's `alpha`; after the last chunk, divided by `l` (0 where
every key of the row was masked, as the safe softmax gives). Each score is then computed once
(on tensor cores, by `tile-mma`), not three times (twice on the FMA pipe).

    %max = ...sweep...; %sum = ...sweep...        online_s[0|1, row] = -inf | 0
    tile.for %ko ... {                    ==>     tile.for %ko ... {
      %s:16 = <scores>                              %s:16 = <scores>
      P[..] = exp(s - max) / sum                    scores_s[..] = s;  barrier
      ...                                           row pass: m', P = exp(s - m'), l', alpha
      acc = acc + P @ V }                           acc = acc * alpha[row] + P @ V }
                                                  out = acc / l[row]

Knob `streaming_softmax` (0 or 1) on the kernel's `schedule`; default 1 where it applies
(the K loop has no cleanup loop: the length is a whole number of chunks).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects import math as math_dialect
from xdsl.dialects.builtin import Float32Type, FloatAttr, MemRefType, UnitAttr
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.dialects.effects import erase_dead
from deplodock.dialects.hardware import WARP_SIZE, shared_memref
from deplodock.dialects.queries import def_chain
from deplodock.dialects.reduce_kind import ReduceKind
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.choices import Tunable, grid
from deplodock.passes.tile.nests import body_ops
from deplodock.passes.tile.shared_statistics import STATISTICS_ATTR

#: The attribute marking the chunk's scores in shared memory (`tile-causal-skip` reads
#: their causal mask there).
SCORES_ATTR = "scores"

#: Rows of the running statistics buffer: maximum, sum, and the chunk's rescale factor.
MAX_ROW, SUM_ROW, ALPHA_ROW = 0, 1, 2


@dataclass
class Streaming:
    """What the rewrite needs of one kernel (module docstring)."""

    threads: tile.ThreadsOp
    ko: tile.ForOp
    ki: tile.ForOp
    statistics: tile.SharedAllocOp
    #: The `P` slab and its stores, one per score cell, with each cell's score `y`.
    slab: tile.SharedAllocOp
    stores: list[tile.StoreOp]
    scores: list[SSAValue]
    #: Which index of the slab is the row (the other is the chunk column).
    row_index: int
    maxima: set[SSAValue]
    sums: set[SSAValue]

    @property
    def rows(self) -> int:
        return self.slab_shape[self.row_index]

    @property
    def columns(self) -> int:
        return self.slab_shape[1 - self.row_index]

    @property
    def slab_shape(self) -> tuple[int, ...]:
        memref = self.slab.result.type
        assert isinstance(memref, MemRefType)
        return tuple(memref.get_shape())


def _statistics_alloc(threads: tile.ThreadsOp) -> tile.SharedAllocOp | None:
    found = [
        op
        for op in threads.body.block.ops
        if isinstance(op, tile.SharedAllocOp) and STATISTICS_ATTR in op.attributes
    ]
    return found[0] if len(found) == 1 else None


def _classify(loads: Sequence[tile.LoadOp]) -> tuple[set[SSAValue], set[SSAValue]] | None:
    """The statistics loads that are a maximum (`y - max`) and a sum (`e / sum`)."""
    maxima: set[SSAValue] = set()
    sums: set[SSAValue] = set()
    for load in loads:
        users = [use.operation for use in load.res.uses]
        if any(isinstance(u, arith.SubfOp) and u.rhs is load.res for u in users):
            maxima.add(load.res)
        elif any(isinstance(u, arith.DivfOp) and u.rhs is load.res for u in users):
            sums.add(load.res)
        else:
            return None
    return maxima, sums


def _score_of(store: tile.StoreOp, maxima: set[SSAValue]) -> SSAValue | None:
    """The `y` of `y - max` the stored probability is computed from."""
    shifts = {
        value.owner
        for value in def_chain(store.value)
        if isinstance(value.owner, arith.SubfOp) and value.owner.rhs in maxima
    }
    if len(shifts) != 1:
        return None
    (shift,) = shifts
    assert isinstance(shift, arith.SubfOp)
    return shift.lhs


def find_streaming(kernel: tile.KernelOp) -> Streaming | None:
    """The kernel's structure if the rewrite applies to it (module docstring), else None."""
    threads = schedule.threads_of(kernel)
    if threads is None or (statistics := _statistics_alloc(threads)) is None:
        return None
    if statistics.result.type.get_shape()[0] != 2:  # type: ignore[union-attr]
        return None
    reduces = [op for op in schedule.top_loops(threads) if op.is_reduce]
    if len(reduces) != 1:
        return None  # a cleanup loop after the chunks reads the statistics too
    ko = reduces[0]
    inner = [op for op in body_ops(ko) if isinstance(op, tile.ForOp) and op.is_reduce]
    ki = inner[-1] if inner else None
    if ki is None or list(ki.inits) != list(ko.iter_args):
        return None
    loads = [
        op for op in body_ops(ko) if isinstance(op, tile.LoadOp) and op.memref is statistics.result
    ]
    if any(op.memref is statistics.result for op in ki.walk() if isinstance(op, tile.LoadOp)):
        return None
    classified = _classify(loads)
    if classified is None or not loads:
        return None
    maxima, sums = classified
    stores = [
        op
        for op in body_ops(ko)
        if isinstance(op, tile.StoreOp)
        and isinstance(op.memref.owner, tile.SharedAllocOp)
        and any(v in maxima for v in def_chain(op.value))
    ]
    if not stores or len({s.memref for s in stores}) != 1:
        return None
    slab = stores[0].memref.owner
    assert isinstance(slab, tile.SharedAllocOp)
    if len(slab.result.type.get_shape()) != 2:  # type: ignore[union-attr]
        return None
    scores = [_score_of(store, maxima) for store in stores]
    if any(score is None for score in scores):
        return None
    row_index = _row_index(stores[0], maxima)
    if row_index is None:
        return None
    found = Streaming(
        threads,
        ko,
        ki,
        statistics,
        slab,
        stores,
        scores,
        row_index,
        maxima,
        sums,  # type: ignore[arg-type]
    )
    if _template(found) is None or _row_group(found) is None:
        return None
    return found


def _row_index(store: tile.StoreOp, maxima: set[SSAValue]) -> int | None:
    """Which index of the slab store is the row: the one the row's maximum is read at."""
    rows = {
        value.owner.indices[1]  # type: ignore[union-attr]
        for value in def_chain(store.value)
        if value in maxima
    }
    positions = [k for k, index in enumerate(store.indices) if index in rows]
    return positions[0] if len(positions) == 1 else None


def _template(found: Streaming) -> list[Operation] | None:
    """The ops that compute the first cell's stored value from its score and statistics:
    what the row pass computes again for each element, with the running maximum for the
    maximum and 1 for the sum. None if they read anything else the cell computes."""
    store = found.stores[0]
    seeds = {found.scores[0], *found.maxima, *found.sums}
    chain = set(def_chain(store.value))
    ops = [op for op in body_ops(found.ko) if any(r in chain for r in op.results)]
    tainted = set(seeds)
    template = []
    for op in ops:
        if any(v in tainted for v in op.operands):
            template.append(op)
            tainted.update(op.results)
    if store.value not in tainted:
        return None
    for op in template:
        for value in op.operands:
            if value in tainted or value.owner is None:
                continue
            if isinstance(value.owner, Operation) and value.owner.parent_op() is found.ko:
                if not isinstance(value.owner, arith.ConstantOp):
                    return None
    return template


def _row_group(found: Streaming) -> int | None:
    """Threads per row of the row pass: a power of two, at most a warp, with the block's
    threads a whole number of row groups and the chunk a whole number of steps."""
    count, rows, columns = found.threads.count, found.rows, found.columns
    group = 1
    while group * 2 <= min(WARP_SIZE, max(1, count // rows)) and columns % (group * 2) == 0:
        group *= 2
    per_round = count // group
    if rows % per_round and per_round % rows:
        return None
    return group


def _f32(pool: ConstantPool, value: float) -> SSAValue:
    return pool.get(FloatAttr(value, Float32Type()))


def stream_softmax(found: Streaming) -> None:
    """The rewrite of the module docstring."""
    threads, ko = found.threads, found.ko
    pool = ConstantPool.adopting(threads.body.block)
    template = _template(found)
    assert template is not None
    group = _row_group(found)
    assert group is not None
    online = tile.SharedAllocOp(shared_memref(Float32Type(), [2, 3, found.rows]), "online_s")
    scores = tile.SharedAllocOp(shared_memref(Float32Type(), list(found.slab_shape)), "scores_s")
    scores.attributes[SCORES_ATTR] = UnitAttr()
    sums = tile.SharedAllocOp(shared_memref(Float32Type(), [found.rows]), "row_sum_s")
    Rewriter.insert_op([online, scores, sums], InsertPoint.after(found.statistics))
    _initialise(online, sums, found, pool)
    for store, score in zip(found.stores, found.scores, strict=True):
        Rewriter.insert_op(
            tile.StoreOp(score, scores.result, list(store.indices)), InsertPoint.before(store)
        )
        Rewriter.erase_op(store)
    last = _last_store(found.ko, scores)
    barrier = tile.BarrierOp()
    Rewriter.insert_op(barrier, InsertPoint.after(last))
    parity = _parities(found, pool)
    point = InsertPoint.after(barrier)
    _row_pass(found, template, online, scores, sums, group, pool, point, parity)
    _rescale(found, online, pool, parity[1])
    _normalise(found, sums, pool)
    erase_dead(list(ko.body.block.ops))
    _erase_sweeps(threads, found.statistics)


def _parities(found: Streaming, pool: ConstantPool) -> tuple[SSAValue, SSAValue]:
    """The chunk's slot of the running statistics (read) and the next chunk's (written):
    alternating, so that no element is read and written between two barriers."""
    build = schedule.IndexBuilder(InsertPoint.at_start(found.ko.body.block), pool)
    chunk = build.add(arith.DivSIOp(found.ko.induction_var, pool.index(found.ko.step_value)))
    read = build.add(arith.RemSIOp(chunk, pool.index(2)), "parity")
    written = build.add(arith.SubiOp(pool.index(1), read), "next_parity")
    return read, written


def _last_store(ko: tile.ForOp, scores: tile.SharedAllocOp) -> tile.StoreOp:
    stores = [
        op for op in body_ops(ko) if isinstance(op, tile.StoreOp) and op.memref is scores.result
    ]
    return stores[-1]


def _initialise(
    online: tile.SharedAllocOp, sums: tile.SharedAllocOp, found: Streaming, pool: ConstantPool
) -> None:
    """The running maximum -inf and sum 0 for every row, before the K loop (the barrier
    after the chunk's first copy publishes them); the final sum 0 too, for a block whose
    K loop runs no chunk."""
    loop = tile.ForOp(found.threads.iv, found.rows, found.threads.count, [])
    loop.induction_var.name_hint = "r"
    zero, row = pool.index(0), loop.induction_var
    body = [
        tile.StoreOp(_f32(pool, -math.inf), online.result, [zero, pool.index(MAX_ROW), row]),
        tile.StoreOp(_f32(pool, 0.0), online.result, [zero, pool.index(SUM_ROW), row]),
        tile.StoreOp(_f32(pool, 0.0), sums.result, [row]),
        tile.YieldOp(),
    ]
    loop.body.block.add_ops(body)
    Rewriter.insert_op(loop, InsertPoint.before(found.ko))


def _slab_indices(found: Streaming, row: SSAValue, column: SSAValue) -> list[SSAValue]:
    return [row, column] if found.row_index == 0 else [column, row]


def _row_pass(
    found: Streaming,
    template: list[Operation],
    online: tile.SharedAllocOp,
    scores: tile.SharedAllocOp,
    sums: tile.SharedAllocOp,
    group: int,
    pool: ConstantPool,
    point: InsertPoint,
    parity: tuple[SSAValue, SSAValue],
) -> None:
    """Per row of the chunk: its maximum, the running statistics and `P` (module doc)."""
    count = found.threads.count
    per_round = count // group
    rounds = max(1, found.rows // per_round)
    outer = tile.ForOp(pool.index(0), rounds, 1, [])
    outer.induction_var.name_hint = "rb"
    outer.body.block.add_op(tile.YieldOp())
    Rewriter.insert_op(outer, point)
    build = schedule.IndexBuilder(InsertPoint.before(outer.body.block.last_op), pool)  # type: ignore[arg-type]
    t = found.threads.iv
    lane = build.add(arith.RemSIOp(t, pool.index(group)), "row_lane")
    local = build.add(arith.DivSIOp(t, pool.index(group)), "row_local")
    row = build.addi(build.muli(outer.induction_var, per_round), local, "row")
    inside = None
    if per_round > found.rows:  # more threads than rows: the extra groups idle
        inside = build.add(arith.CmpiOp(row, pool.index(found.rows), "slt"), "row_inside")
        row = build.add(arith.MinSIOp(row, pool.index(found.rows - 1)), "row_c")
    ninf, zero, one = _f32(pool, -math.inf), _f32(pool, 0.0), _f32(pool, 1.0)
    # the chunk's maximum
    peak = _sweep(build, lane, group, found.columns, ninf)
    scan = schedule.IndexBuilder(InsertPoint.at_end(peak.body.block), pool)
    y = scan.add(tile.LoadOp(scores.result, _slab_indices(found, row, peak.induction_var)), "y")
    _finish_sweep(peak, scan.add(arith.MaximumfOp(peak.iter_args[0], y)))
    chunk_max = _combine(build, ReduceKind.MAX, peak.res[0], group, "chunk_max")
    read, written = parity
    m_old = build.add(tile.LoadOp(online.result, [read, pool.index(MAX_ROW), row]), "m_old")
    l_old = build.add(tile.LoadOp(online.result, [read, pool.index(SUM_ROW), row]), "l_old")
    m_new = build.add(arith.MaximumfOp(m_old, chunk_max), "m_new")
    # P and its row sum
    total = _sweep(build, lane, group, found.columns, zero)
    inner = schedule.IndexBuilder(InsertPoint.at_end(total.body.block), pool)
    y2 = inner.add(tile.LoadOp(scores.result, _slab_indices(found, row, total.induction_var)), "y")
    mapping: dict[SSAValue, SSAValue] = {found.scores[0]: y2}
    mapping |= {m: m_new for m in found.maxima} | {s: one for s in found.sums}
    for op in template:
        clone = op.clone(value_mapper=mapping)
        inner.add(clone)
        for old, new in zip(op.results, clone.results, strict=True):
            mapping[old] = new
    value = mapping[found.stores[0].value]
    unrounded = value.owner.input if isinstance(value.owner, arith.TruncFOp) else value  # type: ignore[union-attr]
    p_store = tile.StoreOp(value, found.slab.result, _slab_indices(found, row, total.induction_var))
    if inside is not None:
        guard = tile.IfOp(inside)
        Rewriter.insert_op(p_store, InsertPoint.at_start(guard.body.block))
        Rewriter.insert_op(guard, inner.point)
    else:
        Rewriter.insert_op(p_store, inner.point)
    _finish_sweep(total, inner.add(arith.AddfOp(total.iter_args[0], unrounded)))
    chunk_sum = _combine(build, ReduceKind.ADD, total.res[0], group, "chunk_sum")
    # the running statistics
    fresh = build.add(arith.CmpfOp(m_old, ninf, "oeq"), "fresh")
    shift = build.add(math_dialect.ExpOp(build.add(arith.SubfOp(m_old, m_new))), "shift")
    alpha = build.add(arith.SelectOp(fresh, zero, shift), "alpha")
    l_new = build.add(arith.AddfOp(build.add(arith.MulfOp(l_old, alpha)), chunk_sum), "l_new")
    lead = build.add(arith.CmpiOp(lane, pool.index(0), "eq"), "row_lead")
    if inside is not None:
        lead = build.add(arith.AndIOp(lead, inside), "row_lead")
    writes = tile.IfOp(lead)
    for slot, value in ((MAX_ROW, m_new), (SUM_ROW, l_new), (ALPHA_ROW, alpha)):
        store = tile.StoreOp(value, online.result, [written, pool.index(slot), row])
        Rewriter.insert_op(store, InsertPoint.before(writes.body.block.last_op))  # type: ignore[arg-type]
    final = tile.StoreOp(l_new, sums.result, [row])
    Rewriter.insert_op(final, InsertPoint.before(writes.body.block.last_op))  # type: ignore[arg-type]
    Rewriter.insert_op(writes, build.point)


def _sweep(
    build: schedule.IndexBuilder, lane: SSAValue, group: int, columns: int, init: SSAValue
) -> tile.ForOp:
    """A loop over the chunk's columns strided over the row's threads."""
    loop = tile.ForOp(lane, columns, group, [init])
    loop.induction_var.name_hint = "c"
    build.add(loop)
    return loop


def _finish_sweep(loop: tile.ForOp, value: SSAValue) -> None:
    loop.body.block.add_op(tile.YieldOp(value))


def _combine(
    build: schedule.IndexBuilder, kind: ReduceKind, value: SSAValue, group: int, name: str
) -> SSAValue:
    if group == 1:
        return value
    return build.add(tile.CombineOp(kind, value, group), name)


def _cell_rows(found: Streaming) -> list[SSAValue]:
    """Per accumulator of the `ki` loop, the block row its product reads of the `P` slab."""
    yielded = found.ki.body.block.last_op
    assert isinstance(yielded, tile.YieldOp)
    rows = []
    for update in yielded.arguments:
        loads = [
            v.owner
            for v in def_chain(update)
            if isinstance(v.owner, tile.LoadOp) and v.owner.memref is found.slab.result
        ]
        if len(loads) != 1:
            raise AssertionError("tile-streaming-softmax: a product reads the P slab once")
        rows.append(loads[0].indices[found.row_index])
    return rows


def _rescale(
    found: Streaming, online: tile.SharedAllocOp, pool: ConstantPool, written: SSAValue
) -> None:
    """Each accumulator times its row's `alpha`, before the chunk's `P @ V`."""
    build = schedule.IndexBuilder(InsertPoint.before(found.ki), pool)
    alphas: dict[SSAValue, SSAValue] = {}
    for k, row in enumerate(_cell_rows(found)):
        if row not in alphas:
            load = tile.LoadOp(online.result, [written, pool.index(ALPHA_ROW), row])
            alphas[row] = build.add(load, "alpha")
        scaled = build.add(arith.MulfOp(found.ki.inits[k], alphas[row]), "rescaled")
        found.ki.operands[1 + k] = scaled


def _normalise(found: Streaming, sums: tile.SharedAllocOp, pool: ConstantPool) -> None:
    """After the last chunk, each accumulator over its row's sum (0 over an empty row),
    which every chunk's row pass also leaves in `row_sum_s` (however many chunks ran:
    `tile-causal-skip` ends a block's K loop at its diagonal)."""
    barrier = tile.BarrierOp()  # orders the reads after the writes when no chunk ran
    Rewriter.insert_op(barrier, InsertPoint.after(found.ko))
    build = schedule.IndexBuilder(InsertPoint.after(barrier), pool)
    zero = _f32(pool, 0.0)
    per_row: dict[SSAValue, tuple[SSAValue, SSAValue]] = {}
    for k, row in enumerate(_cell_rows(found)):
        if row not in per_row:
            total = build.add(tile.LoadOp(sums.result, [row]), "l")
            per_row[row] = (total, build.add(arith.CmpfOp(total, zero, "oeq"), "empty"))
        total, empty = per_row[row]
        result = found.ko.res[k]
        uses = [use for use in result.uses]
        quotient = build.add(arith.DivfOp(result, total))
        normalised = build.add(arith.SelectOp(empty, zero, quotient), result.name_hint)
        for use in uses:
            use.operation.operands[use.index] = normalised


def _erase_sweeps(threads: tile.ThreadsOp, statistics: tile.SharedAllocOp) -> None:
    """The statistics sweeps (every top-level op that writes the old statistics) go."""
    for op in list(threads.body.block.ops):
        if op is statistics:
            continue
        writes = any(
            isinstance(inner, tile.StoreOp) and inner.memref is statistics.result
            for inner in op.walk()
        )
        if writes:
            after = op.next_op
            Rewriter.erase_op(op, safe_erase=False)
            if isinstance(after, tile.BarrierOp):  # it published the statistics
                Rewriter.erase_op(after)
    erase_dead(list(threads.body.block.ops))
    if not statistics.result.uses:
        Rewriter.erase_op(statistics)


@dataclass(frozen=True)
class TileStreamingSoftmaxPass(Tunable):
    """Attention's softmax as running statistics per K chunk (see the module docstring)."""

    name = "tile-streaming-softmax"
    knobs = ("streaming_softmax",)

    #: 0 keeps the statistics sweeps before the K loop (to compare).
    enable: bool = True

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        return find_streaming(kernel) is not None and not schedule.has_knob(
            kernel, "streaming_softmax"
        )

    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        return grid(streaming_softmax=[0, 1])

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        found = find_streaming(kernel)
        if found is None:
            return
        chosen = schedule.read_knob(kernel, "streaming_softmax", int(self.enable))
        if chosen == 1:
            stream_softmax(found)
        schedule.write_knob(kernel, "streaming_softmax", chosen)
