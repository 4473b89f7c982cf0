"""The `tile` dialect's per-thread loads, stores and atomic adds, and the host's alloc and
launch (syntax and verifiers shared with `loop` and `kernel`: `dialects/common/memory.py`,
`kernels.py`).
"""

from __future__ import annotations

from xdsl.irdl import irdl_op_definition

from deplodock.dialects import common


@irdl_op_definition
class LoadOp(common.LoadOpBase):
    """`%v = tile.load %buf[%i, ...] : memref<...>`: one element per thread."""

    name = "tile.load"


@irdl_op_definition
class StoreOp(common.StoreOpBase):
    """`tile.store %v, %buf[%i, ...] : memref<...>`: one element per thread.

    A store that is not inside a thread-strided loop is executed by every thread with the
    same value and address; the `tile -> kernel` lowering guards it with thread 0.
    """

    name = "tile.store"


@irdl_op_definition
class AtomicAddOp(common.AtomicAddOpBase):
    """`tile.atomic_add %v, %buf[%i, ...] : memref<...>`: `buf[i] += v`, atomically.

    Like `tile.store`, an add that every thread of the block runs alike (`is_block_uniform`:
    unscheduled kernels run every loop on every thread) is one update per block; the
    `tile -> kernel` lowering keeps it on thread 0. Otherwise each active thread adds.
    """

    name = "tile.atomic_add"


@irdl_op_definition
class AllocOp(common.AllocOpBase):
    """`%b = tile.alloc : memref<...>` (host)."""

    name = "tile.alloc"


@irdl_op_definition
class LaunchOp(common.LaunchOpBase):
    """`tile.launch @k(%a, ...) : (types) -> ()` (host): runs a `tile.kernel` in place."""

    name = "tile.launch"
