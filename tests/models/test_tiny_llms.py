"""Tiny Hugging Face LLMs, end to end: config -> meta capture -> kernel level -> logits.

Each model is built from a config written in the test (2 layers, hidden 64), given random
weights and saved with `save_pretrained`; `program_from_model` compiles the directory
exactly as `deplodock run DIR` does, binds the safetensors by name and interprets the
kernel-level program; transformers' own `from_pretrained` forward in float64 is the
reference. The Qwen2 checkpoint is one file, the Llama one is sharded (index + shards)
with tied embeddings, so both loading paths and the tied-weight naming are exercised.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from deplodock.driver import (
    arguments_and_reference,
    lower_program,
    max_relative_error,
    program_from_model,
    run_and_compare,
)
from deplodock.frontend.models import randomize_weights

#: Whole tiny models interpreted against transformers (seconds each): slow (issue #39).
pytestmark = pytest.mark.slow

TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "max_position_embeddings": 128,
    "rms_norm_eps": 1e-6,
}


def save_tiny_model(directory: Path, model_type: str, shard: bool = False, **extra: Any) -> Path:
    """A random tiny model saved as a Hugging Face directory (config.json + safetensors)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(model_type, **(TINY | extra))
    torch.manual_seed(0)
    model = randomize_weights(AutoModelForCausalLM.from_config(config), seed=1)
    model.save_pretrained(directory, max_shard_size="100KB" if shard else "1GB")
    return directory


def test_tiny_qwen2_kernel_level_matches_transformers(tmp_path: Path) -> None:
    directory = save_tiny_model(tmp_path, "qwen2", rope_theta=10000.0)
    assert (directory / "model.safetensors").is_file()
    program = program_from_model(str(directory), seq_len=16)
    lower_program(program, "kernel")
    report = run_and_compare(program)
    assert (report.stage, report.tolerance) == ("kernel", 1e-4)
    assert report.ok, report.summary()
    assert max(report.errors) <= 1e-4


def test_tiny_llama_sharded_tied_kernel_level_matches_transformers(tmp_path: Path) -> None:
    directory = save_tiny_model(tmp_path, "llama", shard=True, tie_word_embeddings=True)
    index = json.loads((directory / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1
    assert "lm_head.weight" not in index["weight_map"]  # tied: stored once
    program = program_from_model(str(directory), seq_len=12)
    lower_program(program, "kernel")
    report = run_and_compare(program, seed=3)
    assert report.ok, report.summary()


def test_the_weights_come_from_the_checkpoint(tmp_path: Path) -> None:
    """A checkpoint changed after saving changes the result: nothing is re-randomized."""
    from safetensors.torch import load_file, save_file

    directory = save_tiny_model(tmp_path, "qwen2")
    program = program_from_model(str(directory), seq_len=8)
    lower_program(program, "loop")
    arguments, expected = arguments_and_reference(program)
    tensors = load_file(directory / "model.safetensors")
    tensors["model.norm.weight"] = tensors["model.norm.weight"] * 3
    save_file(tensors, directory / "model.safetensors", metadata={"format": "pt"})
    changed, expected_changed = arguments_and_reference(program)
    assert not all(np.array_equal(a, b) for a, b in zip(arguments, changed, strict=True))
    assert max_relative_error(expected_changed[0], expected[0]) > 1e-3


def test_tiny_qwen3_config_directory_random_weights_loop_level(tmp_path: Path) -> None:
    """Qwen3 (per-head q/k RMSNorm, explicit head_dim) from config.json alone."""
    config = TINY | {"model_type": "qwen3", "head_dim": 32, "tie_word_embeddings": True}
    (tmp_path / "config.json").write_text(json.dumps(config))
    program = program_from_model(str(tmp_path), seq_len=8)
    lower_program(program, "loop")
    report = run_and_compare(program)
    assert report.ok, report.summary()


def test_layers_are_lowered_once_and_stamped(tmp_path: Path) -> None:
    """Every layer launches the same kernels; only one layer's kernels exist."""
    config = TINY | {"model_type": "llama", "num_hidden_layers": 3}
    (tmp_path / "config.json").write_text(json.dumps(config))
    program = program_from_model(str(tmp_path), seq_len=8)
    lower_program(program, "loop")
    assert program.segments is not None
    segments, unique = program.segments
    assert segments == 5 and unique == 3  # prologue, 3 identical layers, epilogue
    ir = str(program.module)
    assert ir.count('deplodock.param = "model.layers.2.mlp.down_proj.weight"') == 1
    report = run_and_compare(program)
    assert report.ok, report.summary()


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_half_precision_models_capture(tmp_path: Path, dtype: str) -> None:
    config = TINY | {"model_type": "qwen2", "num_hidden_layers": 1}
    (tmp_path / "config.json").write_text(json.dumps(config))
    program = program_from_model(str(tmp_path), seq_len=8, dtype=dtype)
    element = {"bf16": "bf16", "fp16": "f16"}[dtype]
    assert f"tensor<1x8x256x{element}>" in str(program.module)
