"""A running batch of blocks, as the `tile` and `kernel` interpreters keep it.

The threads of `B` consecutive blocks run as one lock-step state of `B * T` lanes
(`simt.LockstepState`); `BlockState` adds what is per block on a GPU: a barrier epoch per
block, the shared arrays (a copy per block, `shared_memory.SharedBuffer`) and the copies in
flight (`async_copy.AsyncCopies`). The shared-memory accesses of the active lanes go through
`load_shared` / `store_shared` and the vector forms, race-checked per block. Both
interpreters use these, so a `tile.load` of shared memory and a `kernel.load` check alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.interpreter import PythonValues
from xdsl.ir import Operation
from xdsl.utils.exceptions import InterpretationError

from deplodock.dialects.common.ldmatrix import ROW_ELEMENTS, warp_ldmatrix
from deplodock.dialects.element_types import numpy_dtype
from deplodock.dialects.hardware import WARP_SIZE
from deplodock.interpreters.async_copy import AsyncCopies, check_vector_alignment, shifted
from deplodock.interpreters.shared_memory import Epoch, SharedBuffer
from deplodock.interpreters.simt import LockstepState, buffer_name

#: Lanes a batch of blocks aims at: enough that numpy's work (a few ns per lane) outweighs
#: the ~25 us of Python dispatch per op, few enough that the per-lane arrays and the shared
#: arrays with their race records stay in cache. A 1024^2 GEMM (128 blocks of 128 threads)
#: on the 2-core development machine: 31 s at 2K lanes, 18 s at 4K, 13 s at 8K, 15 s at 16K.
TARGET_LANES = 8192


def default_blocks_per_batch(block_size: int) -> int:
    """How many blocks of `block_size` threads `run_kernel` runs together by default."""
    return max(1, TARGET_LANES // block_size)


@dataclass
class BlockState:
    """The running batch of blocks: their lock-step lanes, a barrier epoch per block, their
    shared arrays and their copies in flight."""

    lanes: LockstepState
    epochs: np.ndarray = field(init=False)
    shared: list[SharedBuffer] = field(default_factory=list)
    copies: AsyncCopies = field(init=False)

    def __post_init__(self) -> None:
        self.epochs = np.zeros(self.lanes.num_blocks, dtype=np.int64)
        self.copies = AsyncCopies(self.lanes)

    @property
    def epoch(self) -> Epoch:
        """The barrier epoch of every lane's block: an int for a lone block, else per lane."""
        if self.lanes.num_blocks == 1:
            return int(self.epochs[0])
        return self.epochs[self.lanes.lane_blocks]

    def active_epochs(self) -> Epoch:
        """The epoch of each active lane (what a shared access of the active lanes uses)."""
        epoch = self.epoch
        return epoch if isinstance(epoch, int) else epoch[self.lanes.current_mask]

    def barrier(self, op_name: str = "kernel.barrier") -> None:
        """`__syncthreads()` for every block whose threads all reached it; the blocks of the
        batch that skipped it (a block-uniform branch) stay in their epoch. A block only
        partly here is an error, as on a GPU (a hang or undefined behavior)."""
        rows = self.lanes.per_block(self.lanes.current_mask)
        reached = rows.all(axis=1)
        partly = rows.any(axis=1) & ~reached
        if partly.any():
            block = self.lanes.first_block + int(np.argmax(partly))
            raise InterpretationError(f"{op_name}: reached by only some threads of block {block}")
        self.epochs += reached


def _active_indices(state: BlockState, indices: PythonValues) -> list[np.ndarray]:
    """Each index operand restricted to the active lanes."""
    mask = state.lanes.current_mask
    return [state.lanes.lanes(i).astype(np.int64)[mask] for i in indices]


def load_shared(state: BlockState, op: Any, buf: SharedBuffer, indices: PythonValues) -> np.ndarray:
    """The active lanes read their block's `buf` (race-checked); inactive lanes get 0."""
    lanes, mask = state.lanes, state.lanes.current_mask
    values = buf.load(
        _active_indices(state, indices),
        lanes.thread_ids[mask],
        state.active_epochs(),
        op.name,
        lanes.lane_blocks[mask],
    )
    result = np.zeros(lanes.num_lanes, dtype=numpy_dtype(op.res.type))
    result[mask] = values
    return result


