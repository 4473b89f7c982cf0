"""The `tile` dialect: a loop kernel scheduled onto GPU blocks and threads (docs/ir.md §4).

A `tile.kernel` holds exactly one `tile.grid` (the blocks, independent of each other), which
holds `tile.threads` (the threads of one block, run in lock-step). Inside, `tile.for` is a
per-thread loop with a dynamic start (the thread id for a cooperative strided loop,
`b * T + t` for a grid-stride loop, a constant for a serial loop) and `tile.combine` reduces
a per-thread value over the block. Other ops (`arith`, `math`, loads, stores) run once per
thread.

The scheduling passes add structure (docs/scheduling.md):

- `tile.block_tile`: which tile of the output axes a block owns (with grouped raster order);
- `tile.thread_tile`: which rows (or columns) of that tile one thread owns in registers;
- `tile.shared_alloc` + `tile.barrier`: a shared-memory stage of the block and its ordering;
- `tile.if`: a bounds guard for partial tiles.

Kernels, loops, loads, stores and the host ops share their syntax and verifiers with
`loop` and `kernel` through `common/`.

The dialect is a package: `structure` (kernel, grid, threads, for, yield, if, combine,
barrier, shared_alloc and its `Swizzle`), `tiling` (block_tile, thread_tile), `memory`
(load, store, atomic_add, alloc, launch) and `async_mma` (the asynchronous copies, vector
accesses and MMAs).
"""

from __future__ import annotations

from xdsl.ir import Dialect

from deplodock.dialects.tile.async_mma import (
    AsyncCommitOp,
    AsyncWaitOp,
    CopyAsyncOp,
    LdmatrixOp,
    LoadVectorOp,
    MmaSyncOp,
    SplitTf32Op,
    StoreVectorOp,
)
from deplodock.dialects.tile.memory import AllocOp, AtomicAddOp, LaunchOp, LoadOp, StoreOp
from deplodock.dialects.tile.structure import (
    BarrierOp,
    CombineOp,
    ForOp,
    GridOp,
    IfOp,
    KernelOp,
    ParallelRegionOpBase,
    ReturnOp,
    SharedAllocOp,
    Swizzle,
    ThreadsOp,
    YieldOp,
    depends_on_thread,
    is_block_uniform,
    shared_bytes,
)
from deplodock.dialects.tile.tiling import BlockTileOp, ThreadTileOp, grouped_tile_indices

__all__ = [
    "AllocOp",
    "AsyncCommitOp",
    "AsyncWaitOp",
    "AtomicAddOp",
    "BarrierOp",
    "BlockTileOp",
    "CombineOp",
    "CopyAsyncOp",
    "ForOp",
    "GridOp",
    "IfOp",
    "KernelOp",
    "LaunchOp",
    "LdmatrixOp",
    "LoadOp",
    "LoadVectorOp",
    "MmaSyncOp",
    "ParallelRegionOpBase",
    "ReturnOp",
    "SharedAllocOp",
    "SplitTf32Op",
    "StoreOp",
    "StoreVectorOp",
    "Swizzle",
    "ThreadTileOp",
    "ThreadsOp",
    "Tile",
    "YieldOp",
    "depends_on_thread",
    "grouped_tile_indices",
    "is_block_uniform",
    "shared_bytes",
]

Tile = Dialect(
    "tile",
    [
        KernelOp,
        ReturnOp,
        GridOp,
        ThreadsOp,
        ForOp,
        YieldOp,
        IfOp,
        BarrierOp,
        SharedAllocOp,
        BlockTileOp,
        ThreadTileOp,
        CombineOp,
        LoadOp,
        StoreOp,
        AtomicAddOp,
        AllocOp,
        LaunchOp,
        CopyAsyncOp,
        AsyncCommitOp,
        AsyncWaitOp,
        LoadVectorOp,
        StoreVectorOp,
        MmaSyncOp,
        LdmatrixOp,
        SplitTf32Op,
    ],
    [],
)
