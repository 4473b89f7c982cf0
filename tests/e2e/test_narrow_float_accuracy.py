"""bf16 programs are held to PyTorch's own accuracy in bf16, and reach it.

A chain of bf16 ops (attention: matmul, scale, mask, softmax, matmul) is off by more than the
flat 1e-2 in PyTorch itself, so the check allows twice PyTorch's own error on the same inputs
when that is larger. Softmax computes in f32 and rounds once, as PyTorch's kernels do: with
every step rounded to bf16 its error was twice PyTorch's.
"""

from __future__ import annotations

import pytest

from deplodock.driver import (
    NARROW_FLOAT_TOLERANCE,
    PYTORCH_ERROR_FACTOR,
    RunReport,
    lower_program,
    narrow_float_tolerance,
    program_from_expression,
    run_and_compare,
)

BF16 = "dtype=torch.bfloat16"
ATTENTION = (
    f"torch.softmax(torch.randn(1, 4, 64, 64, {BF16}) @ torch.randn(1, 4, 64, 64, {BF16})"
    f".transpose(-1, -2) / 8.0 + torch.randn(1, 1, 64, 64, {BF16}), dim=-1)"
    f" @ torch.randn(1, 4, 64, 64, {BF16})"
)


def kernel_level_report(expression: str) -> RunReport:
    program = program_from_expression(expression)
    lower_program(program, "kernel")
    return run_and_compare(program)


def test_the_tolerance_is_the_flat_one_or_twice_pytorch_own_error() -> None:
    assert narrow_float_tolerance(0.0) == NARROW_FLOAT_TOLERANCE
    assert narrow_float_tolerance(0.004) == NARROW_FLOAT_TOLERANCE
    assert narrow_float_tolerance(0.0125) == pytest.approx(PYTORCH_ERROR_FACTOR * 0.0125)


@pytest.mark.parametrize("scale", [1, 4])
def test_bf16_softmax_is_as_accurate_as_pytorch(scale: int) -> None:
    report = kernel_level_report(f"torch.softmax(torch.randn(8, 2000, {BF16}) * {scale}, dim=-1)")
    assert report.pytorch_error is not None and report.pytorch_error > 1e-4  # bf16 rounds
    assert max(report.errors) <= 1.05 * report.pytorch_error, report.summary()


def test_bf16_log_softmax_is_as_accurate_as_pytorch() -> None:
    report = kernel_level_report(f"torch.log_softmax(torch.randn(8, 2000, {BF16}) * 4, dim=-1)")
    assert report.pytorch_error is not None
    assert max(report.errors) <= 1.05 * report.pytorch_error + 1e-6, report.summary()


def test_bf16_attention_is_held_to_twice_pytorch_own_error() -> None:
    report = kernel_level_report(ATTENTION)
    own = report.pytorch_error
    assert own is not None and PYTORCH_ERROR_FACTOR * own > NARROW_FLOAT_TOLERANCE
    assert report.tolerance == pytest.approx(PYTORCH_ERROR_FACTOR * own)
    assert report.ok and max(report.errors) <= 1.05 * own, report.summary()
    assert "2x PyTorch's own" in report.summary()


def test_an_error_past_twice_pytorch_own_is_a_mismatch() -> None:
    report = RunReport("kernel", [0.03], narrow_float_tolerance(0.0125), 0.0, pytorch_error=0.0125)
    assert not report.ok
    assert report.summary().startswith("MISMATCH") and "tolerance 2.50e-02" in report.summary()


def test_fp32_keeps_its_fixed_tolerance() -> None:
    report = kernel_level_report("torch.softmax(torch.randn(8, 300) * 4, dim=-1)")
    assert report.pytorch_error is None and report.tolerance == 1e-5


def test_bf16_cumsum_carries_f32_and_matches_pytorch() -> None:
    """The scan's running value is f32 and each prefix is rounded once: a bf16 running sum
    over 2000 steps would stall (x + 1 == x past 256) and be far off."""
    report = kernel_level_report(f"torch.cumsum(torch.rand(4, 2000, {BF16}), dim=-1)")
    assert report.pytorch_error is not None
    assert max(report.errors) <= 1.05 * report.pytorch_error + 1e-6, report.summary()