def store_shared(
    state: BlockState, op: Operation, buf: SharedBuffer, indices: PythonValues, value: Any
) -> None:
    """The active lanes write `value` to their block's `buf` (race-checked)."""
    lanes, mask = state.lanes, state.lanes.current_mask
    buf.store(
        _active_indices(state, indices),
        lanes.lanes(value)[mask],
        lanes.thread_ids[mask],
        state.active_epochs(),
        op.name,
        lanes.lane_blocks[mask],
    )


def load_vector(state: BlockState, op: Any, args: PythonValues) -> PythonValues:
    """`width` aligned consecutive elements per active lane (shared: race-checked)."""
    buf, *indices = args
    name = buffer_name(op.memref)
    check_vector_alignment(state.lanes, indices, op.width, name, op)
    if isinstance(buf, SharedBuffer):
        return _load_shared_vector(state, op, buf, indices)
    return tuple(
        state.lanes.gather(buf, shifted(indices, k), name=name, op=op) for k in range(op.width)
    )


def load_matrices(state: BlockState, op: Any, args: PythonValues) -> PythonValues:
    """`ldmatrix` (`common/ldmatrix.py`): each addressing lane (below `8 count` in its warp)
    reads its row of 8 elements, race-checked as its own read, and the warp's rows are dealt
    out as fragments by the PTX ISA's layout. Every lane of a running warp must be active."""
    buf, *indices = args
    state.lanes.check_whole_warps(op.name, "ldmatrix", "ldmatrix.sync")
    if not isinstance(buf, SharedBuffer):
        raise InterpretationError(f"{op.name}: {buffer_name(op.memref)} is not shared memory")
    lanes = state.lanes
    addressing = lanes.thread_ids % WARP_SIZE < ROW_ELEMENTS * op.count
    with lanes.masked(addressing):
        check_vector_alignment(lanes, indices, ROW_ELEMENTS, buffer_name(op.memref), op)
        rows = _load_shared_vector(state, op, buf, indices, ROW_ELEMENTS)
    per_warp = np.stack(rows, axis=-1).reshape(-1, WARP_SIZE, ROW_ELEMENTS)
    fragments = warp_ldmatrix(per_warp, op.count, op.is_trans).reshape(lanes.num_lanes, -1)
    return tuple(fragments[:, k] for k in range(fragments.shape[1]))


def _load_shared_vector(
    state: BlockState, op: Any, buf: SharedBuffer, indices: PythonValues, width: int = 0
) -> PythonValues:
    """All `width` elements (the op's vector width by default) of every active lane in one
    race-checked shared read; inactive lanes get zeros."""
    lanes, mask, width = state.lanes, state.lanes.current_mask, width or op.width
    per_element = [_active_indices(state, shifted(indices, k)) for k in range(width)]
    columns = [np.concatenate(parts) for parts in zip(*per_element, strict=True)]
    epochs = state.active_epochs()
    got = buf.load(
        columns,
        np.tile(lanes.thread_ids[mask], width),
        epochs if isinstance(epochs, int) else np.tile(epochs, width),
        op.name,
        np.tile(lanes.lane_blocks[mask], width),
    ).reshape(width, -1)
    results = []
    for k in range(width):
        value = np.zeros(lanes.num_lanes, dtype=numpy_dtype(op.res[0].type))
        value[mask] = got[k]
        results.append(value)
    return tuple(results)


def store_vector(state: BlockState, op: Any, args: PythonValues) -> None:
    """The active lanes write `width` aligned consecutive elements (shared: race-checked)."""
    width = op.width
    values, buf, indices = args[:width], args[width], args[width + 1 :]
    name = buffer_name(op.memref)
    check_vector_alignment(state.lanes, indices, width, name, op)
    for k, value in enumerate(values):
        at = shifted(indices, k)
        if isinstance(buf, SharedBuffer):
            store_shared(state, op, buf, at, value)
        else:
            state.lanes.scatter(buf, at, value, name=name, op=op)
