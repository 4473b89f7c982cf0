"""The ops LLMs (Qwen2, Llama, Qwen3) add, interpreted at each of the six levels, match PyTorch.

Each case is a `-c` expression (captured, lowered stage by stage and run through
`tests/e2e/test_ops_all_levels.py`'s cached helpers) or, for blocks that use a value more than
once, a small `nn.Module` built from transformers' own layers. Every stage's outputs are
compared with PyTorch's float64 result: max relative error <= 1e-5 for fp32, 1e-2 when the
program computes in bf16 (integer and bool outputs must match exactly: their error is 0).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from torch import nn
from transformers import Qwen2Config
from transformers.models.qwen2.modeling_qwen2 import (
    Qwen2Attention,
    Qwen2DecoderLayer,
    Qwen2RotaryEmbedding,
    apply_rotary_pos_emb,
)
from xdsl.dialects.builtin import ModuleOp

from deplodock.backend.cpu_runner import run_on_cpu
from deplodock.backend.cuda_source import kernels_text
from deplodock.backend.nvcc import compile_cubin, nvcc_available
from deplodock.dialects import cuda
from deplodock.driver import (
    Program,
    forward_arguments,
    max_relative_error,
    reference_outputs,
)
from deplodock.frontend.capture import capture
from deplodock.frontend.expression import randomize_parameters
from deplodock.passes.pipelines import STAGES
from tests.e2e.test_ops_all_levels import (
    captured_expression,
    lower_from_above,
    lowered_expression,
)

#: The cuda level builds and runs each case's emitted C on the CPU (seconds a case): `slow`,
#: run by `--run-slow` (.ci/run); the default run checks every other level (issue #39).
LEVELS = [*STAGES[:-1], pytest.param(STAGES[-1], marks=pytest.mark.slow)]

#: `arange(len(x))` keeps a sequence length out of the factory list, so arange is traced.
N16 = "len(torch.randn(16))"

EXPRESSIONS: dict[str, str] = {
    # gathers
    "embedding": "nn.Embedding(256, 64)(torch.randint(0, 256, (1, 16)))",
    "index_2d": "torch.randn(8, 16)[torch.randint(0, 8, (4, 1)), torch.randint(0, 16, (1, 5))]",
    "index_negative": "torch.randn(8, 16)[torch.randint(-8, 8, (6,))] * 2.0",
    # generated tensors, casts, integer arithmetic
    "arange": f"torch.randn(4, 16) * torch.arange({N16})",
    "full_like": "torch.randn(4, 16).new_full((4, 16), 2.5) * torch.randn(4, 16)"
    " + torch.zeros_like(torch.randn(4, 16))",
    "cast_bf16_roundtrip": "(torch.randn(4, 32) * 1.5).bfloat16().float()",
    "cast_int_to_float": "torch.randint(0, 256, (4, 16)).float() * 0.5",
    "cast_bool_to_float": "(torch.randn(4, 16) > 0).float() - 0.25",
    "cast_float_to_int": "(torch.randn(4, 16) * 10).long()",
    "int_arithmetic": "torch.randint(0, 256, (1, 16)) * 3 - 7",
    "int_amax": "torch.amax(torch.randint(-100, 100, (4, 40)), dim=1)",
    "int_sum": "torch.randint(-100, 100, (4, 300)).sum(-1)",
    # comparisons, logic, selection
    "compare_and": "(torch.randn(4, 16) > torch.randn(16)) & (torch.randn(4, 16) < 0.5)",
    "compare_not_or": "torch.logical_not(torch.randn(4, 16) > 0) | (torch.randn(4, 16) == 0)",
    "where": "torch.where(torch.randn(4, 16) > 0, torch.randn(4, 16), torch.randn(16))",
    "masked_fill": "torch.randn(4, 16).masked_fill(torch.randn(4, 16) < 0, 0.5)",
    "causal_masked_softmax": (
        f"torch.randn(2, 16, 16).masked_fill(torch.arange({N16})[None, :]"
        f" > torch.arange({N16})[:, None], float('-inf')).softmax(-1)"
    ),
    # trigonometry, prefix sums, differences (rotary tables, packed-sequence detection)
    "cos_sin": "torch.cos(torch.randn(4, 32)) + torch.sin(torch.randn(4, 32))",
    "cumsum": "torch.randn(4, 16).cumsum(-1)",
    "cumsum_bool": "(torch.randint(0, 3, (2, 16)) != 1).cumsum(-1)",
    "cumsum_dim0": "torch.randn(17, 3, 5).cumsum(0)",
    "cumsum_of_exp_long_rows": "torch.exp(torch.randn(3, 1000)).cumsum(1)",
    "diff": "torch.diff(torch.randn(4, 16), dim=-1)",
    "diff_prepend": "torch.diff(torch.randint(0, 9, (1, 16)), prepend=torch.randint(0, 9, (1, 1)))",
    # attention
    "sdpa_causal_gqa": (
        "F.scaled_dot_product_attention(torch.randn(1, 4, 16, 16), torch.randn(1, 2, 16, 16),"
        " torch.randn(1, 2, 16, 16), is_causal=True, enable_gqa=True)"
    ),
    "sdpa_causal_repeat_kv": (
        "F.scaled_dot_product_attention(torch.randn(1, 4, 16, 16),"
        " torch.randn(1, 2, 16, 16)[:, :, None].expand(1, 2, 2, 16, 16).reshape(1, 4, 16, 16),"
        " torch.randn(1, 2, 16, 16)[:, :, None].expand(1, 2, 2, 16, 16).reshape(1, 4, 16, 16),"
        " is_causal=True)"
    ),
    "sdpa_float_mask": (
        "F.scaled_dot_product_attention(torch.randn(2, 3, 8, 16), torch.randn(2, 3, 12, 16),"
        " torch.randn(2, 3, 12, 8), attn_mask=torch.randn(8, 12), scale=0.3)"
    ),
    "sdpa_bool_mask_masked_row": (
        "F.scaled_dot_product_attention(torch.randn(2, 8, 16), torch.randn(2, 12, 16),"
        " torch.randn(2, 12, 4), attn_mask=torch.arange(len(torch.randn(8)))[:, None] != 3)"
    ),
}

#: Programs that compute in bf16: every op rounds to bf16, the reference does not.
BF16_EXPRESSIONS: dict[str, str] = {
    "bf16_mul_add": "torch.randn(4, 32).bfloat16() * torch.randn(4, 32).bfloat16() + 1.0",
    "bf16_silu_mul": "F.silu(torch.randn(4, 32).bfloat16()) * torch.randn(4, 32).bfloat16()",
    "bf16_to_f16": "(torch.randn(4, 32).bfloat16() * 3.0).half()",
    "bf16_linear": "nn.Linear(64, 32, dtype=torch.bfloat16)(torch.randn(4, 64).bfloat16())",
    "bf16_sum": "torch.randn(4, 300).bfloat16().sum(-1)",
    "bf16_sdpa_gqa": (
        "F.scaled_dot_product_attention(torch.randn(1, 4, 16, 16).bfloat16(),"
        " torch.randn(1, 2, 16, 16).bfloat16(), torch.randn(1, 2, 16, 16).bfloat16(),"
        " is_causal=True, enable_gqa=True)"
    ),
}

TOLERANCE = 1e-5
BF16_TOLERANCE = 1e-2


def _check(module: ModuleOp, arguments, expected, tolerance: float, what: str) -> None:
    actual = run_on_cpu(module, arguments)
    assert len(actual) == len(expected)
    for index, (out, ref) in enumerate(zip(actual, expected, strict=True)):
        if not np.issubdtype(ref.dtype, np.floating):  # integers and bools: exactly
            assert out.dtype == ref.dtype, f"{what}: output {index} is {out.dtype}"
            np.testing.assert_array_equal(out, ref, err_msg=what)
            continue
        error = max_relative_error(out, ref)
        assert error <= tolerance, f"{what}: output {index} rel. error {error:.3e}"


@pytest.mark.parametrize("stage", LEVELS)
@pytest.mark.parametrize("name", list(EXPRESSIONS))
def test_llm_op_matches_pytorch_at_every_level(name: str, stage: str) -> None:
    expr = EXPRESSIONS[name]
    _, arguments, expected = captured_expression(expr)
    _check(lowered_expression(expr, stage), arguments, expected, TOLERANCE, f"{name} at {stage}")


@pytest.mark.parametrize("stage", LEVELS)
@pytest.mark.parametrize("name", list(BF16_EXPRESSIONS))
def test_bf16_matches_pytorch_at_every_level(name: str, stage: str) -> None:
    expr = BF16_EXPRESSIONS[name]
    _, arguments, expected = captured_expression(expr)
    module = lowered_expression(expr, stage)
    _check(module, arguments, expected, BF16_TOLERANCE, f"{name} at {stage}")


# --- blocks of a Hugging Face decoder, built from transformers' own layers -------------------


def _config() -> Qwen2Config:
    config = Qwen2Config(
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        vocab_size=256,
        max_position_embeddings=128,
        num_hidden_layers=1,
    )
    config._attn_implementation = "sdpa"
    return config


class RotaryBlock(nn.Module):
    """Position ids from arange, cos/sin of `inv_freq` (a buffer), rotate_half on q and k."""

    def __init__(self) -> None:
        super().__init__()
        self.rotary = Qwen2RotaryEmbedding(_config())

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        positions = torch.arange(q.shape[-2])[None]
        cos, sin = self.rotary(q, positions)
        return apply_rotary_pos_emb(q, k, cos, sin)


class AttentionBlock(nn.Module):
    """Qwen2 self-attention: q/k/v projections with bias, rotary, GQA SDPA, o_proj. With
    `mask`, a bool causal mask built from arange (HF then repeats the k/v heads); without,
    HF passes `is_causal=True, enable_gqa=True`."""

    def __init__(self, mask: bool) -> None:
        super().__init__()
        config = _config()
        self.attention = Qwen2Attention(config, 0)
        self.rotary = Qwen2RotaryEmbedding(config)
        self.mask = mask

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(hidden.shape[1])[None]
        embeddings = self.rotary(hidden, positions)
        mask = None
        if self.mask:
            mask = positions[:, None, :, None] >= positions[:, None, None, :]
        return self.attention(hidden, position_embeddings=embeddings, attention_mask=mask)[0]


class DecoderLayer(nn.Module):
    """One whole Qwen2 decoder layer: RMSNorm (pow/mean/rsqrt and casts), attention as
    above (causal through SDPA's `is_causal`), residual adds, the SiLU-gated MLP."""

    def __init__(self) -> None:
        super().__init__()
        config = _config()
        self.layer = Qwen2DecoderLayer(config, 0)
        self.rotary = Qwen2RotaryEmbedding(config)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(hidden.shape[1])[None]
        embeddings = self.rotary(hidden, positions)
        out = self.layer(hidden, position_ids=positions, position_embeddings=embeddings)
        return out[0] if isinstance(out, tuple) else out


MODULES = {
    "hf_rotary": (RotaryBlock, [(1, 4, 16, 16), (1, 2, 16, 16)]),
    "hf_attention_causal": (lambda: AttentionBlock(mask=False), [(1, 16, 64)]),
    "hf_attention_bool_mask": (lambda: AttentionBlock(mask=True), [(1, 16, 64)]),
    "hf_decoder_layer": (DecoderLayer, [(1, 16, 64)]),
}


@functools.cache
def captured_module(name: str) -> tuple[Program, list[np.ndarray], list[np.ndarray]]:
    """The torch-level program of `MODULES[name]`, its arguments and float64 reference."""
    factory, shapes = MODULES[name]
    torch.manual_seed(0)
    module = factory().eval()
    inputs = tuple(torch.randn(shape) for shape in shapes)
    randomize_parameters(module, seed=0)
    program = Program(capture(module, inputs), "torch", module, inputs)
    return program, forward_arguments(program), reference_outputs(program)


@functools.cache
def lowered_module(name: str, stage: str) -> ModuleOp:
    program, _, _ = captured_module(name)
    return lower_from_above(program, stage, lambda above: lowered_module(name, above))


@pytest.mark.parametrize("stage", LEVELS)
@pytest.mark.parametrize("name", list(MODULES))
def test_hf_block_matches_pytorch_at_every_level(name: str, stage: str) -> None:
    _, arguments, expected = captured_module(name)
    _check(lowered_module(name, stage), arguments, expected, TOLERANCE, f"{name} at {stage}")


def test_hf_attention_imports_the_llm_ops() -> None:
    """The attention blocks use what a whole model does: arange, cos/sin, SDPA with GQA."""
    causal = {op.name for op in captured_module("hf_attention_causal")[0].module.walk()}
    masked = {op.name for op in captured_module("hf_attention_bool_mask")[0].module.walk()}
    assert {"torch.arange", "torch.cos", "torch.sin", "torch.scaled_dot_product_attention"} <= (
        causal & masked
    )
    assert "torch.ge" in masked and "torch.expand" in masked  # bool mask, repeat_kv


@pytest.mark.nvcc
@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH: cannot compile for sm_90")
@pytest.mark.parametrize("name", [*EXPRESSIONS, *BF16_EXPRESSIONS, *MODULES])
@pytest.mark.slow
def test_emitted_cuda_compiles_for_sm90(name: str) -> None:
    """bool / long long buffers, casts, cosf/sinf, index loads: what nvcc says of them."""
    if name in MODULES:
        module = lowered_module(name, "cuda")
    else:
        module = lowered_expression(EXPRESSIONS.get(name) or BF16_EXPRESSIONS[name], "cuda")
    for kernel_op in (op for op in module.ops if isinstance(op, cuda.KernelOp)):
        result = compile_cubin(kernels_text([kernel_op]), arch="sm_90")
        assert kernel_op.sym_name.data in result.kernels, result.log
