"""Long work is announced and shown: `run --device cpu` warns before a long interpretation
and draws a bar over blocks; a model compile draws a bar over its phases; both only on a
terminal and not with `--quiet`."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import deplodock.driver.checking as checking
from deplodock.cli.main import compile_phases, main
from deplodock.cli.progress import block_progress_bar, phase_progress_bar
from deplodock.driver import (
    long_run_warning,
    lower_program,
    program_from_expression,
    program_from_model,
)

MATMUL = "torch.randn(64, 128) @ torch.randn(128, 96)"


def test_a_run_over_the_threshold_is_announced_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(checking, "LONG_RUN_SECONDS", 0.01)
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
    monkeypatch.setattr(checking, "LONG_RUN_SECONDS", 0.0)
    program = program_from_expression(MATMUL)
    lower_program(program, stage)
    assert long_run_warning(program) is None


def test_the_bar_draws_on_a_terminal_only() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    with block_progress_bar(stream=terminal) as progress:
        assert progress is not None
        for block in range(1, 4):
            progress("matmul_kernel", block, 3)
    assert "@matmul_kernel" in terminal.getvalue() and "block" in terminal.getvalue()
    with block_progress_bar(stream=io.StringIO()) as progress:
        assert progress is None


def test_a_second_launch_of_a_kernel_reported_by_batches_gets_a_fresh_bar() -> None:
    """The kernel interpreter reports batches (64, 128 of 128 blocks): a launch of the same
    kernel again starts over below the count, not at block 1."""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    with block_progress_bar(stream=Terminal()) as bars:
        assert bars is not None
        for done in (64, 128):
            bars("rms_norm_kernel", done, 128)
        first = bars.bar  # type: ignore[attr-defined]
        bars("rms_norm_kernel", 64, 128)
        assert bars.bar is not first and bars.bar.n == 64  # type: ignore[attr-defined]


@pytest.mark.parametrize("stage", ["tensor", "cuda"])
def test_a_model_compile_tells_its_phases_in_the_order_the_bar_counts(
    stage: str, tmp_path: Path
) -> None:
    config = {"model_type": "llama", "hidden_size": 32, "num_attention_heads": 4}
    config |= {"num_hidden_layers": 2, "intermediate_size": 64, "vocab_size": 64}
    (tmp_path / "config.json").write_text(json.dumps(config))
    heard: list[str] = []
    program = program_from_model(str(tmp_path), seq_len=4, progress=heard.append)
    lower_program(program, stage, progress=heard.append)
    assert heard == compile_phases(stage)


def test_the_phase_bar_labels_the_current_phase_on_a_terminal_only() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    with phase_progress_bar(compile_phases("loop"), stream=terminal) as progress:
        assert progress is not None
        for phase in compile_phases("loop"):
            progress(phase)
    assert "compile: segment" in terminal.getvalue()
    with phase_progress_bar(["model"], quiet=True, stream=terminal) as progress:
        assert progress is None
    with phase_progress_bar(["model"], stream=io.StringIO()) as progress:
        assert progress is None
