"""The memory-transaction rules, on addresses with known answers (Nsight's counting)."""

from __future__ import annotations

import numpy as np
import pytest

from deplodock.perf import memory

LANES = np.arange(32)


@pytest.mark.parametrize(
    ("addresses", "width", "sectors"),
    [
        (LANES * 4, 4, 4),  # consecutive floats: 128 bytes
        (LANES * 4 * 32, 4, 32),  # a stride of 32 floats: one sector per lane
        (LANES * 16, 16, 16),  # float4 per lane: 512 bytes
        (LANES * 8, 8, 8),  # float2 per lane: 256 bytes
        (np.zeros(32, dtype=np.int64), 4, 1),  # every lane the same float
        (LANES[:5] * 4, 4, 1),  # five active lanes within one sector
        (LANES * 4 + 16, 4, 5),  # misaligned by half a sector
    ],
)
def test_global_sectors_per_request(addresses, width, sectors):
    assert memory.global_sectors(addresses, width) == sectors


def test_global_lines():
    assert memory.global_lines(LANES * 4) == 1
    assert memory.global_lines(LANES * 4 * 32) == 32
    assert memory.global_lines(LANES * 16, 16) == 4


def test_vectorized_counting_agrees_with_the_definition():
    rng = np.random.default_rng(0)
    warps = np.repeat(np.arange(8), 32)
    for width in (4, 8, 16):
        addresses = rng.integers(0, 1 << 16, size=256) * width
        issued, counts = memory.sectors_by_warp(addresses, warps, width)
        expected = [memory.global_sectors(addresses[warps == w], width) for w in range(8)]
        assert issued.tolist() == list(range(8))
        assert counts.tolist() == expected
        _, lines = memory.sectors_by_warp(addresses, warps, width, memory.LINE_BYTES)
        assert lines.tolist() == [
            memory.global_lines(addresses[warps == w], width) for w in range(8)
        ]


@pytest.mark.parametrize(
    ("stride", "wavefronts"),
    [(1, 1), (2, 2), (4, 4), (32, 32), (33, 1), (3, 1), (16, 16)],
)
def test_shared_bank_conflicts_32_bit(stride, wavefronts):
    assert memory.shared_wavefronts(LANES * stride * 4, 4) == wavefronts


def test_shared_broadcast_is_one_wavefront():
    assert memory.shared_wavefronts(np.zeros(32, dtype=np.int64), 4) == 1
    # two distinct words in one bank, each read by 16 lanes: 2 wavefronts
    assert memory.shared_wavefronts(np.repeat([0, 128], 16), 4) == 2


def test_shared_64_and_128_bit_accesses_are_served_by_half_and_quarter_warps():
    assert memory.shared_wavefronts(LANES * 8, 8) == 2  # float2, consecutive: no conflict
    assert memory.shared_wavefronts(LANES * 16, 16) == 4  # float4, consecutive: no conflict
    assert memory.shared_wavefronts(LANES * 32, 16) == 8  # float4 with a stride of 2: 2-way
    assert memory.ideal_shared_wavefronts(32, 16) == 4
    assert memory.ideal_shared_wavefronts(32, 4) == 1
    assert memory.ideal_shared_wavefronts(0, 4) == 0


def test_shared_lanes_decide_the_phases():
    """A 64-bit access is served a half-warp per phase: lanes 0 and 16 never conflict (each
    phase costs its own wavefront), lanes 0 and 1 do when their words share banks."""
    assert memory.shared_wavefronts(np.array([0, 256]), 8, lanes=np.array([0, 16])) == 2
    assert memory.shared_wavefronts(np.array([0, 256]), 8, lanes=np.array([0, 1])) == 2
    assert memory.shared_wavefronts(np.array([0, 8]), 8, lanes=np.array([0, 16])) == 2
    assert memory.shared_wavefronts(np.array([0, 8]), 8, lanes=np.array([0, 1])) == 1


def test_shared_pairs_of_equal_addresses_pack_into_one_register():
    """NVIDIA's packing rule: when every lane reads the address of lane n ^ 1 (or every
    lane that of n ^ 2), a float4 request takes 2 wavefronts, not 4, and a float2 one 1."""
    by_pairs = (LANES // 2) * 16  # lanes 2k and 2k + 1 read the same float4
    by_pairs_of_two = (LANES % 2 + LANES // 4 * 2) * 16  # lanes n and n ^ 2 read the same
    assert memory.shared_wavefronts(by_pairs, 16) == 2
    assert memory.shared_wavefronts(by_pairs_of_two, 16) == 2
    assert memory.shared_wavefronts((LANES // 2) * 8, 8) == 1
    # equal addresses 16 lanes apart are not a pair: the 4 quarter-warps stay
    assert memory.shared_wavefronts((LANES % 16) * 16, 16) == 4
    # a pair whose partner is inactive does not pack
    assert memory.shared_wavefronts(by_pairs[:31], 16, lanes=LANES[:31]) == 4
    # packing doubles the groups, so a bank conflict inside the larger group now counts:
    # lanes 0-15 read two float4 512 bytes apart (the same banks)
    conflicting = np.where(LANES % 4 < 2, 0, 512) + (LANES // 16) * 16
    assert memory.shared_wavefronts(conflicting, 16) == 4
    # 32-bit requests gain nothing: one word per lane is already one register a cycle
    assert memory.shared_wavefronts((LANES // 2) * 4, 4) == 1


def test_tile_pad_shared_counts_by_the_same_rule():
    """The bank analysis of `tile-pad-shared` and the model's trace call one function."""
    from deplodock.dialects import hardware
    from deplodock.passes.tile import banks

    assert banks.shared_wavefronts is hardware.shared_wavefronts
    assert memory.hardware_shared_wavefronts is hardware.shared_wavefronts


def test_the_conflict_free_minimum_counts_a_packed_pair_once():
    """The bank-conflict factor (wavefronts over the minimum) stays at least 1 when pairs
    pack: 16 distinct float4 read by 32 lanes in pairs need 2 wavefronts at best."""
    assert memory.shared_request((LANES // 2) * 16, 16) == (2, 2)
    assert memory.shared_request(LANES * 16, 16) == (4, 4)
    assert memory.shared_request(LANES * 32, 16) == (8, 4)
