"""`tile-async-copy`: stage copies become `cp.async`, 16 bytes at a time where alignment allows.

Trigger: a staged kernel (`tile-stage`) whose copy loops still load into registers and store
to shared memory.

Rewrite: each copy loop's `load` + `store` pair becomes one `tile.copy_async` (PTX
`cp.async`: global to shared without a register round trip, and without stalling the thread
until the data is needed). When the slab row and the global row are both contiguous in the
copy's column and every copy starts at a multiple of 16 bytes (the column is `U + col` with `U`
a multiple of the vector width, rows a multiple of it long), each copy moves 16 bytes (4 fp32,
8 bf16), the loop running a quarter (an eighth) as many times; otherwise 4 (or 2) bytes.
(A 2-byte element that cannot be moved 16 bytes at a time stays a plain copy: cp.async moves
4, 8 or 16 bytes.) Each chunk's copies end with `tile.async_commit` (one group per chunk, an
empty one past the last chunk so every iteration commits), and the barrier before the chunk
is read is preceded
by `tile.async_wait N`, N the groups allowed in flight: `depth - 2` when `tile-pipeline`
copies ahead (the chunks after this one), else 0.

    tile.for %l = %t to 2048 step 256 {        tile.for %l = %t to 512 step 256 {
      %v = tile.load %x[%m, %k]        ==>       tile.copy_async %x_s[%slot, %row, %col],
      tile.store %v, %x_s[%slot, %row, %col]                     %x[%m, %k], 16
    }                                          }
                                               tile.async_commit

Knob (`schedule`): `async` (1 = on, the default; 0 = off).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp, StringAttr
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import tile
from deplodock.dialects.element_types import byte_size
from deplodock.dialects.hardware import CP_ASYNC_BYTES, CP_ASYNC_CG_BYTES
from deplodock.dialects.queries import constant_index
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.choices import Choice, Tunable, grid, has_knob


def _slabs(threads: tile.ThreadsOp) -> set[SSAValue]:
    return {
        op.result
        for op in threads.body.ops
        if isinstance(op, tile.SharedAllocOp) and isinstance(op.attributes.get("stage"), StringAttr)
    }


@dataclass
class CopyLoop:
    """A cooperative copy loop of a stage: `%v = load G[...]; store %v, S[...]`."""

    loop: tile.ForOp
    load: tile.LoadOp
    store: tile.StoreOp
    row: arith.DivSIOp
    col: arith.RemSIOp


def copy_loops(threads: tile.ThreadsOp) -> list[CopyLoop]:
    slabs = _slabs(threads)
    found: list[CopyLoop] = []
    for op in threads.walk():
        if not isinstance(op, tile.ForOp):
            continue
        stores = [s for s in op.body.block.ops if isinstance(s, tile.StoreOp)]
        if len(stores) != 1 or stores[0].memref not in slabs:
            continue
        store = stores[0]
        load = store.value.owner
        iv = op.induction_var
        row = next(
            (o for o in op.body.block.ops if isinstance(o, arith.DivSIOp) and o.lhs == iv), None
        )
        col = next(
            (o for o in op.body.block.ops if isinstance(o, arith.RemSIOp) and o.lhs == iv), None
        )
        if isinstance(load, tile.LoadOp) and row is not None and col is not None:
            found.append(CopyLoop(op, load, store, row, col))
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


def vector_width(copy: CopyLoop) -> int:
    """Elements per copy: 16 bytes' worth when contiguous and aligned, else 1."""
    element = copy.load.res.type
    width = CP_ASYNC_CG_BYTES // byte_size(element)
    inner = constant_index(copy.col.rhs)
    slab = copy.store.memref.type
    source = copy.load.memref.type
    assert isinstance(slab, MemRefType) and isinstance(source, MemRefType)
    if inner is None or inner % width or copy.loop.upper % width:
        return 1
    if slab.get_shape()[-1] % width or source.get_shape()[-1] % width:
        return 1
    col = copy.col.result
    if copy.store.indices[-1] != col or len(list(col.uses)) != 2:
        return 1
    last = copy.load.indices[-1].owner
    if not isinstance(last, arith.AddiOp) or col not in last.operands:
        return 1
    other = last.rhs if last.lhs == col else last.lhs
    if not multiple_of(other, width) or col in copy.load.indices[:-1]:
        return 1
    return width


