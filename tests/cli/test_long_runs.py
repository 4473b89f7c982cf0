"""`run --device cpu` announces a long interpretation before it starts, and draws a
progress bar over blocks only on a terminal."""

from __future__ import annotations

import io

import pytest

import deplodock.driver as driver
from deplodock.cli.main import main
from deplodock.cli.progress import block_progress_bar
from deplodock.driver import long_run_warning, lower_program, program_from_expression

MATMUL = "torch.randn(64, 128) @ torch.randn(128, 96)"


def test_a_run_over_the_threshold_is_announced_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(driver, "LONG_RUN_SECONDS", 0.01)
    assert main(["run", "-c", MATMUL, "--device", "cpu"]) == 0
    captured = capsys.readouterr()
    (warning,) = captured.err.splitlines()
    assert warning.startswith("deplodock: warning: the kernel-level CPU run will take about ")
    assert "interpreted ops; the costliest launch is @matmul_kernel: " in warning
    assert captured.out.startswith("OK: kernel-level program on cpu")


def test_a_short_run_says_nothing_and_a_pipe_gets_no_bar(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "-c", MATMUL, "--device", "cpu"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("stage", ["tensor", "loop", "cuda"])
def test_only_the_tile_and_kernel_interpreters_are_estimated(
    stage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(driver, "LONG_RUN_SECONDS", 0.0)
    program = program_from_expression(MATMUL)
    lower_program(program, stage)
    assert long_run_warning(program) is None


def test_the_bar_draws_on_a_terminal_only() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    with block_progress_bar(terminal) as progress:
        assert progress is not None
        for block in range(1, 4):
            progress("matmul_kernel", block, 3)
    assert "@matmul_kernel" in terminal.getvalue() and "block" in terminal.getvalue()
    with block_progress_bar(io.StringIO()) as progress:
        assert progress is None
