"""Shared-memory bank conflicts of a block's accesses, evaluated lane by lane.

Shared memory serves a warp's request in one pass (*wavefront*) unless two lanes want
different 4-byte words of the same bank (`hardware.SHARED_BANKS` banks, word `w` in bank
`w % 32`); the request then takes as many wavefronts as the busiest bank has distinct words.
Lanes reading the same word are served together (a broadcast).

`wavefronts` evaluates the index arithmetic of one `tile.load`/`tile.store` for the 32 lanes
of the first warp (the thread id, `tile.thread_tile` positions, loop starts; uniform values
such as block origins count as 0, which shifts every lane alike) and counts the wavefronts
the access would take if the buffer's rows were `row_length` elements long. `tile-pad-shared`
uses it to choose the padding of a slab.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from xdsl.dialects import arith
from xdsl.ir import BlockArgument, SSAValue

from deplodock.dialects import tile
from deplodock.dialects.common.ldmatrix import ROW_ELEMENTS
from deplodock.dialects.element_types import byte_size
from deplodock.dialects.hardware import WARP_SIZE, shared_wavefronts
from deplodock.dialects.queries import constant_index

_BINARY: dict[type, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    arith.AddiOp: np.add,
    arith.SubiOp: np.subtract,
    arith.MuliOp: np.multiply,
    arith.DivSIOp: lambda a, b: np.trunc(a / np.where(b == 0, 1, b)).astype(np.int64),
    arith.FloorDivSIOp: lambda a, b: np.floor_divide(a, np.where(b == 0, 1, b)),
    arith.RemSIOp: lambda a, b: np.fmod(a, np.where(b == 0, 1, b)).astype(np.int64),
    arith.MinSIOp: np.minimum,
    arith.MaxSIOp: np.maximum,
}


class Unknown(Exception):
    """An index the evaluator cannot follow (the access is then left out of the count)."""


def lane_values(value: SSAValue, lanes: np.ndarray, memo: dict[SSAValue, np.ndarray]) -> np.ndarray:
    """`value` for each lane in `lanes` (thread ids) at the first iteration of every loop."""
    if value in memo:
        return memo[value]
    result = _evaluate(value, lanes, memo)
    memo[value] = result
    return result


def _evaluate(value: SSAValue, lanes: np.ndarray, memo: dict[SSAValue, np.ndarray]) -> np.ndarray:
    zeros = np.zeros_like(lanes)
    if isinstance(value, BlockArgument):
        owner = value.block.parent_op()
        if isinstance(owner, tile.ThreadsOp):
            return lanes.copy()
        if isinstance(owner, tile.ForOp) and value.index == 0:
            return lane_values(owner.lb, lanes, memo)
        if isinstance(owner, tile.GridOp):
            return zeros
        raise Unknown(value)
    op = value.owner
    if (constant := constant_index(value)) is not None:
        return zeros + constant
    if isinstance(op, tile.ThreadTileOp):
        return np.asarray(op.position(lanes, op.results.index(value)), dtype=np.int64)  # type: ignore[arg-type]
    if isinstance(op, tile.BlockTileOp):
        return zeros
    if type(op) in _BINARY:
        a, b = (lane_values(v, lanes, memo) for v in op.operands)
        return np.asarray(_BINARY[type(op)](a, b), dtype=np.int64)
    raise Unknown(value)


def wavefronts(
    access: tile.LoadOp | tile.StoreOp | tile.LoadVectorOp | tile.StoreVectorOp | tile.LdmatrixOp,
    row_length: int,
    warp: int = 0,
    swizzle: tile.Swizzle | None = None,
) -> int | None:
    """Wavefronts one warp's request takes with rows of `row_length` elements, laid out by
    `swizzle` if given (None when the indices cannot be evaluated).

    The counting rule is `hardware.shared_wavefronts` (vector accesses are served a half or a
    quarter warp at a time, lanes reading in equal pairs twice as many at once).
    """
    lanes = np.arange(warp * WARP_SIZE, (warp + 1) * WARP_SIZE, dtype=np.int64)
    memo: dict[SSAValue, np.ndarray] = {}
    try:
        indices = [lane_values(i, lanes, memo) for i in access.indices]
    except Unknown:
        return None
    if swizzle is not None:
        indices[-1] = swizzle.column(indices[-2], indices[-1])
    shape = list(access.memref.type.get_shape())  # type: ignore[attr-defined]
    flat = np.zeros_like(lanes)
    for k, index in enumerate(indices):
        extent = row_length if k == len(indices) - 1 else shape[k]
        flat = flat * extent + index
    element = byte_size(access.memref.type.element_type)  # type: ignore[attr-defined]
    if isinstance(access, tile.LdmatrixOp):
        return _matrix_wavefronts(access, flat * element, lanes)
    count = _vector_count(access)
    return shared_wavefronts(flat * element, element * count, lanes)


def _matrix_wavefronts(access: tile.LdmatrixOp, addresses: np.ndarray, lanes: np.ndarray) -> int:
    """An `ldmatrix` reads its matrices one at a time, each the 16-byte rows the 8 lanes
    `8j .. 8j + 7` point at: a quarter warp of 16-byte accesses, never paired (the rows
    differ), and only the lanes whose addresses it uses."""
    used = lanes % WARP_SIZE < ROW_ELEMENTS * access.count
    row_bytes = ROW_ELEMENTS * byte_size(access.memref.type.element_type)  # type: ignore[attr-defined]
    return shared_wavefronts(addresses[used], row_bytes, lanes[used], packed=False)


def _vector_count(access: object) -> int:
    if isinstance(access, tile.LoadVectorOp | tile.StoreVectorOp):
        return access.width
    return 1
