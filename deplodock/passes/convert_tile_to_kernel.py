"""`convert-tile-to-kernel`: materialize a tile schedule as hardware primitives.

A `tile.kernel` becomes a `kernel.func` whose launch configuration is the `tile.grid` extent
(blocks) and the `tile.threads` extent (threads per block). The grid and threads regions are
inlined: their induction variables become `kernel.block_id` and `kernel.thread_id`. Most
per-thread ops have a kernel twin with the same operands, properties and regions, and map one
to one through one table (`ONE_TO_ONE`): `tile.for/yield/if/load/return/barrier/shared_alloc`,
the asynchronous copies, vector accesses and tensor-core MMAs
(`tile.copy_async/async_commit/async_wait/load_vector/store_vector/mma_sync/split_tf32` ->
`kernel.cp_async/cp_async_commit/cp_async_wait/load_vector/store_vector/mma_sync/split_tf32`).
A swizzled shared array's accesses first get the XOR of their column (`tile.Swizzle`). The
rest become what they mean:

- `tile.combine <kind> %v` becomes a warp all-reduce (five `kernel.shfl_xor` steps, 16 ... 1,
  combined with the kind's `arith` op); with more than one warp, lane 0 of each warp then
  stores its partial to a shared array `%red[T/32]`, a `kernel.barrier` publishes them, every
  thread folds all partials in a `kernel.for`, and a second barrier lets the next combine
  reuse `%red`. A segmented combine (`width W`) keeps the shuffles below `W` and, past a
  warp, folds only the partials of its own group's warps.
- A `tile.store` (or `tile.atomic_add`) executed by every thread with the same address (its
  indices do not depend on the thread id and it is not inside a thread-strided loop) is
  guarded by `kernel.if (thread_id == 0)`, so exactly one thread writes.
- `tile.block_tile` and `tile.thread_tile` expand into the index arithmetic of their
  definitions (division and remainder by the tile counts, grouped raster, blocked,
  interleaved or MMA-fragment cells).

Host ops `tile.alloc/launch` become `kernel.alloc/launch`. No tile op remains.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    IndexType,
    IntegerAttr,
    ModuleOp,
)
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import PassFailedException

from deplodock.dialects import kernel, tile
from deplodock.dialects.common import DynamicForOpBase
from deplodock.dialects.common.mma import MmaSyncOpBase
from deplodock.dialects.hardware import WARP_SHUFFLE_MASKS, WARP_SIZE, shared_memref, warps_in
from deplodock.dialects.reduce_kind import ReduceKind
from deplodock.passes.host_ops import LowerHostOps

# --------------------------------------------------------------------------------------------
# Uniform helper values of one kernel.func, built once at the top of its body


@dataclass
class _KernelValues:
    """Values the combine and store lowerings share within one `kernel.func`.

    They are built on first use, right after `kernel.thread_id` at the top of the body, so
    that every later op (in any region) can use them.
    """

    func: kernel.FuncOp
    thread_id: SSAValue
    anchor: Operation
    rewriter: PatternRewriter
    cache: dict[str, SSAValue] = field(default_factory=dict)
    shared: dict[Attribute, SSAValue] = field(default_factory=dict)

    def _top(self, op: Operation, name: str) -> SSAValue:
        """Inserts `op` at the top of the kernel (after the previous helper) and names it."""
        self.rewriter.insert(op, InsertPoint.after(self.anchor))
        self.anchor = op
        op.results[0].name_hint = name
        return op.results[0]

    def _get(self, name: str, build: Callable[[], Operation]) -> SSAValue:
        if name not in self.cache:
            self.cache[name] = self._top(build(), name)
        return self.cache[name]

    def index(self, value: int) -> SSAValue:
        return self._get(f"c{value}", lambda: arith.ConstantOp(IntegerAttr(value, IndexType())))

    @property
    def lane(self) -> SSAValue:
        warp_size = self.index(WARP_SIZE)
        return self._get("lane", lambda: arith.RemSIOp(self.thread_id, warp_size))

    @property
    def warp(self) -> SSAValue:
        warp_size = self.index(WARP_SIZE)
        return self._get("warp", lambda: arith.DivSIOp(self.thread_id, warp_size))

    @property
    def is_lane0(self) -> SSAValue:
        lane, c0 = self.lane, self.index(0)
        return self._get("is_lane0", lambda: arith.CmpiOp(lane, c0, "eq"))

    @property
    def is_thread0(self) -> SSAValue:
        c0 = self.index(0)
        return self._get("is_thread0", lambda: arith.CmpiOp(self.thread_id, c0, "eq"))

    def partials(self, element_type: Attribute) -> SSAValue:
        """The shared array `%red[T/32]` for combines of `element_type` (reused by all)."""
        if element_type not in self.shared:
            memref = shared_memref(element_type, [warps_in(self.func.block_size)])
            name = "red" if not self.shared else f"red_{element_type}"
            self.shared[element_type] = self._top(kernel.SharedAllocOp(memref), name)
        return self.shared[element_type]


@dataclass
class _Kernels:
    """The `_KernelValues` of every `kernel.func` the pass has touched."""

    by_func: dict[int, _KernelValues] = field(default_factory=dict)

    def of(self, op: Operation, rewriter: PatternRewriter) -> _KernelValues:
        func = op.parent_op()
        while func is not None and not isinstance(func, kernel.FuncOp):
            func = func.parent_op()
        if func is None:
            raise PassFailedException(f"{op.name}: not inside a tile.kernel")
        if id(func) not in self.by_func:
            tid = _find_thread_id(func, rewriter)
            anchor: Operation = tid
            while isinstance(anchor.next_op, kernel.ThreadIdOp | kernel.BlockIdOp):
                anchor = anchor.next_op
            self.by_func[id(func)] = _KernelValues(func, tid.result, anchor, rewriter)
        values = self.by_func[id(func)]
        values.rewriter = rewriter
        return values


def _find_thread_id(func: kernel.FuncOp, rewriter: PatternRewriter) -> kernel.ThreadIdOp:
    """The kernel's `kernel.thread_id` (created at the top of the body when missing)."""
    block = func.body.block
    for op in block.ops:
        if isinstance(op, kernel.ThreadIdOp):
            return op
    tid = kernel.ThreadIdOp()
    tid.result.name_hint = "t"
    rewriter.insert(tid, InsertPoint.at_start(block))
    return tid


