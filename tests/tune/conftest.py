"""Shared fixtures of the tuner tests: small loop-level programs, captured once."""

from __future__ import annotations

import pytest

from deplodock.driver import lower_program, program_from_expression

RMSNORM = "nn.RMSNorm(256)(torch.randn(1, 8, 256))"
SILU_MUL = "F.silu(torch.randn(1, 16, 512)) * torch.randn(1, 16, 512)"
LINEAR = "nn.Linear(128, 64, bias=True)(torch.randn(1, 32, 128))"


def loop_module(expression: str):
    program = program_from_expression(expression)
    lower_program(program, "loop")
    return program.module


@pytest.fixture(scope="session")
def rmsnorm_loop():
    return loop_module(RMSNORM)


@pytest.fixture(scope="session")
def silu_mul_loop():
    return loop_module(SILU_MUL)


@pytest.fixture(scope="session")
def linear_loop():
    return loop_module(LINEAR)
