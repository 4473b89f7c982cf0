"""The bad-input examples of issue #12, one test each, run in-process (`tests/cli/invoke.py`).

The wider bad-input corpus is `tests/corpus/`; these are the cases the issue names.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deplodock.driver import RunReport, describe_mismatch, max_relative_error
from deplodock.files import WriteError, write_atomic
from tests.cli.invoke import assert_one_line_error, device, invoke, is_device

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "rmsnorm.mlir"


def nested_modules(levels: int) -> str:
    return "builtin.module {\n" * levels + "}\n" * levels


def nested_attribute(levels: int) -> str:
    return "builtin.module attributes {a = " + "[" * levels + "]" * levels + "} {\n}\n"


@pytest.mark.parametrize("tool", ["deplodock-opt", "deplodock"])
@pytest.mark.parametrize("text", [nested_modules(3000), nested_attribute(5000)])
def test_deep_nesting_is_one_line(tool: str, text: str, tmp_path: Path) -> None:
    deep = tmp_path / "deep.mlir"
    deep.write_text(text)
    argv = [str(deep)] if tool == "deplodock-opt" else ["compile", str(deep)]
    assert_one_line_error(invoke(tool, argv), f"{deep}: nested too deeply")


def test_moderate_nesting_still_parses(tmp_path: Path) -> None:
    """The raised recursion limit is what lets 200 nested modules through."""
    nested = tmp_path / "nested.mlir"
    nested.write_text(nested_modules(200))
    result = invoke("deplodock-opt", [str(nested)])
    assert result.status == 0, result.stderr
    assert result.stdout.count("builtin.module") == 200


@pytest.mark.parametrize(
    ("pipeline", "fragments"),
    [
        ("lower-to-loop{", ("bad pass pipeline 'lower-to-loop{'", "column 15")),
        ("lower-to-loop)", ("bad pass pipeline 'lower-to-loop)'", "column 14")),
        ("builtin.module(lower-to-loop", ("bad pass pipeline",)),
        ("cse((", ("bad pass pipeline 'cse(('",)),
        ("builtin.module(func.func(cse))", ("nested pass pipeline 'func.func(cse)'", "-p 'cse'")),
    ],
)
def test_malformed_pipeline_is_one_line(pipeline: str, fragments: tuple[str, ...]) -> None:
    result = invoke("deplodock-opt", [str(EXAMPLE), "-p", pipeline])
    assert_one_line_error(result, *fragments)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"builtin.module {\n  %x = \n}\n", "bad.mlir:"),  # parse error
        (  # verifier error
            b"func.func @forward(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x4xf32> {\n"
            b"  %r = torch.matmul %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>\n"
            b"  func.return %r : tensor<4x4xf32>\n}\n",
            "torch.matmul",
        ),
        (b"builtin.module {\n}\n\xff\xfe\n", "bad.mlir: not UTF-8 text"),
    ],
)
def test_opt_output_survives_a_failure(content: bytes, fragment: str, tmp_path: Path) -> None:
    bad, kept, new = tmp_path / "bad.mlir", tmp_path / "kept.mlir", tmp_path / "new.mlir"
    bad.write_bytes(content)
    kept.write_text("previous")
    for out in (kept, new):
        result = invoke("deplodock-opt", [str(bad), "-p", "lower-to-tensor", "-o", str(out)])
        assert result.status == 1 and "Traceback" not in result.output
        assert fragment in result.stderr
    assert kept.read_text() == "previous"
    assert not new.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.mlir", "kept.mlir"]


def test_opt_output_is_written_on_success(tmp_path: Path) -> None:
    out = tmp_path / "out.mlir"
    result = invoke("deplodock-opt", [str(EXAMPLE), "-p", "lower-to-tensor", "-o", str(out)])
    assert result.status == 0, result.stderr
    assert "tensor.reduce" in out.read_text() and result.stdout == ""


@pytest.mark.parametrize("tool", ["deplodock", "deplodock-opt"])
def test_output_keeps_umask_mode_and_writes_through_symlinks(tool: str, tmp_path: Path) -> None:
    target, link, fresh = tmp_path / "target.mlir", tmp_path / "link.mlir", tmp_path / "new.mlir"
    target.write_text("previous")
    target.chmod(0o640)
    link.symlink_to(target.name)
    previous = os.umask(0o022)
    try:
        for out in (link, fresh):
            argv = [str(EXAMPLE), "-o", str(out)]
            argv = argv if tool == "deplodock-opt" else ["compile", *argv, "--ir", "torch"]
            assert invoke(tool, argv).status == 0
    finally:
        os.umask(previous)
    assert link.is_symlink() and "torch.rms_norm" in target.read_text()
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o644


def test_same_inf_as_pytorch_matches() -> None:
    result = invoke("deplodock", ["run", "-c", "torch.exp(torch.randn(4, 8) * 100)"])
    assert result.status == 0, result.output
    assert result.stdout.startswith("OK:")


def test_nan_against_nan_is_never_ok() -> None:
    """Issue #41: NaN where the reference is NaN compares nothing; it must not read as OK."""
    result = invoke("deplodock", ["run", "-c", "torch.log(torch.randn(4, 8) - 1)"])
    assert result.status == 1, result.output
    assert result.stdout.startswith("UNCHECKED: "), result.stdout
    assert "max relative error nan" in result.stdout
    assert "(NaN against NaN checks nothing)" in result.stdout
    both = np.array([[1.0, np.nan], [np.nan, 2.0]])
    assert np.isnan(max_relative_error(both.astype(np.float32), both))
    assert describe_mismatch([both], [both], 1e-5) == "output 0 at [0, 1]: nan (expected nan)"
    report = RunReport("kernel", [0.0, float("nan")], 1e-5, 0.0)
    assert not report.ok and report.summary().startswith("UNCHECKED: ")
    for errors, worst in (
        ([float("nan"), float("inf")], "inf"),
        ([float("nan"), 0.5], "5.000e-01"),
    ):
        summary = RunReport("kernel", errors, 1e-5, 0.0).summary()  # a real mismatch wins
        assert summary.startswith("MISMATCH: ") and f"error {worst} " in summary, summary
    actual, expected = np.array([np.nan, 1.0, 5.0]), np.array([np.nan, 1.0, 2.0])
    assert describe_mismatch([both, actual], [both, expected], 1e-5) == (
        "output 1 at [2]: 5 (expected 2)"
    )


