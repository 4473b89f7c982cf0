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

from collections.abc import Sequence
from typing import Any

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
from deplodock.interpreters.async_copy import (
    issue_copy,
)
from deplodock.interpreters.blocks import (
    BlockState,
    default_blocks_per_batch,
    load_matrices,
    load_shared,
    load_vector,
    store_shared,
    store_vector,
)
from deplodock.interpreters.common import (
    alloc_impl,
    blocks_per_batch_of,
    lookup_kernel,
    report_block,
    terminator_impl,
)
from deplodock.interpreters.shared_memory import SharedBuffer, shared_buffer_name
from deplodock.interpreters.simt import (
    LockstepState,
    buffer_name,
    interpret_split_tf32,
    mma_operands,
)
from deplodock.interpreters.values import empty_buffer


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
    blocks: Sequence[int] | None = None,
) -> None:
    """Runs `func` on `buffers` (in place), `blocks_per_batch` blocks at a time as one
    lock-step state (default: the interpreter's `set_blocks_per_batch`, else
    `default_blocks_per_batch`). Progress is reported after each batch.

    `blocks` runs only those block ids (in increasing order; a batch holds consecutive ids
    only) instead of the whole grid: the tuner's correctness check interprets a sample of
    a big kernel's blocks. Progress then counts the chosen blocks."""
    stack: list[BlockState] = interpreter.get_data(KernelFunctions, "blocks", list)
    name, grid = func.sym_name.data, func.grid_size
    batch = blocks_per_batch or blocks_per_batch_of(interpreter)
    batch = batch or default_blocks_per_batch(func.block_size)
    if batch < 1:
        raise ValueError(f"blocks per batch must be at least 1, got {batch}")
    batches = _batches(grid, batch, blocks)
    total, done = sum(count for _, count in batches), 0
    for first, count in batches:
        state = BlockState(LockstepState(func.block_size, first_block=first, num_blocks=count))
        stack.append(state)
        where = f"block {first}" if count == 1 else f"blocks {first}-{first + count - 1}"
        try:
            interpreter.run_ssacfg_region(func.body, buffers, f"kernel.func @{name} {where}")
            state.copies.finish(lambda block: f"kernel.func @{name} block {block}")
        finally:
            stack.pop()
        done += count
        report_block(interpreter, name, done, total)


def _batches(grid: int, batch: int, blocks: Sequence[int] | None) -> list[tuple[int, int]]:
    """(first block, count) of each batch: the grid in order, or the runs of consecutive ids
    among `blocks`, each at most `batch` long."""
    if blocks is None:
        return [(first, min(batch, grid - first)) for first in range(0, grid, batch)]
    batches: list[tuple[int, int]] = []
    for block in sorted(set(blocks)):
        if not 0 <= block < grid:
            raise ValueError(f"block {block} is outside the grid of {grid} blocks")
        if batches and sum(batches[-1]) == block and batches[-1][1] < batch:
            batches[-1] = (batches[-1][0], batches[-1][1] + 1)
        else:
            batches.append((block, 1))
    return batches


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

    @impl(kernel.SplitTf32Op)
    def run_split_tf32(self, interpreter: Interpreter, op: kernel.SplitTf32Op, args: PythonValues):
        return interpret_split_tf32(args[0])

    @impl(kernel.MmaSyncOp)
    def run_mma_sync(self, interpreter: Interpreter, op: kernel.MmaSyncOp, args: PythonValues):
        """The warp's fragments in, D's fragments out (`LockstepState.mma`)."""
        state = _block(interpreter, op)
        a, b, c = mma_operands(op, args)
        return state.lanes.mma(op.shape, a, b, c, op.name)

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

    @impl(kernel.LdmatrixOp)
    def run_ldmatrix(self, interpreter: Interpreter, op: kernel.LdmatrixOp, args: PythonValues):
        """The warp's rows in, each lane's fragment elements out (`blocks.load_matrices`)."""
        return load_matrices(_block(interpreter, op), op, args)

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