def _in_thread_strided_loop(op: Operation) -> bool:
    """Whether an enclosing loop starts at a thread-dependent index (its trips differ)."""
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, kernel.FuncOp):
        if isinstance(parent, DynamicForOpBase) and kernel.depends_on_thread_id(parent.lb):
            return True
        parent = parent.parent_op()
    return False


# --------------------------------------------------------------------------------------------
# Structure: tile.kernel -> kernel.func


class TileKernelToFunc(RewritePattern):
    """`tile.kernel { tile.grid %b { tile.threads %t { body } } }` -> `kernel.func grid block`.

    Several `tile.threads` regions in one grid run one after another on the same threads,
    so they are inlined in order with a `kernel.barrier` between them.
    """

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tile.KernelOp, rewriter: PatternRewriter) -> None:
        name = op.sym_name.data
        grid = op.grid
        threads = [o for o in grid.body.block.ops if isinstance(o, tile.ThreadsOp)]
        counts = sorted({t.count for t in threads})
        if len(counts) != 1:
            raise PassFailedException(
                f"tile.kernel @{name}: expected tile.threads regions of one size in its "
                f"tile.grid, found sizes {counts}"
            )
        func = kernel.FuncOp(
            name,
            body=rewriter.move_region_contents_to_new_regions(op.body),
            properties=kernel.FuncOp.launch_config(grid.count, counts[0]),
        )
        rewriter.replace(op, func)
        block = func.body.block
        tid, bid = kernel.ThreadIdOp(), kernel.BlockIdOp()
        tid.result.name_hint = threads[0].iv.name_hint or "t"
        bid.result.name_hint = grid.iv.name_hint or "b"
        rewriter.insert([tid, bid], InsertPoint.at_start(block))
        for i, region in enumerate(threads):
            if i:
                rewriter.insert(kernel.BarrierOp(), InsertPoint.before(region))
            rewriter.inline_block(region.body.block, InsertPoint.before(region), [tid.result])
            rewriter.erase(region)
        rewriter.inline_block(grid.body.block, InsertPoint.before(grid), [bid.result])
        rewriter.erase(grid)
        for unused in (tid, bid):
            if not unused.result.uses:
                rewriter.erase(unused)
        if isinstance(ret := block.last_op, tile.ReturnOp):
            rewriter.replace(ret, kernel.ReturnOp())