def test_nan_where_pytorch_is_finite_names_the_index() -> None:
    expected = np.array([[1.0, 2.0], [3.0, np.inf]])
    actual = np.array([[1.0, 2.0], [np.nan, np.inf]], dtype=np.float32)
    assert max_relative_error(actual, expected) == float("inf")
    assert describe_mismatch([actual], [expected], 1e-5) == "output 0 at [1, 0]: nan (expected 3)"
    assert max_relative_error(expected.astype(np.float32), expected) == 0.0
    overflow = np.array([np.inf], dtype=np.float32)  # exp(1000) overflows fp32 in PyTorch too
    assert max_relative_error(overflow, np.array([1e300])) == 0.0


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        ("lambda x: x", "a lambda"),
        ("(lambda x: x)(torch.randn(3))", "a lambda"),
    ],
)
def test_lambda_expression_is_a_clear_error(code: str, fragment: str) -> None:
    assert_one_line_error(invoke("deplodock", ["compile", "-c", code]), fragment)


def test_program_that_computes_nothing_says_so() -> None:
    result = invoke("deplodock", ["compile", "-c", "torch.randn(4)", "--ir", "loop"])
    assert result.status == 0
    assert "func.return %x0" in result.stdout
    assert "note: the program computes nothing" in result.stderr


def test_help_and_readme_say_that_c_executes_python() -> None:
    help_text = " ".join(invoke("deplodock", ["compile", "--help"]).stdout.split())
    assert "executes it as Python" in help_text and "not a sandbox" in help_text
    assert "never executed" in help_text
    readme = (EXAMPLE.parents[2] / "README.md").read_text()
    assert "`-c` runs the expression as Python" in " ".join(readme.split())


