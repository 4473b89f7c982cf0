"""CPU semantics of the `kernel` dialect: batches of blocks, threads in lock-step.

`kernel.launch` runs the `kernel.func` for every block index in `[0, G)`. Blocks run in
batches of `B` consecutive blocks (`run_kernel`'s `blocks_per_batch`, by default about
`TARGET_LANES` lanes): the `B * T` threads of a batch run together as one
`simt.LockstepState`, so the Python cost of an op is paid once per batch. `kernel.thread_id`
is each lane's thread index within its block, `kernel.block_id` its block (a scalar when
`B == 1`), per-thread values are `(B * T,)` arrays, `kernel.for` is a per-lane loop and
`kernel.if` a masked region.

The blocks of a batch run concurrently, as on a GPU; results do not depend on `B` as long
as blocks do not communicate through global memory except by atomics (ours never do), and
two lanes of a batch storing different values to one global element is reported. Global
buffers are the launch's numpy arrays, read and written with masked gathers and scatters.
An atomic add lands in lane order within one op, so float sums match block-after-block
exactly when each block adds to an element at most once (split-K slices do); a block that
adds to one element in several ops interleaves with the others of its batch, and the last
bits may differ, as they do between runs on a GPU.

Everything else is per block. Shared arrays are `SharedBuffer`s with a copy per block of
the batch that record, for each element, the writing thread and barrier epoch; each block
has its own epoch, and `kernel.barrier` advances the blocks whose threads all reach it (a
block-uniform loop may skip it in some blocks of a batch; a block only partly there is an
error), so an access that a missing `__syncthreads()` would leave unordered raises
`RaceError` naming the block. `kernel.shfl_xor` stays in the warp, hence in the block.
`kernel.cp_async` is asynchronous (pending per thread and group until `kernel.cp_async_wait`
lands it) and vector accesses are aligned scalar accesses: see `async_copy.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    impl,
    register_impls,
)
from xdsl.ir import Operation
from xdsl.utils.exceptions import InterpretationError

from deplodock.dialects import kernel
from deplodock.dialects.element_types import numpy_dtype
from deplodock.interpreters.async_copy import (
    AsyncCopies,
    check_vector_alignment,
    issue_copy,
    shifted,
)
from deplodock.interpreters.common import (
    alloc_impl,
    blocks_per_batch_of,
    lookup_kernel,
    report_block,
    terminator_impl,
)
from deplodock.interpreters.shared_memory import Epoch, SharedBuffer, shared_buffer_name
from deplodock.interpreters.simt import LockstepState, buffer_name
from deplodock.interpreters.values import empty_buffer

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

    def barrier(self) -> None:
        """`__syncthreads()` for every block whose threads all reached it; the blocks of the
        batch that skipped it (a block-uniform branch) stay in their epoch. A block only
        partly here is an error, as on a GPU (a hang or undefined behavior)."""
        rows = self.lanes.per_block(self.lanes.current_mask)
        reached = rows.all(axis=1)
        partly = rows.any(axis=1) & ~reached
        if partly.any():
            block = self.lanes.first_block + int(np.argmax(partly))
            raise InterpretationError(
                f"kernel.barrier: reached by only some threads of block {block}"
            )
        self.epochs += reached


def _block(interpreter: Interpreter, op: Operation) -> BlockState:
    stack: list[BlockState] = interpreter.get_data(KernelFunctions, "blocks", list)
    if not stack:
        raise InterpretationError(f"{op.name}: only runs inside a kernel.func")
    return stack[-1]


def run_kernel(
    interpreter: Interpreter,
    func: kernel.FuncOp,
    buffers: PythonValues,
    *,
    blocks_per_batch: int | None = None,
) -> None:
    """Runs `func` on `buffers` (in place), `blocks_per_batch` blocks at a time as one
    lock-step state (default: the interpreter's `set_blocks_per_batch`, else
    `default_blocks_per_batch`). Progress is reported after each batch."""
    stack: list[BlockState] = interpreter.get_data(KernelFunctions, "blocks", list)
    name, grid = func.sym_name.data, func.grid_size
    batch = blocks_per_batch or blocks_per_batch_of(interpreter)
    batch = batch or default_blocks_per_batch(func.block_size)
    if batch < 1:
        raise ValueError(f"blocks per batch must be at least 1, got {batch}")
    for first in range(0, grid, batch):
        count = min(batch, grid - first)
        state = BlockState(LockstepState(func.block_size, first_block=first, num_blocks=count))
        stack.append(state)
        blocks = f"block {first}" if count == 1 else f"blocks {first}-{first + count - 1}"
        try:
            interpreter.run_ssacfg_region(func.body, buffers, f"kernel.func @{name} {blocks}")
            state.copies.finish(lambda block: f"kernel.func @{name} block {block}")
        finally:
            stack.pop()
        report_block(interpreter, name, first + count, grid)


def _active_indices(state: BlockState, indices: PythonValues) -> list[np.ndarray]:
    """Each index operand restricted to the active lanes."""
    mask = state.lanes.current_mask
    return [state.lanes.lanes(i).astype(np.int64)[mask] for i in indices]


def load_shared(
    state: BlockState, op: kernel.LoadOp, buf: SharedBuffer, indices: PythonValues
) -> np.ndarray:
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


def load_vector(state: BlockState, op: kernel.LoadVectorOp, args: PythonValues) -> PythonValues:
    """`width` aligned consecutive elements per active lane (shared: race-checked)."""
    buf, *indices = args
    name = buffer_name(op.memref)
    check_vector_alignment(state.lanes, indices, op.width, name, op)
    if isinstance(buf, SharedBuffer):
        return _load_shared_vector(state, op, buf, indices)
    return tuple(
        state.lanes.gather(buf, shifted(indices, k), name=name, op=op) for k in range(op.width)
    )


def _load_shared_vector(
    state: BlockState, op: kernel.LoadVectorOp, buf: SharedBuffer, indices: PythonValues
) -> PythonValues:
    """All `width` elements of every active lane in one race-checked shared read."""
    lanes, mask, width = state.lanes, state.lanes.current_mask, op.width
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
        value = np.zeros(lanes.num_lanes, dtype=numpy_dtype(op.res[k].type))
        value[mask] = got[k]
        results.append(value)
    return tuple(results)


def store_vector(state: BlockState, op: kernel.StoreVectorOp, args: PythonValues) -> None:
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


@register_impls
class KernelFunctions(InterpreterFunctions):
    """`@impl`s of the kernel ops; the running block's state lives on the interpreter
    (`get_data`), so ops in nested regions find it."""

    # -- host -------------------------------------------------------------------------------

    run_alloc = alloc_impl(kernel.AllocOp)

    @impl(kernel.LaunchOp)
    def run_launch(self, interpreter: Interpreter, op: kernel.LaunchOp, args: PythonValues):
        run_kernel(interpreter, lookup_kernel(op, op.callee, kernel.FuncOp), args)
        return ()

    run_return = terminator_impl(kernel.ReturnOp)

    # -- thread geometry and synchronization ------------------------------------------------

    @impl(kernel.ThreadIdOp)
    def run_thread_id(self, interpreter: Interpreter, op: kernel.ThreadIdOp, args: PythonValues):
        return (_block(interpreter, op).lanes.thread_ids,)

    @impl(kernel.BlockIdOp)
    def run_block_id(self, interpreter: Interpreter, op: kernel.BlockIdOp, args: PythonValues):
        return (_block(interpreter, op).lanes.block_ids,)

    @impl(kernel.SharedAllocOp)
    def run_shared_alloc(
        self, interpreter: Interpreter, op: kernel.SharedAllocOp, args: PythonValues
    ):
        """A fresh `__shared__` array for each block of the batch (NaN-filled, like an
        uninitialized one), named with its kernel and block for the race and
        uninitialized-read reports."""
        state = _block(interpreter, op)
        first = state.lanes.first_block
        blocks = range(first, first + state.lanes.num_blocks)
        names = [shared_buffer_name(op.result, op, block) for block in blocks]
        buffer = SharedBuffer(names, empty_buffer(op.result.type))
        state.shared.append(buffer)
        return (buffer,)

    @impl(kernel.BarrierOp)
    def run_barrier(self, interpreter: Interpreter, op: kernel.BarrierOp, args: PythonValues):
        _block(interpreter, op).barrier()
        return ()

    @impl(kernel.ShflXorOp)
    def run_shfl_xor(self, interpreter: Interpreter, op: kernel.ShflXorOp, args: PythonValues):
        """Lane `l` gets lane `l ^ mask`'s value; `mask < 32` keeps it within the warp (and
        so within the block: blocks are whole numbers of warps)."""
        state = _block(interpreter, op)
        values = state.lanes.lanes(args[0])
        source = state.lanes.lane_ids ^ op.mask.value.data
        return (values[source],)

    # -- control flow -----------------------------------------------------------------------

    @impl(kernel.ForOp)
    def run_for(self, interpreter: Interpreter, op: kernel.ForOp, args: PythonValues):
        lb, *inits = args

        def body(iv: Any, carried: tuple[Any, ...]) -> PythonValues:
            return interpreter.run_ssacfg_region(op.body, (iv, *carried), "kernel.for")

        state = _block(interpreter, op)
        return state.lanes.run_loop(lb, op.upper, op.step_value, inits, body)

    run_yield = terminator_impl(kernel.YieldOp)

    @impl(kernel.IfOp)
    def run_if(self, interpreter: Interpreter, op: kernel.IfOp, args: PythonValues):
        lanes = _block(interpreter, op).lanes
        with lanes.masked(args[0]):
            if lanes.any_active():
                interpreter.run_ssacfg_region(op.body, (), "kernel.if")
        return ()

    # -- memory -----------------------------------------------------------------------------

    @impl(kernel.LoadOp)
    def run_load(self, interpreter: Interpreter, op: kernel.LoadOp, args: PythonValues):
        buf, *indices = args
        state = _block(interpreter, op)
        if not isinstance(buf, SharedBuffer):
            return (state.lanes.gather(buf, indices, name=buffer_name(op.memref), op=op),)
        return (load_shared(state, op, buf, indices),)

    @impl(kernel.StoreOp)
    def run_store(self, interpreter: Interpreter, op: kernel.StoreOp, args: PythonValues):
        value, buf, *indices = args
        state = _block(interpreter, op)
        if not isinstance(buf, SharedBuffer):
            state.lanes.scatter(buf, indices, value, name=buffer_name(op.memref), op=op)
            return ()
        store_shared(state, op, buf, indices, value)
        return ()

    @impl(kernel.AtomicAddOp)
    def run_atomic_add(self, interpreter: Interpreter, op: kernel.AtomicAddOp, args: PythonValues):
        value, buf, *indices = args
        state = _block(interpreter, op)
        state.lanes.accumulate(buf, indices, value, name=buffer_name(op.memref), op=op)
        return ()

    # -- asynchronous copies and vector accesses ---------------------------------------------

    @impl(kernel.CpAsyncOp)
    def run_cp_async(self, interpreter: Interpreter, op: kernel.CpAsyncOp, args: PythonValues):
        state = _block(interpreter, op)
        names = (buffer_name(op.dst), buffer_name(op.src))
        issue_copy(state.lanes, state.copies, op, args, state.epoch, names)
        return ()

    @impl(kernel.CpAsyncCommitOp)
    def run_cp_async_commit(
        self, interpreter: Interpreter, op: kernel.CpAsyncCommitOp, args: PythonValues
    ):
        state = _block(interpreter, op)
        state.copies.commit(state.lanes.lane_ids[state.lanes.current_mask])
        return ()

    @impl(kernel.CpAsyncWaitOp)
    def run_cp_async_wait(
        self, interpreter: Interpreter, op: kernel.CpAsyncWaitOp, args: PythonValues
    ):
        state = _block(interpreter, op)
        lanes = state.lanes.lane_ids[state.lanes.current_mask]
        state.copies.wait(lanes, op.groups, state.epoch)
        return ()

    @impl(kernel.LoadVectorOp)
    def run_load_vector(
        self, interpreter: Interpreter, op: kernel.LoadVectorOp, args: PythonValues
    ):
        return load_vector(_block(interpreter, op), op, args)

    @impl(kernel.StoreVectorOp)
    def run_store_vector(
        self, interpreter: Interpreter, op: kernel.StoreVectorOp, args: PythonValues
    ):
        store_vector(_block(interpreter, op), op, args)
        return ()
