"""Shared memory with a race detector, for the lock-step `kernel` interpreter.

The interpreter runs all threads of a block in lock-step, so a missing `__syncthreads()`
would go unnoticed: every store lands before the next load whatever the order. To catch it,
each element of a `__shared__` array remembers which thread last wrote it, and in which
barrier epoch (the number of `kernel.barrier`s the block has passed). When the kernel
interpreter runs a batch of blocks at once, each block has its own copy of the array (a
leading block dimension) and its own epoch, so reports still name one block. Accesses of different
threads to one element in the same epoch are unordered on a GPU, so:

- a read of an element written by another thread in the current epoch (read after write),
- a write of an element another thread wrote (write after write) or read (write after read)
  in the current epoch

raise `RaceError`, naming the buffer, the threads, the element and the op. A read of an
element no thread of the block has written (nor a copy landed in) raises
`UninitializedReadError`: shared memory starts with the previous block's leftovers.

Asynchronous copies (`cp.async`, see `async_copy.py`) add a third record: the element's
pending copy. Between its issue and the `cp.async.wait_group` that retires it, a copy may
land at any moment, so any read or write of the element (by any thread, the issuing one
included) is reported as a race ("cp.async not yet waited for"). When the copy lands it is a
write of the issuing thread in the then current epoch: other threads need a barrier after
the wait before they read it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.ir import Operation, SSAValue
from xdsl.utils.exceptions import InterpretationError

from deplodock.dialects.common import KernelOpBase
from deplodock.dialects.queries import symbol_name
from deplodock.interpreters.simt import buffer_name

NO_THREAD = -1
MANY_THREADS = -2

#: The barrier epoch of an access: one for all lanes, or one per accessing lane (a batch of
#: blocks counts barriers per block).
Epoch = int | np.ndarray


class RaceError(InterpretationError):
    """Two threads of a block touch one shared element with no barrier between them."""


class UninitializedReadError(InterpretationError):
    """A thread reads a shared element that nothing has written in this block: on a GPU it
    holds whatever the previous block left there."""


def shared_buffer_name(value: SSAValue, alloc: Operation, block_id: int) -> str:
    """How reports name a block's shared array: `%red (@rms_like, block 2)`."""
    kernel = alloc.parent_op()
    while kernel is not None and not isinstance(kernel, KernelOpBase):
        kernel = kernel.parent_op()
    where = f"@{symbol_name(kernel)}, " if kernel is not None else ""
    return f"{buffer_name(value)} ({where}block {block_id})"


