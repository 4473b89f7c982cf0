"""The one % of speed-of-light (`deplodock/perf/sol.py`): what it counts and against which roof."""

from __future__ import annotations

import pytest

from deplodock.driver import lower_program, program_from_expression
from deplodock.perf.devices import device_model
from deplodock.perf.model import Calibration, Constants, ErrorBand
from deplodock.perf.profile import format_model_table, model_program
from deplodock.perf.sol import (
    Work,
    family_of_work,
    ideal_seconds,
    peak_flops_per_s,
    program_work,
    sol_fraction,
)

H100 = device_model("h100")


def kernel_module(expression: str):
    program = program_from_expression(expression)
    lower_program(program, "kernel")
    return program.module


def test_a_memory_bound_op_is_its_bytes_at_the_datasheet_bandwidth():
    work = Work(compulsory_bytes=3.35e9, flops=1e6)
    assert ideal_seconds(H100, work) == pytest.approx(1e-3)  # 3.35 TB/s, not an achievable share
    assert sol_fraction(H100, work, 2e-3) == pytest.approx(0.5)


def test_fp32_flops_count_at_the_fma_peak_and_bf16_at_the_tensor_peak():
    assert peak_flops_per_s(H100, "fp32") == H100.fp32_flops_per_s == pytest.approx(66.9e12, 1e-3)
    assert peak_flops_per_s(H100, "bf16") == peak_flops_per_s(H100, "fp16") == 989e12
    fp32, bf16 = Work(1.0, 66.9e9, "fp32"), Work(1.0, 66.9e9, "bf16")
    assert ideal_seconds(H100, fp32) == pytest.approx(1e-3, rel=1e-3)
    assert ideal_seconds(H100, bf16) == pytest.approx(66.9e9 / 989e12)


def test_a_program_counts_its_inputs_and_outputs_once_not_its_intermediates():
    """Two products with a 64 x 256 intermediate between them: only x, both weights and the
    output are compulsory, and the flops are the two products' (no tf32x3 refinement)."""
    x, w1, w2 = "torch.randn(64, 128)", "torch.randn(128, 256)", "torch.randn(256, 32)"
    module = kernel_module(f"torch.relu(torch.matmul({x}, {w1})) @ {w2}")
    work = program_work(module)
    assert work.compulsory_bytes == 4 * (64 * 128 + 128 * 256 + 256 * 32 + 64 * 32)
    products = 2 * 64 * 128 * 256 + 2 * 64 * 256 * 32
    # the products on tensor cores as tf32x3 count once: their refinement products are not
    # useful flops (counted, they would triple the total); relu and epilogues add under 1 %
    assert products + 64 * 256 <= work.flops < 1.01 * products
    assert work.dtype == "fp32"
    assert family_of_work(work) == "GEMM fp32"


def test_the_program_sol_counts_every_launch():
    """The profile's % SOL is the program's ideal over its whole modeled time: the launch is
    in it, so a tiny program sits far under its busy-time ratio."""
    module = kernel_module("nn.RMSNorm(256)(torch.randn(1, 8, 256))")
    estimate = model_program(module, H100, {})
    ideal = ideal_seconds(H100, estimate.work)
    assert estimate.sol_fraction == pytest.approx(ideal / (estimate.total_us * 1e-6))
    assert estimate.total_us > estimate.busy_us
    assert family_of_work(estimate.work) == "memory-bound"
    table = format_model_table(estimate)
    assert "% of speed-of-light" in table and "modeled; memory-bound" in table


def test_bf16_programs_use_the_tensor_roof_and_the_gemm_bf16_band():
    module = kernel_module(
        "torch.matmul(torch.randn(64, 128, dtype=torch.bfloat16), "
        "torch.randn(128, 64, dtype=torch.bfloat16))"
    )
    work = program_work(module)
    assert work.dtype == "bf16" and family_of_work(work) == "GEMM bf16"
    band = ErrorBand("GEMM bf16", 18.0, -4.0, 14, "measured H200 held-out rows")
    calibration = Calibration(Constants(), error_bands={"GEMM bf16": band})
    assert calibration.band_label("GEMM bf16") == (
        "modeled; GEMM bf16 +-18 % on measured H200 held-out rows"
    )
    assert "no measured error band" in calibration.band_label("attention")


def test_attention_is_its_own_family():
    work = Work(1e6, 1e9, "fp32", exponentials=True)
    assert family_of_work(work) == "attention"
    assert family_of_work(Work(1e6, 1e5, "fp32", exponentials=True)) == "memory-bound"
