"""Memory-transaction counting from the addresses one warp instruction touches.

These are the rules Nsight Compute's memory tables count by, written as functions of the
byte addresses of a warp's *active* lanes and the access width (4, 8 or 16 bytes):

- **Global**: L1/L2 move 32-byte *sectors*. A request costs the number of distinct sectors
  its lanes touch: 32 lanes reading consecutive floats touch 128 bytes = 4 sectors; a stride
  of 32 floats puts every lane in its own sector (32); a float4 per lane, 16. L1 handles one
  128-byte *line* of a request per cycle, so a request touching 32 lines occupies it 32 cycles.
- **Shared**: 32 banks of 4 bytes serve one *wavefront* per cycle. A request needs as many
  wavefronts as the most-loaded bank has *distinct* words (lanes reading the same word are
  served together: a broadcast). 64-bit accesses are served a half-warp at a time and 128-bit
  ones a quarter-warp at a time (each group can use all 32 banks), so a conflict-free float4
  request takes 4 wavefronts, not 1; 2 when lanes read in pairs of equal addresses. The rule
  has one home, `hardware.shared_wavefronts`, which `tile-pad-shared` counts by too.
"""

from __future__ import annotations

import numpy as np

from deplodock.dialects.hardware import (
    SHARED_BANK_BYTES,
    SHARED_BANKS,
    WARP_SIZE,
    shared_pairs_pack,
)
from deplodock.dialects.hardware import shared_wavefronts as hardware_shared_wavefronts

SECTOR_BYTES = 32
LINE_BYTES = 128
#: The bank geometry is a hardware fact (`dialects/hardware.py`).
BANK_BYTES = SHARED_BANK_BYTES

#: Wavefront counts by access pattern (addresses relative to their 128-byte row, width,
#: lanes): a loop repeats the same pattern at shifted addresses, so most requests hit.
_WAVEFRONT_CACHE: dict[tuple[bytes, int, bytes], tuple[int, int]] = {}
_CACHE_LIMIT = 1 << 16


def sectors_of(addresses: np.ndarray, width: int = 4) -> np.ndarray:
    """Distinct sector ids touched by lanes that each access `width` bytes at `addresses`."""
    if len(addresses) == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.asarray(addresses, dtype=np.int64)
    ends = starts + width - 1
    return np.unique(np.concatenate([starts // SECTOR_BYTES, ends // SECTOR_BYTES]))


def global_sectors(addresses: np.ndarray, width: int = 4) -> int:
    """Sectors one global request moves (0 when no lane is active)."""
    return len(sectors_of(addresses, width))


def global_lines(addresses: np.ndarray, width: int = 4) -> int:
    """128-byte lines one global request touches: L1 looks up one line per cycle, so this
    is the cycles the request occupies L1 (1 when coalesced, 32 when every lane is apart)."""
    if len(addresses) == 0:
        return 0
    starts = np.asarray(addresses, dtype=np.int64)
    return len(
        np.unique(np.concatenate([starts // LINE_BYTES, (starts + width - 1) // LINE_BYTES]))
    )


def shared_wavefronts(
    addresses: np.ndarray, width: int = 4, lanes: np.ndarray | None = None
) -> int:
    """Wavefronts one shared request takes, by the bank rules in the module docstring.

    `lanes` are the lane ids (0-31) of `addresses`; by default lanes 0, 1, 2, ...
    """
    return shared_request(addresses, width, lanes)[0]


def shared_request(
    addresses: np.ndarray, width: int = 4, lanes: np.ndarray | None = None
) -> tuple[int, int]:
    """(wavefronts, the conflict-free minimum) of one shared request: the minimum is the
    bytes the lanes receive over 128 (at least 1), each pair's bytes counted once where
    pairs pack, so `wavefronts / minimum` is the request's bank-conflict factor."""
    addresses = np.asarray(addresses, dtype=np.int64)
    if len(addresses) == 0:
        return 0, 0
    lanes = np.arange(len(addresses)) if lanes is None else np.asarray(lanes) % WARP_SIZE
    row = SHARED_BANKS * BANK_BYTES
    key = ((addresses - addresses.min() // row * row).tobytes(), width, lanes.tobytes())
    if (known := _WAVEFRONT_CACHE.get(key)) is not None:
        return known
    packed = width > BANK_BYTES and shared_pairs_pack(addresses, lanes)
    active = len(addresses) // 2 if packed else len(addresses)
    counts = (
        hardware_shared_wavefronts(addresses, width, lanes, packed=packed),
        ideal_shared_wavefronts(active, width),
    )
    if len(_WAVEFRONT_CACHE) < _CACHE_LIMIT:
        _WAVEFRONT_CACHE[key] = counts
    return counts


def ideal_shared_wavefronts(active_lanes: int, width: int = 4) -> int:
    """Wavefronts a request of `active_lanes` distinct lanes would take without conflicts:
    bytes / 128, at least 1."""
    if active_lanes == 0:
        return 0
    return max(1, -(-(active_lanes * width) // (SHARED_BANKS * BANK_BYTES)))


def sectors_by_warp(
    addresses: np.ndarray, warps: np.ndarray, width: int = 4, unit: int = SECTOR_BYTES
) -> tuple[np.ndarray, np.ndarray]:
    """`global_sectors` (or, with `unit=LINE_BYTES`, `global_lines`) for many warp requests
    at once, one request per warp id.

    Returns (the warp ids that issued a request, the units each one touched) and is what the
    tracer calls; `global_sectors` is the one-request definition it must agree with.
    """
    starts = np.asarray(addresses, dtype=np.int64)
    warps = np.asarray(warps, dtype=np.int64)
    keys = np.concatenate(
        [
            warps * (1 << 40) + starts // unit,
            warps * (1 << 40) + (starts + width - 1) // unit,
        ]
    )
    unique = np.unique(keys)
    issued, counts = np.unique(unique >> 40, return_counts=True)
    return issued, counts


def distinct_sectors(addresses: np.ndarray, width: int = 4) -> np.ndarray:
    """All sector ids the given accesses touch (for a block's unique-bytes count)."""
    starts = np.asarray(addresses, dtype=np.int64)
    return np.unique(np.concatenate([starts // SECTOR_BYTES, (starts + width - 1) // SECTOR_BYTES]))
