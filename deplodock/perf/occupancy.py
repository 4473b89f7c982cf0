"""How many blocks of a kernel one SM holds at once, and how many waves the grid takes.

The rules are CUDA's (the occupancy calculator's, for compute capability 7.0 and later):
blocks per SM is the smallest of four limits,

- threads: `max_warps_per_sm // warps_per_block` (a block occupies whole warps);
- blocks: `max_blocks_per_sm`;
- registers: a warp is given `ceil(regs_per_thread * 32 / 256) * 256` registers, so
  `(registers_per_sm // registers_per_warp) // warps_per_block` blocks fit;
- shared memory: a block takes its shared bytes rounded up to 128 plus 1 KiB the driver
  reserves, so `shared_bytes_per_sm // that` blocks fit.

A launch whose block needs more than an SM can give (too many threads, registers or shared
bytes) cannot run: `LaunchError`. Registers come from ptxas (`-Xptxas -v`); without nvcc the
model uses an estimate from the IR and marks the occupancy `estimated`.

A *wave* is one SM-count x blocks-per-SM round of blocks; a grid of 1.1 waves runs its last
0.1 with most SMs idle (the tail), which is what `Waves.efficiency` measures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from deplodock.dialects.hardware import MAX_THREADS_PER_BLOCK, WARP_SIZE, warps_in
from deplodock.perf.devices import Device


class LaunchError(ValueError):
    """A block that no SM of the device can hold."""


@dataclass(frozen=True)
class Occupancy:
    """Resident blocks and warps per SM, and which limit decided it."""

    blocks_per_sm: int
    warps_per_sm: int
    max_warps_per_sm: int
    limiter: str
    registers: int
    shared_bytes: int
    estimated: bool = False

    @property
    def fraction(self) -> float:
        """Achieved warps over the SM's maximum (what Nsight calls theoretical occupancy)."""
        return self.warps_per_sm / self.max_warps_per_sm


def registers_per_warp(device: Device, registers: int) -> int:
    """Registers a warp is actually given: whole allocation units."""
    unit = device.limits.register_allocation_unit
    return math.ceil(registers * WARP_SIZE / unit) * unit


def shared_bytes_per_block(device: Device, shared_bytes: int) -> int:
    """Shared memory a block actually takes: rounded up, plus the driver's reservation."""
    limits = device.limits
    rounded = (
        math.ceil(shared_bytes / limits.shared_allocation_unit) * limits.shared_allocation_unit
    )
    return rounded + limits.shared_reserved_per_block


def occupancy(
    device: Device,
    threads: int,
    registers: int,
    shared_bytes: int = 0,
    estimated: bool = False,
) -> Occupancy:
    """Blocks of `threads` threads, `registers` per thread and `shared_bytes` per block
    that one SM of `device` holds at once."""
    limits = device.limits
    warps = warps_in(threads)
    if threads > MAX_THREADS_PER_BLOCK or warps > limits.max_warps_per_sm:
        raise LaunchError(f"{threads} threads per block: more than a block may have")
    if registers > limits.max_registers_per_thread:
        raise LaunchError(f"{registers} registers per thread: more than 255")
    if shared_bytes > limits.max_shared_bytes_per_block:
        raise LaunchError(
            f"{shared_bytes} bytes of shared memory per block: more than the "
            f"{limits.max_shared_bytes_per_block} an {device.arch} block may use"
        )
    candidates = {
        "warps": limits.max_warps_per_sm // warps,
        "blocks": limits.max_blocks_per_sm,
    }
    if registers > 0:
        warps_by_registers = limits.registers_per_sm // registers_per_warp(device, registers)
        candidates["registers"] = warps_by_registers // warps
    if shared_bytes > 0:
        candidates["shared memory"] = limits.shared_bytes_per_sm // shared_bytes_per_block(
            device, shared_bytes
        )
    limiter = min(candidates, key=lambda k: candidates[k])
    blocks = candidates[limiter]
    if blocks == 0:
        raise LaunchError(
            f"a block of {threads} threads x {registers} registers does not fit in one SM"
        )
    return Occupancy(
        blocks_per_sm=blocks,
        warps_per_sm=blocks * warps,
        max_warps_per_sm=limits.max_warps_per_sm,
        limiter=limiter,
        registers=registers,
        shared_bytes=shared_bytes,
        estimated=estimated,
    )


@dataclass(frozen=True)
class Waves:
    """The grid in rounds of `blocks_per_wave` (all SMs full)."""

    grid: int
    blocks_per_wave: int

    @property
    def waves(self) -> float:
        return self.grid / self.blocks_per_wave

    @property
    def full_waves(self) -> int:
        return self.grid // self.blocks_per_wave

    @property
    def rounds(self) -> int:
        """Rounds the slowest SM runs (a partial last wave counts as one)."""
        return math.ceil(self.waves)

    @property
    def efficiency(self) -> float:
        """Fraction of the SM-rounds that do work: 1.0 for whole waves, 0.55 for 1.1."""
        return self.waves / self.rounds if self.rounds else 1.0


def waves(device: Device, grid: int, occupancy: Occupancy) -> Waves:
    return Waves(grid, occupancy.blocks_per_sm * device.sm_count)
