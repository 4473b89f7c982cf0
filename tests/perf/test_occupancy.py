"""Occupancy by CUDA's rules (the occupancy calculator's), and waves."""

from __future__ import annotations

import pytest

from deplodock.perf.devices import DEVICES, device_model, known_devices
from deplodock.perf.occupancy import LaunchError, occupancy, waves

H100 = device_model("h100")
A6000 = device_model("a6000")


@pytest.mark.parametrize(
    ("threads", "registers", "shared", "blocks", "limiter"),
    [
        (256, 32, 0, 8, "warps"),  # 8 warps x 8 blocks = 64 warps
        (256, 64, 0, 4, "registers"),  # 2048 registers per warp: 32 warps
        (128, 255, 0, 2, "registers"),  # 255 x 32 rounds up to 8192 per warp: 8 warps
        (1024, 33, 0, 1, "registers"),  # 1056 -> 1280 per warp: 51 warps, one block of 32
        (256, 32, 48 * 1024, 4, "shared memory"),  # 48 KiB + 1 KiB reserved: 4 fit in 228
        (32, 16, 0, 32, "blocks"),  # one-warp blocks: the 32-block limit
        (1024, 32, 0, 2, "warps"),
    ],
)
def test_h100_occupancy(threads, registers, shared, blocks, limiter):
    result = occupancy(H100, threads, registers, shared)
    assert (result.blocks_per_sm, result.limiter) == (blocks, limiter)
    assert result.warps_per_sm == blocks * -(-threads // 32)


def test_sm86_limits():
    assert occupancy(A6000, 32, 16).blocks_per_sm == 16  # 16 blocks per SM on sm_86
    assert occupancy(A6000, 512, 32).blocks_per_sm == 3  # 48 warps
    assert occupancy(A6000, 256, 32).fraction == 1.0


def test_unlaunchable_blocks_are_errors():
    with pytest.raises(LaunchError, match="threads per block"):
        occupancy(H100, 2048, 32)
    with pytest.raises(LaunchError, match="shared memory"):
        occupancy(A6000, 256, 32, 100 * 1024)
    with pytest.raises(LaunchError, match="registers"):
        occupancy(H100, 256, 300)


def test_waves_and_tail():
    full = waves(H100, 1056, occupancy(H100, 256, 32))
    assert (full.waves, full.rounds, full.efficiency) == (1.0, 1, 1.0)
    tail = waves(H100, 1057, occupancy(H100, 256, 32))
    assert tail.rounds == 2 and tail.efficiency == pytest.approx(1057 / 2112)


@pytest.mark.parametrize("key", sorted(DEVICES))
def test_fp32_peak_matches_the_datasheet(key):
    """Units x clock must reproduce the published FP32 peak (README of shared/perfdata)."""
    published = {
        "h100": 66.9e12,
        "a100": 19.5e12,
        "a6000": 38.7e12,
        "rtx5090": 104.8e12,
        "h200": 66.9e12,
    }
    assert DEVICES[key].fp32_flops_per_s == pytest.approx(published[key], rel=0.01)


def test_unknown_device_names_the_known_ones():
    with pytest.raises(
        ValueError, match=f"unknown device model 'b200' \\(known: {known_devices()}"
    ):
        device_model("b200")