# --------------------------------------------------------------------------------------------
# One-to-one ops: a table


@dataclass(frozen=True)
class Twin:
    """The kernel op a tile op becomes one to one: the same operands, result types,
    properties and regions (each pair shares its base class in `dialects/common`)."""

    op: type[IRDLOperation]
    #: The discardable attributes that still mean something in the kernel; the others are
    #: notes of the tile passes (a shared array's `stage`, `pad`, `depth`) and stay behind.
    keep: tuple[str, ...] = ()
    #: Each result keeps its own name hint; otherwise every result takes the first one's
    #: (what `rewriter.replace` does), as loops and vector loads always have.
    own_names: bool = False


#: Every tile op that maps one to one onto a kernel op.
ONE_TO_ONE: dict[type[Operation], Twin] = {
    tile.ForOp: Twin(kernel.ForOp, keep=("unroll",)),
    tile.YieldOp: Twin(kernel.YieldOp),
    tile.IfOp: Twin(kernel.IfOp),
    tile.LoadOp: Twin(kernel.LoadOp),
    tile.ReturnOp: Twin(kernel.ReturnOp),
    tile.BarrierOp: Twin(kernel.BarrierOp),
    tile.SharedAllocOp: Twin(kernel.SharedAllocOp),
    tile.CopyAsyncOp: Twin(kernel.CpAsyncOp),
    tile.AsyncCommitOp: Twin(kernel.CpAsyncCommitOp),
    tile.AsyncWaitOp: Twin(kernel.CpAsyncWaitOp),
    tile.LoadVectorOp: Twin(kernel.LoadVectorOp),
    tile.LdmatrixOp: Twin(kernel.LdmatrixOp, own_names=True),
    tile.StoreVectorOp: Twin(kernel.StoreVectorOp),
    tile.MmaSyncOp: Twin(kernel.MmaSyncOp, keep=(MmaSyncOpBase.CORRECTION,), own_names=True),
    tile.SplitTf32Op: Twin(kernel.SplitTf32Op, own_names=True),
}


