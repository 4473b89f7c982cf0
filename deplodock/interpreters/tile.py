"""CPU semantics of the `tile` dialect: batches of blocks, threads in lock-step.

`tile.grid` runs its body for batches of `B` consecutive blocks at once (as the kernel
interpreter does; `blocks.default_blocks_per_batch`, or the interpreter's
`set_blocks_per_batch`). Outside `tile.threads` the body is per block: its values are
scalars for a lone block and `(B,)` arrays for a batch, one entry per block, run by a
lock-step state whose lanes are the blocks (a `tile.for` or `tile.if` whose bounds or
condition differ between blocks runs per lane under a mask, as threads do). `tile.threads`
binds the thread id and runs its body once for all `B * T` threads of the batch
(`blocks.BlockState`: per-thread values are `(B * T,)` arrays; a per-block value from
outside is repeated over its block's threads); `tile.for` is a per-lane loop under an
active-lane mask, `tile.if` a masked region, loads and stores are masked gathers and
scatters, and `tile.combine` reduces over each block. Shared arrays (`tile.shared_alloc`)
are `SharedBuffer`s with the race detector of the kernel level, a copy per block, and
`tile.barrier` starts a new epoch for the blocks whose threads all reach it, so a missing
barrier in a schedule is caught here already. `tile.block_tile` and `tile.thread_tile`
compute the positions their docstrings define. `tile.copy_async` is asynchronous (pending
per thread and group until `tile.async_wait` lands it; a copy still in flight when the
block's threads end is an error) and vector accesses are aligned scalar accesses
(`async_copy.py`). Host ops: `tile.alloc` (NaN-filled buffer) and `tile.launch` (runs the
kernel symbol on the buffers, in place).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.dialects.builtin import MemRefType
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    impl,
    register_impls,
)
from xdsl.ir import Operation, SSAValue
from xdsl.utils.exceptions import InterpretationError

from deplodock.dialects import tile
from deplodock.dialects.queries import symbol_name
from deplodock.interpreters.async_copy import issue_copy
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


def _thread_stack(interpreter: Interpreter) -> list[BlockState]:
    return interpreter.get_data(TileFunctions, "threads", list)


def _grid_stack(interpreter: Interpreter) -> list[LockstepState]:
    """The running batches of blocks (one lane per block), innermost last."""
    return interpreter.get_data(TileFunctions, "grid", list)


def _threads(interpreter: Interpreter) -> BlockState | None:
    """The running `tile.threads` (None outside one)."""
    stack = _thread_stack(interpreter)
    return stack[-1] if stack else None


def _require_threads(interpreter: Interpreter, op: Operation) -> BlockState:
    state = _threads(interpreter)
    if state is None:
        raise InterpretationError(f"{op.name}: outside tile.threads")
    return state


def _batch(interpreter: Interpreter) -> LockstepState | None:
    """The running batch of blocks outside `tile.threads`, when it holds several blocks
    (a lone block runs the grid body on plain scalars, as a single block always did)."""
    stack = _grid_stack(interpreter)
    if not stack or stack[-1].num_blocks == 1:
        return None
    return stack[-1]


def _scalar_indices(indices: PythonValues, op: Operation) -> tuple[int, ...]:
    try:
        return tuple(int(i) for i in indices)
    except TypeError as error:
        raise InterpretationError(f"{op.name}: per-thread index outside tile.threads") from error


def threads_per_block(grid: tile.GridOp) -> int:
    """The threads of the grid's `tile.threads` regions (the most, if several): what a batch
    of blocks is sized by (here and in `estimate.py`)."""
    return max((op.count for op in grid.walk() if isinstance(op, tile.ThreadsOp)), default=1)


def _values_from_outside(region_op: Operation) -> list[SSAValue]:
    """The non-buffer values `region_op`'s body uses but does not define (per-block values
    of the grid body that the threads read)."""
    inside: set[SSAValue] = set()
    for op in region_op.walk():
        inside.update(op.results)
        for region in op.regions:
            for block in region.blocks:
                inside.update(block.args)
    used: dict[SSAValue, None] = {}
    for op in region_op.walk():
        for operand in op.operands:
            if operand not in inside and not isinstance(operand.type, MemRefType):
                used[operand] = None
    return list(used)


@register_impls
class TileFunctions(InterpreterFunctions):
    """`@impl`s of the tile ops; the running batch of blocks and the running `tile.threads`
    are kept on the interpreter (`get_data`), so nested regions find them."""

    # -- host -------------------------------------------------------------------------------

    run_alloc = alloc_impl(tile.AllocOp)

    @impl(tile.LaunchOp)
    def run_launch(self, interpreter: Interpreter, op: tile.LaunchOp, args: PythonValues):
        kernel = lookup_kernel(op, op.callee, tile.KernelOp)
        interpreter.run_ssacfg_region(kernel.body, args, f"tile.kernel {kernel.sym_name.data}")
        return ()

    run_return = terminator_impl(tile.ReturnOp)

    # -- blocks and threads -----------------------------------------------------------------

    @impl(tile.GridOp)
    def run_grid(self, interpreter: Interpreter, op: tile.GridOp, args: PythonValues):
        name = symbol_name(op.parent_op())  # a tile.grid sits in its tile.kernel
        batch = blocks_per_batch_of(interpreter)
        batch = batch or default_blocks_per_batch(threads_per_block(op))
        stack = _grid_stack(interpreter)
        for first in range(0, op.count, batch):
            blocks = LockstepState(1, first_block=first, num_blocks=min(batch, op.count - first))
            stack.append(blocks)
            try:
                interpreter.run_ssacfg_region(op.body, (blocks.block_ids,), "tile.grid")
            finally:
                stack.pop()
            report_block(interpreter, name, first + blocks.num_blocks, op.count)
        return ()

    @impl(tile.BlockTileOp)
    def run_block_tile(self, interpreter: Interpreter, op: tile.BlockTileOp, args: PythonValues):
        def origin(block: int) -> tuple[int, ...]:
            indices = tile.grouped_tile_indices(block, op.tile_counts, op.group_rows)
            return tuple(i * s for i, s in zip(indices, op.tile_sizes, strict=True))

        if np.ndim(args[0]) == 0:
            return origin(int(args[0]))
        per_block = np.array([origin(int(b)) for b in args[0]], dtype=np.int64)
        return tuple(per_block[:, axis] for axis in range(per_block.shape[1]))

    @impl(tile.ThreadTileOp)
    def run_thread_tile(self, interpreter: Interpreter, op: tile.ThreadTileOp, args: PythonValues):
        threads = np.asarray(args[0], dtype=np.int64)
        return tuple(op.position(threads, cell) for cell in range(op.cell_count))  # type: ignore[arg-type]

    @impl(tile.SplitTf32Op)
    def run_split_tf32(self, interpreter: Interpreter, op: tile.SplitTf32Op, args: PythonValues):
        return interpret_split_tf32(args[0])

    @impl(tile.MmaSyncOp)
    def run_mma_sync(self, interpreter: Interpreter, op: tile.MmaSyncOp, args: PythonValues):
        """The warp's fragments in, D's fragments out (`LockstepState.mma`)."""
        state = _require_threads(interpreter, op)
        a, b, c = mma_operands(op, args)
        return state.lanes.mma(op.shape, a, b, c, op.name)

    @impl(tile.SharedAllocOp)
    def run_shared_alloc(
        self, interpreter: Interpreter, op: tile.SharedAllocOp, args: PythonValues
    ):
        """A fresh shared array for each block (NaN-filled, like an uninitialized one), named
        with its kernel and block for the race and uninitialized-read reports."""
        state = _require_threads(interpreter, op)
        first = state.lanes.first_block
        blocks = range(first, first + state.lanes.num_blocks)
        names = [shared_buffer_name(op.result, op, block) for block in blocks]
        return (SharedBuffer(names, empty_buffer(op.result.type)),)

    @impl(tile.BarrierOp)
    def run_barrier(self, interpreter: Interpreter, op: tile.BarrierOp, args: PythonValues):
        _require_threads(interpreter, op).barrier(op.name)
        return ()

    @impl(tile.IfOp)
    def run_if(self, interpreter: Interpreter, op: tile.IfOp, args: PythonValues):
        lanes = _lanes(interpreter)
        if lanes is None:
            if bool(args[0]):
                interpreter.run_ssacfg_region(op.body, (), "tile.if")
            return ()
        with lanes.masked(args[0]):
            if lanes.any_active():
                interpreter.run_ssacfg_region(op.body, (), "tile.if")
        return ()

    @impl(tile.ThreadsOp)
    def run_threads(self, interpreter: Interpreter, op: tile.ThreadsOp, args: PythonValues):
        grid = _grid_stack(interpreter)
        blocks = grid[-1] if grid else LockstepState(1)
        lanes = LockstepState(
            op.count, first_block=blocks.first_block, num_blocks=blocks.num_blocks
        )
        state = BlockState(lanes)
        stack = _thread_stack(interpreter)
        stack.append(state)
        interpreter.push_scope("tile.threads")
        try:
            if blocks.num_blocks > 1:  # each block's values, repeated over its threads
                outside = _values_from_outside(op)
                values = interpreter.get_values(outside)
                interpreter.set_values(
                    (value, _per_thread(data, blocks.num_blocks, op.count))
                    for value, data in zip(outside, values, strict=True)
                )
            interpreter.run_ssacfg_region(op.body, (lanes.thread_ids,), "tile.threads")
            state.copies.finish(lambda block: f"tile.threads of block {block}")
        finally:
            interpreter.pop_scope()
            stack.pop()
        return ()

    # -- loops ------------------------------------------------------------------------------

    @impl(tile.ForOp)
    def run_for(self, interpreter: Interpreter, op: tile.ForOp, args: PythonValues):
        lb, *inits = args

        def body(iv: Any, carried: tuple[Any, ...]) -> PythonValues:
            return interpreter.run_ssacfg_region(op.body, (iv, *carried), "tile.for")

        lanes = _lanes(interpreter)
        if lanes is not None:
            return lanes.run_loop(lb, op.upper, op.step_value, inits, body)
        carried = tuple(inits)  # a uniform loop of a lone block, outside tile.threads
        for iv in range(int(lb), op.upper, op.step_value):
            carried = tuple(body(iv, carried))
        return carried

    run_yield = terminator_impl(tile.YieldOp)

    @impl(tile.CombineOp)
    def run_combine(self, interpreter: Interpreter, op: tile.CombineOp, args: PythonValues):
        state = _threads(interpreter)
        if state is None:
            raise InterpretationError("tile.combine: outside tile.threads")
        return (state.lanes.combine(op.kind.data, args[0], op.segment),)

    # -- memory -----------------------------------------------------------------------------

    @impl(tile.LoadOp)
    def run_load(self, interpreter: Interpreter, op: tile.LoadOp, args: PythonValues):
        buf, *indices = args
        if isinstance(buf, SharedBuffer):
            return (load_shared(_require_threads(interpreter, op), op, buf, indices),)
        lanes = _lanes(interpreter)
        if lanes is None:
            return (np.asarray(buf)[_scalar_indices(indices, op)],)
        return (lanes.gather(buf, indices, name=buffer_name(op.memref), op=op),)

    @impl(tile.StoreOp)
    def run_store(self, interpreter: Interpreter, op: tile.StoreOp, args: PythonValues):
        value, buf, *indices = args
        if isinstance(buf, SharedBuffer):
            store_shared(_require_threads(interpreter, op), op, buf, indices, value)
            return ()
        lanes = _lanes(interpreter)
        if lanes is None:
            buf[_scalar_indices(indices, op)] = value
            return ()
        lanes.scatter(buf, indices, value, name=buffer_name(op.memref), op=op)
        return ()

    @impl(tile.AtomicAddOp)
    def run_atomic_add(self, interpreter: Interpreter, op: tile.AtomicAddOp, args: PythonValues):
        value, buf, *indices = args
        state = _threads(interpreter)
        if state is None:
            batch = _batch(interpreter)
            if batch is None:
                buf[_scalar_indices(indices, op)] += value
            else:  # once per block of the batch
                batch.accumulate(buf, indices, value, name=buffer_name(op.memref), op=op)
            return ()
        once = tile.is_block_uniform(op)
        name = buffer_name(op.memref)
        state.lanes.accumulate(buf, indices, value, name=name, op=op, once=once)
        return ()

    # -- asynchronous copies and vector accesses ---------------------------------------------

    @impl(tile.CopyAsyncOp)
    def run_copy_async(self, interpreter: Interpreter, op: tile.CopyAsyncOp, args: PythonValues):
        state = _require_threads(interpreter, op)
        names = (buffer_name(op.dst), buffer_name(op.src))
        issue_copy(state.lanes, state.copies, op, args, state.epoch, names)
        return ()

    @impl(tile.AsyncCommitOp)
    def run_async_commit(
        self, interpreter: Interpreter, op: tile.AsyncCommitOp, args: PythonValues
    ):
        state = _require_threads(interpreter, op)
        state.copies.commit(state.lanes.lane_ids[state.lanes.current_mask])
        return ()

    @impl(tile.AsyncWaitOp)
    def run_async_wait(self, interpreter: Interpreter, op: tile.AsyncWaitOp, args: PythonValues):
        state = _require_threads(interpreter, op)
        lanes = state.lanes.lane_ids[state.lanes.current_mask]
        state.copies.wait(lanes, op.groups, state.epoch)
        return ()

    @impl(tile.LdmatrixOp)
    def run_ldmatrix(self, interpreter: Interpreter, op: tile.LdmatrixOp, args: PythonValues):
        """The warp's rows in, each lane's fragment elements out (`blocks.load_matrices`)."""
        return load_matrices(_require_threads(interpreter, op), op, args)

    @impl(tile.LoadVectorOp)
    def run_load_vector(self, interpreter: Interpreter, op: tile.LoadVectorOp, args: PythonValues):
        return load_vector(_require_threads(interpreter, op), op, args)

    @impl(tile.StoreVectorOp)
    def run_store_vector(
        self, interpreter: Interpreter, op: tile.StoreVectorOp, args: PythonValues
    ):
        store_vector(_require_threads(interpreter, op), op, args)
        return ()


def _lanes(interpreter: Interpreter) -> LockstepState | None:
    """Who runs a per-lane op now: the threads inside `tile.threads`, the blocks of a batch
    outside it, or None for a lone block outside it (plain scalars)."""
    state = _threads(interpreter)
    return state.lanes if state is not None else _batch(interpreter)


def _per_thread(value: Any, blocks: int, threads: int) -> Any:
    """A value of the grid body as the threads see it: one entry per block, repeated over the
    block's threads (a scalar, uniform over the whole batch, stays as it is)."""
    if isinstance(value, np.ndarray) and value.shape == (blocks,):
        return np.repeat(value, threads)
    return value
