"""Long prompts compile (issue 40): every sequence length from 1 to 8192 tokens, to CUDA.

Up to 1024 tokens a row of attention scores fits a lane's registers (`tile-shared-statistics`
keeps 32 cells a lane); past that the row statistics are swept by a lane-strided loop, a
reduce loop that `tile-mma` took for the K loop of the product and asserted on ("not a
serial tile.for"), so no model compiled past about 1k tokens. Here one decoder layer of
Qwen2.5-7B and of TinyLlama (at the shipped configs' shapes) and SDPA with GQA, causal and
not, go to CUDA at each length of `LENGTHS` in fp32 and bf16, and nvcc builds each
translation unit where it is installed (ptxas would refuse shared memory or registers a
long row asked for). Numerics past the old limit run through the emitted C on the CPU
against PyTorch in float64, on narrow heads so that a 1536-token row stays affordable.

The sweep takes minutes: it is marked slow (`pytest --run-slow`, which `.ci/run` gives). Each
test builds the previous length's cubin on a second thread while it lowers the next one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from deplodock.backend.nvcc import compile_cubin, nvcc_available
from deplodock.dialects import tile
from deplodock.driver import (
    Program,
    lower_program,
    program_from_expression,
    program_from_model,
    render,
    run_and_compare,
)
from deplodock.frontend.models import ModelError, make_config, resolve_model
from deplodock.passes.tile.nests import is_serial
from tests.models.test_tiny_llms import save_tiny_model

#: The lengths of the issue: short, around 1k (where the statistics leave the registers),
#: and long contexts.
LENGTHS = (1, 7, 128, 1000, 1024, 1100, 1536, 2048, 4096, 8192)
MODELS = ("Qwen/Qwen2.5-7B", "TinyLlama/TinyLlama-1.1B-Chat-v1.0")
TORCH_DTYPES = {"fp32": "torch.float32", "bf16": "torch.bfloat16"}


def sdpa(tokens: int, dtype: str, causal: bool, heads: int = 28, head_dim: int = 128) -> str:
    """SDPA with Qwen2.5-7B's GQA (28 query heads over 4 KV heads) as a `-c` expression."""
    kv_heads = max(1, heads // 7)
    tensor = f"dtype={TORCH_DTYPES[dtype]}"
    q = f"torch.randn(1, {heads}, {tokens}, {head_dim}, {tensor})"
    kv = f"torch.randn(1, {kv_heads}, {tokens}, {head_dim}, {tensor})"
    return f"F.scaled_dot_product_attention({q}, {kv}, {kv}, is_causal={causal}, enable_gqa=True)"


def model_lengths(model: str) -> tuple[int, ...]:
    """The lengths the model's config admits (TinyLlama stops at 2048 positions)."""
    limit = make_config(resolve_model(model), layers=1).max_position_embeddings
    return tuple(length for length in LENGTHS if length <= limit)


def sweep(make: Callable[[int], Program], lengths: tuple[int, ...]) -> list[str]:
    """Lowers `make(length)` to CUDA for each length, building each cubin on a second
    thread while the next length lowers; returns one line per failure."""
    failures: list[str] = []
    with ThreadPoolExecutor(max_workers=1) as builder:
        builds: list[tuple[int, Future[object]]] = []
        for length in lengths:
            try:
                program = make(length)
                lower_program(program, "cuda")
                source = render(program.module, "cuda")
            except Exception as error:  # every length is reported, not just the first
                failures.append(f"{length} tokens: {type(error).__name__}: {error}")
                continue
            assert "__global__" in source, f"{length} tokens: no kernel in the CUDA"
            if nvcc_available():
                builds.append((length, builder.submit(compile_cubin, source)))
        for length, build in builds:
            if (error := build.exception()) is not None:
                failures.append(f"{length} tokens: nvcc: {str(error).splitlines()[0]}")
    return failures


@pytest.mark.slow
@pytest.mark.parametrize("dtype", list(TORCH_DTYPES))
@pytest.mark.parametrize("model", MODELS)
def test_one_decoder_layer_compiles_at_every_length(model: str, dtype: str) -> None:
    failures = sweep(
        lambda length: program_from_model(model, layers=1, seq_len=length, dtype=dtype),
        model_lengths(model),
    )
    assert not failures, "\n".join(failures)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", list(TORCH_DTYPES))
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_sdpa_with_gqa_compiles_at_every_length(causal: bool, dtype: str) -> None:
    failures = sweep(lambda length: program_from_expression(sdpa(length, dtype, causal)), LENGTHS)
    assert not failures, "\n".join(failures)


def test_tinyllama_refuses_lengths_past_its_positions() -> None:
    """The sweep stops where the config does: past it is the user's error, said in words."""
    with pytest.raises(ModelError, match="takes 1 to 2048 tokens"):
        program_from_model(MODELS[1], layers=1, seq_len=4096)


def lane_strided_sweeps(program: Program) -> Iterator[tile.ForOp]:
    """The row-statistic loops strided over lanes (what a row past 1024 cells leaves)."""
    for op in program.module.walk():
        if isinstance(op, tile.ForOp) and op.is_reduce and not is_serial(op):
            yield op


def long_sdpa_cases() -> Iterator[object]:
    """Causal SDPA at 1536 keys in both dtypes by default; the rest with `--run-slow`."""
    for tokens in (1100, 1536):
        for dtype in TORCH_DTYPES:
            for causal in (True, False):
                marks = () if causal and tokens == 1536 else (pytest.mark.slow,)
                label = f"{'causal' if causal else 'full'}-{dtype}-{tokens}"
                yield pytest.param(causal, dtype, tokens, marks=marks, id=label)


@pytest.mark.parametrize(("causal", "dtype", "tokens"), list(long_sdpa_cases()))
def test_long_sdpa_matches_pytorch_through_the_emitted_c(
    causal: bool, dtype: str, tokens: int
) -> None:
    """Past 1024 keys, on two query heads over one KV head of 64: the case that crashed."""
    program = program_from_expression(sdpa(tokens, dtype, causal, heads=2, head_dim=64))
    lower_program(program, "tile")
    assert any(lane_strided_sweeps(program)), "the long-row path is not exercised"
    lower_program(program, "cuda")
    report = run_and_compare(program)
    assert report.ok, report.summary()


@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["qwen2", "llama"])
def test_narrow_decoder_layer_at_1536_tokens_matches_transformers(
    tmp_path: Path, model_type: str
) -> None:
    """A decoder layer of the real architecture, narrowed (hidden 128, two heads of 64), at
    1536 tokens through the emitted C, against transformers in float64."""
    directory = save_tiny_model(
        tmp_path,
        model_type,
        hidden_size=128,
        num_attention_heads=2,
        num_key_value_heads=1,
        num_hidden_layers=1,
        max_position_embeddings=2048,
    )
    program = program_from_model(str(directory), seq_len=1536)
    lower_program(program, "cuda")
    report = run_and_compare(program)
    assert report.ok, report.summary()
