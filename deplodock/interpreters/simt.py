"""Lock-step SIMT machinery shared by the `tile` and `kernel` interpreters.

The threads of a block run together: a per-thread value is a numpy array with one entry per
*lane*, a uniform value may stay a scalar and broadcasts. Divergent control flow (a
per-thread loop bound, `kernel.if`) runs under an *active-lane mask*: every op still
computes on all lanes, but only active lanes may touch memory or update loop-carried values.

A state may hold a *batch* of `B` consecutive blocks of `T` threads each, as `B * T` lanes
(lane `l` is thread `l % T` of block `first_block + l // T`): the Python cost of
interpreting an op is then paid once per batch instead of once per block, which is what
makes grids of tens of thousands of blocks interpretable. Everything that is per block on a
GPU stays per block here: `combine` reduces within a block, `accumulate(once=True)` adds
once per block, and error messages name the thread *within its block* and the block
(`describe_lane`). With `B == 1` this is plainly one block, lane `i` = thread `i`.

```python
state = LockstepState(num_threads=256, first_block=b)          # or num_blocks=B
with state.masked(t < n):                 # push_mask / pop_mask
    v = state.gather(buf, (i, j), name="x", op=op)         # inactive lanes read a safe index
    state.scatter(out, (i, j), v * 2, name="y", op=op)     # inactive lanes write nothing
results = state.run_loop(lb, ub, step, inits, body)         # a per-lane `for` with iter_args
total = state.combine("add", partial)                       # all-reduce over active lanes
d = state.mma(shape, a, b, c)            # a warp-wide tensor-core MMA, fragments per lane
```

Memory checks: an out-of-bounds index in an active lane, and two active lanes writing
different values to one element in the same store, raise `InterpretationError` naming the
buffer and the op. (Races across a missing barrier are the kernel interpreter's business:
its shared arrays are `shared_memory.SharedBuffer`s that remember writers per epoch.)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.ir import Operation, SSAValue
from xdsl.utils.exceptions import InterpretationError

from deplodock.dialects.common.mma import MmaShape, MmaSyncOpBase, is_tf32, split_tf32, warp_mma
from deplodock.dialects.hardware import WARP_SIZE
from deplodock.dialects.reduce_kind import ReduceKind


def buffer_name(value: SSAValue) -> str:
    """How error messages name a buffer: its SSA name (`%x`) when it has one."""
    return f"%{value.name_hint}" if value.name_hint else "<buffer>"


#: The body of a per-lane loop: (induction variable lanes, carried values) -> next values.
LoopBody = Callable[[np.ndarray, tuple[Any, ...]], Sequence[Any]]


def describe(name: str, op: Operation | None) -> str:
    """`buffer %x in tile.load` for error messages."""
    where = f" in {op.name}" if op is not None else ""
    return f"buffer {name}{where}"


@functools.cache
def row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a row-major buffer of `shape` (asked for every load and store of
    the interpreted kernels, so computed once per shape)."""
    strides = [1] * len(shape)
    for dim in range(len(shape) - 2, -1, -1):
        strides[dim] = strides[dim + 1] * shape[dim + 1]
    return tuple(strides)


