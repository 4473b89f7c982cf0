"""The model must rank schedules the way GPUs do (the tuner's reward depends on it).

Each test models two hand-written kernels that compute the same thing and asserts which one
the model prefers. Times are the model's, compared with each other only; no test asserts an
absolute time.
"""

from __future__ import annotations

import pytest

from deplodock.backend.cost import kernel_cost
from deplodock.dialects import kernel
from deplodock.perf.devices import DEVICES, device_model
from deplodock.perf.model import KernelEstimate, model_kernel
from deplodock.perf.trace import trace_kernel
from tests.helpers import parse
from tests.perf import kernels as K

H100 = device_model("h100")


def modeled(text: str, registers: int = 32) -> KernelEstimate:
    module = parse(text)
    fn = next(op for op in module.ops if isinstance(op, kernel.FuncOp))
    return model_kernel(trace_kernel(fn), H100, registers, kernel_cost(fn).flops)


def test_coalesced_beats_strided():
    assert modeled(K.copy_2d(4096)).time_us < modeled(K.copy_2d(4096, transposed_read=True)).time_us


def test_padded_shared_tile_beats_a_bank_conflicted_one():
    padded = modeled(K.transpose_via_shared(4096, pad=1))
    conflicted = modeled(K.transpose_via_shared(4096, pad=0))
    assert padded.time_us < conflicted.time_us
    assert conflicted.terms_us["shared"] > 10 * padded.terms_us["shared"]


def test_higher_occupancy_wins_when_memory_bound():
    full = modeled(K.copy_2d(4096), registers=32)  # 8 blocks of 256 per SM
    low = modeled(K.copy_2d(4096), registers=255)  # 1 block per SM
    assert full.occupancy.fraction > low.occupancy.fraction
    assert full.time_us < low.time_us
    assert low.limiter == "latency"


def test_a_wave_tail_costs_more_than_its_share():
    whole = modeled(K.fma_loop(1056))  # exactly one wave of 8 x 132 blocks
    tail = modeled(K.fma_loop(1057))  # one block more: a second, nearly empty round
    assert tail.time_us / 1057 > 1.02 * whole.time_us / 1056


def test_more_bytes_in_flight_per_warp_win_when_memory_bound():
    """What vector loads buy a memory-bound kernel: the kernel dialect has no vector access
    yet, so the same bytes per warp come from four independent loads per loop body."""
    one = modeled(K.copy_2d(4096))
    four = modeled(K.copy_2d_ilp(4096, per_thread=4))
    assert four.counters.bytes_in_flight_per_warp > one.counters.bytes_in_flight_per_warp
    assert four.time_us < one.time_us


def test_register_tiled_contraction_beats_untiled():
    assert modeled(K.matmul_register_tiled()).time_us < modeled(K.matmul_naive()).time_us


def test_staged_contraction_beats_unstaged():
    staged = modeled(K.matmul_16x16(staged=True))
    unstaged = modeled(K.matmul_16x16())
    assert staged.time_us < unstaged.time_us
    assert staged.l2_bytes < unstaged.l2_bytes


@pytest.mark.parametrize("key", sorted(DEVICES))
def test_every_device_models_a_kernel(key):
    module = parse(K.copy_2d(1024))
    fn = next(op for op in module.ops if isinstance(op, kernel.FuncOp))
    estimate = model_kernel(trace_kernel(fn), device_model(key), 32, 0)
    assert estimate.time_us > 0 and 0 < estimate.sol_fraction <= 1