class OneToOneToKernel(RewritePattern):
    """A tile op of `ONE_TO_ONE` -> its kernel twin, regions moved over."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        twin = ONE_TO_ONE.get(type(op))
        if twin is None:
            return
        new = twin.op.create(
            operands=op.operands,
            result_types=[result.type for result in op.results],
            properties=dict(op.properties),
            attributes={k: v for k, v in op.attributes.items() if k in twin.keep},
            regions=[rewriter.move_region_contents_to_new_regions(r) for r in op.regions],
        )
        if twin.own_names:
            for old, result in zip(op.results, new.results, strict=True):
                result.name_hint = old.name_hint
        rewriter.replace(op, new)


# --------------------------------------------------------------------------------------------
# Stores executed by every thread, and block-wide combines


@dataclass
class StoreToKernel(RewritePattern):
    """`tile.store` -> `kernel.store`, guarded by thread 0 when every thread would write."""

    kernels: _Kernels

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tile.StoreOp, rewriter: PatternRewriter) -> None:
        store = kernel.StoreOp(op.value, op.memref, op.indices)
        per_thread = any(kernel.depends_on_thread_id(i) for i in op.indices)
        if per_thread or _in_thread_strided_loop(op):
            rewriter.replace(op, store)
            return
        rewriter.replace(op, _guarded(self.kernels.of(op, rewriter).is_thread0, store))


@dataclass
class AtomicAddToKernel(RewritePattern):
    """`tile.atomic_add` -> `kernel.atomic_add`; a block-uniform one (every thread would
    add the same value to the same element) runs on thread 0 only."""

    kernels: _Kernels

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tile.AtomicAddOp, rewriter: PatternRewriter) -> None:
        add = kernel.AtomicAddOp(op.value, op.memref, op.indices)
        operands = [op.value, *op.indices]
        per_thread = any(kernel.depends_on_thread_id(v) for v in operands)
        if per_thread or _in_thread_strided_loop(op):  # `tile.is_block_uniform`, lowered
            rewriter.replace(op, add)
            return
        rewriter.replace(op, _guarded(self.kernels.of(op, rewriter).is_thread0, add))


def _guarded(cond: SSAValue, op: Operation) -> kernel.IfOp:
    """`kernel.if %cond { op }`."""
    guard = kernel.IfOp(cond)
    guard.body.block.insert_op_before(op, guard.body.block.first_op)  # before the yield
    return guard


@dataclass
class CombineToShuffles(RewritePattern):
    """`tile.combine` -> warp shuffles (+ shared partials and barriers past one warp).

    A segmented combine (`width W`) shuffles only within its group: for `W <= 32` the xor
    masks below `W` (a lane never leaves its aligned group of `W`); for `W > 32` the full
    warp reduces, lane 0 of each warp publishes to `%red`, and each thread folds only the
    `W / 32` partials of its own group's warps.
    """

    kernels: _Kernels

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tile.CombineOp, rewriter: PatternRewriter) -> None:
        if _in_thread_strided_loop(op):
            raise PassFailedException(
                "tile.combine: inside a thread-strided loop, where not every thread takes part"
            )
        values = self.kernels.of(op, rewriter)
        kind = ReduceKind(op.kind.data)
        name = op.result.name_hint or "comb"
        width = min(op.segment_width(values.func.block_size), values.func.block_size)
        new_ops: list[Operation] = []
        partial = op.value
        for mask in WARP_SHUFFLE_MASKS:
            if mask >= width:
                continue
            shuffled = kernel.ShflXorOp(partial, mask)
            combined = kind.combine(partial, shuffled.result)
            shuffled.result.name_hint = f"{name}_shfl"
            combined.results[0].name_hint = f"{name}_warp"
            new_ops += [shuffled, combined]
            partial = combined.results[0]
        if width > WARP_SIZE:
            partial = self._across_warps(values, kind, partial, name, new_ops, width)
        partial.name_hint = name
        rewriter.replace(op, new_ops, [partial])

    @staticmethod
    def _across_warps(
        values: _KernelValues,
        kind: ReduceKind,
        partial: SSAValue,
        name: str,
        new_ops: list[Operation],
        width: int,
    ) -> SSAValue:
        """Lane 0 of each warp publishes its partial; every thread folds its group's."""
        is_lane0, warp, red = values.is_lane0, values.warp, values.partials(partial.type)
        publish = _guarded(is_lane0, kernel.StoreOp(partial, red, [warp]))
        init = arith.ConstantOp(kind.identity_attr(partial.type))
        init.result.name_hint = f"{name}_init"
        warps = warps_in(width)
        new_ops += [publish, kernel.BarrierOp(), init]
        first: SSAValue = values.index(0)
        if width < values.func.block_size:
            # The group's first warp: warp - warp % (W / 32).
            lead = arith.RemSIOp(warp, values.index(warps))
            start = arith.SubiOp(warp, lead.result)
            start.result.name_hint = f"{name}_warp0"
            new_ops += [lead, start]
            first = start.result
        fold = kernel.ForOp(values.index(0), warps, 1, [init.result])
        w, acc = fold.body.block.args
        w.name_hint, acc.name_hint = "wid", f"{name}_acc"
        fold_ops: list[Operation] = []
        slot: SSAValue = w
        if first is not values.cache.get("c0"):
            at = arith.AddiOp(first, w)
            fold_ops.append(at)
            slot = at.result
        load = kernel.LoadOp(red, [slot])
        load.res.name_hint = f"{name}_part"
        combined = kind.combine(acc, load.res)
        combined.results[0].name_hint = f"{name}_next"
        fold.body.block.add_ops([*fold_ops, load, combined, kernel.YieldOp(combined.results[0])])
        new_ops += [fold, kernel.BarrierOp()]
        return fold.res[0]


