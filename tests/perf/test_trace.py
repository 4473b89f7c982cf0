"""Counters traced from hand-written kernels, against the answers the CUDA rules give."""

from __future__ import annotations

import pytest

from deplodock.dialects import kernel
from deplodock.interpreters.shared_memory import RaceError
from deplodock.perf import trace
from deplodock.perf.trace import representative_blocks, trace_kernel
from tests.helpers import parse
from tests.perf import kernels as K


def kernel_of(text: str) -> kernel.FuncOp:
    module = parse(text)
    return next(op for op in module.ops if isinstance(op, kernel.FuncOp))


def test_coalesced_and_strided_loads():
    coalesced = trace_kernel(kernel_of(K.copy_2d(256)))
    strided = trace_kernel(kernel_of(K.copy_2d(256, transposed_read=True)))
    assert coalesced.sectors_per_load_request == 4
    assert coalesced.sectors_per_store_request == 4
    assert strided.sectors_per_load_request == 32
    # both read and write each byte once: the compulsory traffic is the two buffers
    assert coalesced.footprint_bytes("load") == 256 * 256 * 4
    assert strided.footprint_bytes("load") == 256 * 256 * 4
    assert coalesced.footprint_bytes("store") == 256 * 256 * 4


@pytest.mark.parametrize(("stride", "factor"), [(1, 1.0), (2, 2.0), (32, 32.0), (33, 1.0)])
def test_shared_bank_conflicts(stride, factor):
    counters = trace_kernel(kernel_of(K.shared_stride(stride)))
    assert counters.bank_conflict_factor == factor
    assert counters.total("shared_requests") == 2  # one store, one load, one warp


def test_shared_broadcast_has_no_conflict():
    counters = trace_kernel(kernel_of(K.shared_stride(1, broadcast=True)))
    assert counters.total("shared_wavefronts") == 2


def test_padding_removes_the_transpose_conflict():
    conflicted = trace_kernel(kernel_of(K.transpose_via_shared(256, pad=0)))
    padded = trace_kernel(kernel_of(K.transpose_via_shared(256, pad=1)))
    # the store is conflict-free in both; the column read is 32-way without padding
    assert conflicted.bank_conflict_factor == pytest.approx((1 + 32) / 2)
    assert padded.bank_conflict_factor == 1.0


def test_instruction_mix_of_a_naive_matmul():
    """Per k and warp: two loads, one FFMA (mulf + addf contracted), the loop's back edge."""
    n = 64
    counters = trace_kernel(kernel_of(K.matmul_naive(n)))
    warps = n * n // 32
    mix = counters.instructions
    assert mix["fma"] == warps * n
    assert mix["fp32"] == 0
    assert mix["ld_global"] == 2 * warps * n
    assert mix["st_global"] == warps
    assert mix["branch"] == warps * n


def test_representative_blocks_cover_the_grid():
    assert representative_blocks(1) == ([0], [1])
    assert representative_blocks(3) == ([0, 1, 2], [1, 1, 1])
    assert representative_blocks(1000) == ([0, 500, 999], [1, 998, 1])


def test_a_sampled_streaming_loop_counts_like_the_full_loop(monkeypatch):
    fn = kernel_of(K.fma_loop(4, iterations=64))
    full = trace_kernel(fn)
    monkeypatch.setattr(trace, "SAMPLED_ITERATIONS", 8)
    sampled = trace_kernel(fn)
    assert sampled.instructions == pytest.approx(full.instructions)
    assert sampled.footprint_bytes("load") == full.footprint_bytes("load")


def test_a_sampled_staged_loop_counts_like_the_full_loop(monkeypatch):
    """A K loop through shared memory (barriers inside) of 64 steps, traced for 24 of them and
    scaled, counts what tracing all 64 counts."""
    fn = kernel_of(K.matmul_16x16(1024, staged=True))
    sampled = trace_kernel(fn)
    monkeypatch.setattr(trace, "SAMPLED_STAGED_ITERATIONS", 10**9)
    full = trace_kernel(fn)
    assert sampled.instructions == pytest.approx(full.instructions, rel=1e-3)
    assert sampled.total("shared_wavefronts") == pytest.approx(full.total("shared_wavefronts"))
    assert sampled.footprint_bytes("load") == pytest.approx(full.footprint_bytes("load"))
    assert sampled.bytes_in_flight_per_warp == pytest.approx(full.bytes_in_flight_per_warp)


def test_global_memory_is_virtual():
    """A 16 GiB buffer costs nothing to trace: loads read a zero-stride view."""
    n = 65536
    counters = trace_kernel(kernel_of(K.copy_2d(n)))
    assert counters.buffer_bytes["%x"] == n * n * 4
    assert counters.sectors_per_load_request == 4


def test_a_missing_barrier_is_still_a_race():
    """Thread 0 writes s[0] and every thread reads it with no barrier between."""
    text = K.shared_stride(1, broadcast=True).replace("  kernel.barrier\n", "")
    with pytest.raises(RaceError):
        trace_kernel(kernel_of(text))


@pytest.mark.parametrize("carried", [False, True])
def test_a_loop_filling_shared_memory_for_later_is_traced_whole(carried):
    """A loop that fills 64 rows of shared memory read after it: sampling it would leave the
    last row unwritten. Without a carried value it is never sampled; with one (sampled like a
    K loop) the read-back finds the hole and the trace runs again with the loop whole."""
    counters = trace_kernel(kernel_of(K.shared_fill(64, carried)))
    assert counters.instructions["st_shared"] == 64
    assert counters.instructions["ld_global"] == 64
