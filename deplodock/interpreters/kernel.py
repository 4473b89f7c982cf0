"""CPU semantics of the `kernel` dialect: blocks one after another, threads in lock-step.

`kernel.launch` runs the `kernel.func` once per block index in `[0, G)`; within a block the
`T` threads run together (`simt.LockstepState`): `kernel.thread_id` is `np.arange(T)`,
per-thread values are `(T,)` arrays, `kernel.for` is a per-lane loop and `kernel.if` a
masked region. Global buffers are the launch's numpy arrays, read and written with masked
gathers and scatters. Shared arrays are fresh `SharedBuffer`s per block that record, for
each element, the writing thread and barrier epoch; `kernel.barrier` starts a new epoch, so
an access that a missing `__syncthreads()` would leave unordered raises `RaceError`.
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
    lookup_kernel,
    report_block,
    terminator_impl,
)
from deplodock.interpreters.shared_memory import SharedBuffer, shared_buffer_name
from deplodock.interpreters.simt import LockstepState, buffer_name
from deplodock.interpreters.values import empty_buffer


@dataclass
class BlockState:
    """The running block: its lock-step lanes and its barrier epoch."""

    lanes: LockstepState
    epoch: int = 0
    shared: list[SharedBuffer] = field(default_factory=list)
    copies: AsyncCopies = field(init=False)

    def __post_init__(self) -> None:
        self.copies = AsyncCopies(self.lanes.num_threads)


def _block(interpreter: Interpreter, op: Operation) -> BlockState:
    stack: list[BlockState] = interpreter.get_data(KernelFunctions, "blocks", list)
    if not stack:
        raise InterpretationError(f"{op.name}: only runs inside a kernel.func")
    return stack[-1]


def run_kernel(interpreter: Interpreter, func: kernel.FuncOp, buffers: PythonValues) -> None:
    """Runs `func` on `buffers` (in place): every block, one after another."""
    stack: list[BlockState] = interpreter.get_data(KernelFunctions, "blocks", list)
    name = func.sym_name.data
    for block_id in range(func.grid_size):
        state = BlockState(LockstepState(func.block_size, block_id=block_id))
        stack.append(state)
        where = f"kernel.func @{func.sym_name.data} block {block_id}"
        try:
            interpreter.run_ssacfg_region(func.body, buffers, where)
            state.copies.finish(where)
        finally:
            stack.pop()
        report_block(interpreter, name, block_id + 1, func.grid_size)


def _active_indices(state: BlockState, indices: PythonValues) -> list[np.ndarray]:
    """Each index operand restricted to the active lanes."""
    mask = state.lanes.current_mask
    return [state.lanes.lanes(i).astype(np.int64)[mask] for i in indices]


def load_shared(
    state: BlockState, op: kernel.LoadOp, buf: SharedBuffer, indices: PythonValues
) -> np.ndarray:
    """The active lanes read `buf` (race-checked); inactive lanes get 0."""
    mask = state.lanes.current_mask
    values = buf.load(
        _active_indices(state, indices), state.lanes.thread_ids[mask], state.epoch, op.name
    )
    result = np.zeros(state.lanes.num_threads, dtype=numpy_dtype(op.res.type))
    result[mask] = values
    return result


def store_shared(
    state: BlockState, op: kernel.StoreOp, buf: SharedBuffer, indices: PythonValues, value: Any
) -> None:
    """The active lanes write `value` to `buf` (race-checked)."""
    mask = state.lanes.current_mask
    buf.store(
        _active_indices(state, indices),
        state.lanes.lanes(value)[mask],
        state.lanes.thread_ids[mask],
        state.epoch,
        op.name,
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
    mask = state.lanes.current_mask
    per_element = [_active_indices(state, shifted(indices, k)) for k in range(op.width)]
    columns = [np.concatenate(parts) for parts in zip(*per_element, strict=True)]
    lanes = np.tile(state.lanes.thread_ids[mask], op.width)
    got = buf.load(columns, lanes, state.epoch, op.name).reshape(op.width, -1)
    results = []
    for k in range(op.width):
        value = np.zeros(state.lanes.num_threads, dtype=numpy_dtype(op.res[k].type))
        value[mask] = got[k]
        results.append(value)
    return tuple(results)


def store_vector(state: BlockState, op: kernel.StoreVectorOp, args: PythonValues) -> None:
    """The active lanes write `width` aligned consecutive elements (shared: race-checked)."""
    width = op.width
    values, buf, indices = args[:width], args[width], args[width + 1 :]
    name = buffer_name(op.memref)
    check_vector_alignment(state.lanes, indices, width, name, op)
    mask = state.lanes.current_mask
    for k, value in enumerate(values):
        at = shifted(indices, k)
        if isinstance(buf, SharedBuffer):
            buf.store(
                _active_indices(state, at),
                state.lanes.lanes(value)[mask],
                state.lanes.thread_ids[mask],
                state.epoch,
                op.name,
            )
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
        return (_block(interpreter, op).lanes.block_id,)

    @impl(kernel.SharedAllocOp)
    def run_shared_alloc(
        self, interpreter: Interpreter, op: kernel.SharedAllocOp, args: PythonValues
    ):
        """A fresh `__shared__` array for this block (NaN-filled, like an uninitialized one),
        named with its kernel and block for the race and uninitialized-read reports."""
        state = _block(interpreter, op)
        name = shared_buffer_name(op.result, op, state.lanes.block_id)
        buffer = SharedBuffer(name, empty_buffer(op.result.type))
        state.shared.append(buffer)
        return (buffer,)

    @impl(kernel.BarrierOp)
    def run_barrier(self, interpreter: Interpreter, op: kernel.BarrierOp, args: PythonValues):
        state = _block(interpreter, op)
        if not state.lanes.current_mask.all():
            raise InterpretationError(
                f"kernel.barrier: reached by only some threads of block {state.lanes.block_id}"
            )
        state.epoch += 1
        return ()

    @impl(kernel.ShflXorOp)
    def run_shfl_xor(self, interpreter: Interpreter, op: kernel.ShflXorOp, args: PythonValues):
        """Lane `l` gets lane `l ^ mask`'s value; `mask < 32` keeps it within the warp."""
        state = _block(interpreter, op)
        values = state.lanes.lanes(args[0])
        source = state.lanes.thread_ids ^ op.mask.value.data
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
        state.copies.commit(state.lanes.thread_ids[state.lanes.current_mask])
        return ()

    @impl(kernel.CpAsyncWaitOp)
    def run_cp_async_wait(
        self, interpreter: Interpreter, op: kernel.CpAsyncWaitOp, args: PythonValues
    ):
        state = _block(interpreter, op)
        lanes = state.lanes.thread_ids[state.lanes.current_mask]
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
