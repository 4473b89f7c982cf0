"""Every supported PyTorch op, interpreted at each of the six levels, matches PyTorch.

One expression per op (plus the three fused examples) is captured, lowered stage by stage,
and the module at every stage is run on random inputs and random parameters. Each stage's
outputs are compared with PyTorch's float64 result: max relative error <= 1e-5 in fp32.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from deplodock.backend.cpu_runner import run_on_cpu
from deplodock.driver import (
    Program,
    forward_arguments,
    lower_program,
    max_relative_error,
    program_from_expression,
    reference_outputs,
)
from deplodock.frontend.expression import randomize_parameters
from deplodock.passes.pipelines import STAGES, previous_stage

#: The cuda level builds and runs each case's emitted C on the CPU (seconds a case): `slow`,
#: run by `--run-slow` (.ci/run); the default run checks every other level (issue #39).
LEVELS = [*STAGES[:-1], pytest.param(STAGES[-1], marks=pytest.mark.slow)]

OPS: dict[str, str] = {
    "add": "torch.randn(4, 32) + torch.randn(32)",
    "sub": "torch.randn(4, 32) - torch.randn(4, 1)",
    "mul": "torch.randn(4, 32) * torch.randn(4, 32)",
    "div": "torch.randn(4, 32) / (torch.rand(4, 32) + 0.5)",
    "add_scalar": "torch.randn(4, 32) * 2.5 + 1.0",
    "neg": "-torch.randn(4, 32)",
    "exp": "torch.exp(torch.randn(4, 32))",
    "log": "torch.log(torch.rand(4, 32) + 0.1)",
    "sqrt": "torch.sqrt(torch.rand(4, 32) + 0.1)",
    "rsqrt": "torch.rsqrt(torch.rand(4, 32) + 0.1)",
    "abs": "torch.abs(torch.randn(4, 32))",
    "relu": "torch.relu(torch.randn(4, 32))",
    "sigmoid": "torch.sigmoid(torch.randn(4, 32))",
    "tanh": "torch.tanh(torch.randn(4, 32))",
    "silu": "F.silu(torch.randn(4, 32))",
    "gelu_erf": "F.gelu(torch.randn(4, 32))",
    "gelu_tanh": "F.gelu(torch.randn(4, 32), approximate='tanh')",
    "pow_int": "torch.randn(4, 32) ** 3",
    "pow_float": "torch.pow(torch.rand(4, 32) + 0.5, 2.5)",
    "erf": "torch.erf(torch.randn(4, 32))",
    "clamp": "torch.clamp(torch.randn(4, 32), min=-0.5, max=0.5)",
    "clamp_min": "torch.randn(4, 32).clamp_min(-0.25)",
    "clamp_max": "torch.clamp(torch.randn(4, 32), max=0.75)",
    "relu6": "F.relu6(torch.randn(4, 32) * 4)",
    "hardswish": "F.hardswish(torch.randn(4, 32) * 3)",
    "hardtanh": "F.hardtanh(torch.randn(4, 32) * 2, -1.5, 0.5)",
    "hardsigmoid": "F.hardsigmoid(torch.randn(4, 32) * 4)",
    "leaky_relu": "F.leaky_relu(torch.randn(4, 32) * 3, 0.2)",
    "elu": "F.elu(torch.randn(4, 32) * 3, alpha=0.7)",
    "selu": "F.selu(torch.randn(4, 32) * 3)",
    "celu": "F.celu(torch.randn(4, 32) * 3, alpha=0.5)",
    "softplus": "F.softplus(torch.randn(4, 32) * 4, beta=2.0, threshold=3.0)",
    "mish": "F.mish(torch.randn(4, 32) * 4)",
    "logsigmoid": "F.logsigmoid(torch.randn(4, 32) * 8)",
    "maximum": "torch.maximum(torch.randn(4, 32), torch.randn(32))",
    "minimum": "torch.minimum(torch.randn(4, 1), torch.randn(4, 32))",
    "clamp_tensor": "torch.randn(4, 32).clamp(torch.randn(32) - 0.5, torch.randn(4, 1) + 0.5)",
    "clamp_min_tensor": "torch.randn(4, 32).clamp_min(torch.randn(4, 32))",
    "triu": "torch.triu(torch.randn(2, 5, 7), 1)",
    "tril": "torch.tril(torch.randn(5, 7), -2)",
    "numpy_T": "torch.randn(5, 7).T * 2.0",
    "mT": "torch.randn(2, 5, 7).mT + 1.0",
    "sum": "torch.randn(4, 8, 16).sum(dim=1)",
    "sum_keepdim": "torch.randn(4, 8, 16).sum(dim=-1, keepdim=True)",
    "mean": "torch.randn(4, 8, 16).mean(dim=-1)",
    "amax": "torch.amax(torch.randn(4, 8, 16), dim=(0, 2))",
    "amin": "torch.amin(torch.randn(4, 8, 16), dim=(0, 2))",
    "min_all": "torch.randn(4, 8, 16).min() * 1.5",
    "max_dim": "torch.max(torch.randn(4, 8, 16), dim=1).values * 2.0",
    "argmax": "torch.randn(4, 8, 16).argmax(dim=1)",
    "argmax_keepdim": "torch.randn(4, 8, 16).argmax(dim=-1, keepdim=True)",
    "argmax_flat": "torch.randn(4, 8, 16).argmax()",
    "argmin": "torch.randn(4, 8, 16).argmin(dim=0)",
    "argmin_flat_keepdim": "torch.argmin(torch.randn(5, 7), keepdim=True)",
    "argmax_ties": "torch.randn(6, 32).clamp(-0.5, 0.5).argmax(dim=1)",
    "argmin_int_ties": "(torch.randn(6, 32) * 0.7).to(torch.int64).argmin(dim=1)",
    "softmax": "torch.softmax(torch.randn(4, 8, 16), dim=-1)",
    "softmax_dim1": "torch.softmax(torch.randn(4, 8, 16), dim=1)",
    "log_softmax": "F.log_softmax(torch.randn(4, 8, 16), dim=-1)",
    "rms_norm": "nn.RMSNorm(64)(torch.randn(2, 8, 64))",
    "layer_norm": "nn.LayerNorm(64)(torch.randn(2, 8, 64))",
    "batch_norm": "nn.BatchNorm2d(6).eval()(torch.randn(2, 6, 3, 5))",
    "group_norm": "nn.GroupNorm(3, 6)(torch.randn(2, 6, 3, 5))",
    "instance_norm": "F.instance_norm(torch.randn(2, 6, 7))",
    "vector_norm": "torch.linalg.vector_norm(torch.randn(4, 8, 16), dim=-1)",
    "vector_norm_inf": "torch.linalg.vector_norm(torch.randn(4, 16), float('inf'), dim=0)",
    "normalize": "F.normalize(torch.randn(4, 16), dim=1)",
    "matrix_norm_1": "torch.linalg.matrix_norm(torch.randn(3, 5, 7), 1)",
    "linalg_norm_fro": "torch.linalg.norm(torch.randn(5, 7))",
    "mse_loss": "F.mse_loss(torch.randn(4, 16), torch.randn(4, 16))",
    "huber_loss": "F.huber_loss(torch.randn(4, 16) * 2, torch.randn(4, 16), delta=0.7)",
    "kl_div": "F.kl_div(torch.randn(4, 16).log_softmax(-1), torch.rand(4, 16), reduction='sum')",
    "cosine_similarity": "F.cosine_similarity(torch.randn(4, 16), torch.randn(4, 16))",
    "bce_with_logits": (
        "F.binary_cross_entropy_with_logits(torch.randn(4, 16) * 4, torch.rand(4, 16))"
    ),
    "triplet_margin": (
        "F.triplet_margin_loss(torch.randn(6, 8), torch.randn(6, 8), torch.randn(6, 8))"
    ),
    "cross_entropy": "F.cross_entropy(torch.randn(6, 5), torch.randint(0, 5, (6,)))",
    "max_pool2d": "F.max_pool2d(torch.randn(2, 3, 9, 8), 3, 2, 1, ceil_mode=True)",
    "avg_pool2d": "F.avg_pool2d(torch.randn(2, 3, 9, 8), 3, 2, 1, count_include_pad=False)",
    "avg_pool1d": "F.avg_pool1d(torch.randn(2, 3, 11), 4, 3, 2, ceil_mode=True)",
    "conv2d": "nn.Conv2d(3, 4, 3, padding=1)(torch.randn(2, 3, 7, 6))",
    "conv2d_depthwise": "nn.Conv2d(4, 4, 3, stride=2, groups=4)(torch.randn(1, 4, 7, 7))",
    "conv1d": "nn.Conv1d(3, 5, 3, stride=2, padding=1, dilation=2)(torch.randn(2, 3, 11))",
    "conv2d_same": "nn.Conv2d(3, 4, 4, padding='same', dilation=2)(torch.randn(2, 3, 7, 6))",
    "conv2d_same_odd_total": "nn.Conv2d(3, 4, (4, 2), padding='same')(torch.randn(2, 3, 7, 6))",
    "conv1d_valid": "nn.Conv1d(3, 5, 4, padding='valid', dilation=2)(torch.randn(2, 3, 11))",
    "conv_transpose2d": (
        "nn.ConvTranspose2d(4, 3, 3, 2, 1, output_padding=1)(torch.randn(1, 4, 4, 3))"
    ),
    "einsum": "torch.einsum('bhqd,bhkd->bhqk', torch.randn(2, 3, 4, 8), torch.randn(2, 3, 5, 8))",
    "einsum_chain": "torch.einsum('ij,jk,k', torch.randn(4, 6), torch.randn(6, 5), torch.randn(5))",
    "einsum_diagonal": "torch.einsum('bii,bij->bj', torch.randn(3, 5, 5), torch.randn(3, 5, 7))",
    "einsum_trace": "torch.einsum('ii', torch.randn(7, 7))",
    "matmul": "torch.matmul(torch.randn(2, 16, 32), torch.randn(32, 8))",
    "linear": "nn.Linear(32, 16)(torch.randn(4, 32))",
    "linear_no_bias": "nn.Linear(32, 16, bias=False)(torch.randn(2, 4, 32))",
    "bmm": "torch.bmm(torch.randn(2, 8, 16), torch.randn(2, 16, 4))",
    "transpose": "torch.randn(4, 8, 16).transpose(0, 2) * 1.5",
    "permute": "torch.randn(4, 8, 16).permute(2, 0, 1) + 1.0",
    "reshape": "torch.randn(4, 8, 16).reshape(8, 64) * 2.0",
    "view": "torch.randn(4, 8, 16).view(32, 16) - 1.0",
    "unsqueeze": "torch.randn(4, 16).unsqueeze(1) * torch.randn(4, 3, 16)",
    "expand": "torch.randn(4, 1, 16).expand(4, 8, 16) + torch.randn(4, 8, 16)",
    "slice": "torch.randn(8, 32)[2:7, 1:30:3] * 3.0",
    "cat": "torch.cat([torch.randn(4, 8), torch.randn(4, 5), torch.randn(4, 3)], dim=1) * 2.0",
    # The three fused examples of the foundation issue.
    "fused_rmsnorm": "nn.RMSNorm(2048)(torch.randn(1, 32, 2048))",
    "fused_softmax": "nn.Softmax(dim=-1)(torch.randn(2, 4, 128))",
    "fused_matmul_relu": (
        "torch.relu(torch.matmul(torch.randn(16, 64) + torch.randn(64), torch.randn(64, 16)))"
    ),
}

TOLERANCE = 1e-5


@functools.cache
def captured_expression(expr: str) -> tuple[Program, list[np.ndarray], list[np.ndarray]]:
    """The torch-level program of a `-c` expression, its random arguments and float64
    reference."""
    program = program_from_expression(expr)
    randomize_parameters(program.torch_module, seed=0)
    return program, forward_arguments(program), reference_outputs(program)


def lower_from_above(program: Program, stage: str, at: Callable[[str], ModuleOp]) -> ModuleOp:
    """`program`'s module at `stage`: a copy of the torch level, or one pass pipeline step
    from `at(stage above)`, so that a cached `at` lowers every stage only once."""
    if stage == "torch":
        return program.module.clone()
    above = previous_stage(stage)
    step = Program(at(above).clone(), above)
    lower_program(step, stage)
    return step.module


@functools.cache
def lowered_expression(expr: str, stage: str) -> ModuleOp:
    """The module of a `-c` expression at `stage`, lowered from the stage above it."""
    program, _, _ = captured_expression(expr)
    return lower_from_above(program, stage, lambda above: lowered_expression(expr, above))


def captured(name: str) -> tuple[Program, list[np.ndarray], list[np.ndarray]]:
    """The torch-level program of `OPS[name]`, its random arguments and float64 reference."""
    return captured_expression(OPS[name])


def lowered(name: str, stage: str) -> ModuleOp:
    """The module of `OPS[name]` at `stage`, lowered from the stage above it."""
    return lowered_expression(OPS[name], stage)


@pytest.mark.parametrize("stage", LEVELS)
@pytest.mark.parametrize("name", list(OPS))
def test_op_matches_pytorch_at_every_level(name: str, stage: str) -> None:
    _, arguments, expected = captured(name)
    actual = run_on_cpu(lowered(name, stage), arguments)
    assert len(actual) == len(expected)
    for index, (out, ref) in enumerate(zip(actual, expected, strict=True)):
        error = max_relative_error(out, ref)
        assert error <= TOLERANCE, f"{name} at {stage}: output {index} rel. error {error:.3e}"
