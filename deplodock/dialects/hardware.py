"""What the CUDA target allows, in one place for every verifier, pass, interpreter and runtime.

The limits are those of every CUDA GPU deplodock targets (compute capability 7.0 and up): a
block of at most 1024 threads in warps of 32, 48 KiB of static shared memory per block, and
up to 99 KiB as dynamic shared memory for a kernel that opts in (compute capability 8.0 and
up, as `cp.async` and `mma.sync` need). A shared array is a memref in
memory space 3 (as in NVVM). Numbers that describe one device model (SM count, bandwidths)
are not here: they belong to the performance model's device tables.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import IntegerAttr, MemRefType
from xdsl.ir import Attribute

SHARED_MEMORY_SPACE = 3
MAX_THREADS_PER_BLOCK = 1024
WARP_SIZE = 32
#: Threads of a warpgroup (4 consecutive warps, the first a multiple of 4): the unit that
#: runs one sm_90a `wgmma.mma_async` together (`common/wgmma.py`).
WARPGROUP_SIZE = 4 * WARP_SIZE
MAX_STATIC_SHARED_BYTES = 48 * 1024
#: Shared memory one block may have once its kernel opts in past `MAX_STATIC_SHARED_BYTES`
#: (`cudaFuncAttributeMaxDynamicSharedMemorySize`): the least that a GPU of compute
#: capability 8.0 or newer allows (sm_86, sm_89 and sm_120: 99 KiB; sm_80: 163 KiB; sm_90:
#: 227 KiB), so a kernel within it runs on all of them. The printer carves the arrays of such
#: a kernel out of dynamic shared memory (`needs_dynamic_shared`).
MAX_SHARED_BYTES = 99 * 1024

#: Shared memory is 32 banks of 4-byte words; one request takes as many passes (wavefronts)
#: as the busiest bank has distinct words (`shared_wavefronts`).
SHARED_BANKS = 32
SHARED_BANK_BYTES = 4
#: The lane distances of the pairs whose equal addresses let shared memory pack two lanes'
#: 8- or 16-byte results into one returned register (`shared_wavefronts`).
SHARED_PAIR_DISTANCES: tuple[int, ...] = (1, 2)

#: `__shfl_xor_sync` participation mask: every lane of the warp.
FULL_WARP_MASK = (1 << WARP_SIZE) - 1

#: The lane distances of a butterfly all-reduce over one warp: 16, 8, 4, 2, 1.
WARP_SHUFFLE_MASKS: tuple[int, ...] = tuple(
    WARP_SIZE >> k for k in range(1, WARP_SIZE.bit_length())
)


def warps_in(threads: int) -> int:
    """Warps of a block of `threads` threads (a partial warp still occupies a whole one)."""
    return -(-threads // WARP_SIZE)


def is_valid_block_size(threads: int) -> bool:
    """What the tile and kernel verifiers accept: whole warps, at most 1024 threads."""
    return 0 < threads <= MAX_THREADS_PER_BLOCK and threads % WARP_SIZE == 0


def shared_wavefronts(
    addresses: np.ndarray, lane_bytes: int, lanes: np.ndarray, *, packed: bool | None = None
) -> int:
    """Wavefronts one warp's shared-memory request takes: lane `lanes[i]` accesses
    `lane_bytes` bytes at byte address `addresses[i]` (active lanes only).

    Shared memory returns 128 bytes a cycle: one 4-byte register to each of the 32 lanes.
    A lane moving 8 or 16 bytes is therefore served a half or a quarter warp at a time,
    each group with all 32 banks to itself, and within a group a bank serves one distinct
    word per wavefront (lanes reading the same word share it: a broadcast). When every
    active lane reads the same address as lane `n ^ 1`, or every one as lane `n ^ 2`, the
    pair's results pack into one register and the groups are twice as large: a `float4`
    read in such pairs takes 2 wavefronts, not 4. (NVIDIA's account of the packing rule
    for compute capability 7.x, forums.developer.nvidia.com/t/77228; deplodock assumes the
    later architectures keep it.) The thread order `tile-thread` gives a scalar GEMM is
    built to meet it. `packed`: `shared_pairs_pack` of the request, when the caller has it.
    """
    addresses = np.asarray(addresses, dtype=np.int64)
    lanes = np.asarray(lanes, dtype=np.int64) % WARP_SIZE
    if len(addresses) == 0:
        return 0
    group = WARP_SIZE * SHARED_BANK_BYTES // max(lane_bytes, SHARED_BANK_BYTES)
    if packed is None:
        packed = lane_bytes > SHARED_BANK_BYTES and shared_pairs_pack(addresses, lanes)
    if packed:
        group *= 2
    words_per_lane = max(1, lane_bytes // SHARED_BANK_BYTES)
    words = addresses[:, None] // SHARED_BANK_BYTES + np.arange(words_per_lane)[None, :]
    total = 0
    for first in range(0, WARP_SIZE, group):
        in_group = (lanes >= first) & (lanes < first + group)
        if in_group.any():
            distinct = np.unique(words[in_group])
            total += int(np.bincount(distinct % SHARED_BANKS).max())
    return total


def shared_pairs_pack(addresses: np.ndarray, lanes: np.ndarray) -> bool:
    """Whether, for one of `SHARED_PAIR_DISTANCES`, every active lane's partner is active
    and reads the same address (`shared_wavefronts` then packs each pair's results)."""
    addresses = np.asarray(addresses, dtype=np.int64)
    lanes = np.asarray(lanes, dtype=np.int64) % WARP_SIZE
    by_lane = np.full(WARP_SIZE, -1, dtype=np.int64)
    by_lane[lanes] = addresses
    active = np.zeros(WARP_SIZE, dtype=bool)
    active[lanes] = True
    for distance in SHARED_PAIR_DISTANCES:
        partners = lanes ^ distance
        if active[partners].all() and (by_lane[partners] == addresses).all():
            return True
    return False


def needs_dynamic_shared(shared_bytes: int) -> bool:
    """Whether a block with `shared_bytes` of shared arrays must take them as dynamic shared
    memory (past the static limit; the launch then opts in to that many bytes)."""
    return shared_bytes > MAX_STATIC_SHARED_BYTES


def is_shared(memref_type: Attribute) -> bool:
    """True for a `memref<..., 3>`: a `__shared__` array of the block."""
    if not isinstance(memref_type, MemRefType):
        return False
    space = memref_type.memory_space
    return isinstance(space, IntegerAttr) and space.value.data == SHARED_MEMORY_SPACE


def shared_memref(element_type: Attribute, shape: list[int]) -> MemRefType:
    """The type of a static `__shared__` array of `shape`."""
    return MemRefType(element_type, shape, memory_space=IntegerAttr(SHARED_MEMORY_SPACE, 64))


#: Sizes one `cp.async` may copy (PTX ISA, `cp.async`: cp-size is 4, 8 or 16 bytes).
CP_ASYNC_BYTES: tuple[int, ...] = (4, 8, 16)
#: `cp.async.cg` (bypass L1, cache in L2 only) takes only this size; 4 and 8 bytes use `.ca`.
CP_ASYNC_CG_BYTES = 16
#: The widest vector load or store of one thread (`ld.global.v4.f32`, `LDG.E.128`): 16 bytes.
MAX_VECTOR_BYTES = 16
#: The vector lanes (elements) of `ld`/`st` `.v2` and `.v4`.
VECTOR_LANES: tuple[int, ...] = (2, 4)
#: The widths (elements) of one vector access: `.v2` and `.v4` of the element, or 8 narrow
#: elements as a `.v4` of 32-bit pairs (16 bytes of bf16: `LDG.E.128`, as 4 floats are).
VECTOR_WIDTHS: tuple[int, ...] = (*VECTOR_LANES, 8)
#: Bytes of one vector access deplodock emits (4 = a pair of bf16, as an MMA fragment
#: register holds it; 8 = `float2`; 16 = `float4`).
VECTOR_BYTES: tuple[int, ...] = (4, 8, MAX_VECTOR_BYTES)
#: The vectors `tile-vectorize` widens elementwise accesses to: 4 bytes of narrow elements
#: (four bools, two bf16) gain little over scalar accesses.
WIDE_VECTOR_BYTES: tuple[int, ...] = (8, MAX_VECTOR_BYTES)
#: An XOR swizzle of a shared slab permutes whole chunks of this many bytes within a row: the
#: widest access, so a `float4` or a 16-byte `cp.async` still lands contiguous and aligned.
SWIZZLE_CHUNK_BYTES = MAX_VECTOR_BYTES


#: TMA (`cp.async.bulk.tensor`) and mbarriers need sm_90 or newer.
TMA_MIN_CAPABILITY: tuple[int, int] = (9, 0)
#: The swizzle spans of a TMA tensor map, in bytes (0: none; CUtensorMapSwizzle): 16-byte
#: chunks are permuted within rows of the span, the pattern repeating every 8 rows.
TMA_SWIZZLE_SPANS: tuple[int, ...] = (0, 32, 64, 128)
#: The most elements a TMA box may have along one dimension (cuTensorMapEncodeTiled).
TMA_MAX_BOX = 256
#: A TMA box row, and a tensor's row pitch, are whole multiples of this many bytes.
TMA_ROW_BYTES = 16
#: The alignment of a TMA copy's shared destination (PTX ISA, cp.async.bulk.tensor).
TMA_SHARED_ALIGN = 128
#: The most arrivals an mbarrier phase may expect (PTX ISA, mbarrier: 2^20 - 1).
MBARRIER_MAX_COUNT = (1 << 20) - 1

#: `mma.sync` with bf16 or f16 inputs and fp32 accumulation (m16n8k16) needs sm_80 or newer,
#: as does its tf32 form (m16n8k8).
MMA_MIN_CAPABILITY: tuple[int, int] = (8, 0)
#: The tensor cores' tf32 rate as a fraction of their bf16/f16 one, in flops: NVIDIA's dense
#: peaks are half (A100 156 vs 312 TFLOP/s, H100 SXM 494.7 vs 989.4).
TF32_MMA_RATE = 0.5


def cp_async_cache(nbytes: int) -> str:
    """The `cp.async` cache modifier for a copy of `nbytes`: `cg` for 16, `ca` otherwise."""
    return "cg" if nbytes == CP_ASYNC_CG_BYTES else "ca"
