"""`deplodock generate` on a tiny model directory, in-process (`tests/cli/invoke.py`): the
ids it prints are the Python API's, and what a user can get wrong is one line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from deplodock.generation import Generator
from tests.cli.invoke import assert_one_line_error, invoke
from tests.generation.test_generate import tiny_lm


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tiny-qwen2")
    tiny_lm("qwen2-gqa3", seed=2).save_pretrained(directory)
    return directory


def test_generate_prints_the_ids_the_api_generates(model_dir: Path) -> None:
    result = invoke(
        "deplodock",
        ["generate", str(model_dir), "--prompt-ids", "3,14,15,92", "--max-new-tokens", "5",
         "--ir", "kernel", "--max-len", "16"],
    )  # fmt: skip
    assert result.status == 0, result.stderr
    from transformers import AutoModelForCausalLM

    lm = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="sdpa").eval()
    with torch.no_grad():
        expected = Generator(lm, 16, stage="kernel").generate([3, 14, 15, 92], 5).ids
    assert result.stdout.strip() == ",".join(map(str, expected))
    assert "5/5 tokens" in result.stderr and "2 program(s) compiled" in result.stderr


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--prompt-ids", ""], "--prompt-ids is empty"),
        (["--prompt-ids", "1,x"], "--prompt-ids: item 1 'x' is not an integer"),
        (["--prompt-ids", "1,999"], "prompt token 1 is 999: ids run from 0 to 119"),
        (["--prompt-ids", "1,2,3", "--max-len", "2"], "the prompt has 3 tokens, more than max_len"),
        (["--prompt", "hello"], "--prompt needs a tokenizer (give --weights DIR)"),
        (["--prompt-ids", "1", "--weights", "/no/such/dir"], "--weights /no/such/dir: no such"),
        (["--prompt-ids", "1", "--temperature", "0", "--do-sample"], "temperature 0.0"),
        (["--prompt-ids", "1", "--max-new-tokens", "0"], "max_new_tokens 0: give at least 1"),
        (["--prompt-ids", "1", "--ir", "kernel", "--device", "cuda"], "--ir goes with"),
    ],
)  # fmt: skip
def test_a_bad_request_is_one_line(model_dir: Path, argv: list[str], fragment: str) -> None:
    assert_one_line_error(invoke("deplodock", ["generate", str(model_dir), *argv]), fragment)


def test_weights_that_are_a_file_is_one_line(model_dir: Path) -> None:
    config = model_dir / "config.json"
    result = invoke(
        "deplodock", ["generate", str(model_dir), "--prompt-ids", "1", "--weights", str(config)]
    )
    assert_one_line_error(result, f"--weights {config}: not a directory")


def test_weights_without_safetensors_is_one_line(model_dir: Path, tmp_path: Path) -> None:
    result = invoke(
        "deplodock", ["generate", str(model_dir), "--prompt-ids", "1", "--weights", str(tmp_path)]
    )
    assert_one_line_error(result, f"--weights {tmp_path}: no *.safetensors in it")


#: A local TinyLlama checkpoint (config, safetensors, tokenizer), when one is on disk.
TINYLLAMA = os.environ.get("DEPLODOCK_TINYLLAMA_DIR")


@pytest.mark.slow
@pytest.mark.skipif(
    not TINYLLAMA, reason="no local TinyLlama: set DEPLODOCK_TINYLLAMA_DIR to its directory"
)
def test_tinyllama_with_real_weights_matches_transformers() -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    assert TINYLLAMA is not None
    tokenizer = AutoTokenizer.from_pretrained(TINYLLAMA)
    prompt = tokenizer("The capital of France is")["input_ids"]
    lm = AutoModelForCausalLM.from_pretrained(TINYLLAMA, attn_implementation="sdpa").eval()
    with torch.no_grad():
        expected = lm.generate(torch.tensor([prompt]), max_new_tokens=8, do_sample=False)
        ours = Generator(lm, 64).generate(prompt, 8).ids
    assert ours == expected[0, len(prompt) :].tolist()


TINY_LLAMA = "docs/examples/tiny-llama"


def test_run_checks_the_decode_step_against_pytorch(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.docs_examples import ROOT

    monkeypatch.chdir(ROOT)
    result = invoke("deplodock", ["run", TINY_LLAMA, "--kv-len", "40"])
    assert result.status == 0, result.output
    assert result.stdout.startswith("OK: kernel-level program on cpu, 5 output(s)")


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["compile", "-c", "torch.randn(3)", "--kv-len", "4"], "--kv-len: only for models"),
        (["compile", TINY_LLAMA, "--kv-len", "0"], f"--kv-len 0: {TINY_LLAMA} takes 1 to 512"),
        (["compile", TINY_LLAMA, "--kv-len", "513"], "--kv-len 513"),
    ],
)  # fmt: skip
def test_a_bad_kv_len_is_one_line(
    argv: list[str], fragment: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.docs_examples import ROOT

    monkeypatch.chdir(ROOT)
    assert_one_line_error(invoke("deplodock", argv), fragment)