class SharedBuffer:
    """The `__shared__` array of each block of a batch plus per-element writer and reader
    records.

    `name` names the array of a lone block; a sequence names one block each, and the
    buffer then holds a copy of `data` per block, stacked along a leading block dimension
    (`data` and the records have shape `(blocks, *shape)`, flat element numbers count over
    all of it), so the blocks of a batch never see each other's elements.

    `store` and `load` take the accesses of the active lanes of one op: `indices` is one
    integer array per dimension (one entry per active lane), `lanes` the thread ids (within
    their block) of those lanes, `epoch` the barrier epoch of each lane's block (or one
    epoch for all), `blocks` each lane's block position in the batch (default: block 0).
    """

    def __init__(self, name: str | Sequence[str], data: np.ndarray):
        self.names = [name] if isinstance(name, str) else list(name)
        self.shape: tuple[int, ...] = data.shape
        self.data = np.repeat(data[np.newaxis], len(self.names), axis=0)
        # Flat (1-d) views and records: numpy indexes a 1-d array with an index array
        # several times faster than through `.flat`.
        self._values = self.data.reshape(-1)
        size = self._values.size
        self.writer_thread = np.full(size, NO_THREAD, dtype=np.int64)
        self.writer_epoch = np.full(size, -1, dtype=np.int64)
        self.reader_thread = np.full(size, NO_THREAD, dtype=np.int64)
        self.reader_epoch = np.full(size, -1, dtype=np.int64)
        self.pending_thread = np.full(size, NO_THREAD, dtype=np.int64)
        self._pending = 0  # elements with a copy in flight: none, the common case, is free
        # What the copies in flight are, and what a racing access missed, for the reports.
        self._pending_note = ("cp.async", "cp.async not yet waited for")
        self._strides = _row_major_strides(self.data.shape)

    @property
    def name(self) -> str:
        """The name of the first block's array (the only one of a lone block)."""
        return self.names[0]

    # -- helpers ---------------------------------------------------------------------------

    def _element(self, flat_index: int) -> tuple[str, list[int]]:
        """The array name and in-block coordinates of element `flat_index`, for reports."""
        block, *element = np.unravel_index(int(flat_index), self.data.shape)
        return self.names[int(block)], [int(k) for k in element]

    def flat(
        self,
        indices: Sequence[np.ndarray],
        count: int,
        op_name: str,
        blocks: np.ndarray | None = None,
    ) -> np.ndarray:
        """Element numbers of the accessed elements (bounds-checked): `indices` within the
        block, `blocks` the accessing lanes' block positions (default: block 0)."""
        if len(indices) != len(self.shape):
            raise InterpretationError(
                f"{op_name}: {len(indices)} indices for the rank-{len(self.shape)} shared "
                f"buffer {self.name}"
            )
        flat = np.zeros(count, dtype=np.int64)
        if blocks is not None and self._strides[0]:
            flat += blocks * self._strides[0]
        for dim, (index, size) in enumerate(zip(indices, self.shape, strict=True)):
            column = np.asarray(index, dtype=np.int64)
            if column.size and (column.min() < 0 or column.max() >= size):
                self._out_of_bounds(column, count, dim, op_name, blocks)
            flat += column * self._strides[dim + 1]
        return flat

    def _out_of_bounds(
        self,
        column: np.ndarray,
        count: int,
        dim: int,
        op_name: str,
        blocks: np.ndarray | None,
    ) -> None:
        """Raises the report of the first access out of bounds in dimension `dim`."""
        column = np.broadcast_to(column, (count,))
        k = int(np.argmax((column < 0) | (column >= self.shape[dim])))
        block = 0 if blocks is None else int(blocks[k])
        raise InterpretationError(
            f"{op_name}: index {int(column[k])} out of bounds for dimension {dim} "
            f"(size {self.shape[dim]}) of shared buffer {self.names[block]}"
        )

    def _check(
        self,
        racy: np.ndarray,
        lanes: np.ndarray,
        flat: np.ndarray,
        others: np.ndarray,
        access: str,
        op_name: str,
    ) -> None:
        """Raises `RaceError` for the first racy lane: `access` is e.g. "reads ... written"."""
        if not racy.any():
            return
        i = int(np.argmax(racy))
        verb, what = access.split(" ... ")
        other = int(others[i])
        who = "several threads" if other == MANY_THREADS else f"thread {other}"
        name, element = self._element(flat[i])
        raise RaceError(
            f"race on shared buffer {name}: thread {int(lanes[i])} {verb} element "
            f"{element} {what} by {who} in the same barrier epoch ({op_name})"
        )

    def _check_initialized(
        self, never_written: np.ndarray, lanes: np.ndarray, flat: np.ndarray, op_name: str
    ) -> None:
        """Raises `UninitializedReadError` for the first lane reading a never-written element."""
        if not never_written.any():
            return
        i = int(np.argmax(never_written))
        name, element = self._element(flat[i])
        raise UninitializedReadError(
            f"uninitialized read of shared buffer {name}: thread {int(lanes[i])} reads "
            f"element {element}, which nothing in this block has written ({op_name})"
        )

    def _check_pending(self, flat: np.ndarray, lanes: np.ndarray, verb: str, op_name: str):
        """Raises `RaceError` when an accessed element has a copy in flight."""
        if not self._pending:
            return
        issuer = self.pending_thread[flat]
        pending = issuer != NO_THREAD
        if not pending.any():
            return
        i = int(np.argmax(pending))
        name, element = self._element(flat[i])
        raise RaceError(
            f"race on shared buffer {name}: thread {int(lanes[i])} {verb} element "
            f"{element} while a {self._pending_note[0]} of thread {int(issuer[i])} to it is "
            f"in flight: {self._pending_note[1]} ({op_name})"
        )

    # -- accesses --------------------------------------------------------------------------

    def load(
        self,
        indices: Sequence[np.ndarray],
        lanes: np.ndarray,
        epoch: Epoch,
        op_name: str,
        blocks: np.ndarray | None = None,
    ) -> np.ndarray:
        """The values at `indices` for each lane; raises `RaceError` on a read after write."""
        lanes = np.asarray(lanes, dtype=np.int64)
        flat = self.flat(indices, lanes.size, op_name, blocks)
        self._check_pending(flat, lanes, "reads", op_name)
        writer = self.writer_thread[flat]
        self._check_initialized(writer == NO_THREAD, lanes, flat, op_name)
        racy = (writer != lanes) & (self.writer_epoch[flat] == epoch)
        self._check(racy, lanes, flat, writer, "reads ... written", op_name)
        self._record_readers(flat, lanes, epoch)
        return self._values[flat]

    def _record_readers(self, flat: np.ndarray, lanes: np.ndarray, epoch: Epoch) -> None:
        """Remember who read each element in this epoch (one thread, or `MANY_THREADS`).

        No sort: each entry scatters what its element's record becomes if its lane were
        the only new reader (its lane, or `MANY_THREADS` when another thread read the
        element earlier in this epoch); an entry that reads back something else shares its
        element with another lane, which makes the element `MANY_THREADS`."""
        if flat.size == 0:
            return
        seen_now = self.reader_epoch[flat] == epoch
        alone = ~seen_now | (self.reader_thread[flat] == lanes)
        candidate = np.where(alone, lanes, MANY_THREADS)
        self.reader_thread[flat] = candidate
        shared = self.reader_thread[flat] != candidate
        if shared.any():
            self.reader_thread[flat[shared]] = MANY_THREADS
        self.reader_epoch[flat] = epoch

    def store(
        self,
        indices: Sequence[np.ndarray],
        values: np.ndarray,
        lanes: np.ndarray,
        epoch: Epoch,
        op_name: str = "kernel.store",
        blocks: np.ndarray | None = None,
    ) -> None:
        """Writes `values` at `indices`; raises `RaceError` on a write after write or read."""
        lanes = np.asarray(lanes, dtype=np.int64)
        flat = self.flat(indices, lanes.size, op_name, blocks)
        if flat.size == 0:
            return
        self._check_pending(flat, lanes, "writes", op_name)
        self._check_write(flat, lanes, epoch, op_name)
        self._values[flat] = np.broadcast_to(values, (lanes.size,))
        self.writer_thread[flat] = lanes
        self.writer_epoch[flat] = epoch

    def _check_write(self, flat: np.ndarray, lanes: np.ndarray, epoch: Epoch, op_name: str):
        """Write after write (in this access or this epoch) or after read: `RaceError`."""
        self._check_distinct(flat, lanes, op_name)
        writer = self.writer_thread[flat]
        racy = (writer != lanes) & (writer >= 0) & (self.writer_epoch[flat] == epoch)
        self._check(racy, lanes, flat, writer, "writes ... written", op_name)
        reader = self.reader_thread[flat]
        racy = (reader != lanes) & (reader != NO_THREAD) & (self.reader_epoch[flat] == epoch)
        self._check(racy, lanes, flat, reader, "writes ... read", op_name)

    def _check_distinct(self, flat: np.ndarray, lanes: np.ndarray, op_name: str) -> None:
        """Two entries of one access writing one element: `RaceError` naming the first
        duplicate (in lane order) and the entry before it. Detected without a sort (each
        entry scatters its position and must read it back); the report sorts."""
        scratch = np.empty(self._values.size, dtype=np.int64)
        positions = np.arange(flat.size, dtype=np.int64)
        scratch[flat] = positions
        if (scratch[flat] == positions).all():
            return
        order = np.argsort(flat, kind="stable")
        twice = np.zeros(lanes.size, dtype=bool)
        twice[order[1:]] = flat[order[1:]] == flat[order[:-1]]
        first_writer = np.empty_like(lanes)
        first_writer[order[1:]] = lanes[order[:-1]]
        self._check(twice, lanes, flat, first_writer, "writes ... also written", op_name)

    # -- asynchronous copies ---------------------------------------------------------------

    def issue_copy(
        self,
        flat: np.ndarray,
        lanes: np.ndarray,
        epoch: Epoch,
        op_name: str,
        note: tuple[str, str] = ("cp.async", "cp.async not yet waited for"),
    ) -> None:
        """Marks elements `flat` (one per entry, `lanes` the issuing threads) as the target
        of a copy in flight. The copy may land at once, so it is checked as a write now:
        against other threads' accesses in this epoch and against copies already in flight.
        `note` names the copy and what an access racing with it missed, for the reports."""
        lanes = np.asarray(lanes, dtype=np.int64)
        flat = np.asarray(flat, dtype=np.int64)
        if flat.size == 0:
            return
        self._check_pending(flat, lanes, "copies to", op_name)
        self._check_write(flat, lanes, epoch, op_name)
        self.pending_thread[flat] = lanes
        self._pending += flat.size
        self._pending_note = note

    def land_copy(
        self, flat: np.ndarray, values: np.ndarray, lanes: np.ndarray, epoch: Epoch
    ) -> None:
        """The copy to `flat` lands: a write of the issuing threads `lanes` in `epoch`."""
        self._values[flat] = values
        self.writer_thread[flat] = lanes
        self.writer_epoch[flat] = epoch
        self.pending_thread[flat] = NO_THREAD
        self._pending -= flat.size


def _row_major_strides(shape: tuple[int, ...]) -> list[int]:
    """Element strides of a C-ordered array of `shape`."""
    strides = [1] * len(shape)
    for dim in range(len(shape) - 2, -1, -1):
        strides[dim] = strides[dim + 1] * shape[dim + 1]
    return strides