@dataclass
class LockstepState:
    """The threads of `num_blocks` consecutive blocks, run in lock-step.

    `num_lanes = num_blocks * num_threads` lanes; `thread_ids` is each lane's thread index
    within its block, `lane_blocks` its block's position in the batch (0 for a lone block)
    and `lane_ids` its lane number (what per-lane records such as cp.async groups index).
    A stack of active-lane masks whose top (`current_mask`) is the conjunction of all
    pushed masks.
    """

    num_threads: int
    first_block: int = 0
    num_blocks: int = 1
    num_lanes: int = field(init=False)
    thread_ids: np.ndarray = field(init=False)
    lane_blocks: np.ndarray = field(init=False)
    lane_ids: np.ndarray = field(init=False)
    _masks: list[np.ndarray] = field(init=False)

    def __post_init__(self) -> None:
        if self.num_blocks < 1:
            raise InterpretationError(f"a lock-step batch needs a block, got {self.num_blocks}")
        self.num_lanes = self.num_threads * self.num_blocks
        self.thread_ids = np.tile(np.arange(self.num_threads, dtype=np.int64), self.num_blocks)
        self.lane_blocks = np.repeat(np.arange(self.num_blocks, dtype=np.int64), self.num_threads)
        self.lane_ids = np.arange(self.num_lanes, dtype=np.int64)
        self._masks = [np.ones(self.num_lanes, dtype=bool)]

    # -- blocks -----------------------------------------------------------------------------

    @property
    def block_ids(self) -> int | np.ndarray:
        """`blockIdx.x` of every lane: the uniform scalar for a lone block, else per lane."""
        if self.num_blocks == 1:
            return self.first_block
        return self.first_block + self.lane_blocks

    def block_of(self, lane: int) -> int:
        """The grid-wide block id of `lane`."""
        return self.first_block + lane // self.num_threads

    def describe_lane(self, lane: int) -> str:
        """`thread 5, block 3`: how error messages name a lane (thread within its block)."""
        return f"thread {lane % self.num_threads}, block {self.block_of(lane)}"

    def per_block(self, lanes: np.ndarray) -> np.ndarray:
        """A per-lane array viewed as `(num_blocks, num_threads)`: one row per block."""
        return lanes.reshape(self.num_blocks, self.num_threads)

    # -- masks ------------------------------------------------------------------------------

    @property
    def current_mask(self) -> np.ndarray:
        return self._masks[-1]

    def push_mask(self, mask: Any) -> None:
        """Narrows the active lanes to `mask` (and-ed with the current mask)."""
        self._masks.append(self.current_mask & self.lanes(mask).astype(bool))

    def pop_mask(self) -> None:
        if len(self._masks) == 1:
            raise InterpretationError("pop_mask: no mask was pushed")
        self._masks.pop()

    @contextmanager
    def masked(self, mask: Any) -> Iterator[np.ndarray]:
        """`with state.masked(m):` runs its body with the active lanes narrowed to `m`."""
        self.push_mask(mask)
        try:
            yield self.current_mask
        finally:
            self.pop_mask()

    def any_active(self) -> bool:
        return bool(self.current_mask.any())

    # -- values -----------------------------------------------------------------------------

    def lanes(self, value: Any) -> np.ndarray:
        """`value` as a `(num_lanes,)` array (a uniform scalar is broadcast to every lane)."""
        array = np.asarray(value)
        if array.shape == (self.num_lanes,):
            return array
        return np.broadcast_to(array, (self.num_lanes,)).copy()

    def select(self, new: Any, old: Any) -> np.ndarray:
        """`new` on the active lanes, `old` elsewhere (how masked updates merge)."""
        new_lanes, old_lanes = self.lanes(new), self.lanes(old)
        return np.where(self.current_mask, new_lanes, old_lanes).astype(
            np.result_type(new_lanes, old_lanes), copy=False
        )

    # -- memory -----------------------------------------------------------------------------

    def flat_indices(
        self, buf: np.ndarray, indices: Sequence[Any], name: str, op: Operation | None
    ) -> np.ndarray:
        """Row-major offsets per lane; inactive lanes get 0, active ones are bounds-checked.

        Indices are checked with min/max over all lanes first (one pass, no temporaries);
        only an index outside that range somewhere, often an inactive lane's, is checked
        lane by lane."""
        if len(indices) != buf.ndim:
            raise InterpretationError(
                f"{describe(name, op)}: {len(indices)} indices for a rank-{buf.ndim} buffer"
            )
        mask = self.current_mask
        flat = np.zeros(self.num_lanes, dtype=np.int64)
        strides = row_major_strides(buf.shape)
        for dim, (index, size) in enumerate(zip(indices, buf.shape, strict=True)):
            if isinstance(index, int | np.integer) and 0 <= index < size:
                flat += int(index) * strides[dim]  # one index for every lane: no reductions
                continue
            index = np.asarray(index)
            if index.min() < 0 or index.max() >= size:
                index = self._checked(self.lanes(index), size, dim, name, op)
            flat += index.astype(np.int64, copy=False) * strides[dim]
        return flat if mask.all() else np.where(mask, flat, 0)

    def _checked(
        self, index: np.ndarray, size: int, dim: int, name: str, op: Operation | None
    ) -> np.ndarray:
        """`index` with inactive lanes' entries zeroed; an active lane out of bounds raises."""
        mask = self.current_mask
        bad = mask & ((index < 0) | (index >= size))
        if bad.any():
            lane = int(np.argmax(bad))
            raise InterpretationError(
                f"{describe(name, op)}: index {int(index[lane])} out of bounds for "
                f"dimension {dim} of size {size} ({self.describe_lane(lane)})"
            )
        return np.where(mask, index, 0)

    def gather(
        self,
        buf: np.ndarray,
        indices: Sequence[Any],
        *,
        name: str = "?",
        op: Operation | None = None,
    ) -> np.ndarray:
        """Each lane reads `buf[indices[lane]]`; inactive lanes read element 0 (harmless)."""
        flat = self.flat_indices(buf, indices, name, op)
        return buf.reshape(-1)[flat]

    def scatter(
        self,
        buf: np.ndarray,
        indices: Sequence[Any],
        values: Any,
        *,
        name: str = "?",
        op: Operation | None = None,
    ) -> None:
        """Each active lane writes `values[lane]` to `buf[indices[lane]]`, in place.

        Several active lanes may write the same element only with the same value (the
        uniform store every thread of a row executes); different values are a race.
        """
        flat = self.flat_indices(buf, indices, name, op)
        mask = self.current_mask
        if not mask.any():
            return
        targets = flat[mask]
        data = self.lanes(values)[mask].astype(buf.dtype, copy=False)
        self._check_conflicts(targets, data, name, op)
        buf.reshape(-1)[targets] = data

    def accumulate(
        self,
        buf: np.ndarray,
        indices: Sequence[Any],
        values: Any,
        *,
        name: str = "?",
        op: Operation | None = None,
        once: bool = False,
    ) -> None:
        """Each active lane adds `values[lane]` to `buf[indices[lane]]` (an atomic add:
        lanes adding to one element all land, in lane order); `once`: only the first active
        lane of each block adds (a block-uniform add, which every thread runs alike)."""
        flat = self.flat_indices(buf, indices, name, op)
        mask = self._first_active_per_block() if once else self.current_mask
        if not mask.any():
            return
        data = self.lanes(values)[mask].astype(buf.dtype, copy=False)
        np.add.at(buf.reshape(-1), flat[mask], data)

    def _first_active_per_block(self) -> np.ndarray:
        """A mask with only the first active lane of each block set."""
        rows = self.per_block(self.current_mask)
        first = np.zeros_like(rows)
        blocks = np.flatnonzero(rows.any(axis=1))
        first[blocks, np.argmax(rows[blocks], axis=1)] = True
        return first.reshape(-1)

    def _check_conflicts(
        self, targets: np.ndarray, data: np.ndarray, name: str, op: Operation | None
    ) -> None:
        """Two lanes storing different values to one element in one store: a race (blocks
        of a batch included, which run concurrently on a GPU)."""
        order = np.argsort(targets, kind="stable")
        sorted_targets, sorted_data = targets[order], data[order]
        same = sorted_targets[1:] == sorted_targets[:-1]
        if not same.any():
            return
        a, b = sorted_data[:-1][same], sorted_data[1:][same]
        equal = a == b
        if a.dtype.kind == "f":
            equal |= np.isnan(a) & np.isnan(b)
        differ = ~equal
        if differ.any():
            k = int(np.flatnonzero(same)[np.argmax(differ)])
            lanes = self.lane_ids[self.current_mask][order]
            first, second = int(lanes[k]), int(lanes[k + 1])
            threads = self.thread_ids[[first, second]]
            if self.block_of(first) == self.block_of(second):
                who = f"threads {threads[0]} and {threads[1]}"
                where = f"block {self.block_of(first)}"
            else:
                who = f"thread {threads[0]} (block {self.block_of(first)}) and thread "
                who += f"{threads[1]} (block {self.block_of(second)})"
                where = "blocks run concurrently"
            raise InterpretationError(
                f"{describe(name, op)}: {who} write different values to element "
                f"{int(sorted_targets[k])} ({where})"
            )

    # -- control flow -----------------------------------------------------------------------

    def run_loop(
        self, lb: Any, ub: int, step: int, inits: Sequence[Any], body: LoopBody
    ) -> tuple[Any, ...]:
        """A per-lane `for iv = lb; iv < ub; iv += step` with loop-carried values.

        Each lane starts at its own `lb`. One sweep runs `body` on every lane, with the mask
        narrowed to the lanes still iterating; their carried values are updated, the others
        keep theirs. The loop ends when no active lane has iterations left. Returns the
        final carried values (per lane).
        """
        iv = self.lanes(lb).astype(np.int64)
        carried = tuple(self.lanes(v) for v in inits) if inits else ()
        running = iv < ub
        while (self.current_mask & running).any():
            with self.masked(running):
                nxt = tuple(body(iv, carried))
                if len(nxt) != len(carried):
                    raise InterpretationError(
                        f"per-lane loop body returned {len(nxt)} values for {len(carried)}"
                    )
                carried = tuple(self.select(n, c) for n, c in zip(nxt, carried, strict=True))
            iv = np.where(running, iv + step, iv)
            running = iv < ub
        return carried

    def combine(self, kind: ReduceKind | str, values: Any, width: int | None = None) -> np.ndarray:
        """All-reduce of `values` over the active lanes of each block; every lane gets its
        block's result.

        With `width`, the lanes form aligned groups of `width` consecutive threads and each
        lane gets the reduction over the active lanes of its own group (a group with no
        active lane gets the kind's identity, which nobody reads). Groups never straddle
        blocks: `width` divides the block.
        """
        reduce_kind = ReduceKind(kind)
        lanes = self.lanes(values)
        mask = self.current_mask
        if not mask.any():
            raise InterpretationError("combine: no active thread")
        if width is None or width >= self.num_threads:
            return self._block_combine(reduce_kind, lanes)
        if width <= 0 or self.num_threads % width:
            raise InterpretationError(
                f"combine: width {width} does not divide the {self.num_threads} threads"
            )
        identity = reduce_kind.numpy_ufunc.identity
        if identity is None:  # max / min: the identity is the kind's extreme value
            identity = _extreme(lanes.dtype, reduce_kind)
        groups = np.where(mask, lanes, np.asarray(identity, dtype=lanes.dtype))
        groups = groups.reshape(-1, width)
        totals = reduce_kind.numpy_ufunc.reduce(groups, axis=1, dtype=lanes.dtype)
        return np.repeat(totals, width).astype(lanes.dtype, copy=False)

    def mma(
        self, shape: MmaShape, a: Sequence[Any], b: Sequence[Any], c: Sequence[Any], what: str
    ) -> tuple[np.ndarray, ...]:
        """A warp-wide `mma.sync`: lanes `[32w, 32w + 32)` of each block are warp `w`, and
        each lane passes its fragment registers (`common/mma.py`). Every lane of a warp that
        takes part must be active: `mma.sync` in a partly active warp is undefined."""
        self.check_whole_warps(what, "MMA", "mma.sync")

        def fragments(values: Sequence[Any]) -> list[np.ndarray]:
            return [self.lanes(v).astype(np.float32) for v in values]

        def per_warp(lanes: list[np.ndarray]) -> np.ndarray:
            return np.stack(lanes, axis=-1).reshape(-1, WARP_SIZE, len(lanes))

        a_lanes, b_lanes = fragments(a), fragments(b)
        if not shape.packed:
            self._check_tf32(a_lanes + b_lanes, what)
        old = fragments(c)  # what a wholly inactive warp keeps
        d = warp_mma(shape, per_warp(a_lanes), per_warp(b_lanes), per_warp(old))
        d = d.reshape(self.num_lanes, -1)
        return tuple(self.select(d[:, i], old[i]) for i in range(d.shape[1]))

    def check_whole_warps(self, what: str, action: str, instruction: str) -> None:
        """A warp-collective instruction (`.sync.aligned`) needs blocks of whole warps and,
        in each warp that runs it, every lane active: anything else is undefined on a GPU,
        so it is reported rather than given some answer."""
        if self.num_threads % WARP_SIZE:
            raise InterpretationError(
                f"{what}: a block of {self.num_threads} threads is not whole warps"
            )
        active = self.current_mask.reshape(-1, WARP_SIZE)
        partial = active.any(axis=1) & ~active.all(axis=1)
        if partial.any():
            warp = int(np.flatnonzero(partial)[0])
            lane = warp * WARP_SIZE + int(np.flatnonzero(~active[warp])[0])
            raise InterpretationError(
                f"{what}: {self.describe_lane(lane)} is inactive while its warp runs the "
                f"{action} ({instruction} needs every lane of the warp)"
            )

    def _check_tf32(self, operands: list[np.ndarray], what: str) -> None:
        """A tf32 MMA's A and B must be tf32 values (`common/mma.py`): reports the first
        active lane passing one with low mantissa bits set."""
        for values in operands:
            bad = self.current_mask & ~is_tf32(values)
            if bad.any():
                lane = int(np.flatnonzero(bad)[0])
                raise InterpretationError(
                    f"{what}: {self.describe_lane(lane)} passes {values[lane]!r}, not a tf32 "
                    "value (split it with split_tf32 first)"
                )

    def _block_combine(self, kind: ReduceKind, lanes: np.ndarray) -> np.ndarray:
        """The whole-block all-reduce. Each block reduces exactly the values a lone block
        would (its active lanes, in order), so a float sum rounds the same whatever the
        batch; a block with no active lane gets zeros, which nobody reads."""
        ufunc = kind.numpy_ufunc
        rows, active = self.per_block(lanes), self.per_block(self.current_mask)
        if active.all():
            totals = ufunc.reduce(rows, axis=1, dtype=lanes.dtype)
        else:
            totals = np.zeros(self.num_blocks, dtype=lanes.dtype)
            for block in np.flatnonzero(active.any(axis=1)):
                totals[block] = ufunc.reduce(rows[block][active[block]], dtype=lanes.dtype)
        return np.repeat(totals, self.num_threads).astype(lanes.dtype, copy=False)


def mma_operands(op: MmaSyncOpBase, args: Sequence[Any]) -> tuple[Sequence[Any], ...]:
    """An mma op's interpreted operands split into its A, B and C fragments."""
    a_end = len(op.a)
    b_end = a_end + len(op.b)
    return args[:a_end], args[a_end:b_end], args[b_end:]


def _extreme(dtype: np.dtype, kind: ReduceKind) -> Any:
    """The identity of max (lowest value) or min (highest value) for `dtype`."""
    big = np.inf if dtype.kind == "f" else np.iinfo(dtype).max
    low = -np.inf if dtype.kind == "f" else np.iinfo(dtype).min
    return low if kind == ReduceKind.MAX else big


def interpret_split_tf32(value: Any) -> tuple[Any, Any]:
    """`split_tf32` of one value or of every lane's (`common/mma.split_tf32`)."""
    hi, lo = split_tf32(np.asarray(value, dtype=np.float32))
    return (hi, lo) if np.ndim(value) else (np.float32(hi), np.float32(lo))
