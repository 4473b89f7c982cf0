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

A masked copy (`copy_loops.CopyLoop.predicate`: the slab gets `select(%c, load, 0)`, `%c` a
condition of the row, as padded keys past the last real one) becomes a predicated
`tile.copy_async ... if %c`: where `%c` is false cp.async reads nothing and writes zeros
(its source size 0), so the padded rows of a slab cost no DRAM traffic and no registers.

Knob (`schedule`): `async` (1 = on, the default; 0 = off).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Operation
from xdsl.rewriter import InsertPoint, Rewriter

from deplodock.dialects import tile
from deplodock.dialects.common.schedule import Schedule
from deplodock.dialects.element_types import byte_size
from deplodock.dialects.hardware import CP_ASYNC_BYTES, CP_ASYNC_CG_BYTES
from deplodock.passes.constant_pool import ConstantPool
from deplodock.passes.tile import schedule
from deplodock.passes.tile.choices import Tunable, grid
from deplodock.passes.tile.copy_loops import CopyLoop, copy_loops, vector_width, widen


def to_async(copy: CopyLoop, load: tile.LoadOp, pool: ConstantPool) -> None:
    """Rewrites one plain copy loop (see the module docstring)."""
    element_bytes = byte_size(load.res.type)
    width = vector_width(copy, CP_ASYNC_CG_BYTES // element_bytes)
    if width * element_bytes not in CP_ASYNC_BYTES:
        return  # a 2-byte element alone: cp.async moves 4, 8 or 16 bytes; stays a plain copy
    if width > 1:
        widen(copy, width, pool)
    async_copy = tile.CopyAsyncOp(
        copy.store.memref,
        list(copy.store.indices),
        load.memref,
        list(load.indices),
        width * element_bytes,
        copy.predicate,
    )
    masking = copy.store.value.owner if copy.predicate is not None else None
    Rewriter.insert_op(async_copy, InsertPoint.before(copy.store))
    Rewriter.erase_op(copy.store)
    if masking is not None:  # the select of a masked copy: zeros land where it is false
        Rewriter.erase_op(masking)
    Rewriter.erase_op(load)


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
    copies = [(c, c.direct_load) for c in copy_loops(threads) if c.direct_load is not None]
    if not copies:
        return False
    pool = ConstantPool.adopting(threads.body.block)
    loops = [c.loop for c, _ in copies]
    ends = _group_ends(threads, loops)
    for copy, load in copies:
        to_async(copy, load, pool)
    for end in ends:
        Rewriter.insert_op(tile.AsyncCommitOp(), InsertPoint.after(end))
    pipelined = schedule.read_knob(kernel, "pipeline", 0)
    depth = schedule.read_knob(kernel, "depth", 1)
    in_flight = depth - 2 if pipelined and depth >= 2 else 0
    for barriers in _read_barriers(threads):
        Rewriter.insert_op(tile.AsyncWaitOp(in_flight), InsertPoint.before(barriers[0]))
        for barrier in barriers[1:]:
            Rewriter.insert_op(tile.AsyncWaitOp(0), InsertPoint.before(barrier))
    return True


def _read_barriers(threads: tile.ThreadsOp) -> list[list[tile.BarrierOp]]:
    """Per loop body that holds copies or waits for them, the barriers before which a
    chunk is read: the first one, and each later one that copies precede since the barrier
    before it (attention in one kernel copies K, computes P, then copies V). The later
    ones wait for every group: their copies were committed in this same iteration."""
    found: list[list[tile.BarrierOp]] = []
    for op in threads.walk():
        if not (isinstance(op, tile.ForOp) and op.is_reduce):
            continue
        barriers: list[tile.BarrierOp] = []
        copied = False
        for inner in op.body.block.ops:
            if isinstance(inner, tile.AsyncCommitOp):
                copied = True
            elif isinstance(inner, tile.BarrierOp):
                if not barriers or copied:
                    barriers.append(inner)
                copied = False
        if barriers:
            found.append(barriers)
    return found


@dataclass(frozen=True)
class TileAsyncCopyPass(Tunable):
    """Staged contractions: copies as `cp.async` with commit and wait groups (module doc)."""

    name = "tile-async-copy"
    knobs = ("async",)

    enable: bool = True

    def applies_to(self, kernel: tile.KernelOp) -> bool:
        return schedule.has_knob(kernel, "stage") and not schedule.has_knob(kernel, "async")

    def candidates(self, kernel: tile.KernelOp) -> list[Schedule]:
        return grid(**{"async": (0, 1)})

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        if not schedule.has_knob(kernel, "stage"):
            return
        if any(isinstance(o, tile.CopyAsyncOp) for o in kernel.walk()):
            return
        on = schedule.read_knob(kernel, "async", int(self.enable))
        done = bool(on) and async_copies(kernel)
        schedule.write_knob(kernel, "async", int(done))