def test_mlir_input_executes_nothing(tmp_path: Path) -> None:
    """A `.mlir` file is parsed, never evaluated: a string that would be Python stays data."""
    marker = tmp_path / "ran"
    payload = f"__import__('os').mkdir('{marker}')"
    hostile = tmp_path / "hostile.mlir"
    text = EXAMPLE.read_text().replace(
        "builtin.module {", f'builtin.module attributes {{x = "{payload}"}} {{'
    )
    hostile.write_text(text)
    for command in (["compile", "--ir", "cuda"], ["run", "--ir", "loop"]):
        result = invoke("deplodock", [command[0], str(hostile), *command[1:]])
        assert result.status == 0, result.output
    assert not marker.exists()


def test_run_mlir_compares_with_its_own_level() -> None:
    result = invoke("deplodock", ["run", str(EXAMPLE), "--ir", "loop"])
    assert result.status == 0, result.output
    assert result.stdout.startswith("OK: loop-level program on cpu, 1 output(s)")


def test_run_mlir_at_its_own_level_is_unchecked_and_memchecked(tmp_path: Path) -> None:
    """Issue #39: a cuda-level file was compared with itself ("OK, error 0.000e+00") even
    for a kernel that reads `x0[-1]`; now nothing compared is UNCHECKED (exit 1), and the C
    runs under memcheck, which finds the bad read."""
    cuda_file, bad = tmp_path / "rms.cuda.mlir", tmp_path / "bad.cuda.mlir"
    lowered = invoke("deplodock-opt", [str(EXAMPLE), "-p", "lower-to-cuda", "-o", str(cuda_file)])
    assert lowered.status == 0, lowered.output
    result = invoke("deplodock", ["run", str(cuda_file)])
    assert result.status == 1, result.output
    assert result.stdout == (
        "UNCHECKED: cuda-level program on cpu, 1 output(s), no reference: the file is at the "
        "cuda level, the level it runs at (memcheck found no bad access)\n"
    )
    text = cuda_file.read_text()
    assert "x0[b * 2048 + t]" in text
    bad.write_text(text.replace("x0[b * 2048 + t]", "x0[b * 2048 + t - 1]", 1))
    assert_one_line_error(
        invoke("deplodock", ["run", str(bad), "--memcheck"]),
        "out-of-bounds access in kernel rms_norm_kernel",
        "touches %x0 at element -1",
    )
    assert_one_line_error(invoke("deplodock", ["run", str(bad)]), "touches %x0 at element -1")
    kernel_file = tmp_path / "rms.kernel.mlir"
    invoke("deplodock-opt", [str(EXAMPLE), "-p", "lower-to-kernel", "-o", str(kernel_file)])
    result = invoke("deplodock", ["run", str(kernel_file)])
    assert result.status == 1 and "(--ir cuda compares its lowering with it)" in result.stdout
    assert invoke("deplodock", ["run", str(kernel_file), "--ir", "cuda"]).status == 0


