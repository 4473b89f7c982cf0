"""CPU semantics of the kernel dialect's warpgroup MMA (`common/wgmma.py`): descriptors,
`wgmma_fence`, `wgmma`, `wgmma_commit`, `wgmma_wait`, in the kernel interpreter's lock-step
batches (`interpreters/kernel.py`).

A `kernel.wgmma_desc` is the real 64-bit descriptor: its start address is the operand's byte
offset within its shared array (the interpreter places every shared array at address 0 of its
own window, which the GPU build matches by aligning a swizzled operand's array to the swizzle
pattern). A `kernel.wgmma` decodes the descriptors, reads the 64 x K A and N x K B bytes the
ISA's canonical layout names (race-checked as reads of the warpgroup's first thread), and
computes D for each warpgroup of the batch.

Asynchrony is modelled, not assumed away: each result of a wgmma is an `InFlight` value that
refuses to be read (by any op: arithmetic, a store, a conversion) until a `kernel.wgmma_wait`
has retired the group that holds it; only a later wgmma may take it as its accumulator, as
the hardware chains wgmmas in order. A wgmma needs a `kernel.wgmma_fence` since the
warpgroup's start or its last wait (conservatively: the ISA asks for one whenever the
accumulator registers were touched by other instructions, which a program does after a
wait). Not modelled yet: the async proxy's view of shared memory (`fence.proxy.async`), a
write to an operand while its wgmma is in flight, and a kernel that ends with groups pending.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin
from xdsl.dialects.builtin import MemRefType
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    impl,
    register_impls,
)
from xdsl.utils.exceptions import InterpretationError

from deplodock.dialects import kernel
from deplodock.dialects.common.mma import is_tf32
from deplodock.dialects.common.wgmma import (
    WGMMA_M,
    MatrixDescriptor,
    WgmmaShape,
    kmajor_addresses,
    operand_bytes,
    warpgroup_mma,
)
from deplodock.dialects.hardware import WARPGROUP_SIZE
from deplodock.interpreters.blocks import BlockState
from deplodock.interpreters.kernel import _block
from deplodock.interpreters.shared_memory import SharedBuffer
from deplodock.interpreters.simt import buffer_name

#: Bytes of K one row of a wgmma operand spans (K = 16 bf16/f16 or 8 tf32).
ROW_BYTES = 32


class InFlight(NDArrayOperatorsMixin):
    """One accumulator register of every lane, written by a wgmma still in flight: any read
    raises until `pending` (one flag per warpgroup of the batch) is all clear."""

    def __init__(self, value: np.ndarray, pending: np.ndarray, what: str) -> None:
        self._value, self._pending, self._what = value, pending, what

    def settled(self) -> np.ndarray:
        """The value, once every warpgroup that issued it has waited for its group."""
        if self._pending.any():
            group = int(np.flatnonzero(self._pending)[0])
            raise InterpretationError(
                f"{self._what}: warpgroup {group} reads an accumulator of a wgmma still in "
                "flight (no kernel.wgmma_wait has retired its group: a race)"
            )
        return self._value

    def chained(self) -> np.ndarray:
        """The value as the accumulator of a next wgmma (legal while in flight)."""
        return self._value

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        value = self.settled()
        return value if dtype is None else value.astype(dtype)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return getattr(ufunc, method)(*map(_settle, inputs), **kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return func(*map(_settle, args), **kwargs)

    def __getitem__(self, key: Any) -> Any:
        return self.settled()[key]

    def __getattr__(self, name: str) -> Any:  # shape, dtype, astype, ...: read the value
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.settled(), name)

    def __len__(self) -> int:
        return len(self.settled())


def _settle(value: Any) -> Any:
    return value.settled() if isinstance(value, InFlight) else value


@dataclass
class _Group:
    """The wgmmas of one commit group: their results' pending flags."""

    pending: list[np.ndarray] = field(default_factory=list)


