"""Asynchronous copies and vector accesses for the lock-step `tile` and `kernel` interpreters.

`cp.async` is interpreted with real asynchrony, following the PTX ISA (`cp.async`,
`cp.async.commit_group`, `cp.async.wait_group`):

- an issued copy reads its source at once (the interpreter's choice: the source is global
  memory that the kernel does not write while copying) and is recorded as *pending* in the
  issuing thread's current, uncommitted group; its destination elements are marked in flight
  (`SharedBuffer.issue_copy`), so touching them before the wait is a race;
- `commit` closes each active thread's current group;
- `wait N` lands every copy of each active thread except those in its `N` most recently
  committed groups (and its uncommitted copies, which no wait_group covers). Landing is a
  write of the issuing thread in the current barrier epoch, so another thread still needs a
  barrier before reading it;
- at the end of the block, a copy that never landed is an error (a missing wait).

A copy with a false predicate reads nothing and lands zeros (PTX's `src-size` 0).

Vector loads and stores access `width` consecutive elements of the innermost dimension as
`width` scalar accesses (race-checked in shared memory), after checking at run time that the
innermost index is a multiple of `width` (a misaligned vector access faults on a GPU).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.ir import Operation
from xdsl.utils.exceptions import InterpretationError

from deplodock.interpreters.shared_memory import Epoch, SharedBuffer
from deplodock.interpreters.simt import LockstepState


@dataclass
class _Copy:
    """The copies of one `cp_async` execution: one row per issuing lane."""

    buffer: SharedBuffer
    lanes: np.ndarray  # (k,) issuing lanes (`LockstepState.lane_ids`)
    flat: np.ndarray  # (k, n) destination elements
    values: np.ndarray  # (k, n) what lands
    group: np.ndarray  # (k,) the issuing thread's group number at issue
    landed: np.ndarray  # (k,) bool


def _element_epochs(epoch: Epoch, lanes: np.ndarray, n: int) -> Epoch:
    """The epoch of each of the `n` elements that each of `lanes` copies: `epoch` is one
    for all, or one per lane of the state."""
    return epoch if np.ndim(epoch) == 0 else np.repeat(np.asarray(epoch)[lanes], n)


@dataclass
class AsyncCopies:
    """The copies in flight of the lanes of `state` (one block or a batch), per thread: its
    committed groups count up from 0, and a copy belongs to the group numbered by the
    commits its thread had done at issue. Lanes are `state.lane_ids`; the shared buffers
    hear of threads within their block. An `Epoch` array here has one entry per lane."""

    state: LockstepState
    copies: list[_Copy] = field(default_factory=list)
    commits: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.commits = np.zeros(self.state.num_lanes, dtype=np.int64)

    def issue(
        self,
        buffer: SharedBuffer,
        lanes: np.ndarray,
        flat: np.ndarray,
        values: np.ndarray,
        epoch: Epoch,
        op_name: str,
    ) -> None:
        if lanes.size == 0:
            return
        n = flat.shape[1]
        threads = np.repeat(self.state.thread_ids[lanes], n)
        buffer.issue_copy(flat.reshape(-1), threads, _element_epochs(epoch, lanes, n), op_name)
        group = self.commits[lanes].copy()
        landed = np.zeros(lanes.size, dtype=bool)
        self.copies.append(_Copy(buffer, lanes, flat, values, group, landed))

    def commit(self, lanes: np.ndarray) -> None:
        self.commits[lanes] += 1

    def wait(self, lanes: np.ndarray, pending_groups: int, epoch: Epoch) -> None:
        """Lands the copies of `lanes` in groups older than their `pending_groups` newest."""
        active = np.zeros(self.state.num_lanes, dtype=bool)
        active[lanes] = True
        limit = self.commits - pending_groups  # a copy lands when its group < limit
        for copy in self.copies:
            due = ~copy.landed & active[copy.lanes] & (copy.group < limit[copy.lanes])
            if not due.any():
                continue
            n = copy.flat.shape[1]
            issuers = copy.lanes[due]
            copy.buffer.land_copy(
                copy.flat[due].reshape(-1),
                copy.values[due].reshape(-1),
                np.repeat(self.state.thread_ids[issuers], n),
                _element_epochs(epoch, issuers, n),
            )
            copy.landed |= due
        self.copies = [c for c in self.copies if not c.landed.all()]

    def finish(self, where: Callable[[int], str]) -> None:
        """At the end of the block(s): a copy still in flight means a missing wait.
        `where(block)` says where, e.g. `kernel.func @k block 3`."""
        for copy in self.copies:
            if not copy.landed.all():
                lane = int(copy.lanes[np.argmax(~copy.landed)])
                thread, block = int(self.state.thread_ids[lane]), self.state.block_of(lane)
                raise InterpretationError(
                    f"{where(block)}: thread {thread} ends with a cp.async to shared buffer "
                    f"{copy.buffer.names[block - self.state.first_block]} not yet waited for "
                    f"(missing cp.async wait)"
                )


def _aligned_innermost(
    state: LockstepState, indices: Sequence[Any], count: int, name: str, op: Operation
) -> None:
    """Raises `InterpretationError` when an active lane's innermost index is not a multiple
    of `count` (a vector or cp.async access must be aligned to its size)."""
    if count == 1 or not indices:
        return
    inner = state.lanes(indices[-1]).astype(np.int64)
    bad = state.current_mask & (inner % count != 0)
    if bad.any():
        lane = int(np.argmax(bad))
        raise InterpretationError(
            f"{op.name}: misaligned access to buffer {name}: innermost index "
            f"{int(inner[lane])} is not a multiple of {count} ({state.describe_lane(lane)})"
        )


def shifted(indices: Sequence[Any], k: int) -> list[Any]:
    """`indices` with `k` added to the innermost one."""
    return [*indices[:-1], np.asarray(indices[-1]) + k] if k else list(indices)


def issue_copy(
    state: LockstepState,
    copies: AsyncCopies,
    op: Any,
    args: Sequence[Any],
    epoch: Epoch,
    names: tuple[str, str],
    read: bool = True,
) -> None:
    """One `cp_async` / `copy_async` on the active lanes: read the source now (zeros where
    the predicate is false), record the copy as pending in each thread's current group.
    With `read=False` (the performance tracer, whose global buffers are virtual) zeros land.
    `epoch`: one for all lanes, or one per lane of `state`."""
    nd, ns = len(op.dst_indices), len(op.src_indices)
    dst, src = args[0], args[1 + nd]
    dst_indices, src_indices = list(args[1 : 1 + nd]), list(args[2 + nd : 2 + nd + ns])
    pred = args[-1] if op.pred is not None else True
    if not isinstance(dst, SharedBuffer):
        raise InterpretationError(f"{op.name}: destination {names[0]} is not shared memory")
    count = op.elements
    _aligned_innermost(state, dst_indices, count, names[0], op)
    _aligned_innermost(state, src_indices, count, names[1], op)
    mask = state.current_mask
    lanes = state.lane_ids[mask]
    reading = state.lanes(pred).astype(bool)
    values = np.zeros((lanes.size, count), dtype=dst.data.dtype)
    flat = np.zeros((lanes.size, count), dtype=np.int64)
    with state.masked(reading if read else False):
        read_mask = state.current_mask[mask]
        for k in range(count):
            if state.any_active():
                got = state.gather(src, shifted(src_indices, k), name=names[1], op=op)
                values[:, k] = np.where(read_mask, got[mask], 0)
    base = [state.lanes(i).astype(np.int64)[mask] for i in dst_indices]
    blocks = state.lane_blocks[mask]
    for k in range(count):
        flat[:, k] = dst.flat(shifted(base, k), lanes.size, op.name, blocks)
    copies.issue(dst, lanes, flat, values, epoch, op.name)


def check_vector_alignment(
    state: LockstepState, indices: Sequence[Any], width: int, name: str, op: Operation
) -> None:
    _aligned_innermost(state, indices, width, name, op)