@dataclass
class _IndexMath:
    """Emits index arithmetic before one op, folding `x * 1`, `x + 0` and `x / 1`."""

    rewriter: PatternRewriter
    before: Operation

    def _emit(self, op: Operation, name: str | None = None) -> SSAValue:
        self.rewriter.insert(op, InsertPoint.before(self.before))
        if name:
            op.results[0].name_hint = name
        return op.results[0]

    def const(self, value: int) -> SSAValue:
        return self._emit(arith.ConstantOp(IntegerAttr(value, IndexType())))

    def div(self, a: SSAValue, b: int | SSAValue, name: str | None = None) -> SSAValue:
        if b == 1:
            return a
        divisor = self.const(b) if isinstance(b, int) else b
        return self._emit(arith.DivSIOp(a, divisor), name)

    def rem(self, a: SSAValue, b: int | SSAValue, name: str | None = None) -> SSAValue:
        if b == 1:
            return self.const(0)
        divisor = self.const(b) if isinstance(b, int) else b
        return self._emit(arith.RemSIOp(a, divisor), name)

    def mul(self, a: SSAValue, b: int, name: str | None = None) -> SSAValue:
        return a if b == 1 else self._emit(arith.MuliOp(a, self.const(b)), name)

    def add(self, a: SSAValue, b: SSAValue | int, name: str | None = None) -> SSAValue:
        if b == 0:
            return a
        other = self.const(b) if isinstance(b, int) else b
        return self._emit(arith.AddiOp(a, other), name)


def _column_operand(access: Operation, use_index: int) -> int | None:
    """Position among `access`'s operands of its last (column) index into the shared array
    it uses as operand `use_index` (None when that operand is not the accessed array)."""
    match access:
        case tile.LoadOp() | tile.LoadVectorOp() | tile.LdmatrixOp() if use_index == 0:
            return len(access.indices)
        case tile.StoreOp() if use_index == 1:
            return 1 + len(access.indices)
        case tile.StoreVectorOp() if use_index == len(access.values):
            return len(access.values) + len(access.indices)
        case tile.CopyAsyncOp() if use_index == 0:
            return len(access.dst_indices)
    return None


def _after_definition(value: SSAValue) -> Operation:
    """The op right after `value`'s definition (the first op of its block for a block
    argument): index math inserted before it sees `value` and dominates its uses."""
    if isinstance(value, BlockArgument):
        first = value.block.first_op
    else:
        first = value.owner.next_op  # type: ignore[union-attr]
    assert first is not None, "an index is used, so an op follows its definition"
    return first