def test_ctrl_c_is_one_line_and_130(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import deplodock.driver

    def interrupted(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(deplodock.driver, "lower_program", interrupted)
    out = tmp_path / "out.cu"
    out.write_text("previous")
    result = invoke("deplodock", ["compile", str(EXAMPLE), "-o", str(out)])
    assert_one_line_error(result, "deplodock: interrupted", status=130)
    assert out.read_text() == "previous"


@pytest.mark.parametrize("shape", ["0, 4", "4, 0", "0"])
def test_zero_size_tensor_is_one_named_line(shape: str) -> None:
    result = invoke("deplodock", ["compile", "-c", f"torch.relu(torch.randn({shape}))"])
    assert_one_line_error(result, "zero-size")


def test_zero_attention_heads_is_one_named_line(tmp_path: Path) -> None:
    import json

    config = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 0}
    config |= {"num_hidden_layers": 1, "intermediate_size": 128, "vocab_size": 128}
    (tmp_path / "config.json").write_text(json.dumps(config))
    result = invoke("deplodock", ["compile", str(tmp_path), "--ir", "torch"])
    assert_one_line_error(result, "num_attention_heads")


def test_500_chained_additions_compile() -> None:
    code = "torch.randn(4)" + " + 1.0" * 500
    result = invoke("deplodock", ["compile", "-c", code, "--ir", "tensor"])
    assert result.status == 0, result.stderr
    assert result.stdout.count("tensor.elementwise") >= 1


def tiny_checkpoint(directory: Path, layers: int = 1) -> dict[str, Any]:
    """A random tiny llama saved in `directory` (config and safetensors); its weights."""
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForCausalLM

    sizes = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": layers}
    sizes |= {"num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 64}
    AutoModelForCausalLM.from_config(AutoConfig.for_model("llama", **sizes)).save_pretrained(
        directory
    )
    return load_file(directory / "model.safetensors")


def save_checkpoint(directory: Path, weights: dict[str, Any]) -> None:
    from safetensors.torch import save_file

    save_file(weights, directory / "model.safetensors", metadata={"format": "pt"})


def test_bad_safetensors_shape_names_tensor_and_shapes(tmp_path: Path) -> None:
    import torch

    weights = tiny_checkpoint(tmp_path)
    weights["model.layers.0.mlp.up_proj.weight"] = torch.zeros(63, 32)
    save_checkpoint(tmp_path, weights)
    result = invoke("deplodock", ["run", str(tmp_path), "--seq-len", "4"])
    assert_one_line_error(
        result, "tensor 'model.layers.0.mlp.up_proj.weight' has shape (63, 32)", "expects (64, 32)"
    )


def test_weights_of_fewer_layers_are_one_line_and_v_lists_them(tmp_path: Path) -> None:
    """Issue #41: a config asking for more layers than the weights hold printed
    transformers' load report (a dozen lines) before the error; now one line, the listing
    only with -v."""
    weights = tiny_checkpoint(tmp_path, layers=2)
    save_checkpoint(tmp_path, {k: v for k, v in weights.items() if ".layers.1." not in k})
    line = (
        f"{tmp_path}: the checkpoint lacks 'model.layers.1.self_attn.q_proj.weight' and 8 "
        "more tensors the model expects; it holds 1 of the 2 layers the config asks for "
        "(--layers 1 keeps those)"
    )
    assert_one_line_error(invoke("deplodock", ["run", str(tmp_path), "--seq-len", "4"]), line)
    verbose = invoke("deplodock", ["run", str(tmp_path), "--seq-len", "4", "-v"])
    lines = verbose.stderr.splitlines()
    assert verbose.status == 1 and lines[0] == f"deplodock: error: {line}"
    missing = sorted(k for k in weights if ".layers.1." in k)
    assert sorted(x.removeprefix("  missing: ") for x in lines[1:-1]) == missing
    assert lines[-1].lstrip().startswith("total")
    result = invoke("deplodock", ["run", str(tmp_path), "--seq-len", "4", "--layers", "1"])
    assert result.status == 0 and result.stdout.startswith("OK:"), result.output


def test_one_missing_weight_is_one_line(tmp_path: Path) -> None:
    weights = tiny_checkpoint(tmp_path)
    del weights["model.layers.0.mlp.up_proj.weight"]
    save_checkpoint(tmp_path, weights)
    result = invoke("deplodock", ["run", str(tmp_path), "--seq-len", "4"])
    assert_one_line_error(
        result, "lacks 'model.layers.0.mlp.up_proj.weight', a tensor the model expects"
    )


def test_nan_weight_warns_and_is_not_ok(tmp_path: Path) -> None:
    """Issue #41: a NaN norm weight made the reference NaN too, and the run said OK."""
    weights = tiny_checkpoint(tmp_path)
    weights["model.norm.weight"][3] = float("nan")
    weights["model.layers.0.input_layernorm.weight"][0] = float("inf")
    save_checkpoint(tmp_path, weights)
    result = invoke("deplodock", ["run", str(tmp_path), "--seq-len", "4"])
    assert result.stderr.splitlines() == [
        f"deplodock: warning: {tmp_path}: weight 'model.layers.0.input_layernorm.weight' "
        "holds Inf (1 of 32 values); 1 other weight too"
    ]
    assert result.status == 1 and result.stdout.startswith("UNCHECKED: "), result.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["deplodock-opt", str(EXAMPLE), "-o", "{full}"],
        ["deplodock-opt", str(EXAMPLE), "-p", "lower-to-loop", "-o", "{full}"],
        ["deplodock", "compile", str(EXAMPLE), "--ir", "torch", "-o", "{full}"],
        ["deplodock", "compile", str(EXAMPLE), "--ir", "torch", "--html", "{full}"],
    ],
    ids=["opt", "opt-passes", "compile", "compile-html"],
)
def test_write_to_a_full_device_is_one_line(argv: list[str], tmp_path: Path) -> None:
    """Issue #41: `-o /dev/full` exited 0 (as root, the device itself was replaced by a
    regular file holding the output)."""
    full = device(tmp_path, "full")
    tool, *args = [a.replace("{full}", str(full)) for a in argv]
    result = invoke(tool, args)
    assert_one_line_error(result, f"{tool}: error: cannot write {full}: No space left on device")
    assert is_device(full)