@dataclass
class WarpgroupState:
    """Per batch: which warpgroups are fenced, the wgmmas issued since the last commit, and
    the committed groups not yet retired (oldest first)."""

    fenced: np.ndarray
    open: _Group = field(default_factory=_Group)
    groups: list[_Group] = field(default_factory=list)


def _warpgroups(interpreter: Interpreter, op: Any) -> tuple[BlockState, WarpgroupState, np.ndarray]:
    """The running batch, its warpgroup state and which warpgroups run `op` (each wholly
    active or wholly inactive, as `.sync.aligned` needs)."""
    block = _block(interpreter, op)
    lanes = block.lanes
    if lanes.num_threads % WARPGROUP_SIZE:
        raise InterpretationError(
            f"{op.name}: a block of {lanes.num_threads} threads is not whole warpgroups of 128"
        )
    active = lanes.current_mask.reshape(-1, WARPGROUP_SIZE)
    partial = active.any(axis=1) & ~active.all(axis=1)
    if partial.any():
        group = int(np.flatnonzero(partial)[0])
        raise InterpretationError(
            f"{op.name}: warpgroup {group} is partly active (the whole warpgroup must run it)"
        )
    current = interpreter.get_data(WgmmaFunctions, "current", lambda: [None, None])
    if current[0] is not block:  # a new batch starts with nothing fenced or in flight
        current[:] = [block, WarpgroupState(np.zeros(active.shape[0], dtype=bool))]
    return block, current[1], active.all(axis=1)


def _uniform_descriptor(values: np.ndarray, group: int, what: str) -> MatrixDescriptor:
    """The one descriptor the 128 threads of warpgroup `group` pass."""
    mine = np.asarray(values).reshape(-1, WARPGROUP_SIZE)[group]
    if (mine != mine[0]).any():
        raise InterpretationError(f"{what}: warpgroup {group} passes different descriptors")
    return MatrixDescriptor.decode(int(mine[0]))


