"""`deplodock compile/run` on models: shipped ids on meta tensors, local directories, errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from deplodock.frontend.models import randomize_weights, shipped_models

TINY_QWEN2 = {
    "model_type": "qwen2",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "max_position_embeddings": 128,
}


def deplodock(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deplodock", *argv], capture_output=True, text=True, check=False
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("deplodock: error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def summary_counts(stderr: str) -> tuple[int, int]:
    match = re.search(r"(\d+) kernel launches, (\d+) unique kernels", stderr)
    assert match, stderr
    return int(match.group(1)), int(match.group(2))


def test_shipped_configs() -> None:
    shipped = shipped_models()
    assert set(shipped) >= {
        "Qwen/Qwen2.5-7B",
        "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
        "Qwen/Qwen3-0.6B",
    }
    qwen = json.loads(shipped["Qwen/Qwen2.5-7B"].read_text())
    assert (qwen["hidden_size"], qwen["num_hidden_layers"], qwen["vocab_size"]) == (
        3584,
        28,
        152064,
    )


@pytest.mark.slow
def test_whole_qwen25_7b_compiles_to_loop_on_meta_tensors() -> None:
    """28 layers, no weights, no download: the loop-level IR on stdout, counts on stderr."""
    result = deplodock("compile", "Qwen/Qwen2.5-7B", "--ir", "loop")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("builtin.module")
    assert "loop.kernel @" in result.stdout
    assert 'deplodock.param = "model.layers.27.mlp.down_proj.weight"' in result.stdout
    assert "Qwen/Qwen2.5-7B (qwen2, 28 layers, hidden 3584, seq 128, fp32)" in result.stderr
    launches, unique = summary_counts(result.stderr)
    assert launches >= 28 * 5
    assert unique < launches / 10  # each layer's kernels are lowered once and shared
    assert launches == result.stdout.count("loop.launch @")


@pytest.mark.slow
def test_tinyllama_one_layer_with_options() -> None:
    result = deplodock(
        "compile", "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "--layers", "1", "--seq-len", "64",
        "--dtype", "bf16", "--ir", "loop", "-v",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "memref<1x64x32000xbf16>" in result.stdout
    assert "(llama, 1 layers, hidden 2048, seq 64, bf16)" in result.stderr
    assert re.search(r"^\s+loop\s+[\d.]+ ms$", result.stderr, re.MULTILINE)


@pytest.mark.slow
def test_local_directory_compile_to_cuda_and_run(tmp_path: Path) -> None:
    from transformers import AutoConfig, AutoModelForCausalLM

    values = dict(TINY_QWEN2)
    config = AutoConfig.for_model(values.pop("model_type"), **values)
    torch.manual_seed(0)
    randomize_weights(AutoModelForCausalLM.from_config(config)).save_pretrained(tmp_path)
    out = tmp_path / "out.cu"
    compiled = deplodock("compile", str(tmp_path), "--seq-len", "8", "--ir", "cuda", "-o", str(out))
    assert compiled.returncode == 0, compiled.stderr
    assert "__global__" in out.read_text() and "deplodock_forward" in out.read_text()
    ran = deplodock("run", str(tmp_path), "--device", "cpu", "--seq-len", "8", "--ir", "loop")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("OK: loop-level program on cpu"), ran.stdout
    assert "Loading weights" not in ran.stderr  # transformers' progress bars kept quiet


def test_unknown_model_lists_the_shipped_ids() -> None:
    result = deplodock("compile", "meta-llama/Llama-404")
    assert_one_line_error(
        result, "unknown model 'meta-llama/Llama-404'", "Qwen/Qwen2.5-7B", "Qwen/Qwen3-0.6B"
    )


def test_directory_without_config(tmp_path: Path) -> None:
    assert_one_line_error(deplodock("compile", str(tmp_path)), "has no config.json")


def test_unsupported_architecture(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 2}))
    assert_one_line_error(
        deplodock("compile", str(tmp_path)), "model type 'gpt2'", "supported: llama, qwen2"
    )


def test_model_options_need_a_model() -> None:
    result = deplodock("compile", "-c", "torch.relu(torch.randn(4))", "--layers", "2")
    assert_one_line_error(result, "--layers", "only for models")


def test_too_many_layers(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(TINY_QWEN2))
    assert_one_line_error(deplodock("compile", str(tmp_path), "--layers", "3"), "has 2 layers")


@pytest.mark.slow
def test_stamped_model_cuda_kernel_names_are_unique(tmp_path: Path) -> None:
    """Kernels are renamed apart at the loop level, before their names enter CUDA source;
    with nvcc, the whole translation unit (kernels + host launches) compiles."""
    from deplodock.backend.nvcc import compile_cubin, nvcc_available

    out = tmp_path / "qwen.cu"
    result = deplodock(
        "compile", "Qwen/Qwen2.5-7B", "--layers", "2", "--seq-len", "16", "-o", str(out)
    )
    assert result.returncode == 0, result.stderr
    source = out.read_text()
    names = re.findall(r"__global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(", source)
    assert len(names) == len(set(names)) >= 5
    launched = set(re.findall(r"^\s+(\w+)<<<", source, re.MULTILINE))
    assert launched == set(names)
    if nvcc_available():
        assert compile_cubin(source).cubin


@pytest.mark.slow
def test_the_cuda_program_has_the_kernels_of_the_kernel_level(tmp_path: Path) -> None:
    """Issue #39 item 6: kernels equal but for their names (the epilogue's RMSNorm and a
    layer's, two split-K combines of one shape) are one kernel at the kernel level, and were
    two again in the CUDA (22 unique kernels against the profile's 20 rows for TinyLlama):
    the cuda stage printed each name into its source before the segments were stitched."""
    model = ("TinyLlama/TinyLlama-1.1B-Chat-v1.0", "--layers", "1")
    kernel = deplodock("compile", *model, "--ir", "kernel", "-o", str(tmp_path / "k.mlir"))
    cuda = deplodock("compile", *model, "-o", str(tmp_path / "k.cu"))
    assert kernel.returncode == cuda.returncode == 0, kernel.stderr + cuda.stderr
    assert summary_counts(cuda.stderr) == summary_counts(kernel.stderr)
    assert summary_counts(cuda.stderr)[1] == (tmp_path / "k.cu").read_text().count("__global__")
