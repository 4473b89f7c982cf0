"""Issue #39 item 8: `run <model dir>` says which weights it ran with, keeps transformers'
load report to itself, and `--profile` without a GPU gives a verdict, its note on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deplodock.backend.device import cuda_unavailable_reason
from tests.cli.invoke import invoke
from tests.cli.test_bad_input import tiny_checkpoint


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random tiny llama of two layers, saved (config and safetensors)."""
    directory = tmp_path_factory.mktemp("tiny-llama")
    tiny_checkpoint(directory, layers=2)
    return directory


def test_the_verdict_names_the_checkpoint_weights(checkpoint: Path) -> None:
    result = invoke("deplodock", ["run", str(checkpoint), "--seq-len", "4"])
    assert result.status == 0, result.output
    (line,) = result.stdout.splitlines()
    assert line.startswith("OK: kernel-level program on cpu")
    assert line.endswith(f"; the checkpoint's weights ({checkpoint})")


def test_the_verdict_says_random_weights_where_there_is_no_checkpoint(tmp_path: Path) -> None:
    tiny_checkpoint(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.json").write_text(json.dumps(config))
    result = invoke("deplodock", ["run", str(bare), "--seq-len", "4", "--seed", "3"])
    assert result.status == 0, result.output
    assert result.stdout.strip().endswith(
        "; random weights, seed 3 (no safetensors in the directory)"
    )


def test_fewer_layers_than_the_checkpoint_print_no_load_report(checkpoint: Path) -> None:
    """transformers reported the unused layer's 9 tensors as UNEXPECTED, in 18 lines."""
    result = invoke("deplodock", ["run", str(checkpoint), "--seq-len", "4", "--layers", "1"])
    assert result.status == 0, result.output
    assert result.stdout.startswith("OK:") and len(result.stderr.splitlines()) <= 1
    assert "UNEXPECTED" not in result.output


def test_profile_without_a_gpu_checks_on_the_cpu_and_notes_on_stderr(checkpoint: Path) -> None:
    if cuda_unavailable_reason() is None:
        pytest.skip("a GPU is present: --profile measures on it")
    result = invoke("deplodock", ["run", str(checkpoint), "--seq-len", "4", "--profile"])
    assert result.status == 0, result.output
    verdict, header = result.stdout.splitlines()[:2]
    assert verdict.startswith("OK: kernel-level program on cpu") and "checkpoint" in verdict
    assert header.startswith("profile: MODELED on NVIDIA H100")
    assert "no CUDA device" not in result.stdout
    assert result.stderr.splitlines()[0].startswith("deplodock: note: no CUDA device here")
