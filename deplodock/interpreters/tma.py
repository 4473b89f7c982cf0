"""CPU semantics of the kernel dialect's TMA copies and mbarriers (`common/tma.py`).

The kernel interpreter runs the threads of a block in lock-step; these ops follow the PTX
ISA's rules for mbarriers and `cp.async.bulk.tensor` within that model:

- Each mbarrier (one `i64` element of a shared array, per block of the batch) keeps its
  expected arrival count, the pending arrivals and tx-count of its current phase, the number
  of completed phases, whether `fence_proxy_async` made its init visible to the async proxy,
  and the copies in flight on the phase.
- A `tma_load` reads its box at once (zeros outside the source, swizzled as the op's span
  says) and marks the destination elements as in flight (`SharedBuffer.issue_copy`): any
  access to them before they land is a race ("TMA copy before its mbarrier phase
  completed"), so a consumer that reads a stage before waiting on its full barrier is
  reported. The copies land when the phase's last arrival is in (at that arrival or at a
  later wait), lowering the tx-count by their bytes; a phase completes when its tx-count is
  then zero. Landed bytes are ordered before the threads that wait on the phase, so they are
  recorded outside any barrier epoch.
- A wait on a phase that has not completed can never complete: every thread of the block is
  at the same op or masked off, so it is reported as a hang naming the barrier's state (a
  wrong `expect_tx`, a missing arrival). Kernels whose producer and consumers wait in
  different branches (warp specialization) need the CPU emulation of the emitted C instead.
- A thread waits on a barrier for each of its phases in turn; a wait that finds the barrier
  past the phase it is for reports a stage reused one phase early.
- The completion of a phase that every thread of the block arrives on (an "empty" barrier),
  seen by a wait, orders the arrivals' earlier accesses before the waiters' later ones: the
  block moves to a new barrier epoch, as at `__syncthreads`. A producer that issues a copy
  into a stage without that wait writes in the epoch its consumers read the stage in, which
  the race detector reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.interpreter import Interpreter, InterpreterFunctions, PythonValues, impl, register_impls
from xdsl.ir import Operation
from xdsl.utils.exceptions import InterpretationError

from deplodock.dialects import kernel
from deplodock.dialects.common.tma import swizzled, tma_box
from deplodock.interpreters.blocks import BlockState
from deplodock.interpreters.kernel import KernelFunctions
from deplodock.interpreters.shared_memory import SharedBuffer

#: How a racing access to a TMA destination reads in the race report.
TMA_NOTE = ("TMA copy", "its mbarrier phase has not completed")


@dataclass
class _Copy:
    """A TMA copy in flight: its destination elements, their values, the issuing thread."""

    buffer: SharedBuffer
    flat: np.ndarray
    values: np.ndarray
    lane: int


@dataclass
class _Barrier:
    """One mbarrier of one block (module docstring)."""

    expected: int
    init_thread: int
    pending: int
    tx: int = 0
    completed: int = 0
    fenced: bool = False
    copies: list[_Copy] = field(default_factory=list)
    waits: dict[int, int] = field(default_factory=dict)  # thread -> its completed waits


@dataclass
class _Barriers:
    """The mbarriers of the running batch, by (buffer, block position, element)."""

    state: BlockState
    table: dict[tuple[int, int, int], _Barrier] = field(default_factory=dict)


def _barriers(interpreter: Interpreter, op: Operation) -> _Barriers:
    """The running batch's barriers (a new table for each batch)."""
    stack: list[BlockState] = interpreter.get_data(KernelFunctions, "blocks", list)
    if not stack:
        raise InterpretationError(f"{op.name}: only runs inside a kernel.func")
    current: _Barriers | None = interpreter.get_data(TmaFunctions, "barriers", lambda: None)
    if current is None or current.state is not stack[-1]:
        current = _Barriers(stack[-1])
        interpreter.set_data(TmaFunctions, "barriers", current)
    return current


def _active(state: BlockState, values: Any) -> np.ndarray:
    return state.lanes.lanes(values).astype(np.int64)[state.lanes.current_mask]


def _barrier_keys(
    state: BlockState, buffer: SharedBuffer, indices: PythonValues, op: Operation
) -> list[tuple[int, int, int, int]]:
    """(buffer, block position, element, thread) for each active lane."""
    mask = state.lanes.current_mask
    blocks = state.lanes.lane_blocks[mask]
    flat = buffer.flat([_active(state, i) for i in indices], int(mask.sum()), op.name, blocks)
    per_block = int(np.prod(buffer.shape))
    threads = state.lanes.thread_ids[mask]
    return [
        (id(buffer), int(b), int(f) - int(b) * per_block, int(t))
        for b, f, t in zip(blocks, flat, threads, strict=True)
    ]


def _lookup(barriers: _Barriers, key: tuple[int, int, int, int], op: Operation) -> _Barrier:
    barrier = barriers.table.get(key[:3])
    if barrier is None:
        raise InterpretationError(
            f"{op.name}: thread {key[3]} uses an mbarrier that was never initialized"
        )
    return barrier


def _advance(barrier: _Barrier, op: Operation) -> bool:
    """Lands the phase's copies once its arrivals are in and completes it at tx-count zero;
    whether it completed."""
    if barrier.pending:
        return False
    for copy in barrier.copies:
        copy.buffer.land_copy(copy.flat, copy.values, np.full(copy.flat.size, copy.lane), -1)
        barrier.tx -= copy.values.nbytes
    barrier.copies.clear()
    if barrier.tx < 0:
        raise InterpretationError(
            f"{op.name}: TMA copies delivered {-barrier.tx} bytes more than the phase's "
            "mbarrier.arrive.expect_tx announced"
        )
    if barrier.tx:
        return False
    barrier.completed += 1
    barrier.pending = barrier.expected
    return True


