"""CPU semantics of the `tile` dialect: blocks one after another, threads in lock-step.

`tile.grid` runs its body once per block; `tile.threads` binds the thread id to
`np.arange(T)` and runs its body once for all threads of the block, with per-thread values
as `(T,)` arrays. `tile.for` is a per-lane loop under an active-lane mask, `tile.if` a
masked region, loads and stores are masked gathers and scatters, and `tile.combine` reduces
over the block; all of this is the shared lock-step machinery of `simt.py`. Shared arrays
(`tile.shared_alloc`) are `SharedBuffer`s with the race detector of the kernel level, and
`tile.barrier` starts a new epoch, so a missing barrier in a schedule is caught here
already. `tile.block_tile` and `tile.thread_tile` compute the positions their docstrings
define. `tile.copy_async` is asynchronous (pending per thread and group until
`tile.async_wait` lands it; a copy still in flight when the block's threads end is an
error) and vector accesses are aligned scalar accesses (`async_copy.py`). Host ops:
`tile.alloc` (NaN-filled buffer) and `tile.launch` (runs the kernel symbol on the buffers,
in place).
"""

from __future__ import annotations

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

from deplodock.dialects import tile
from deplodock.dialects.element_types import numpy_dtype
from deplodock.dialects.queries import symbol_name
from deplodock.interpreters.async_copy import (
    AsyncCopies,
    check_vector_alignment,
    issue_copy,
    shifted,
)
from deplodock.interpreters.common import (
    alloc_impl,
    lookup_kernel,
    report_block,
    terminator_impl,
)
from deplodock.interpreters.shared_memory import SharedBuffer, shared_buffer_name
from deplodock.interpreters.simt import LockstepState, buffer_name
from deplodock.interpreters.values import empty_buffer


def _lockstep_stack(interpreter: Interpreter) -> list[LockstepState]:
    return interpreter.get_data(TileFunctions, "lockstep", list)


def _current_state(interpreter: Interpreter) -> LockstepState | None:
    stack = _lockstep_stack(interpreter)
    return stack[-1] if stack else None


def _require_state(interpreter: Interpreter, op: Operation) -> LockstepState:
    state = _current_state(interpreter)
    if state is None:
        raise InterpretationError(f"{op.name}: outside tile.threads")
    return state


def _epochs(interpreter: Interpreter) -> dict[str, int]:
    """The barrier epoch of the running block (`tile.barrier` counts up)."""
    return interpreter.get_data(TileFunctions, "epoch", dict)


def _active(state: LockstepState, indices: PythonValues) -> list[np.ndarray]:
    mask = state.current_mask
    return [state.lanes(i).astype(np.int64)[mask] for i in indices]


def _scalar_indices(indices: PythonValues, op: Operation) -> tuple[int, ...]:
    try:
        return tuple(int(i) for i in indices)
    except TypeError as error:
        raise InterpretationError(f"{op.name}: per-thread index outside tile.threads") from error


def _copies(interpreter: Interpreter, state: LockstepState) -> AsyncCopies:
    """The copies in flight of the running `tile.threads` (one record per execution)."""
    table: dict[int, AsyncCopies] = interpreter.get_data(TileFunctions, "async", dict)
    return table.setdefault(id(state), AsyncCopies(state))


def _finish_copies(interpreter: Interpreter, state: LockstepState) -> None:
    table: dict[int, AsyncCopies] = interpreter.get_data(TileFunctions, "async", dict)
    if (copies := table.pop(id(state), None)) is not None:
        copies.finish(lambda block: f"tile.threads of block {block}")


