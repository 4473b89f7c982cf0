"""`python -m bench.spills`: the zero-spill check of the default schedules."""

from __future__ import annotations

import pytest

import bench.spills as spills
from deplodock.backend.nvcc import nvcc_available

needs_nvcc = pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH")


@needs_nvcc
def test_a_case_that_does_not_spill_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert spills.main(["--dtype", "fp32", "-k", "rmsnorm/tinyllama-1.1b/s32"]) == 0
    out = capsys.readouterr().out
    assert out.strip() == "1 kernel(s) of 1 program(s) compiled for sm_90: 0 spill"


def test_a_spill_is_reported_and_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("deplodock.backend.nvcc.nvcc_available", lambda: True)

    def fake(program: object, source: str) -> tuple[int, list[spills.Spill]]:
        return 3, [spills.Spill(source, "linear_kernel", 255, 20, 32)]

    monkeypatch.setattr(spills, "spills_of", fake)
    assert spills.main(["--dtype", "fp32", "-k", "q_proj/tinyllama-1.1b/s32"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "fp32 q_proj/tinyllama-1.1b/s32: @linear_kernel spills 20 bytes stored, 32 loaded "
        "(255 registers)"
    )
    assert lines[-1] == "3 kernel(s) of 1 program(s) compiled for sm_90: 1 spill"


def test_without_nvcc_nothing_is_claimed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("deplodock.backend.nvcc.nvcc_available", lambda: False)
    assert spills.main([]) == 2
    assert "nvcc is not on PATH" in capsys.readouterr().err