def _row_mask(row: SSAValue, layout: tile.Swizzle, rewriter: PatternRewriter) -> SSAValue:
    """`((row / phase) % chunks) * chunk_elements`, emitted where `row` is defined."""
    math = _IndexMath(rewriter, _after_definition(row))
    phase = math.div(row, layout.phase, "swz_phase")
    chunk = math.rem(phase, layout.chunks, "swz_chunk")
    return math.mul(chunk, layout.chunk_elements, "swz")


class SwizzleToArith(RewritePattern):
    """A `tile.shared_alloc {swizzle = P}` -> every access's column index XORed with the mask
    of its row, `((row / P) % chunks) * g` (`tile.Swizzle.column`). The mask is computed right
    after the row index is defined, so a row fixed outside the K loop costs one XOR per access
    inside it."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tile.SharedAllocOp, rewriter: PatternRewriter) -> None:
        layout = op.swizzle_layout()
        if layout is None:
            return
        masks: dict[SSAValue, SSAValue] = {}
        for use in list(op.result.uses):
            access = use.operation
            position = _column_operand(access, use.index)
            if position is None:
                raise PassFailedException(
                    f"convert-tile-to-kernel: {access.name} uses a swizzled shared array "
                    "other than by indices"
                )
            row, column = access.operands[position - 1], access.operands[position]
            if row not in masks:
                masks[row] = _row_mask(row, layout, rewriter)
            swizzled = arith.XOrIOp(column, masks[row])
            if column.name_hint:
                swizzled.result.name_hint = f"{column.name_hint}_swz"
            rewriter.insert(swizzled, InsertPoint.before(access))
            access.operands[position] = swizzled.result
        del op.attributes["swizzle"]
        rewriter.handle_operation_modification(op)


class BlockTileToArith(RewritePattern):
    """`tile.block_tile` -> the tile index on each axis times the tile size."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tile.BlockTileOp, rewriter: PatternRewriter) -> None:
        math = _IndexMath(rewriter, op)
        counts, group = op.tile_counts, op.group_rows
        pid: SSAValue = op.block
        indices: list[SSAValue] = []
        if len(counts) > 2:
            per_batch = counts[-1] * counts[-2]
            batch = math.div(pid, per_batch, "batch")
            pid = math.rem(pid, per_batch, "pid")
            for count in reversed(counts[:-2]):
                indices.insert(0, math.rem(batch, count))
                batch = math.div(batch, count)
        if len(counts) == 1:
            indices.append(pid)
        else:
            indices += self._grouped(math, pid, counts[-2], counts[-1], group)
        origins = [
            math.mul(index, size, name=_origin_name(op, k))
            for k, (index, size) in enumerate(zip(indices, op.tile_sizes, strict=True))
        ]
        rewriter.replace(op, [], origins)

    @staticmethod
    def _grouped(
        math: _IndexMath, pid: SSAValue, rows: int, cols: int, group: int
    ) -> list[SSAValue]:
        """(row, col) of a block in the grouped raster (`tile.grouped_tile_indices`)."""
        if group == 1:
            return [math.div(pid, cols, "tile_m"), math.rem(pid, cols, "tile_n")]
        if group >= rows:
            return [math.rem(pid, rows, "tile_m"), math.div(pid, rows, "tile_n")]
        band = group * cols
        in_band = math.rem(pid, band, "in_band")
        first_row = math.mul(math.div(pid, band), group, "first_row")
        left = math._emit(arith.SubiOp(math.const(rows), first_row))
        height = math._emit(arith.MinSIOp(left, math.const(group)), "band_rows")
        row = math.add(first_row, math.rem(in_band, height), "tile_m")
        return [row, math.div(in_band, height, "tile_n")]


def _origin_name(op: Operation, k: int) -> str | None:
    hint = op.results[k].name_hint
    return hint or None


