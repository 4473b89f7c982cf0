"""`deplodock run --profile --model DEVICE`: the modeled profile, without a GPU."""

from __future__ import annotations

import pytest

from deplodock.backend.device import cuda_unavailable_reason
from deplodock.cli.main import main

RMSNORM = "nn.RMSNorm(256)(torch.randn(1, 16, 256))"


def test_profile_on_a_named_device_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--profile", "--model", "a100", "-c", RMSNORM]) == 0
    out = capsys.readouterr().out
    header, columns, row, total, sol, legend = out.strip().splitlines()
    assert header.startswith("profile: MODELED on NVIDIA A100")
    assert "not measured" in header and "constants fitted" in header
    assert "modeled; memory-bound" in header  # the family's error band
    assert "limiter" in columns and "%SOL" in columns
    assert row.split()[0] == "rms_norm_kernel"
    assert total.split()[:2] == ["total", "(modeled)"]
    assert sol.split()[0] == "program:" and "% of speed-of-light, modeled; memory-bound" in sol
    assert "sectors per" in legend and "launch included" in legend


def test_profile_without_a_gpu_models_an_h100(capsys: pytest.CaptureFixture[str]) -> None:
    if cuda_unavailable_reason() is None:
        pytest.skip("a GPU is present: --profile measures on it")
    assert main(["run", "--profile", "-c", RMSNORM]) == 0
    captured = capsys.readouterr()
    first, second = captured.out.splitlines()[:2]
    assert first.startswith("OK: kernel-level program on cpu")  # checked, as on a GPU
    assert second.startswith("profile: MODELED on NVIDIA H100")
    assert captured.err.startswith("deplodock: note: no CUDA device here")


def test_unknown_device_model_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--profile", "--model", "b200", "-c", RMSNORM]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == (
        "deplodock: error: unknown device model 'b200' (known: h100, a100, a6000, rtx5090, h200)"
    )


def test_model_needs_profile(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--model", "h100", "-c", RMSNORM]) == 1
    assert "--model DEVICE goes with --profile" in capsys.readouterr().err