@register_impls
class TileFunctions(InterpreterFunctions):
    """`@impl`s of the tile ops; the lock-step state of the running block is kept on the
    interpreter (`get_data`), so nested regions find it."""

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
        data = interpreter.get_data(TileFunctions, "block", dict)
        name = symbol_name(op.parent_op())  # a tile.grid sits in its tile.kernel
        for block in range(op.count):
            data["id"] = block
            _epochs(interpreter)["epoch"] = 0
            interpreter.run_ssacfg_region(op.body, (block,), "tile.grid")
            report_block(interpreter, name, block + 1, op.count)
        return ()

    @impl(tile.BlockTileOp)
    def run_block_tile(self, interpreter: Interpreter, op: tile.BlockTileOp, args: PythonValues):
        indices = tile.grouped_tile_indices(int(args[0]), op.tile_counts, op.group_rows)
        return tuple(i * s for i, s in zip(indices, op.tile_sizes, strict=True))

    @impl(tile.ThreadTileOp)
    def run_thread_tile(self, interpreter: Interpreter, op: tile.ThreadTileOp, args: PythonValues):
        threads = np.asarray(args[0], dtype=np.int64)
        return tuple(op.position(threads, cell) for cell in range(op.cell_count))  # type: ignore[arg-type]

    @impl(tile.SharedAllocOp)
    def run_shared_alloc(
        self, interpreter: Interpreter, op: tile.SharedAllocOp, args: PythonValues
    ):
        """A fresh shared array for this block (NaN-filled, like an uninitialized one), named
        with its kernel and block for the race and uninitialized-read reports."""
        state = _require_state(interpreter, op)
        name = shared_buffer_name(op.result, op, state.first_block)
        return (SharedBuffer(name, empty_buffer(op.result.type)),)

    @impl(tile.BarrierOp)
    def run_barrier(self, interpreter: Interpreter, op: tile.BarrierOp, args: PythonValues):
        state = _require_state(interpreter, op)
        if not state.current_mask.all():
            raise InterpretationError(
                f"tile.barrier: reached by only some threads of block {state.first_block}"
            )
        _epochs(interpreter)["epoch"] = _epochs(interpreter).get("epoch", 0) + 1
        return ()

    @impl(tile.IfOp)
    def run_if(self, interpreter: Interpreter, op: tile.IfOp, args: PythonValues):
        state = _current_state(interpreter)
        if state is None:
            if bool(args[0]):
                interpreter.run_ssacfg_region(op.body, (), "tile.if")
            return ()
        with state.masked(args[0]):
            if state.any_active():
                interpreter.run_ssacfg_region(op.body, (), "tile.if")
        return ()

    @impl(tile.ThreadsOp)
    def run_threads(self, interpreter: Interpreter, op: tile.ThreadsOp, args: PythonValues):
        block = interpreter.get_data(TileFunctions, "block", dict).get("id", 0)
        state = LockstepState(op.count, first_block=block)
        stack = _lockstep_stack(interpreter)
        stack.append(state)
        try:
            interpreter.run_ssacfg_region(op.body, (state.thread_ids,), "tile.threads")
            _finish_copies(interpreter, state)
        finally:
            interpreter.get_data(TileFunctions, "async", dict).pop(id(state), None)
            stack.pop()
        return ()

    # -- loops ------------------------------------------------------------------------------

    @impl(tile.ForOp)
    def run_for(self, interpreter: Interpreter, op: tile.ForOp, args: PythonValues):
        lb, *inits = args

        def body(iv: Any, carried: tuple[Any, ...]) -> PythonValues:
            return interpreter.run_ssacfg_region(op.body, (iv, *carried), "tile.for")

        state = _current_state(interpreter)
        if state is not None:
            return state.run_loop(lb, op.upper, op.step_value, inits, body)
        carried = tuple(inits)  # a uniform loop outside tile.threads
        for iv in range(int(lb), op.upper, op.step_value):
            carried = tuple(body(iv, carried))
        return carried

    run_yield = terminator_impl(tile.YieldOp)

    @impl(tile.CombineOp)
    def run_combine(self, interpreter: Interpreter, op: tile.CombineOp, args: PythonValues):
        state = _current_state(interpreter)
        if state is None:
            raise InterpretationError("tile.combine: outside tile.threads")
        return (state.combine(op.kind.data, args[0], op.segment),)

    # -- memory -----------------------------------------------------------------------------

    @impl(tile.LoadOp)
    def run_load(self, interpreter: Interpreter, op: tile.LoadOp, args: PythonValues):
        buf, *indices = args
        state = _current_state(interpreter)
        if isinstance(buf, SharedBuffer):
            state = _require_state(interpreter, op)
            mask = state.current_mask
            epoch = _epochs(interpreter).get("epoch", 0)
            values = buf.load(_active(state, indices), state.thread_ids[mask], epoch, op.name)
            result = np.zeros(state.num_threads, dtype=numpy_dtype(op.res.type))
            result[mask] = values
            return (result,)
        if state is None:
            return (np.asarray(buf)[_scalar_indices(indices, op)],)
        return (state.gather(buf, indices, name=buffer_name(op.memref), op=op),)

    @impl(tile.StoreOp)
    def run_store(self, interpreter: Interpreter, op: tile.StoreOp, args: PythonValues):
        value, buf, *indices = args
        state = _current_state(interpreter)
        if isinstance(buf, SharedBuffer):
            state = _require_state(interpreter, op)
            mask = state.current_mask
            epoch = _epochs(interpreter).get("epoch", 0)
            lanes = state.thread_ids[mask]
            buf.store(_active(state, indices), state.lanes(value)[mask], lanes, epoch, op.name)
            return ()
        if state is None:
            buf[_scalar_indices(indices, op)] = value
            return ()
        state.scatter(buf, indices, value, name=buffer_name(op.memref), op=op)
        return ()

    @impl(tile.AtomicAddOp)
    def run_atomic_add(self, interpreter: Interpreter, op: tile.AtomicAddOp, args: PythonValues):
        value, buf, *indices = args
        state = _current_state(interpreter)
        if state is None:
            buf[_scalar_indices(indices, op)] += value
            return ()
        once = tile.is_block_uniform(op)
        state.accumulate(buf, indices, value, name=buffer_name(op.memref), op=op, once=once)
        return ()

    # -- asynchronous copies and vector accesses ---------------------------------------------

    @impl(tile.CopyAsyncOp)
    def run_copy_async(self, interpreter: Interpreter, op: tile.CopyAsyncOp, args: PythonValues):
        state = _require_state(interpreter, op)
        epoch = _epochs(interpreter).get("epoch", 0)
        names = (buffer_name(op.dst), buffer_name(op.src))
        issue_copy(state, _copies(interpreter, state), op, args, epoch, names)
        return ()

    @impl(tile.AsyncCommitOp)
    def run_async_commit(
        self, interpreter: Interpreter, op: tile.AsyncCommitOp, args: PythonValues
    ):
        state = _require_state(interpreter, op)
        _copies(interpreter, state).commit(state.thread_ids[state.current_mask])
        return ()

    @impl(tile.AsyncWaitOp)
    def run_async_wait(self, interpreter: Interpreter, op: tile.AsyncWaitOp, args: PythonValues):
        state = _require_state(interpreter, op)
        epoch = _epochs(interpreter).get("epoch", 0)
        _copies(interpreter, state).wait(state.thread_ids[state.current_mask], op.groups, epoch)
        return ()

    @impl(tile.LoadVectorOp)
    def run_load_vector(self, interpreter: Interpreter, op: tile.LoadVectorOp, args: PythonValues):
        buf, *indices = args
        state = _require_state(interpreter, op)
        name = buffer_name(op.memref)
        check_vector_alignment(state, indices, op.width, name, op)
        results = []
        for k in range(op.width):
            at = shifted(indices, k)
            if isinstance(buf, SharedBuffer):
                mask = state.current_mask
                epoch = _epochs(interpreter).get("epoch", 0)
                got = buf.load(_active(state, at), state.thread_ids[mask], epoch, op.name)
                value = np.zeros(state.num_threads, dtype=numpy_dtype(op.res[k].type))
                value[mask] = got
            else:
                value = state.gather(buf, at, name=name, op=op)
            results.append(value)
        return tuple(results)

    @impl(tile.StoreVectorOp)
    def run_store_vector(
        self, interpreter: Interpreter, op: tile.StoreVectorOp, args: PythonValues
    ):
        width = op.width
        values, buf, indices = args[:width], args[width], args[width + 1 :]
        state = _require_state(interpreter, op)
        name = buffer_name(op.memref)
        check_vector_alignment(state, indices, width, name, op)
        mask = state.current_mask
        for k, value in enumerate(values):
            at = shifted(indices, k)
            if isinstance(buf, SharedBuffer):
                epoch = _epochs(interpreter).get("epoch", 0)
                lanes = state.thread_ids[mask]
                buf.store(_active(state, at), state.lanes(value)[mask], lanes, epoch, op.name)
            else:
                state.scatter(buf, at, value, name=name, op=op)
        return ()