def _read_operand(
    block: BlockState,
    op: kernel.WgmmaOp,
    buf: SharedBuffer,
    desc: MatrixDescriptor,
    rows: int,
    group: int,
    name: str,
) -> np.ndarray:
    """The `rows x K` operand `desc` describes in `buf`, read as the warpgroup's first thread."""
    element = op.shape.element_bytes
    addresses = kmajor_addresses(desc, rows, ROW_BYTES)[:, ::element]
    if (addresses % element).any():
        raise InterpretationError(f"{op.name}: a descriptor addresses a misaligned element")
    flat = (addresses // element).reshape(-1)
    size = int(np.prod(buf.shape))
    if flat.max() >= size:
        raise InterpretationError(
            f"{op.name}: a descriptor reads byte {int(flat.max()) * element} of "
            f"{name}, past its {size * element}"
        )
    first = group * WARPGROUP_SIZE
    lanes = block.lanes
    epoch = block.epoch if isinstance(block.epoch, int) else int(block.epoch[first])
    values = buf.load(
        list(np.unravel_index(flat, buf.shape)),
        np.full(flat.size, lanes.thread_ids[first]),
        epoch,
        op.name,
        np.full(flat.size, lanes.lane_blocks[first]),
    )
    return values.reshape(rows, -1).astype(np.float32)


@register_impls
class WgmmaFunctions(InterpreterFunctions):
    """The wgmma ops of the kernel dialect (module docstring)."""

    @impl(kernel.WgmmaDescOp)
    def run_wgmma_desc(self, interpreter: Interpreter, op: kernel.WgmmaDescOp, args: PythonValues):
        buf, *indices = args
        lanes = _block(interpreter, op).lanes
        if not isinstance(buf, SharedBuffer):
            raise InterpretationError(f"{op.name}: {buffer_name(op.memref)} is not shared memory")
        mask = lanes.current_mask
        try:
            flat = np.zeros(lanes.num_lanes, dtype=np.int64)
            flat[mask] = np.ravel_multi_index([lanes.lanes(i)[mask] for i in indices], buf.shape)
        except ValueError:
            raise InterpretationError(
                f"{op.name}: an index is outside {buffer_name(op.memref)}"
            ) from None
        assert isinstance(op.memref.type, MemRefType)
        start = flat * operand_bytes(op.memref.type, op.name)
        if (start % 16).any():
            raise InterpretationError(f"{op.name}: an operand must start 16-byte aligned")
        base = op.descriptor(0).encode()
        return ((start >> 4).astype(np.uint64) | np.uint64(base),)

    @impl(kernel.WgmmaFenceOp)
    def run_wgmma_fence(
        self, interpreter: Interpreter, op: kernel.WgmmaFenceOp, args: PythonValues
    ):
        _, state, active = _warpgroups(interpreter, op)
        state.fenced |= active
        return ()

    @impl(kernel.WgmmaOp)
    def run_wgmma(self, interpreter: Interpreter, op: kernel.WgmmaOp, args: PythonValues):
        block, state, active = _warpgroups(interpreter, op)
        a_buf, a_desc, b_buf, b_desc, *c = args
        unfenced = active & ~state.fenced
        if unfenced.any():
            raise InterpretationError(
                f"{op.name}: warpgroup {int(np.flatnonzero(unfenced)[0])} issues a wgmma "
                "without a kernel.wgmma_fence since its start or its last kernel.wgmma_wait"
            )
        shape = op.shape
        old = [
            (v.chained() if isinstance(v, InFlight) else block.lanes.lanes(v)).astype(np.float32)
            for v in c
        ]
        accumulators = np.stack(old, axis=-1).reshape(-1, WARPGROUP_SIZE, shape.registers)
        result = accumulators.copy()
        for group in np.flatnonzero(active):
            a, b = self._operands(block, op, shape, (a_buf, a_desc, b_buf, b_desc), int(group))
            result[group] = warpgroup_mma(shape, a[None], b[None], accumulators[group][None])[0]
        pending = active.copy()
        state.open.pending.append(pending)
        flat = result.reshape(-1, shape.registers)
        return tuple(InFlight(flat[:, i].copy(), pending, op.name) for i in range(shape.registers))

    @staticmethod
    def _operands(
        block: BlockState,
        op: kernel.WgmmaOp,
        shape: WgmmaShape,
        args: Sequence[Any],
        group: int,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Warpgroup `group`'s A (64 x K) and B (N x K) from shared memory."""
        a_buf, a_desc, b_buf, b_desc = args
        operands = []
        for buf, desc, rows, value in (
            (a_buf, a_desc, WGMMA_M, op.a_buf),
            (b_buf, b_desc, shape.n, op.b_buf),
        ):
            if not isinstance(buf, SharedBuffer):
                raise InterpretationError(f"{op.name}: reads its operands from shared memory")
            decoded = _uniform_descriptor(desc, group, op.name)
            try:
                name = buffer_name(value)
                operands.append(_read_operand(block, op, buf, decoded, rows, group, name))
            except ValueError as error:
                raise InterpretationError(f"{op.name}: {error}") from None
        if shape.element_bytes == 4 and not all(is_tf32(x).all() for x in operands):
            raise InterpretationError(f"{op.name}: a tf32 wgmma reads a value that is not tf32")
        return operands[0], operands[1]

    @impl(kernel.WgmmaCommitOp)
    def run_wgmma_commit(
        self, interpreter: Interpreter, op: kernel.WgmmaCommitOp, args: PythonValues
    ):
        _, state, _ = _warpgroups(interpreter, op)
        if state.open.pending:
            state.groups.append(state.open)
            state.open = _Group()
        return ()

    @impl(kernel.WgmmaWaitOp)
    def run_wgmma_wait(self, interpreter: Interpreter, op: kernel.WgmmaWaitOp, args: PythonValues):
        """Retires, for the running warpgroups, every committed group but the `N` newest."""
        _, state, active = _warpgroups(interpreter, op)
        keep = op.groups
        retiring = state.groups[: max(0, len(state.groups) - keep)]
        for group in retiring:
            for pending in group.pending:
                pending &= ~active
        state.groups = [g for g in state.groups if any(p.any() for p in g.pending)]
        state.fenced &= ~active
        return ()
