"""`python -m bench.spills`: the zero-spill check of the default schedules."""

from __future__ import annotations

import pytest

import bench.spills as spills
from tests.backend.sass import needs_nvcc


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


def test_by_default_every_case_in_both_dtypes_is_compiled() -> None:
    """No option means the 84 cases in fp32 and bf16 (`-k` narrows them, `--no-cases` drops
    them); a shared argparse dest once made the bare command compile nothing."""
    from itertools import islice

    from bench.cases import all_cases
    from bench.spills import parse_args, programs

    def labels(argv: list[str]) -> list[str]:
        return [label for label, _ in islice(programs(parse_args(argv)), 3)]

    first = all_cases()[0].name
    assert labels([])[0] == f"fp32 {first}"
    assert labels(["-k", "softmax/qwen", "--dtype", "bf16"])[0].startswith("bf16 softmax/qwen")
    assert labels(["--no-cases"]) == []