def test_write_to_a_null_device_writes_in_place(tmp_path: Path) -> None:
    null = device(tmp_path, "null")
    for tool, argv in (
        ("deplodock-opt", [str(EXAMPLE), "-o", str(null)]),
        ("deplodock", ["compile", str(EXAMPLE), "--ir", "loop", "-o", str(null)]),
    ):
        result = invoke(tool, argv)
        assert result.status == 0 and result.output == "", result.output
        assert is_device(null)


class _FailingFile:
    """A file object from `os.fdopen` whose `step` (write, flush or close) fails with ENOSPC,
    as on a full disk (the descriptor is still closed)."""

    def __init__(self, file: Any, step: str) -> None:
        self.file, self.step = file, step

    def __enter__(self) -> _FailingFile:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _fail(self, step: str) -> None:
        if step == self.step:
            raise OSError(28, "No space left on device")

    def fileno(self) -> int:
        return self.file.fileno()

    def write(self, data: bytes) -> int:
        self._fail("write")
        return self.file.write(data)

    def flush(self) -> None:
        self._fail("flush")
        self.file.flush()

    def close(self) -> None:
        self.file.close()
        self._fail("close")


@pytest.mark.parametrize("failing", ["write", "flush", "fsync", "close", "replace"])
def test_a_failed_write_keeps_the_old_file(
    failing: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each step of `write_atomic` failing (write, flush, fsync, close, the rename): the
    error is `cannot write PATH: REASON` for the target (not the temporary), the old file is
    kept and no temporary is left."""
    import deplodock.files as files

    def no_space(*_: object) -> None:
        raise OSError(28, "No space left on device")

    real_fdopen = os.fdopen
    if failing in ("write", "flush", "close"):
        monkeypatch.setattr(
            files.os, "fdopen", lambda fd, mode: _FailingFile(real_fdopen(fd, mode), failing)
        )
    else:
        monkeypatch.setattr(files.os, failing, no_space)
    out = tmp_path / "out.mlir"
    out.write_text("previous")
    with pytest.raises(WriteError) as raised:
        write_atomic(out, "new text")
    monkeypatch.undo()
    assert str(raised.value) == f"cannot write {out}: No space left on device"
    assert out.read_text() == "previous"
    assert [p.name for p in tmp_path.iterdir()] == ["out.mlir"]


def test_tune_report_to_a_full_device_fails(tmp_path: Path) -> None:
    from deplodock.tune.report import write_report

    report = tmp_path / "report.html"
    report.symlink_to(device(tmp_path, "full"))
    with pytest.raises(WriteError, match=re.escape(f"cannot write {report}: No space left")):
        write_report([], report, "title")


def test_truncated_string_literal_fails_at_once(tmp_path: Path) -> None:
    """xDSL's string-literal pattern backtracked exponentially on an unterminated literal
    (`deplodock.dialects.common.lexer`); a cut-off cuda-level file took minutes to reject."""
    cut = tmp_path / "cut.mlir"
    cut.write_text('builtin.module attributes {source = "' + "const float* x0, " * 30 + "\n}\n")
    result = invoke("deplodock-opt", [str(cut)])
    assert result.status == 1
    assert "End of file reached before closing string literal" in result.stderr


def test_verifier_error_names_file_and_op(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text(
        "func.func @forward(%a: tensor<4xf32>) -> tensor<8xf32> {\n"
        "  func.return %a : tensor<4xf32>\n}\n"
    )
    for tool, argv in (("deplodock", ["compile", str(bad)]), ("deplodock-opt", [str(bad)])):
        assert_one_line_error(invoke(tool, argv), f"{bad}: func.return: Expected arguments")