@register_impls
class TmaFunctions(InterpreterFunctions):
    """`@impl`s of the kernel dialect's TMA and mbarrier ops."""

    @impl(kernel.MbarrierInitOp)
    def run_init(self, interpreter: Interpreter, op: kernel.MbarrierInitOp, args: PythonValues):
        barriers = _barriers(interpreter, op)
        for key in _barrier_keys(barriers.state, args[0], args[1:], op):
            barriers.table[key[:3]] = _Barrier(op.arrivals, key[3], op.arrivals)
        return ()

    @impl(kernel.FenceProxyAsyncOp)
    def run_fence(self, interpreter: Interpreter, op: kernel.FenceProxyAsyncOp, args: PythonValues):
        barriers = _barriers(interpreter, op)
        lanes = barriers.state.lanes
        active = set(
            zip(
                lanes.lane_blocks[lanes.current_mask].tolist(),
                lanes.thread_ids[lanes.current_mask].tolist(),
                strict=True,
            )
        )
        for (_, block, _), barrier in barriers.table.items():
            if (block, barrier.init_thread) in active:
                barrier.fenced = True
        return ()

    @impl(kernel.MbarrierArriveOp)
    def run_arrive(self, interpreter: Interpreter, op: kernel.MbarrierArriveOp, args: PythonValues):
        barriers = _barriers(interpreter, op)
        for key in _barrier_keys(barriers.state, args[0], args[1:], op):
            barrier = _lookup(barriers, key, op)
            if barrier.pending == 0:
                raise InterpretationError(
                    f"{op.name}: thread {key[3]} arrives on a phase that expects no more "
                    f"arrivals ({barrier.expected} per phase)"
                )
            barrier.tx += op.expect_tx or 0
            barrier.pending -= 1
        for key in _barrier_keys(barriers.state, args[0], args[1:], op):
            _advance(_lookup(barriers, key, op), op)
        return ()

    @impl(kernel.MbarrierWaitOp)
    def run_wait(self, interpreter: Interpreter, op: kernel.MbarrierWaitOp, args: PythonValues):
        barriers = _barriers(interpreter, op)
        state = barriers.state
        parities = _active(state, args[-1])
        epoch_blocks: set[int] = set()
        keys = _barrier_keys(state, args[0], args[1:-1], op)
        for key, parity in zip(keys, parities.tolist(), strict=True):
            barrier = _lookup(barriers, key, op)
            _advance(barrier, op)
            if barrier.completed % 2 == parity:
                raise InterpretationError(
                    f"{op.name}: hang: thread {key[3]} waits for the phase of parity {parity}, "
                    f"which can never complete ({barrier.pending} of {barrier.expected} "
                    f"arrivals pending, tx-count {barrier.tx} bytes, {len(barrier.copies)} "
                    "TMA copies in flight; every thread of the block is here or masked off)"
                )
            phase = barrier.waits.get(key[3], 0)
            if barrier.completed - 1 != phase:
                raise InterpretationError(
                    f"{op.name}: thread {key[3]}'s wait {phase} is for phase {phase}, but the "
                    f"barrier completed {barrier.completed} phases (a stage reused one phase "
                    "early)"
                )
            barrier.waits[key[3]] = phase + 1
            if barrier.expected == state.lanes.num_threads:
                epoch_blocks.add(key[1])
        for block in epoch_blocks:  # an all-thread phase orders like __syncthreads
            state.epochs[block] += 1
        return ()

    @impl(kernel.TmaLoadOp)
    def run_tma_load(self, interpreter: Interpreter, op: kernel.TmaLoadOp, args: PythonValues):
        barriers = _barriers(interpreter, op)
        state = barriers.state
        n_dst, n_src = len(op.dst_indices), len(op.src_indices)
        dst, src = args[0], args[1 + n_dst]
        dst_indices = args[1 : 1 + n_dst]
        row, col = args[2 + n_dst : 2 + n_dst + n_src]
        bar_at = 2 + n_dst + n_src
        keys = _barrier_keys(state, args[bar_at], args[bar_at + 1 :], op)
        rows, cols = _active(state, row), _active(state, col)
        leading = [_active(state, i) for i in dst_indices[:-2]]
        for k, key in enumerate(keys):
            barrier = _lookup(barriers, key, op)
            if not barrier.fenced:
                raise InterpretationError(
                    f"{op.name}: thread {key[3]} copies on an mbarrier whose init no "
                    "fence_proxy_async made visible to the async proxy"
                )
            box = swizzled(tma_box(src, int(rows[k]), int(cols[k]), op.box), op.span)
            flat = _box_elements(dst, [int(i[k]) for i in leading], key[1], op)
            dst.issue_copy(
                flat, np.full(flat.size, key[3]), state.epochs[key[1]], op.name, TMA_NOTE
            )
            barrier.copies.append(_Copy(dst, flat, box.reshape(-1), key[3]))
        return ()


def _box_elements(
    buffer: SharedBuffer, leading: list[int], block: int, op: Operation
) -> np.ndarray:
    """The flat elements of the box at `leading` indices of `buffer` in block `block`."""
    rows, cols = buffer.shape[-2:]
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    count = rows * cols
    indices = [np.full(count, i) for i in leading] + [r.reshape(-1), c.reshape(-1)]
    return buffer.flat(indices, count, op.name, np.full(count, block))
