"""The command-line tools: help, stages, files, and one-line errors without tracebacks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

RMSNORM = "nn.RMSNorm(64)(torch.randn(1, 4, 64))"


def run_tool(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv], capture_output=True, text=True, cwd=cwd, check=False
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_python_m_deplodock_help() -> None:
    result = run_tool("deplodock", "--help")
    assert result.returncode == 0
    assert "compile" in result.stdout and "run" in result.stdout


@pytest.mark.parametrize("command", ["compile", "run", "tune"])
def test_device_help_is_the_device_table(command: str, capsys: pytest.CaptureFixture) -> None:
    """`--model` and `--tuned-for` list the devices of `perf/devices.py` and its default."""
    from deplodock.cli.main import build_parser
    from deplodock.perf.devices import DEFAULT_DEVICE, known_devices

    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())  # as argparse wraps it
    assert f"({known_devices()}" in text
    assert (
        f"default {DEFAULT_DEVICE}" in text or f"default without a GPU is {DEFAULT_DEVICE}" in text
    )


@pytest.mark.parametrize("stage", ["torch", "tensor", "loop", "tile", "kernel"])
def test_compile_prints_each_stage(stage: str) -> None:
    result = run_tool("deplodock", "compile", "-c", RMSNORM, "--ir", stage)
    assert result.returncode == 0, result.stderr
    assert f"{stage}." in result.stdout
    assert "func.func @forward" in result.stdout


def test_compile_cuda_writes_a_translation_unit(tmp_path: Path) -> None:
    out = tmp_path / "rmsnorm.cu"
    result = run_tool("deplodock", "compile", "-c", RMSNORM, "-o", str(out))
    assert result.returncode == 0, result.stderr
    source = out.read_text()
    assert "__global__" in source and "deplodock_forward" in source


def test_compile_from_file_and_opt_round_trip(tmp_path: Path) -> None:
    torch_level = tmp_path / "rmsnorm.mlir"
    assert (
        run_tool(
            "deplodock", "compile", "-c", RMSNORM, "--ir", "torch", "-o", str(torch_level)
        ).returncode
        == 0
    )
    via_opt = run_tool(
        "deplodock.cli.opt", str(torch_level), "--pass-pipeline=builtin.module(lower-to-loop)"
    )
    assert via_opt.returncode == 0, via_opt.stderr
    via_compile = run_tool("deplodock", "compile", str(torch_level), "--ir", "loop")
    assert via_compile.returncode == 0, via_compile.stderr
    assert via_opt.stdout.strip() == via_compile.stdout.strip()


def test_run_cpu_reports_relative_error() -> None:
    result = run_tool(
        "deplodock", "run", "-c", "nn.Softmax(dim=-1)(torch.randn(2, 4, 32))", "--device", "cpu"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("OK: kernel-level program on cpu")


def test_run_cpu_holds_a_bf16_expression_to_the_bf16_tolerance() -> None:
    """bf16 rounds where PyTorch's float64 reference does not: 1e-2, not fp32's 1e-5."""
    bf16 = "dtype=torch.bfloat16"
    expression = f"nn.Linear(96, 72, bias=False, {bf16})(torch.randn(17, 96, {bf16}))"
    result = run_tool("deplodock", "run", "-c", expression, "--device", "cpu")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(tolerance 1e-02)" in result.stdout


def test_unsupported_op_is_one_line() -> None:
    result = run_tool("deplodock", "compile", "-c", "torch.lgamma(torch.randn(4, 8))")
    assert_one_line_error(result, "deplodock: error:", "lgamma")


def test_bad_expression_is_one_line() -> None:
    result = run_tool("deplodock", "compile", "-c", "torch.relu(torch.randn(4, 8)")
    assert_one_line_error(result, "deplodock: error:")


def test_malformed_mlir_reports_line_and_column(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text(
        "func.func @forward(%a: tensor<4xf32>) -> tensor<4xf32> {\n  %r = torch.relu %a %a\n}\n"
    )
    result = run_tool("deplodock", "compile", str(bad), "--ir", "tensor")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert f"{bad}:2:" in result.stderr


def test_verifier_failure_names_op_and_rule(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text(
        "func.func @forward(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x4xf32> {\n"
        "  %r = torch.matmul %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>\n"
        "  func.return %r : tensor<4x4xf32>\n}\n"
    )
    result = run_tool("deplodock", "compile", str(bad), "--ir", "tensor")
    assert_one_line_error(result, "torch.matmul")


def test_missing_file_is_one_line(tmp_path: Path) -> None:
    result = run_tool("deplodock", "compile", str(tmp_path / "nope.mlir"))
    assert_one_line_error(result, "nope.mlir")


def test_unwritable_output_fails_before_compiling(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir" / "out.cu"
    result = run_tool("deplodock", "compile", "-c", RMSNORM, "-o", str(missing))
    assert_one_line_error(result, f"-o {missing}", "no directory")
    result = run_tool("deplodock", "compile", "-c", RMSNORM, "-o", str(tmp_path))
    assert_one_line_error(result, "is a directory")


def test_failed_compile_leaves_the_previous_output_alone(tmp_path: Path) -> None:
    out = tmp_path / "out.cu"
    out.write_text("previous")
    result = run_tool("deplodock", "compile", "-c", "torch.lgamma(torch.randn(4))", "-o", str(out))
    assert result.returncode != 0
    assert out.read_text() == "previous"
    assert [p.name for p in tmp_path.iterdir()] == ["out.cu"]  # no temporary left behind


def test_timing_without_bench_is_one_line() -> None:
    result = run_tool("deplodock", "run", "--timing", "device", "-c", "torch.randn(3) * 2")
    assert_one_line_error(result, "deplodock: error:", "--timing goes with --bench")


def test_a_cached_compile_prints_what_a_fresh_one_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The capture cache changes the time of `compile -c`, not its output; a new seed or
    expression is a new entry."""
    from deplodock.cli.main import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    argv = ["compile", "-c", "torch.softmax(torch.randn(3, 40), -1)", "--ir", "tile"]
    outputs = []
    for _ in range(2):
        assert main(argv) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and "tile.kernel" in outputs[0]
    assert main([*argv[:2], "torch.softmax(torch.randn(3, 41), -1)", "--ir", "tile"]) == 0
    assert len(list((tmp_path / "deplodock" / "captures").iterdir())) == 2