def to_async(copy: CopyLoop, pool: ConstantPool) -> None:
    """Rewrites one copy loop (see the module docstring)."""
    width = vector_width(copy)
    element_bytes = byte_size(copy.load.res.type)
    if width * element_bytes not in CP_ASYNC_BYTES:
        return  # a 2-byte element alone: cp.async moves 4, 8 or 16 bytes; stays a plain copy
    loop = copy.loop
    if width > 1:
        inner = constant_index(copy.col.rhs)
        assert inner is not None
        loop.ub = IntegerAttr(loop.upper // width, 64)
        copy.row.operands[1] = pool.index(inner // width)
        copy.col.operands[1] = pool.index(inner // width)
        build = schedule.IndexBuilder(InsertPoint.after(copy.col), pool)
        scaled = build.add(arith.MuliOp(copy.col.result, pool.index(width)), "col4")
        for use in list(copy.col.result.uses):
            if use.operation is not scaled.owner:
                use.operation.operands[use.index] = scaled
    async_copy = tile.CopyAsyncOp(
        copy.store.memref,
        list(copy.store.indices),
        copy.load.memref,
        list(copy.load.indices),
        width * element_bytes,
    )
    Rewriter.insert_op(async_copy, InsertPoint.before(copy.store))
    Rewriter.erase_op(copy.store)
    Rewriter.erase_op(copy.load)


def _group_ends(threads: tile.ThreadsOp, copies: list[tile.ForOp]) -> list[Operation]:
    """The ops after which a group of copies is committed: the last copy of each chunk in
    the prologue, the prefetching `tile.if`, or the last copy of the K loop body."""
    ends: list[Operation] = []
    copy_set = set(copies)
    for block in {c.parent_block() for c in copies}:
        assert block is not None
        parent = block.parent_op()
        if isinstance(parent, tile.IfOp):
            ends.append(parent)
            continue
        run: Operation | None = None
        for op in block.ops:
            if op in copy_set:
                run = op
                if _chunk_of(op) != _chunk_of(op.next_op):
                    ends.append(op)
                    run = None
            elif run is not None:
                ends.append(run)
                run = None
    return ends


def _chunk_of(op: Operation | None) -> object:
    if op is None or "chunk" not in op.attributes:
        return None
    return op.attributes["chunk"]


def async_copies(kernel: tile.KernelOp) -> bool:
    threads = schedule.threads_of(kernel)
    if threads is None:
        return False
    copies = copy_loops(threads)
    if not copies:
        return False
    pool = ConstantPool.adopting(threads.body.block)
    loops = [c.loop for c in copies]
    ends = _group_ends(threads, loops)
    for copy in copies:
        to_async(copy, pool)
    for end in ends:
        Rewriter.insert_op(tile.AsyncCommitOp(), InsertPoint.after(end))
    pipelined = schedule.read_knob(kernel, "pipeline", 0)
    depth = schedule.read_knob(kernel, "depth", 1)
    in_flight = depth - 2 if pipelined and depth >= 2 else 0
    for barrier in _read_barriers(threads):
        Rewriter.insert_op(tile.AsyncWaitOp(in_flight), InsertPoint.before(barrier))
    return True


def _read_barriers(threads: tile.ThreadsOp) -> list[tile.BarrierOp]:
    """The first barrier of each loop body that holds copies or waits for them."""
    found: list[tile.BarrierOp] = []
    for op in threads.walk():
        if isinstance(op, tile.ForOp) and op.is_reduce:
            barriers = [b for b in op.body.block.ops if isinstance(b, tile.BarrierOp)]
            if barriers:
                found.append(barriers[0])
    return found


@dataclass(frozen=True)
class TileAsyncCopyPass(Tunable, ModulePass):
    """Staged contractions: copies as `cp.async` with commit and wait groups (module doc)."""

    name = "tile-async-copy"
    knobs = ("async",)

    enable: bool = True

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        return has_knob(kernel, "stage") and not has_knob(kernel, "async")

    def candidates(self, kernel: tile.KernelOp) -> list[Choice]:
        return grid(**{"async": (0, 1)})

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in [k for k in op.ops if isinstance(k, tile.KernelOp)]:
            if kernel.schedule is None or "stage" not in kernel.schedule.data:
                continue
            if any(isinstance(o, tile.CopyAsyncOp) for o in kernel.walk()):
                continue
            on = schedule.read_knob(kernel, "async", int(self.enable))
            done = bool(on) and async_copies(kernel)
            schedule.write_knob(kernel, "async", int(done))
