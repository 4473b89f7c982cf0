"""Shared helpers for the frontend tests: run a captured module with the torch interpreter."""

from collections.abc import Callable, Sequence

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.interpreter import Interpreter
from xdsl.interpreters.func import FuncFunctions

from deplodock.interpreters.torch import TorchFunctions


def _run_torch(module: ModuleOp, arguments: Sequence[np.ndarray]) -> list[np.ndarray]:
    """`@forward` at the torch level (only the torch and func interpreters are needed)."""
    interpreter = Interpreter(module)
    interpreter.register_implementations(FuncFunctions())
    interpreter.register_implementations(TorchFunctions())
    return [np.asarray(r) for r in interpreter.call_op("forward", tuple(arguments))]


def _rel_err(out: np.ndarray, ref: np.ndarray) -> float:
    out64, ref64 = out.astype(np.float64), np.asarray(ref, dtype=np.float64)
    assert out64.shape == ref64.shape
    return float(np.max(np.abs(out64 - ref64), initial=0.0) / max(np.max(np.abs(ref64)), 1e-30))


@pytest.fixture
def run_torch() -> Callable[[ModuleOp, Sequence[np.ndarray]], list[np.ndarray]]:
    return _run_torch


@pytest.fixture
def rel_err() -> Callable[[np.ndarray, np.ndarray], float]:
    return _rel_err
