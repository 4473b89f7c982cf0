"""Core ATen coverage, measured: every op of PyTorch's Core ATen opset either compiles and
matches eager, or is refused with the reason `coverage.REFUSED` gives.

Each op runs its `core_aten_samples.SAMPLES` program through `deplodock.compile` on the CPU
(the kernel level, interpreted) against eager PyTorch in float64 (integer and bool outputs
exactly). The op list comes from torch (`core_aten_ops()`), so an op a new torch adds fails
here until it has a sample and lowers or is refused.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import torch

import deplodock
from deplodock.frontend.aten.coverage import REFUSED, coverage, summary
from deplodock.frontend.aten.decompositions import core_aten_ops
from deplodock.frontend.capture import UnsupportedOpError, to_numpy
from deplodock.numerics import FP32_LONG_SUM_TOLERANCE, FP32_TOLERANCE, max_relative_error
from tests.frontend.core_aten_samples import SAMPLES, Sample

CORE = [str(op) for op in core_aten_ops()]


class _Program(torch.nn.Module):
    def __init__(self, sample: Sample):
        super().__init__()
        self.fn = sample.fn

    def forward(self, *xs: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        return self.fn(*xs)


def _inputs(name: str, sample: Sample) -> list[torch.Tensor]:
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    return [draw(rng) for draw in sample.inputs]


def _outputs(value: torch.Tensor | tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    return value if isinstance(value, tuple) else (value,)


def check_sample(name: str) -> None:
    """Compiles the op's program and compares every output with eager in float64."""
    sample = SAMPLES[name]
    inputs = _inputs(name, sample)
    compiled = deplodock.compile(_Program(sample), inputs)
    outputs = _outputs(compiled(*inputs))
    with torch.no_grad():
        wide = [x.double() if x.is_floating_point() else x for x in inputs]
        references = _outputs(sample.fn(*wide))
    assert len(outputs) == len(references)
    tolerance = FP32_LONG_SUM_TOLERANCE if sample.long_sums else FP32_TOLERANCE
    for out, ref in zip(outputs, references, strict=True):
        assert tuple(out.shape) == tuple(ref.shape)
        if ref.is_floating_point():
            error = max_relative_error(to_numpy(out), to_numpy(ref))
            assert error <= tolerance, f"{name}: max relative error {error:.3g}"
        else:
            assert out.dtype == ref.dtype
            np.testing.assert_array_equal(to_numpy(out), to_numpy(ref))


def test_the_opset_is_torchs() -> None:
    """Guards the parametrization: the Core ATen opset has ~190 overloads."""
    assert len(CORE) >= 150
    assert "aten.add.Tensor" in CORE and "aten.nonzero.default" in CORE
    stale = sorted(set(SAMPLES) - set(CORE))
    assert not stale, f"samples of ops this torch does not tag `core`: {stale}"


def test_at_least_95_percent_of_the_opset_lowers() -> None:
    """Issue 42's bar; refusals are for what cannot be compiled ahead of time at all."""
    table = coverage()
    lowered = [s for s in table.values() if not s.startswith("refused") and s != "not yet"]
    assert len(lowered) >= 0.95 * len(table), summary(table)


@pytest.mark.parametrize("name", CORE)
def test_core_aten_op(name: str) -> None:
    assert name in SAMPLES, f"{name} has no sample in tests/frontend/core_aten_samples.py"
    if name in REFUSED:
        with pytest.raises(UnsupportedOpError):
            check_sample(name)
        return
    check_sample(name)
