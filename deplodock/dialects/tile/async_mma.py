"""The `tile` dialect's asynchronous copies, vector accesses and tensor-core MMAs (syntax and
rules: `dialects/common/async_memory.py`, `mma.py`); the tile -> kernel lowering maps each to
its kernel op one to one.
"""

from __future__ import annotations

from xdsl.irdl import irdl_op_definition, traits_def
from xdsl.traits import HasAncestor, MemoryReadEffect

from deplodock.dialects.common import async_memory, ldmatrix, mma
from deplodock.dialects.effects import Collective
from deplodock.dialects.tile.structure import ThreadsOp


@irdl_op_definition
class CopyAsyncOp(async_memory.CpAsyncOpBase):
    """`tile.copy_async %dst[...], %src[...], 16 [if %p] : memref<..., 3>, memref<...>`:
    each thread copies BYTES from global to shared memory without a register round trip;
    the copy lands by the `tile.async_wait` that retires its group."""

    name = "tile.copy_async"
    traits = traits_def(HasAncestor(ThreadsOp))


@irdl_op_definition
class AsyncCommitOp(async_memory.CpAsyncCommitOpBase):
    """`tile.async_commit`: the thread's copies since the last commit form one group."""

    name = "tile.async_commit"
    traits = traits_def(HasAncestor(ThreadsOp))


@irdl_op_definition
class AsyncWaitOp(async_memory.CpAsyncWaitOpBase):
    """`tile.async_wait N`: all but the thread's `N` most recent groups have landed."""

    name = "tile.async_wait"
    traits = traits_def(HasAncestor(ThreadsOp))


@irdl_op_definition
class LoadVectorOp(async_memory.LoadVectorOpBase):
    """`%a, %b, %c, %d = tile.load_vector %buf[...] width 4 : memref<...>`: per thread."""

    name = "tile.load_vector"


@irdl_op_definition
class StoreVectorOp(async_memory.StoreVectorOpBase):
    """`tile.store_vector %a, %b, %c, %d, %buf[...] : memref<...>`: per thread."""

    name = "tile.store_vector"


@irdl_op_definition
class MmaSyncOp(mma.MmaSyncOpBase):
    """`%d:4 = tile.mma_sync a(...) b(...) c(...) : bf16`: one warp's m16n8k16 tensor-core
    multiply-accumulate (m16n8k8 for `: tf32`); the 32 threads `[32w, 32w + 32)` of the
    block form warp `w` (`common/mma.py` has the fragment layouts)."""

    name = "tile.mma_sync"
    traits = traits_def(HasAncestor(ThreadsOp), Collective())


@irdl_op_definition
class LdmatrixOp(ldmatrix.LdmatrixOpBase):
    """`%r:8 = tile.ldmatrix %buf[...] x4 [trans] : memref<..., 3>`: one warp's load of 8x8
    matrices of 16-bit elements from shared memory into MMA fragments (`common/ldmatrix.py`);
    the threads `[32w, 32w + 32)` of the block form warp `w`."""

    name = "tile.ldmatrix"
    traits = traits_def(HasAncestor(ThreadsOp), Collective(), MemoryReadEffect())


@irdl_op_definition
class SplitTf32Op(mma.SplitTf32OpBase):
    """`%hi, %lo = tile.split_tf32 %x`: `x` as two tf32 values (`common/mma.py`)."""

    name = "tile.split_tf32"