class ThreadTileToArith(RewritePattern):
    """`tile.thread_tile` -> the thread's coordinate and its cells' positions."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tile.ThreadTileOp, rewriter: PatternRewriter) -> None:
        math = _IndexMath(rewriter, op)
        rows, cols = op.thread_grid
        if op.layout.data == "mma":
            rewriter.replace(op, [], _mma_positions(math, op))
            return
        if op.thread_order == "quads":
            coord = _quad_coordinate(math, op)
        elif op.axis == 0:
            coord = math.div(op.thread, cols, "tm")
        else:
            coord = math.rem(op.thread, cols, "tn") if rows > 1 else op.thread
        positions: list[SSAValue] = []
        for cell in range(op.cell_count):
            if op.layout.data == "blocked":
                position = math.add(math.mul(coord, op.cell_count), cell)
            else:
                position = math.add(coord, cell * op.thread_grid[op.axis])
            if position.name_hint is None and op.results[cell].name_hint:
                position.name_hint = op.results[cell].name_hint
            positions.append(position)
        rewriter.replace(op, [], positions)


def _quad_coordinate(math: _IndexMath, op: tile.ThreadTileOp) -> SSAValue:
    """The thread's row or column in quad order (`tile.ThreadTileOp.coordinates`)."""
    quad_cols = op.thread_grid[1] // 2
    quad = math.div(op.thread, 4, "quad")
    if op.axis == 0:
        quad_row = math.mul(math.div(quad, quad_cols), 2)
        return math.add(quad_row, math.rem(math.div(op.thread, 2), 2), "tm")
    quad_col = math.mul(math.rem(quad, quad_cols), 2)
    return math.add(quad_col, math.rem(op.thread, 2), "tn")


def _mma_positions(math: _IndexMath, op: tile.ThreadTileOp) -> list[SSAValue]:
    """The `mma` layout as index arithmetic (`tile.ThreadTileOp._mma_position`)."""
    warp = math.div(op.thread, WARP_SIZE, "warp")
    lane = math.rem(op.thread, WARP_SIZE, "lane")
    warp_cols = op.mma_warp_grid()[1]
    cells = op.cell_count
    if op.axis == 0:
        corner = math.mul(math.div(warp, warp_cols, "wm"), 8 * cells)
        base = math.add(corner, math.div(lane, 4, "group"), "wrow")
        steps = [16 * (cell // 2) + 8 * (cell % 2) for cell in range(cells)]
    else:
        corner = math.mul(math.rem(warp, warp_cols, "wn"), 4 * cells)
        base = math.add(corner, math.mul(math.rem(lane, 4, "quad"), 2), "wcol")
        steps = [8 * (cell // 2) + cell % 2 for cell in range(cells)]
    positions = []
    for cell, step in enumerate(steps):
        position = math.add(base, step)
        if position.name_hint is None and op.results[cell].name_hint:
            position.name_hint = op.results[cell].name_hint
        positions.append(position)
    return positions


# --------------------------------------------------------------------------------------------
# The pass


def _walk(module: ModuleOp, *patterns: RewritePattern) -> None:
    applier = GreedyRewritePatternApplier(list(patterns), dce_enabled=False)
    PatternRewriteWalker(applier).rewrite_module(module)


@dataclass(frozen=True)
class ConvertTileToKernelPass(ModulePass):
    """Lowers every `tile` op to the `kernel` dialect (see the module docstring)."""

    name = "convert-tile-to-kernel"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        kernels = _Kernels()
        _walk(op, SwizzleToArith())  # on logical tile indices, before anything moves
        _walk(op, TileKernelToFunc(), LowerHostOps("tile", kernel.AllocOp, kernel.LaunchOp))
        # Loops first, so the store and combine lowerings see kernel.for starts.
        _walk(op, OneToOneToKernel(), BlockTileToArith(), ThreadTileToArith())
        _walk(op, StoreToKernel(kernels), AtomicAddToKernel(kernels), CombineToShuffles(kernels))
        if left := next((o for o in op.walk() if o.dialect_name() == "tile"), None):
            raise PassFailedException(f"convert-tile-to-kernel: {left.name} was not lowered")
