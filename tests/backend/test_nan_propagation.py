"""`arith.maximumf`/`minimumf` propagate NaN at every level, the emitted CUDA C included.

C's `fmaxf` returns the other operand for a NaN input (maxNum), so the printer guards it;
relu, clamp and the max of softmax must give NaN where PyTorch does.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from deplodock.backend.cpu_runner import run_on_cpu
from deplodock.driver import lower_program, program_from_expression
from deplodock.interpreters import run_module


@pytest.mark.parametrize(
    ("expression", "reference"),
    [
        ("torch.relu(torch.randn(4, 64))", torch.relu),
        ("torch.clamp(torch.randn(4, 64), -0.5, 0.5)", lambda x: torch.clamp(x, -0.5, 0.5)),
        ("torch.softmax(torch.randn(4, 64), dim=-1)", lambda x: torch.softmax(x, dim=-1)),
        ("torch.randn(4, 64).amax(dim=-1)", lambda x: x.amax(dim=-1)),
    ],
)
def test_nan_inputs_give_pytorchs_nans(expression, reference):
    program = program_from_expression(expression)
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    x[1, 7] = np.nan
    x[3, 0] = np.inf
    expected = reference(torch.from_numpy(x.copy())).numpy()
    lower_program(program, "kernel")
    kernel_level = run_module(program.module, [x])[0]
    lower_program(program, "cuda")
    cuda_level = run_on_cpu(program.module, [x])[0]
    for actual in (kernel_level, cuda_level):
        np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
        finite = ~np.isnan(expected)
        np.testing.assert_allclose(actual[finite], expected[finite], rtol=1e-5, atol=1e-6)


def test_the_guard_is_folded_for_a_constant_operand():
    program = program_from_expression("torch.relu(torch.randn(64))")
    lower_program(program, "cuda")
    from deplodock.backend.cuda_source import module_to_cuda_source

    source = module_to_cuda_source(program.module)
    assert "v0 != v0 ? v0 + 0.0f : fmaxf(v0, 0.0f)" in source
