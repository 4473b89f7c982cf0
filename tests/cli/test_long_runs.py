"""Long work is announced and shown: `run --device cpu` warns before a long interpretation
and draws a bar over blocks; a model compile draws a bar over its phases; both only on a
terminal and not with `--quiet`."""

from __future__ import annotations

import io
import json
import re
import sys
import time
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


# --- a long command whose stderr is no terminal (issue #39 item 7) ----------------------


def test_a_heartbeat_on_a_file_says_what_and_how_long(tmp_path: Path) -> None:
    from deplodock.cli import progress

    log = tmp_path / "stderr.log"
    with log.open("w") as stream:
        with progress.heartbeat("compile m", stream=stream, interval=0.05):
            progress.tell("loop")
            time.sleep(0.3)
        time.sleep(0.15)  # stopped: no more lines
    lines = log.read_text().splitlines()
    assert len(lines) >= 3
    assert all(re.fullmatch(r"deplodock: compile m: loop \(\d+ s\)", line) for line in lines)


def test_no_heartbeat_on_a_terminal_a_capture_or_with_quiet(tmp_path: Path) -> None:
    from deplodock.cli import progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

        def fileno(self) -> int:
            return 2

    for stream, quiet in ((Terminal(), False), (io.StringIO(), False)):
        with progress.heartbeat("x", quiet=quiet, stream=stream, interval=0.01):
            time.sleep(0.1)
        assert stream.getvalue() == ""
    with (tmp_path / "log").open("w") as stream:
        with progress.heartbeat("x", quiet=True, stream=stream, interval=0.01):
            time.sleep(0.1)
    assert (tmp_path / "log").read_text() == ""


def test_a_model_compile_piped_to_a_log_prints_its_phases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model compile used to print nothing on a pipe until it ended (a minute or two)."""
    from deplodock.cli import progress

    config = {"model_type": "llama", "hidden_size": 32, "num_attention_heads": 4}
    config |= {"num_hidden_layers": 2, "intermediate_size": 64, "vocab_size": 64}
    (tmp_path / "config.json").write_text(json.dumps(config))
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.2)
    log = tmp_path / "stderr.log"
    with log.open("w") as stream:
        monkeypatch.setattr(sys, "stderr", stream)
        status = main(["compile", str(tmp_path), "--seq-len", "4", "-o", str(tmp_path / "m.cu")])
    assert status == 0
    beat = re.compile(rf"deplodock: compile {re.escape(str(tmp_path))}: (\w+) \(\d+ s\)")
    phases = {m[1] for line in log.read_text().splitlines() if (m := beat.fullmatch(line))}
    assert phases and phases <= set(compile_phases("cuda")) | {"working"}, log.read_text()


def test_tune_verbose_in_a_file_does_not_wrap_its_lines() -> None:
    """`tune -v 2> log` wrapped its per-kernel line at 80 columns (rich's width off a
    terminal), mid-number."""
    from tests.cli.invoke import invoke

    expr = "F.silu(torch.randn(1, 16, 512)) * torch.randn(1, 16, 512)"
    result = invoke(
        "deplodock", ["tune", "-c", expr, "--trials", "3", "--no-check", "--no-cache", "-v"]
    )
    assert result.status == 0, result.output
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("tune: mul_kernel")]
    assert line.endswith("stopped: trials"), line
